"""Named segments of real motion capture (config/motions.yaml) and the folder their files are in.

A name such as `run` stands for a time window of one file of Unitree's LAFAN1 retargeting for the
G1. The folder is found the way the G1 model is: an explicit path (a `--motion-dir` flag), then the
environment variable BCG_MOTION_DIR, else `MotionDirNotFoundError` saying how to give one.
"""
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Union

import yaml

from bcg.config_files import config_file

from .errors import MotionDirNotFoundError, MotionFileError
from .source import MotionSource

ENV_VAR = "BCG_MOTION_DIR"
SEGMENTS_FILE = "motions.yaml"
"""config/<this>: the named segments."""
_KEYS = ("file", "start_s", "end_s", "why")


@dataclass(frozen=True)
class NamedSegment:
    """One entry of config/motions.yaml: `file` (name inside the motion folder), `start_s` < `end_s`
    (s, the window kept), `why` (what makes this window stand for the motion)."""

    name: str
    file: str
    start_s: float
    end_s: float
    why: str

    def source(self, motion_dir: Union[str, Path]) -> MotionSource:
        """The window of `motion_dir`/file; MotionFileError when the file is not there."""
        path = Path(motion_dir) / self.file
        if not path.is_file():
            raise MotionFileError(f"motion {self.name!r}: {path} does not exist (the motion folder holds "
                                  f"{', '.join(sorted(p.name for p in Path(motion_dir).iterdir())) or 'nothing'})")
        return MotionSource(path, self.start_s, self.end_s)


def named_segments(path: Optional[Union[str, Path]] = None) -> Dict[str, NamedSegment]:
    """name -> NamedSegment from `path` (default config/motions.yaml). MotionFileError names the file
    and the key of anything malformed."""
    path = Path(path) if path is not None else config_file(SEGMENTS_FILE)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise MotionFileError(f"{path}: cannot be read ({type(e).__name__}: {e})") from None
    entries = data.get("motions") if isinstance(data, dict) else None
    if not isinstance(entries, dict) or not entries:
        raise MotionFileError(f"{path}: expected a mapping `motions:` of name -> {{{', '.join(_KEYS)}}}")
    segments = {}
    for name, entry in entries.items():
        where = f"{path}: motions.{name}"
        if not isinstance(entry, dict) or set(entry) != set(_KEYS):
            keys = sorted(entry) if isinstance(entry, dict) else entry
            raise MotionFileError(f"{where}: has {keys}, expected exactly {list(_KEYS)}")
        for key in ("start_s", "end_s"):
            if isinstance(entry[key], bool) or not isinstance(entry[key], (int, float)):
                raise MotionFileError(f"{where}.{key}: {entry[key]!r} is not a number of seconds")
        for key in ("file", "why"):
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise MotionFileError(f"{where}.{key}: expected a non-empty string, got {entry[key]!r}")
        if not 0 <= entry["start_s"] < entry["end_s"]:
            raise MotionFileError(f"{where}: start_s {entry['start_s']} and end_s {entry['end_s']} do not make "
                                  "0 <= start_s < end_s")
        segments[str(name)] = NamedSegment(str(name), entry["file"], float(entry["start_s"]), float(entry["end_s"]),
                                           entry["why"].strip())
    return segments


def resolve_motion_dir(explicit: Optional[Union[str, Path]] = None) -> Path:
    """The folder of real motion files: `explicit` (a flag), then $BCG_MOTION_DIR.
    MotionDirNotFoundError when neither is given or the one given is not a folder."""
    for origin, value in (("--motion-dir", explicit), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if value in (None, ""):
            continue
        path = Path(value).expanduser()
        if not path.is_dir():
            raise MotionDirNotFoundError(f"{origin} names {path}, which is not a folder")
        return path
    raise MotionDirNotFoundError(
        f"no motion folder given: pass --motion-dir DIR or set {ENV_VAR}=DIR, DIR holding Unitree's LAFAN1 "
        "retargeting for the G1 (the CSV files of unitreerobotics/LAFAN1_Retargeting_Dataset, folder g1/; "
        "the tools use ../shared/motions/lafan1_g1 beside the checkout)")


def segment_source(name: str, motion_dir: Optional[Union[str, Path]] = None) -> MotionSource:
    """The file window that the named segment `name` stands for, its folder from `resolve_motion_dir`
    (MotionDirNotFoundError, naming the segment, when there is none)."""
    segment = named_segments()[name]
    try:
        folder = resolve_motion_dir(motion_dir)
    except MotionDirNotFoundError as e:
        raise MotionDirNotFoundError(
            f"motion {name!r} is {segment.file} {segment.start_s:g}-{segment.end_s:g} s of real motion capture "
            f"(config/{SEGMENTS_FILE}), and {e}.") from None
    return segment.source(folder)
