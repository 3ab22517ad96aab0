"""tools/gpu/torch_flavour.sh, which tells tools/bootstrap.sh to install torch's CUDA build: a fake
`nvidia-smi` on PATH stands for a machine with or without a working NVIDIA driver."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gpu" / "torch_flavour.sh"
NO_KERNEL_MODULE = not os.path.exists("/proc/driver/nvidia/version")


def flavour(tmp_path, nvidia_smi_exit=None, **env):
    """Runs the script with PATH = a folder holding only bash's folder and, when nvidia_smi_exit is
    given, a fake nvidia-smi that exits with it; returns (exit code, stdout, stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if nvidia_smi_exit is not None:
        fake = bin_dir / "nvidia-smi"
        fake.write_text(f"#!/bin/sh\necho 'GPU 0: NVIDIA Fake (UUID: GPU-0)'\nexit {nvidia_smi_exit}\n")
        fake.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k != "BCG_TORCH"}
    run_env = dict(base, PATH=f"{bin_dir}:/usr/bin:/bin", **env)
    res = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=run_env)
    return res.returncode, res.stdout.strip(), res.stderr.strip()


def test_a_working_nvidia_smi_means_the_cuda_build(tmp_path):
    assert flavour(tmp_path, nvidia_smi_exit=0) == (0, "cuda", "")


@pytest.mark.skipif(not NO_KERNEL_MODULE, reason="this machine has the NVIDIA kernel module")
def test_no_driver_means_the_cpu_build(tmp_path):
    assert flavour(tmp_path) == (0, "cpu", "")
    # nvidia-smi installed but the driver not loaded ("couldn't communicate with the NVIDIA driver", exit 9)
    assert flavour(tmp_path, nvidia_smi_exit=9) == (0, "cpu", "")


def test_bcg_torch_overrides_the_detection(tmp_path):
    assert flavour(tmp_path, nvidia_smi_exit=0, BCG_TORCH="cpu") == (0, "cpu", "")
    assert flavour(tmp_path, BCG_TORCH="cuda") == (0, "cuda", "")
    code, out, err = flavour(tmp_path, BCG_TORCH="rocm")
    assert code == 2 and out == "" and "BCG_TORCH must be cpu or cuda, got 'rocm'" in err


APT_READY = all(subprocess.run(["dpkg", "-s", p], capture_output=True).returncode == 0
                for p in ("cyclonedds-dev", "libosmesa6", "python3-venv"))


@pytest.mark.skipif(not APT_READY, reason="bootstrap's apt packages are not installed (it would install them)")
def test_bootstrap_installs_again_when_the_flavour_changes(tmp_path):
    """tools/bootstrap.sh against a venv whose python is a fake that logs each call: the stamp it
    writes names the flavour, so a switch between cpu and cuda runs the installs again, and cuda
    asks pip for exactly the pinned version (`===`, no local +cpu build)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    calls = tmp_path / "calls.txt"
    fake = venv / "bin" / "python"
    fake.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n'
                    'case "$*" in *torch.version.cuda*) exit "${FAKE_TORCH_IS_CPU:-0}";; esac\nexit 0\n')
    fake.chmod(0o755)

    def bootstrap(torch, **env):
        calls.write_text("")
        res = subprocess.run(["bash", str(ROOT / "tools" / "bootstrap.sh")], capture_output=True, text=True,
                             env=dict(os.environ, BCG_VENV=str(venv), BCG_TORCH=torch, **env))
        return res.returncode, calls.read_text().splitlines(), res.stderr

    torch_pin = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch=="))
    code, cpu_calls, _ = bootstrap("cpu")
    assert code == 0 and len(cpu_calls) == 2 and " -r " in cpu_calls[0] and "===" not in "".join(cpu_calls)
    assert bootstrap("cpu")[:2] == (0, [])                                   # stamped: nothing to do

    code, cuda_calls, err = bootstrap("cuda")                                # the switch is noticed
    assert code == 0 and "CUDA build" in err
    assert cuda_calls[0].endswith(f"install -c {ROOT}/constraints.txt torch==={torch_pin[len('torch=='):]}")
    assert cuda_calls[1:3] == cpu_calls and "torch.version.cuda" in cuda_calls[3]
    assert bootstrap("cuda")[:2] == (0, [])
    assert bootstrap("cpu")[1] == cpu_calls                                  # and back

    code, _, err = bootstrap("cuda", FAKE_TORCH_IS_CPU="1")
    assert code == 1 and "holds a CPU build of torch" in err
    assert bootstrap("cpu")[:2] == (0, [])                                   # the failed run left the stamp alone
