"""`kill -9` of bcg-train while it writes a checkpoint, then `--resume`: the run goes on from the
previous intact checkpoint and nothing written is corrupt. The run is a real bcg-train process on
the toy env (bcg_train/test/conftest.py); it is paused half-way through writing a checkpoint's bytes
(its torch.save stops after half of them, flushed, and says so in a file), killed there with
SIGKILL, so the moment is the same every run, whatever the machine's speed."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bcg_train import cli
from bcg_train.checkpoint import CheckpointError, checkpoints_in, find_checkpoint, load_checkpoint

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAIN = ["--preset", "cpu-smoke", "--motion", "jump", "--no-bundle", "--set", "shac.iterations=4",
         "--set", "shac.actor_hidden=[16]", "--set", "add.hidden=[16]", "--set", "runner.checkpoint_every=1",
         "--set", "runner.keep_checkpoints=5"]
PAUSED_IN = 3
"""The iteration whose checkpoint the process is killed while writing."""

CHILD = r"""
import io, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
from conftest import ToyTrackingEnv
from bcg_train import cli
cli.build_env = lambda cfg, motion, device: ToyTrackingEnv(num_envs=cfg.num_envs(), seed=cfg.runner.seed, device=device)
cli.checked_motion = lambda motion: f"motion {motion}: not checked (toy env)"
paused_in, signal_file = int(sys.argv[2]), Path(sys.argv[3])
save = torch.save

def half_then_pause(obj, f, *args, **kwargs):
    if not (isinstance(obj, dict) and obj.get("iteration") == paused_in):
        return save(obj, f, *args, **kwargs)
    data = io.BytesIO()
    save(obj, data, *args, **kwargs)
    f.write(data.getvalue()[:len(data.getvalue()) // 2])
    f.flush()
    signal_file.touch()
    time.sleep(600)

torch.save = half_then_pause           # what checkpoint.save_atomic calls
sys.exit(cli.main(sys.argv[4:]))
"""


def test_a_run_killed_while_writing_a_checkpoint_resumes_from_the_previous_one(toy_factory, tmp_path):
    run, signal_file = tmp_path / "run", tmp_path / "writing"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(Path(__file__).parent), str(PAUSED_IN),
                              str(signal_file), *TRAIN, "--run-dir", str(run)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not signal_file.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert signal_file.exists(), f"bcg-train never wrote checkpoint {PAUSED_IN} (exit {child.poll()}): " \
                                     f"{child.stderr.read() if child.poll() is not None else 'still running'}"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()

    folder = run / "checkpoints"
    (partial,) = folder.glob(f".iter_{PAUSED_IN:06d}.pt.*.tmp")          # the atomic writer's temporary file
    assert partial.stat().st_size > 0                                      # half written
    with pytest.raises(Exception):
        torch.load(partial, map_location="cpu", weights_only=True)
    assert [p.name for p in checkpoints_in(folder)] == ["iter_000001.pt", "iter_000002.pt"]
    assert find_checkpoint(run).name == "iter_000002.pt"          # the partial file is never taken
    assert load_checkpoint(run)["iteration"] == 2

    intact = {p.name: p.stat().st_mtime_ns for p in checkpoints_in(folder)}
    assert cli.main(["--resume", str(run)]) == 0
    assert [(motion, device) for motion, _, _, device in toy_factory] == [("jump", "cpu")]
    assert [p.name for p in checkpoints_in(folder)] == [f"iter_{k:06d}.pt" for k in range(1, 5)]
    assert {name: (folder / name).stat().st_mtime_ns for name in intact} == intact   # continued after 2
    for path in checkpoints_in(folder):
        assert load_checkpoint(path)["iteration"] == int(path.stem[5:])
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_checkpoint(partial)
