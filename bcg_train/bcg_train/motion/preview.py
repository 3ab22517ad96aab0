"""Pictures of a MotionClip: a PNG contact sheet or an animated GIF, rendered offscreen by MuJoCo.

Offscreen rendering needs $MUJOCO_GL (egl or osmesa on machines without a display) set before
mujoco is first imported; `python -m bcg_train.motion preview` sets egl when it is unset.
"""
from pathlib import Path
from typing import Union

import mujoco
import numpy as np
from PIL import Image

from bcg.atomic_file import write_atomic

from .clip import MotionClip
from .kinematics import RobotKinematics


def render_preview(clip: MotionClip, kinematics: RobotKinematics, path: Union[str, Path], fps: float = 10.0,
                   width: int = 320, height: int = 240, columns: int = 6, azimuth: float = 90.0) -> Path:
    """Render `clip` every 1/fps s from 2.5 m away at `azimuth` degrees (MuJoCo's free camera; 90 sees
    the side of a robot facing +x), following the root sideways, not up and down, so jumps show.

    `.gif`: one animation frame per picture; `.png`: a sheet of `columns` pictures per row.
    """
    path = Path(path)
    renderer = mujoco.Renderer(kinematics.model, height=height, width=width)
    camera = mujoco.MjvCamera()
    camera.distance, camera.azimuth, camera.elevation = 2.5, azimuth, -5.0
    pictures = []
    for i in np.unique(np.round(np.arange(0.0, clip.duration_s + 1e-9, 1.0 / fps) * clip.fps).astype(int)):
        camera.lookat[:] = (clip.root_pos[i, 0], clip.root_pos[i, 1], 0.6)
        data = kinematics.set_pose(clip.root_pos[i], clip.root_quat[i], clip.joint_pos[i])
        renderer.update_scene(data, camera=camera)
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
            renderer.scene.flags[flag] = 0
        pictures.append(Image.fromarray(renderer.render().copy()))
    renderer.close()
    if path.suffix.lower() == ".gif":
        write_atomic(path, lambda f: pictures[0].save(f, format="GIF", save_all=True, append_images=pictures[1:],
                                                        duration=int(1000 / fps), loop=0))
        return path
    rows = -(-len(pictures) // columns)
    sheet = Image.new("RGB", (columns * width, rows * height), "white")
    for k, picture in enumerate(pictures):
        sheet.paste(picture, ((k % columns) * width, (k // columns) * height))
    write_atomic(path, lambda f: sheet.save(f, format="PNG"))
    return path
