"""Stage the wheels and the G1 model that bench/gpu_check.sh needs on a GPU machine that cannot fetch them.

An offline GPU machine that has Python 3.12 with torch (CUDA), onnx, onnxruntime, numpy,
scipy, pyyaml and pytest, but no warp-lang, no MuJoCo, no rsl-rl-lib and no network, and that takes at most 64 MiB per
transfer. So the wheels are fetched here, bundled with the G1 model into one
xz-compressed tar (wheels repacked uncompressed first, so that xz sees their contents: with
warp-lang's 142 MiB wheel and the 25 MB G1 model it is 110 MiB), split into parts that each fit one
transfer, carried over one transfer per part, and reassembled, verified and installed there.

Here (the download needs the network; run it with the project's .venv/bin/python, whose installed
versions name the packages constraints.txt does not pin):

    python tools/gpu/stage.py download     # pip download the cp312 manylinux x86_64 wheels -> .gpu-stage/wheels/
    python tools/gpu/stage.py pack         # bundle + split -> .gpu-stage/part-NN/ (part + manifest.json each)
    python tools/gpu/stage.py plan         # print the transfers, one per part, in order

There (python3 is the system Python that holds torch; each transfer carries its part, and they follow
each other while that machine keeps its files, since received parts live in the repo folder there):

    python3 tools/gpu/stage.py receive .gpu-stage/part-01
    ...
    python3 tools/gpu/stage.py receive .gpu-stage/part-NN && python3 tools/gpu/stage.py install \
        && bash bench/gpu_check.sh --device cuda:0

`install` checks the sha256 of every part, of the joined bundle, of every wheel and every file
the wheels' RECORDs list, and of every model file; installs the wheels with
`pip install --no-index --no-deps --target .gpu-site/site` (the system's torch stays the one used);
writes .gpu-site/env.sh (PYTHONPATH: that folder and the workspace's packages; BCG_G1_MODEL: the
staged model), which bench/gpu_check.sh sources; and imports every installed package to prove it.

Standard library only (Python 3.10+), so it runs on both machines.
"""
import argparse
import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
STAGE_DIR = ROOT / ".gpu-stage"
SITE_DIR = ROOT / ".gpu-site"
DEFAULT_MODEL = ROOT.parent / "shared" / "robots" / "unitree_g1" / "scene_29dof.xml"
MANIFEST = "manifest.json"
BUNDLE = "bundle.tar.xz"
FORMAT = 1
MIB = 2 ** 20
CALL_LIMIT_MIB = 64
"""What one transfer to the GPU machine carries at most, the working tree (tracked and untracked-not-ignored
files) included."""
CALL_MARGIN_MIB = 2
"""MiB left free in each transfer besides the working tree and the part (files added before the transfers)."""
XZ_PRESET = 9

# What the GPU check imports that the GPU machine lacks. Not staged: what that machine already has
# (numpy, scipy, pyyaml, absl-py, onnx, onnxscript, onnxruntime, tensorboard, matplotlib, pytest,
# pytest-timeout), mujoco-studio and pyopengl (MuJoCo's viewer and renderer, never imported by the
# check; studio would also need websockets) and cyclonedds (DDS, not used by the check).
STAGED = (
    "warp-lang",                        # the differentiable simulator
    "mujoco", "mujoco-core", "glfw",    # the G1 model loader and the reference (mujoco imports glfw)
    "rsl-rl-lib", "tensordict", "pyvers", "gitpython", "gitdb", "smmap",   # the PPO baseline
)
TARGET_PYTHON = "3.12"
TARGET_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                    "manylinux2014_x86_64", "manylinux1_x86_64")


class StageError(RuntimeError):
    """A staging step cannot go on; the message names the file, part or package at fault."""


def log(msg: str) -> None:
    print(f"[stage] {msg}", flush=True)


def canonical(name: str) -> str:
    """PEP 503 normal form of a distribution name ('Warp_Lang' -> 'warp-lang')."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MIB):
            h.update(chunk)
    return h.hexdigest()


# --- here: which wheels, and fetching them ------------------------------------------------------

def read_pins(constraints: Path) -> Dict[str, str]:
    """`name==version` lines of a constraints file, by canonical name."""
    pins = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", line)
        if not m:
            raise StageError(f"{constraints}: cannot read the pin {line!r} (expected name==version)")
        pins[canonical(m.group(1))] = m.group(2)
    return pins


def staged_versions(names: Iterable[str], pins: Dict[str, str],
                    installed: Callable[[str], Optional[str]]) -> List[Tuple[str, str]]:
    """(name, version) of each package to stage: its pin, else the version installed here."""
    out = []
    for name in names:
        version = pins.get(canonical(name)) or installed(name)
        if version is None:
            raise StageError(f"{name}: not pinned in constraints.txt and not installed in {sys.executable} "
                             "(run this with the project's .venv/bin/python)")
        out.append((name, version))
    return out


def installed_version(name: str) -> Optional[str]:
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def download_command(packages: List[Tuple[str, str]], dest: Path, python_version: str = TARGET_PYTHON,
                     platforms: Iterable[str] = TARGET_PLATFORMS, pip_args: Iterable[str] = ()) -> List[str]:
    """The `pip download` command line for binary wheels of `packages` for another Python and platform."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", python_version, "--implementation", "cp", "-d", str(dest), *pip_args]
    for p in platforms:
        cmd += ["--platform", p]
    return cmd + [f"{n}=={v}" for n, v in packages]


def wheel_name_version(path: Path) -> Tuple[str, str]:
    """(canonical name, version) from a wheel's file name (name-version-...-tags.whl)."""
    parts = path.name[:-len(".whl")].split("-")
    if not path.name.endswith(".whl") or len(parts) < 5:
        raise StageError(f"{path}: not a wheel file name (name-version-python-abi-platform.whl)")
    return canonical(parts[0]), parts[1]


def find_wheels(wheel_dir: Path, packages: List[Tuple[str, str]]) -> List[Path]:
    """The one wheel in `wheel_dir` for each (name, version)."""
    found = []
    for name, version in packages:
        hits = [w for w in sorted(wheel_dir.glob("*.whl")) if wheel_name_version(w) == (canonical(name), version)]
        if len(hits) != 1:
            what = "no wheel" if not hits else f"{len(hits)} wheels ({', '.join(h.name for h in hits)})"
            raise StageError(f"{wheel_dir}: {what} for {name}=={version}; run `stage.py download` first")
        found.append(hits[0])
    return found


# --- wheels: repack, verify ---------------------------------------------------------------------

def record_hash(data: bytes) -> str:
    """A RECORD file's hash field of `data` ('sha256=' + urlsafe base64, no padding)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def verify_wheel_record(wheel: Path) -> int:
    """Checks every file of `wheel` against the sha256 its RECORD lists; returns the files checked."""
    with zipfile.ZipFile(wheel) as z:
        records = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")]
        if len(records) != 1:
            raise StageError(f"{wheel.name}: {len(records)} .dist-info/RECORD files, expected one")
        listed = {}
        for row in csv.reader(io.StringIO(z.read(records[0]).decode())):
            if row:
                listed[row[0]] = row[1] if len(row) > 1 else ""
        checked = 0
        for info in z.infolist():
            if info.is_dir():
                continue
            name = info.filename
            if name == records[0] or name.endswith((".dist-info/RECORD.jws", ".dist-info/RECORD.p7s")):
                continue
            if name not in listed:
                raise StageError(f"{wheel.name}: {name} is not listed in its RECORD")
            expected = listed[name]
            if not expected.startswith("sha256="):
                raise StageError(f"{wheel.name}: RECORD has no sha256 for {name} ({expected!r})")
            if record_hash(z.read(info)) != expected:
                raise StageError(f"{wheel.name}: {name} does not match the sha256 in its RECORD")
            checked += 1
    return checked


def repack_stored(src: Path, dst: Path) -> None:
    """Writes `src` as an uncompressed (ZIP_STORED) wheel: the same members, names, times and modes
    (so the same RECORD holds), but bytes that xz can compress."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            out = zipfile.ZipInfo(info.filename, info.date_time)
            out.external_attr = info.external_attr
            out.compress_type = zipfile.ZIP_STORED
            zo.writestr(out, zi.read(info))   # zipfile checks each member's CRC as it reads


# --- here: bundle and split ---------------------------------------------------------------------

def _add_file(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = tarfile.TarInfo(arcname)
    info.size = path.stat().st_size
    info.mode = 0o644
    info.mtime = 0
    with open(path, "rb") as f:
        tar.addfile(info, f)


def model_files(model_xml: Path) -> List[Path]:
    """Every file of the folder that holds the model XML (its meshes included), sorted."""
    if not model_xml.is_file():
        raise StageError(f"{model_xml}: model XML not found (pass --model or set BCG_G1_MODEL)")
    return sorted(p for p in model_xml.parent.rglob("*") if p.is_file())


def pack(wheels: List[Path], model_xml: Path, stage_dir: Path, part_bytes: int,
         preset: int = XZ_PRESET) -> dict:
    """Bundles `wheels` (repacked uncompressed) and the model folder of `model_xml` into one
    xz-compressed tar, splits it into `stage_dir`/part-NN/ of at most `part_bytes` each, writes the
    manifest into every part folder and returns it."""
    if part_bytes <= 0:
        raise StageError(f"part size must be positive, got {part_bytes} bytes")
    models = model_files(model_xml)
    stage_dir.mkdir(parents=True, exist_ok=True)
    for old in stage_dir.glob("part-*"):
        shutil.rmtree(old)
    model_root = model_xml.parent
    manifest = {"format": FORMAT, "python": TARGET_PYTHON, "wheels": [],
                "model": {"folder": model_root.name, "xml": model_xml.name, "files": {}}}
    bundle = stage_dir / BUNDLE
    with tempfile.TemporaryDirectory(dir=stage_dir) as tmp:
        with tarfile.open(bundle, "w:xz", preset=preset, format=tarfile.PAX_FORMAT) as tar:
            for wheel in wheels:
                stored = Path(tmp) / wheel.name
                repack_stored(wheel, stored)
                files = verify_wheel_record(stored)
                name, version = wheel_name_version(wheel)
                manifest["wheels"].append({"file": wheel.name, "name": name, "version": version,
                                           "sha256": sha256_file(stored), "size": stored.stat().st_size,
                                           "downloaded_sha256": sha256_file(wheel), "record_files": files})
                _add_file(tar, stored, f"wheels/{wheel.name}")
                stored.unlink()
                log(f"bundled {wheel.name} ({files} files match its RECORD)")
            for path in models:
                rel = path.relative_to(model_root).as_posix()
                manifest["model"]["files"][rel] = sha256_file(path)
                _add_file(tar, path, f"model/{model_root.name}/{rel}")
            log(f"bundled model {model_root.name}/ ({len(manifest['model']['files'])} files)")
    manifest["bundle"] = {"name": BUNDLE, "size": bundle.stat().st_size, "sha256": sha256_file(bundle)}
    manifest["parts"] = split(bundle, stage_dir, part_bytes)
    bundle.unlink()
    for i in range(len(manifest["parts"])):
        (part_dir(stage_dir, i + 1) / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def working_tree_bytes(root: Path) -> int:
    """Bytes of what a transfer sends besides the carried paths: the tracked files and the
    untracked files git does not ignore (`git ls-files --cached --others --exclude-standard`)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise StageError(f"{root}: cannot list the working tree with git ({e}); pass --part-mib") from e
    files = (root / name for name in out.decode().split("\0") if name)
    return sum(f.stat().st_size for f in files if f.is_file())


def default_part_mib(tree_bytes: int) -> float:
    """The largest part that fits one transfer beside a working tree of `tree_bytes`, MiB."""
    part = CALL_LIMIT_MIB - CALL_MARGIN_MIB - tree_bytes / MIB
    if part < 1:
        raise StageError(f"the working tree is {tree_bytes / MIB:.1f} MiB: no part fits beside it in a "
                         f"{CALL_LIMIT_MIB} MiB transfer")
    return part


def part_dir(stage_dir: Path, number: int) -> Path:
    return stage_dir / f"part-{number:02d}"


def split(path: Path, stage_dir: Path, part_bytes: int) -> List[dict]:
    """Cuts `path` into stage_dir/part-NN/<name>.NN files of at most `part_bytes`; their entries."""
    parts = []
    with open(path, "rb") as f:
        while chunk := f.read(part_bytes):
            number = len(parts) + 1
            folder = part_dir(stage_dir, number)
            folder.mkdir(parents=True)
            name = f"{path.name}.{number:02d}"
            (folder / name).write_bytes(chunk)
            parts.append({"name": name, "size": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    return parts


def load_manifest(path: Path) -> dict:
    if not path.is_file():
        raise StageError(f"{path}: no manifest (a part folder made by `stage.py pack` holds one)")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise StageError(f"{path}: manifest format {manifest.get('format')!r}, this tool reads {FORMAT}")
    return manifest


def plan(stage_dir: Path) -> List[Tuple[str, str]]:
    """(command, carried path) of each transfer, in order, for the parts in `stage_dir`."""
    manifest = load_manifest(part_dir(stage_dir, 1) / MANIFEST)
    rel = stage_dir.relative_to(ROOT) if stage_dir.is_relative_to(ROOT) else stage_dir
    calls = []
    n = len(manifest["parts"])
    for i in range(1, n + 1):
        carried = f"{rel}/part-{i:02d}"
        cmd = f"python3 tools/gpu/stage.py receive {carried}"
        if i == n:
            cmd += " && python3 tools/gpu/stage.py install && bash bench/gpu_check.sh --device cuda:0"
        calls.append((cmd, carried))
    return calls


# --- there: receive, join, verify, install -------------------------------------------------------

def _check_part(path: Path, entry: dict) -> None:
    size = path.stat().st_size
    if size != entry["size"]:
        raise StageError(f"{path}: {size} bytes, the manifest says {entry['size']}")
    if sha256_file(path) != entry["sha256"]:
        raise StageError(f"{path}: sha256 differs from the manifest's (a damaged or foreign part)")


def parts_state(site: Path) -> Tuple[Optional[dict], List[str], List[str]]:
    """(manifest, names present and verified by size, names missing) of the parts received into `site`."""
    received = site / "parts"
    if not (received / MANIFEST).is_file():
        return None, [], []
    manifest = load_manifest(received / MANIFEST)
    present, missing = [], []
    for entry in manifest["parts"]:
        p = received / entry["name"]
        (present if p.is_file() and p.stat().st_size == entry["size"] else missing).append(entry["name"])
    return manifest, present, missing


def receive(part_folder: Path, site: Path) -> Tuple[List[str], List[str]]:
    """Verifies the part in `part_folder` against its manifest and keeps it in `site`/parts (parts
    of an older staging are dropped); returns (names present, names missing)."""
    manifest = load_manifest(part_folder / MANIFEST)
    entries = [e for e in manifest["parts"] if (part_folder / e["name"]).is_file()]
    if len(entries) != 1:
        raise StageError(f"{part_folder}: holds {len(entries)} of the manifest's parts, expected one")
    entry = entries[0]
    _check_part(part_folder / entry["name"], entry)
    received = site / "parts"
    old, _, _ = parts_state(site)
    if old is not None and old["bundle"]["sha256"] != manifest["bundle"]["sha256"]:
        log(f"dropping the parts of an older staging in {received}")
        shutil.rmtree(received)
    received.mkdir(parents=True, exist_ok=True)
    tmp = received / (entry["name"] + ".tmp")
    shutil.copyfile(part_folder / entry["name"], tmp)
    os.replace(tmp, received / entry["name"])
    (received / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    _, present, missing = parts_state(site)
    return present, missing


def join_parts(site: Path, manifest: dict, out: Path) -> None:
    """Checks every received part, joins them into `out` and checks the whole bundle's sha256."""
    received = site / "parts"
    h = hashlib.sha256()
    with open(out, "wb") as f:
        for entry in manifest["parts"]:
            p = received / entry["name"]
            _check_part(p, entry)
            data = p.read_bytes()
            h.update(data)
            f.write(data)
    if h.hexdigest() != manifest["bundle"]["sha256"]:
        raise StageError(f"{out}: the joined parts' sha256 differs from the manifest's bundle sha256")


def unpack(bundle: Path, manifest: dict, dest: Path) -> Tuple[List[Path], Path]:
    """Extracts the bundle into `dest`, checks each wheel (sha256 and RECORD) and model file;
    returns (wheels, model XML)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(bundle, "r:xz") as tar:
        tar.extractall(dest, filter="data")
    wheels = []
    for w in manifest["wheels"]:
        path = dest / "wheels" / w["file"]
        if not path.is_file() or sha256_file(path) != w["sha256"]:
            raise StageError(f"{w['file']}: missing from the bundle or its sha256 differs from the manifest's")
        verify_wheel_record(path)
        wheels.append(path)
    model = manifest["model"]
    model_root = dest / "model" / model["folder"]
    for rel, digest in model["files"].items():
        p = model_root / rel
        if not p.is_file() or sha256_file(p) != digest:
            raise StageError(f"model file {model['folder']}/{rel}: missing or its sha256 differs from the manifest's")
    return wheels, model_root / model["xml"]


def top_level_modules(wheel: Path) -> List[str]:
    """The importable top-level names a wheel installs (from its file list)."""
    with zipfile.ZipFile(wheel) as z:
        names = set()
        for n in z.namelist():
            first = n.split("/", 1)[0]
            if first.endswith((".dist-info", ".data")):
                continue
            if "/" in n:
                names.add(first)
            elif first.endswith(".py"):
                names.add(first[:-3])
    return sorted(n for n in names if n.isidentifier())


def env_script(site: Path, model_xml: Path) -> str:
    """bash lines (sourced by bench/gpu_check.sh) that put the staged packages, the workspace's
    packages and the staged model into the environment; paths relative to the script's folder."""
    to_root = os.path.relpath(ROOT, site)
    to_model = os.path.relpath(model_xml, site)
    packages = ":".join(f"$_root/{p}" for p in ("bcg", "bcg_train", "bcg_sim_bridge", "bcg_policy_node"))
    return ("# Written by tools/gpu/stage.py install.\n"
            '_site="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
            f'_root="$(cd "$_site/{to_root}" && pwd)"\n'
            f'export PYTHONPATH="$_site/site:{packages}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            f'export BCG_G1_MODEL="$_site/{to_model}"\n'
            "# GitPython (rsl-rl-lib's logger) refuses to import where no git program is installed\n"
            "export GIT_PYTHON_REFRESH=quiet\n"
            "unset _site _root\n")


# Imported after installing, with .gpu-site/env.sh sourced: the staged packages and the project's
# modules that use them.
PROJECT_MODULES = ("bcg_train.diffsim", "bcg_train.algo.ppo")
IMPORT_CHECK = """
import importlib, json, sys
from importlib import metadata
out = {"python": sys.version.split()[0], "modules": {}, "dists": {}}
for m in sys.argv[2:]:
    out["modules"][m] = importlib.import_module(m).__file__
for d in sys.argv[1].split(","):
    out["dists"][d] = metadata.version(d)
print(json.dumps(out))
"""


def install(site: Path, python: str = sys.executable, project_modules: Iterable[str] = PROJECT_MODULES) -> dict:
    """Joins, verifies and installs what `receive` collected into `site`, then imports every
    installed package and `project_modules` with `python`; returns the import report."""
    manifest, present, missing = parts_state(site)
    if manifest is None:
        raise StageError(f"{site}/parts: no part received yet; run `stage.py receive .gpu-stage/part-01` first")
    if missing:
        raise StageError(f"parts missing from {site}/parts: {', '.join(missing)} (a fresh machine keeps none: "
                         "receive every part again, one transfer each, from part-01)")
    bundle = site / BUNDLE
    join_parts(site, manifest, bundle)
    log(f"joined {len(present)} parts: {bundle.name} sha256 {manifest['bundle']['sha256'][:16]}... verified")
    try:
        wheels, model_xml = unpack(bundle, manifest, site / "unpacked")
    finally:
        bundle.unlink()
    log(f"verified {len(wheels)} wheels (sha256 and RECORD) and {len(manifest['model']['files'])} model files")
    target = site / "site"
    if target.exists():
        shutil.rmtree(target)
    cmd = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
           "--disable-pip-version-check", "--target", str(target), *map(str, wheels)]
    if subprocess.run(cmd).returncode != 0:
        raise StageError("pip install --target failed (its output is above): " + " ".join(cmd))
    env_sh = site / "env.sh"
    env_sh.write_text(env_script(site, model_xml))
    modules = sorted({m for w in wheels for m in top_level_modules(w)}) + list(project_modules)
    dists = ",".join(w["name"] for w in manifest["wheels"])
    res = subprocess.run(["bash", "-c", '. "$0" && exec "$@"', str(env_sh), python, "-c", IMPORT_CHECK, dists,
                          *modules], capture_output=True, text=True)
    if res.returncode != 0:
        raise StageError(f"installed, but importing {', '.join(modules)} failed:\n{res.stderr.strip()}")
    report = json.loads(res.stdout)
    for name, version in report["dists"].items():
        log(f"installed {name} {version}")
    log(f"imported {', '.join(modules)} with Python {report['python']} from {target}")
    log(f"model: {model_xml}")
    log(f"environment: . {env_sh}")
    return report


# --- command line --------------------------------------------------------------------------------

def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("download", help="here, with network: pip download the wheels for the GPU machine")
    d.add_argument("--dest", type=Path, default=STAGE_DIR / "wheels")
    p = sub.add_parser("pack", help="here: bundle wheels + model, split into parts")
    p.add_argument("--wheels", type=Path, default=STAGE_DIR / "wheels")
    p.add_argument("--model", type=Path, default=None,
                   help="MuJoCo XML whose folder is staged (default: $BCG_G1_MODEL, else ../shared's G1)")
    p.add_argument("--part-mib", type=float, default=None,
                   help=f"largest part, MiB (default: {CALL_LIMIT_MIB} MiB less the working tree and "
                        f"{CALL_MARGIN_MIB} MiB)")
    p.add_argument("--stage", type=Path, default=STAGE_DIR)
    pl = sub.add_parser("plan", help="here: print the transfers, one per part")
    pl.add_argument("--stage", type=Path, default=STAGE_DIR)
    r = sub.add_parser("receive", help="there: verify one part and keep it in .gpu-site/parts")
    r.add_argument("part", type=Path, help="a part folder (.gpu-stage/part-NN)")
    r.add_argument("--site", type=Path, default=SITE_DIR)
    i = sub.add_parser("install", help="there: join, verify and install the received parts")
    i.add_argument("--site", type=Path, default=SITE_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "download":
            packages = staged_versions(STAGED, read_pins(ROOT / "constraints.txt"), installed_version)
            args.dest.mkdir(parents=True, exist_ok=True)
            cmd = download_command(packages, args.dest)
            log(" ".join(cmd))
            if subprocess.run(cmd).returncode != 0:
                raise StageError("pip download failed (its output is above; it needs the network)")
            for w in find_wheels(args.dest, packages):
                log(f"{w.name}: {w.stat().st_size / MIB:.1f} MiB")
        elif args.command == "pack":
            packages = staged_versions(STAGED, read_pins(ROOT / "constraints.txt"), installed_version)
            model = args.model or Path(os.environ.get("BCG_G1_MODEL") or DEFAULT_MODEL)
            part_mib = args.part_mib if args.part_mib is not None else default_part_mib(working_tree_bytes(ROOT))
            manifest = pack(find_wheels(args.wheels, packages), model, args.stage.resolve(), int(part_mib * MIB))
            log(f"bundle {manifest['bundle']['size'] / MIB:.1f} MiB in {len(manifest['parts'])} parts")
            print_plan(args.stage.resolve())
        elif args.command == "plan":
            print_plan(args.stage.resolve())
        elif args.command == "receive":
            present, missing = receive(args.part, args.site)
            log(f"{args.part.name} verified and kept; {len(present)} of {len(present) + len(missing)} parts here"
                + (f"; still to receive: {', '.join(missing)}" if missing else "; complete: run `stage.py install`"))
        elif args.command == "install":
            install(args.site)
    except StageError as e:
        print(f"[stage] error: {e}", file=sys.stderr)
        return 1
    return 0


def print_plan(stage_dir: Path) -> None:
    calls = plan(stage_dir)
    log("transfers, in order, each soon after the last (the GPU machine must keep the parts between them):")
    for n, (cmd, carried) in enumerate(calls, 1):
        print(f"  {n}. carry [\"{carried}\"]  command: {cmd}")


if __name__ == "__main__":
    sys.exit(main())
