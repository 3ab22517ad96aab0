"""The `bcg-sim-bridge` command line: bad settings, offscreen recording, exit status."""
import json
import os
import subprocess
import sys

import pytest
from PIL import Image

from bcg_sim_bridge.main import main, parse_args


def test_flags_override_the_parameter_file(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("sim_bridge:\n  ros__parameters:\n    physics_hz: 2000.0\n    domain: 7\n")
    config = parse_args(["--params", str(params), "--domain", "40", "--fast", "--duration", "2"])
    assert (config.physics_hz, config.domain, config.fast, config.duration) == (2000.0, 40, True, 2.0)
    assert config.steps_per_state == 4


def test_bad_setting_exits_2_naming_the_key(caplog):
    assert main(["--physics-hz", "1000", "--state-hz", "300", "--headless"]) == 2
    assert "sim_bridge.state_hz=300.0: physics_hz (1000) is not a whole multiple of it" in caplog.text


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flags, frames, size", [((), 7, (320, 240)),
                                                 (("--record-fps", "10", "--record-width", "160",
                                                   "--record-height", "120"), 3, (160, 120))],
                         ids=["config's 30 fps, 320x240", "flags: 10 fps, 160x120"])
def test_headless_recording_to_gif(tmp_path, flags, frames, size):
    """Offscreen rendering without a display (MUJOCO_GL chosen by the bridge: egl), at the frame rate
    and size of config/sim_bridge.yaml or of the flags (0.2 s: frames at 0, 1/fps, ..., 0.2 s)."""
    gif, metrics = tmp_path / "run.gif", tmp_path / "metrics.json"
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY")}
    out = subprocess.run([sys.executable, "-m", "bcg_sim_bridge.main", "--fast", "--headless", "--wait-for-command",
                          "0", "--domain", "33", "--duration", "0.2", "--record", str(gif), "--metrics", str(metrics),
                          *flags],
                         capture_output=True, text=True, env=env, timeout=110)
    assert out.returncode == 0, out.stderr
    with Image.open(gif) as image:
        assert image.n_frames == frames and image.size == size
    assert json.loads(metrics.read_text())["sim_time_s"] == pytest.approx(0.2)
