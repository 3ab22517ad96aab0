"""Looking at the simulation: the interactive viewer (with a display) and offscreen recording.

Offscreen rendering needs an OpenGL backend chosen by $MUJOCO_GL before mujoco is imported.
On these CPU-only machines both `egl` and `osmesa` (Mesa's software renderers) work; `glfw` needs a
display. The recorder uses `egl` unless MUJOCO_GL is already set. Software rendering is slow
(about 140 ms per 320x240 frame on one core here, with shadows and reflections off, which the
recorder turns off for that reason).
"""
import os
from pathlib import Path
from typing import List, Optional

import numpy as np


def choose_offscreen_backend() -> str:
    """Set $MUJOCO_GL to 'egl' unless already set; returns the backend in effect.

    Only effective before `mujoco` creates its first GL context.
    """
    return os.environ.setdefault("MUJOCO_GL", "egl")


def display_available() -> bool:
    """True when an X11 or Wayland display can be opened by the viewer."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class Recorder:
    """Renders frames offscreen at `fps` frames per simulated second and writes them at `close`.

The camera follows body `track_body` (the robot's root) from 3 m.

    `.gif` is written by Pillow; `.mp4` and other video formats need the `imageio-ffmpeg` package.
    Frames are kept in memory until `close` (width * height * 3 bytes each).
    """

    def __init__(self, model, path: str, fps: float, width: int, height: int, track_body: int = 1):
        import mujoco
        self.path = Path(path)
        if self.path.suffix.lower() != ".gif":
            try:
                import imageio_ffmpeg  # noqa: F401  (only checks that video writing can work)
            except ImportError:
                raise ValueError(f"record: {path!r} needs imageio-ffmpeg for {self.path.suffix} "
                                 "files; use a .gif path") from None
        self.fps = float(fps)
        self._renderer = mujoco.Renderer(model, height=height, width=width)
        self._off = (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION)
        self._camera = mujoco.MjvCamera()
        mujoco.mjv_defaultFreeCamera(model, self._camera)
        self._camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        self._camera.trackbodyid = track_body
        self._camera.distance = 3.0
        self._frames: List[np.ndarray] = []
        self._next_time = 0.0

    def maybe_capture(self, data) -> None:
        """Render a frame when simulated time has reached the next frame time."""
        if data.time + 1e-9 < self._next_time:
            return
        self._next_time += 1.0 / self.fps
        self._renderer.update_scene(data, camera=self._camera)
        for flag in self._off:
            self._renderer.scene.flags[flag] = 0
        self._frames.append(self._renderer.render().copy())

    @property
    def frames(self) -> int:
        return len(self._frames)

    def close(self) -> Optional[Path]:
        """Write the file (atomically) and release the renderer; returns the path, or None without frames."""
        import imageio.v2 as imageio
        self._renderer.close()
        if not self._frames:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp" + self.path.suffix)
        if self.path.suffix.lower() == ".gif":
            imageio.mimsave(tmp, self._frames, duration=1000.0 / self.fps, loop=0)
        else:
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
