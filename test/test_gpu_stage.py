"""tools/gpu/stage.py: wheels and model bundled, split into parts, received part by part, joined,
verified and installed into a --target folder, as on the GPU machine (here with this Python and a
wheel built by the test, or a real one from the index when it is reachable)."""
import base64
import hashlib
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_stage", ROOT / "tools" / "gpu" / "stage.py")
stage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stage)

KIB = 1024


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str = "bcg_standin", version: str = "1.0", value: int = 42,
               payload_bytes: int = 200 * KIB, tamper: str = "") -> Path:
    """A deflated pure-Python wheel: `name`/__init__.py (VALUE = value) and an incompressible
    `name`/payload.bin. tamper='hash' lists a wrong sha256 for __init__.py, 'unlisted' leaves
    payload.bin out of the RECORD."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VALUE = {value}\n".encode(),
        f"{name}/payload.bin": random.Random(value).randbytes(payload_bytes),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = []
    for path, data in files.items():
        if tamper == "unlisted" and path.endswith("payload.bin"):
            continue
        digest = _record_hash(b"not the file" if tamper == "hash" and path.endswith("__init__.py") else data)
        rows.append(f"{path},{digest},{len(data)}")
    rows.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(rows) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


def make_model(folder: Path, seed: int = 0) -> Path:
    """A model folder like the G1's: the scene XML and a binary mesh beside it."""
    (folder / "meshes").mkdir(parents=True)
    (folder / "meshes" / "foot.STL").write_bytes(random.Random(seed).randbytes(100 * KIB))
    xml = folder / "scene.xml"
    xml.write_text(f'<mujoco model="standin {seed}"><compiler meshdir="meshes"/></mujoco>\n')
    return xml


def pack_standin(tmp_path: Path, part_bytes: int = 64 * KIB, seed: int = 0, **kw) -> tuple:
    wheel = make_wheel(tmp_path / "wheels")
    xml = make_model(tmp_path / f"model{seed}" / "robot", seed)
    manifest = stage.pack([wheel], xml, tmp_path / f"stage{seed}", part_bytes, **kw)
    return manifest, tmp_path / f"stage{seed}", xml


def receive_all(stage_dir: Path, site: Path, numbers) -> tuple:
    result = None
    for n in numbers:
        result = stage.receive(stage.part_dir(stage_dir, n), site)
    return result


def test_pack_receive_install_roundtrip(tmp_path):
    manifest, stage_dir, xml = pack_standin(tmp_path)
    parts = manifest["parts"]
    assert len(parts) >= 3                                        # 300 KiB of random bytes over 64 KiB parts
    assert all(p["size"] <= 64 * KIB for p in parts) and sum(p["size"] for p in parts) == manifest["bundle"]["size"]
    for n, entry in enumerate(parts, 1):
        folder = stage.part_dir(stage_dir, n)
        assert sorted(f.name for f in folder.iterdir()) == sorted([entry["name"], stage.MANIFEST])
        assert hashlib.sha256((folder / entry["name"]).read_bytes()).hexdigest() == entry["sha256"]
    assert not (stage_dir / stage.BUNDLE).exists()                # only the parts stay
    (w,) = manifest["wheels"]
    assert (w["name"], w["version"], w["record_files"]) == ("bcg-standin", "1.0", 4)
    assert w["sha256"] != w["downloaded_sha256"]                  # repacked uncompressed

    site = tmp_path / "site"
    present, missing = receive_all(stage_dir, site, range(1, len(parts)))
    assert missing == [parts[-1]["name"]]
    present, missing = receive_all(stage_dir, site, [len(parts)])
    assert missing == [] and present == [p["name"] for p in parts]

    report = stage.install(site, sys.executable)
    assert report["dists"] == {"bcg-standin": "1.0"}
    assert report["modules"]["bcg_standin"].startswith(str(site / "site"))
    assert set(stage.PROJECT_MODULES) < set(report["modules"])           # the project imports beside it
    out = subprocess.run(
        ["bash", "-c", f'. "{site}/env.sh" && "{sys.executable}" -c "import bcg_standin, bcg_train, os; '
                       f'print(bcg_standin.VALUE); print(bcg_train.__file__); print(os.environ[\'BCG_G1_MODEL\'])"'],
        capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "42"
    assert Path(out[1]).resolve().is_relative_to(ROOT / "bcg_train")   # the workspace's packages, not installed ones
    staged_xml = Path(out[2])
    assert staged_xml.name == "scene.xml" and staged_xml.read_text() == xml.read_text()
    assert (staged_xml.parent / "meshes" / "foot.STL").read_bytes() == (xml.parent / "meshes" / "foot.STL").read_bytes()


def test_install_names_the_missing_parts(tmp_path):
    manifest, stage_dir, _ = pack_standin(tmp_path, preset=0)
    site = tmp_path / "site"
    with pytest.raises(stage.StageError, match="no part received yet"):
        stage.install(site, sys.executable)
    receive_all(stage_dir, site, [1, 3])
    with pytest.raises(stage.StageError, match=rf"parts missing .*{manifest['parts'][1]['name']}.*from part-01"):
        stage.install(site, sys.executable)


def test_receive_rejects_a_damaged_part(tmp_path):
    manifest, stage_dir, _ = pack_standin(tmp_path, preset=0)
    entry = manifest["parts"][1]
    part = stage.part_dir(stage_dir, 2) / entry["name"]
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(stage.StageError, match=rf"{entry['name']}: sha256 differs"):
        stage.receive(part.parent, tmp_path / "site")
    part.write_bytes(bytes(data[:-1]))
    with pytest.raises(stage.StageError, match=rf"{entry['name']}: {entry['size'] - 1} bytes, the manifest says"):
        stage.receive(part.parent, tmp_path / "site")


def test_a_part_damaged_after_receiving_is_caught_by_install(tmp_path):
    manifest, stage_dir, _ = pack_standin(tmp_path, preset=0)
    site = tmp_path / "site"
    receive_all(stage_dir, site, range(1, len(manifest["parts"]) + 1))
    kept = site / "parts" / manifest["parts"][0]["name"]
    data = bytearray(kept.read_bytes())
    data[-1] ^= 1
    kept.write_bytes(bytes(data))
    with pytest.raises(stage.StageError, match="sha256 differs"):
        stage.install(site, sys.executable)


def test_a_new_staging_replaces_the_parts_of_an_older_one(tmp_path):
    old, old_stage, _ = pack_standin(tmp_path, seed=0, preset=0)
    new, new_stage, _ = pack_standin(tmp_path, seed=1, preset=0)
    assert old["bundle"]["sha256"] != new["bundle"]["sha256"]
    site = tmp_path / "site"
    receive_all(old_stage, site, [1, 2])
    present, missing = receive_all(new_stage, site, [1])
    assert present == [new["parts"][0]["name"]] and len(missing) == len(new["parts"]) - 1
    manifest, _, _ = stage.parts_state(site)
    assert manifest["bundle"]["sha256"] == new["bundle"]["sha256"]


def test_a_wheel_whose_files_disagree_with_its_record_is_refused(tmp_path):
    good = make_wheel(tmp_path / "good")
    assert stage.verify_wheel_record(good) == 4
    bad = make_wheel(tmp_path / "bad", tamper="hash")
    with pytest.raises(stage.StageError, match="bcg_standin/__init__.py does not match the sha256 in its RECORD"):
        stage.verify_wheel_record(bad)
    unlisted = make_wheel(tmp_path / "unlisted", tamper="unlisted")
    with pytest.raises(stage.StageError, match="bcg_standin/payload.bin is not listed in its RECORD"):
        stage.verify_wheel_record(unlisted)
    with pytest.raises(stage.StageError, match="does not match"):
        stage.pack([bad], make_model(tmp_path / "m" / "robot"), tmp_path / "stage", 64 * KIB, preset=0)


def test_repacked_wheel_has_the_same_members_uncompressed(tmp_path):
    src = make_wheel(tmp_path / "w")
    dst = tmp_path / "stored.whl"
    stage.repack_stored(src, dst)
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst) as b:
        assert [i.filename for i in a.infolist()] == [i.filename for i in b.infolist()]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in b.infolist())
        assert all(a.read(n) == b.read(n) for n in a.namelist())
    assert stage.verify_wheel_record(dst) == 4


def test_versions_come_from_constraints_then_from_this_environment(tmp_path):
    pins = stage.read_pins(ROOT / "constraints.txt")
    installed = {"glfw": "2.11.0"}.get
    got = dict(stage.staged_versions(["warp-lang", "MuJoCo", "glfw"], pins, installed))
    assert got == {"warp-lang": pins["warp-lang"], "MuJoCo": pins["mujoco"], "glfw": "2.11.0"}
    with pytest.raises(stage.StageError, match="smmap: not pinned in constraints.txt and not installed"):
        stage.staged_versions(["smmap"], pins, lambda name: None)
    bad = tmp_path / "constraints.txt"
    bad.write_text("numpy==2.4.6\ntorch>=2\n")
    with pytest.raises(stage.StageError, match="cannot read the pin 'torch>=2'"):
        stage.read_pins(bad)


def test_download_command_asks_for_binary_wheels_of_the_gpu_python(tmp_path):
    cmd = stage.download_command([("warp-lang", "1.19.0"), ("glfw", "2.11.0")], tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
    assert {"--no-deps", "--only-binary=:all:"} <= set(cmd)
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and cmd[cmd.index("--implementation") + 1] == "cp"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"] == list(stage.TARGET_PLATFORMS)
    assert cmd[-2:] == ["warp-lang==1.19.0", "glfw==2.11.0"]


def test_find_wheels_wants_exactly_one_wheel_per_package(tmp_path):
    wheel = make_wheel(tmp_path)
    assert stage.find_wheels(tmp_path, [("bcg-standin", "1.0")]) == [wheel]
    with pytest.raises(stage.StageError, match="no wheel for bcg-standin==2.0; run `stage.py download` first"):
        stage.find_wheels(tmp_path, [("bcg-standin", "2.0")])


def test_plan_carries_one_part_per_call_and_ends_with_the_check(tmp_path):
    manifest, stage_dir, _ = pack_standin(tmp_path, preset=0)
    calls = stage.plan(stage_dir)
    assert [carried for _, carried in calls] == [f"{stage_dir}/part-{n:02d}"
                                                 for n in range(1, len(manifest["parts"]) + 1)]
    assert all(cmd.startswith(f"python3 tools/gpu/stage.py receive {carried}") for cmd, carried in calls)
    assert calls[-1][0].endswith("&& python3 tools/gpu/stage.py install && bash bench/gpu_check.sh --device cuda:0")
    assert "install" not in calls[0][0]


def test_parts_fit_a_call_beside_the_working_tree(tmp_path):
    """The default part size leaves room for what every call sends: tracked and untracked files,
    not the ignored ones."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("big/\n")
    (repo / "tracked.bin").write_bytes(b"x" * 3 * stage.MIB)
    subprocess.run(["git", "-C", str(repo), "add", "tracked.bin"], check=True)
    (repo / "untracked.bin").write_bytes(b"y" * stage.MIB)
    (repo / "big").mkdir()
    (repo / "big" / "ignored.bin").write_bytes(b"z" * 5 * stage.MIB)
    tree = stage.working_tree_bytes(repo)
    assert tree == 4 * stage.MIB + len("big/\n")
    assert stage.default_part_mib(tree) == pytest.approx(stage.CALL_LIMIT_MIB - stage.CALL_MARGIN_MIB - 4, abs=1e-3)
    with pytest.raises(stage.StageError, match="the working tree is 63.0 MiB: no part fits beside it"):
        stage.default_part_mib(63 * stage.MIB)


def test_a_real_wheel_from_the_index(tmp_path):
    """The download as the GPU machine needs it (cp312 manylinux), then the same way there; skipped
    where the package index cannot be reached."""
    packages = [("pyvers", "0.2.3")]
    dest = tmp_path / "wheels"
    res = subprocess.run(stage.download_command(packages, dest, pip_args=["--timeout", "20", "--retries", "1"]),
                         capture_output=True, text=True)
    if res.returncode != 0:
        offline = ("NewConnectionError", "Network is unreachable", "Temporary failure in name resolution",
                   "Could not fetch URL", "ConnectTimeout", "ReadTimeout")
        if any(s in res.stdout + res.stderr for s in offline):
            pytest.skip("the package index cannot be reached")
        pytest.fail(res.stdout + res.stderr)
    (wheel,) = stage.find_wheels(dest, packages)
    xml = make_model(tmp_path / "model" / "robot")
    manifest = stage.pack([wheel], xml, tmp_path / "stage", 4 * KIB, preset=0)
    site = tmp_path / "site"
    receive_all(tmp_path / "stage", site, range(1, len(manifest["parts"]) + 1))
    report = stage.install(site, sys.executable, project_modules=())
    assert report["dists"] == {"pyvers": "0.2.3"} and report["modules"]["pyvers"].startswith(str(site / "site"))


def test_command_line_reports_errors_by_name(tmp_path, capsys):
    assert stage.main(["install", "--site", str(tmp_path / "site")]) == 1
    assert "no part received yet" in capsys.readouterr().err
    assert stage.main(["receive", str(tmp_path / "nowhere")]) == 1
    assert "nowhere/manifest.json: no manifest" in capsys.readouterr().err
    env = dict(os.environ, BCG_G1_MODEL=str(tmp_path / "missing.xml"))
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu" / "stage.py"), "pack", "--wheels", str(tmp_path)],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 1 and "no wheel for warp-lang==" in res.stderr
    manifest, stage_dir, _ = pack_standin(tmp_path, preset=0)
    assert json.loads((stage.part_dir(stage_dir, 1) / stage.MANIFEST).read_text()) == manifest


def test_the_cuda_tests_collect_with_the_staged_environment(tmp_path):
    """On the GPU machine the workspace's packages come from env.sh's PYTHONPATH, not from an
    install (the first H200 run failed there: pytest imported the folder bcg_train/ as the module).
    Here: a Python that skips site (-S, so no editable install) and sees only env.sh's PYTHONPATH
    plus this environment's site-packages runs the check's real CUDA-test step."""
    site = tmp_path / "gpu-site"
    site.mkdir()
    (site / "env.sh").write_text(stage.env_script(site, tmp_path / "model" / "scene.xml"))
    python = tmp_path / "python"
    python.write_text(f"""#!/bin/bash
. {site / "env.sh"}
export PYTHONPATH="$PYTHONPATH:{sysconfig.get_paths()["purelib"]}:{sysconfig.get_paths()["platlib"]}"
exec {sys.executable} -S "$@"
""")
    python.chmod(0o755)
    out = tmp_path / "out"
    res = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--device", "cpu", "--only", "cuda_tests",
                          "--out", str(out)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHON=str(python)))
    report = (out / "gpu_check.txt").read_text()
    assert res.returncode == 0, report
    assert re.search(r"cuda_tests +ok", report)
    assert re.search(r"\d+ (passed|skipped), \d+ deselected", report), report
