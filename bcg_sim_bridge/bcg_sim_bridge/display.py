"""Looking at the simulation: the interactive viewer (with a display) and offscreen recording.

Offscreen rendering needs an OpenGL backend chosen by $MUJOCO_GL before mujoco is imported.
On these CPU-only machines both `egl` and `osmesa` (Mesa's software renderers) work; `glfw` needs a
display. The recorder uses `egl` unless MUJOCO_GL is already set. Software rendering is slow
(140-800 ms per 320x240 frame here, with shadows and reflections off, which the recorder turns
off for that reason), so the recorder renders in a thread of its own, never on the path that
steps the physics and publishes LowState.
"""
import os
import queue
import threading
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

RENDER_NICENESS = 10
"""Nice increment of the render thread (Linux: per thread), so physics and DDS keep their CPU."""
GIF_COLOURS = 64
"""Colours of a recorded GIF's one palette (GIF allows 256 per frame)."""
GIF_PALETTE_FRAMES = 8
"""Frames, spread over the run, from which the GIF's palette is chosen."""


def write_gif(frames: List[np.ndarray], path: Path, fps: float) -> None:
    """Write `frames` ((height, width, 3) uint8 each) as a looping GIF at `fps` frames per second,
    every frame in one palette of GIF_COLOURS chosen from GIF_PALETTE_FRAMES of them, without
    dithering: the moving checker floor under a tracking camera, dithered in a palette of its own per
    frame (imageio's default), takes 1.7 times the bytes (the dance segment's 15 s, 150 frames at
    240x180: 3.7 MB against 2.2 MB)."""
    from PIL import Image
    images = [Image.fromarray(f) for f in frames]
    picks = [images[i] for i in sorted(set(np.linspace(0, len(images) - 1, GIF_PALETTE_FRAMES).round().astype(int)))]
    strip = Image.new("RGB", (picks[0].width, picks[0].height * len(picks)))
    for i, image in enumerate(picks):
        strip.paste(image, (0, i * image.height))
    palette = strip.quantize(colors=GIF_COLOURS, dither=Image.Dither.NONE)
    indexed = [image.quantize(palette=palette, dither=Image.Dither.NONE) for image in images]
    indexed[0].save(path, format="GIF", save_all=True, append_images=indexed[1:], duration=1000.0 / fps, loop=0)


def choose_offscreen_backend() -> str:
    """Set $MUJOCO_GL to 'egl' unless already set; returns the backend in effect.

    Only effective before `mujoco` creates its first GL context.
    """
    return os.environ.setdefault("MUJOCO_GL", "egl")


def display_available() -> bool:
    """True when an X11 or Wayland display can be opened by the viewer."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def prepare_rendering(record: bool, headless: bool) -> None:
    """Before mujoco is imported: choose the offscreen backend when recording without a viewer."""
    if record and (headless or not display_available()):
        choose_offscreen_backend()


def _mujoco_renderer(model, width: int, height: int):
    import mujoco
    return mujoco.Renderer(model, height=height, width=width)


class Recorder:
    """Records the run at `fps` frames per simulated second into `path` (written at `close`).

    `maybe_capture(data)`, called by the bridge at the state rate, only copies the pose (qpos) of
    each due frame into a queue; a render thread (lower CPU priority where the OS allows it) poses
    its own MjData from it and renders it with `renderer_factory(model, width, height)` (default:
    `mujoco.Renderer`, created in that thread: GL contexts belong to one thread). The physics never
    waits for a frame and no frame is dropped: frames not rendered yet when the run ends are
    rendered by `close`, which then writes the file. The camera follows body `track_body` from 3 m.

    `.gif` is written by Pillow (`write_gif`); `.mp4` and other video formats need the `imageio-ffmpeg` package.
    Frames are kept in memory until `close` (width * height * 3 bytes each).
    """

    def __init__(self, model, path: str, fps: float, width: int, height: int, track_body: int = 1,
                 renderer_factory: Callable = _mujoco_renderer):
        self.path = Path(path)
        if self.path.suffix.lower() != ".gif":
            try:
                import imageio_ffmpeg  # noqa: F401  (only checks that video writing can work)
            except ImportError:
                raise ValueError(f"record: {path!r} needs imageio-ffmpeg for {self.path.suffix} "
                                 "files; use a .gif path") from None
        self.fps = float(fps)
        self.model, self.width, self.height, self.track_body = model, width, height, track_body
        self._factory = renderer_factory
        self._poses: "queue.SimpleQueue[Optional[tuple]]" = queue.SimpleQueue()
        self._frames: List[np.ndarray] = []
        self._next_time = 0.0
        self.captured = 0
        """Poses queued so far."""
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._render_loop, name="bcg-recorder", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise ValueError(f"record: cannot render offscreen ({type(self._error).__name__}: {self._error}); "
                             "set MUJOCO_GL to egl or osmesa") from None

    def maybe_capture(self, data) -> None:
        """Queue the current pose when simulated time has reached the next frame time (no rendering here)."""
        if data.time + 1e-9 < self._next_time:
            return
        self._next_time += 1.0 / self.fps
        self._poses.put((float(data.time), data.qpos.copy()))
        self.captured += 1

    @property
    def frames(self) -> int:
        """Frames rendered so far."""
        return len(self._frames)

    @property
    def pending(self) -> int:
        """Poses queued but not rendered yet."""
        return self.captured - len(self._frames)

    def _render_loop(self) -> None:
        import mujoco
        renderer = None
        try:
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), RENDER_NICENESS)
            except (AttributeError, OSError):     # not Linux / not permitted: same priority as physics
                pass
            renderer = self._factory(self.model, self.width, self.height)
            data = mujoco.MjData(self.model)
            camera = mujoco.MjvCamera()
            mujoco.mjv_defaultFreeCamera(self.model, camera)
            camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
            camera.trackbodyid = self.track_body
            camera.distance = 3.0
        except BaseException as e:  # reported by the constructor
            self._error = e
            return
        finally:
            self._ready.set()
        try:
            while (pose := self._poses.get()) is not None:
                data.time, data.qpos[:] = pose
                mujoco.mj_kinematics(self.model, data)      # what drawing needs: poses, centres of mass,
                mujoco.mj_comPos(self.model, data)          # cameras and lights
                mujoco.mj_camlight(self.model, data)
                renderer.update_scene(data, camera=camera)
                for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                    renderer.scene.flags[flag] = 0
                self._frames.append(renderer.render().copy())
        except BaseException as e:  # reported by close
            self._error = e
        finally:
            renderer.close()

    def close(self) -> Optional[Path]:
        """Render what is still queued, write the file (atomically); returns the path, or None without frames."""
        self._poses.put(None)
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"record: rendering failed: {type(self._error).__name__}: {self._error}")
        if not self._frames:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp" + self.path.suffix)
        if self.path.suffix.lower() == ".gif":
            write_gif(self._frames, tmp, self.fps)
        else:
            import imageio.v2 as imageio
            imageio.mimsave(tmp, self._frames, fps=self.fps)
        os.replace(tmp, self.path)
        return self.path


class Viewer:
    """MuJoCo's passive viewer, synced at most `hz` times per wall-clock second."""

    def __init__(self, model, data, hz: float = 60.0):
        import mujoco.viewer
        self._handle = mujoco.viewer.launch_passive(model, data)
        self._period = 1.0 / hz
        self._last = -np.inf

    def maybe_sync(self, wall_now: float) -> bool:
        """Redraw when due; returns False once the user has closed the window."""
        if not self._handle.is_running():
            return False
        if wall_now - self._last >= self._period:
            self._handle.sync()
            self._last = wall_now
        return True

    def close(self) -> None:
        self._handle.close()
