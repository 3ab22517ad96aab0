"""Which motion file to read and how: a time window, the frame rate of a CSV, the joint order of an
npz without joint names, and velocity-spike repair.

String form, accepted wherever a motion file is (command lines, ROS parameters, launch arguments):

    PATH[@START:END][,fps=HZ][,joint_order=sdk|isaaclab][,despike=RAD_S]

- `@START:END`: keep the frames at START <= t <= END seconds of the file (t = frame index / fps);
  either bound may be left out (`@10:` = from 10 s to the end).
- `fps=HZ`: frame rate of a headerless CSV (default 30, Unitree's LAFAN1 retargeting; public G1
  CSVs also come at 60 and 120). An npz states its own.
- `joint_order=sdk|isaaclab`: column order of an npz that has no `joint_names` array (BeyondMimic
  writes Isaac Lab's order, mjlab the SDK (MJCF) order; nothing in the file tells them apart).
- `despike=RAD_S`: replace joint samples around frame-to-frame speeds above RAD_S by interpolation
  (`bcg.motion.spikes`), before the joint-limit check.

Examples: `run1_subject2.csv@61:76`, `clip.csv,fps=120`, `dance.npz,joint_order=sdk`,
`take.csv@10:25,despike=35`. A string that names an existing file is that file, whatever it contains.
"""
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

from ..config_check import ConfigError, split_assignment
from .errors import MotionFileError

FPS_RANGE = (1.0, 1000.0)
"""frames/s a motion file may have (motion capture runs at 30-240; outside, the rate is a mistake whose
durations and resampled frame counts would overflow)."""

JOINT_ORDERS = ("sdk", "isaaclab")
"""Named joint orders of the 29-DoF G1 (`files.JOINT_ORDER_NAMES` holds the names in each)."""

_SPEC = re.compile(r"^(?P<path>.+?\.(?:csv|npz))(?:@(?P<start>[^:,]*):(?P<end>[^,]*))?(?P<options>(?:,[^,]*)*)$")
_OPTIONS = {"fps": "fps", "joint_order": "joint_order", "despike": "despike_rad_s"}
SYNTAX = "PATH[@START:END][,fps=HZ][,joint_order=sdk|isaaclab][,despike=RAD_S]"
_OPTION_FORMS = "fps=HZ, joint_order=sdk|isaaclab or despike=RAD_S"
"""What an option of the string form is, in an error's 'expected ...'."""
_OPTION_EXAMPLE = "fps=120"


@dataclass(frozen=True)
class MotionSource:
    """A motion file and how to read it (see the module docstring)."""

    path: Path
    start_s: Optional[float] = None
    """s, first time kept (None: the file's start)."""
    end_s: Optional[float] = None
    """s, last time kept (None: the file's end)."""
    fps: Optional[float] = None
    """frames/s of a CSV (None: 30, LAFAN1); an npz states its own."""
    joint_order: Optional[str] = None
    """'sdk' or 'isaaclab': column order of an npz without `joint_names` (None: 'isaaclab', BeyondMimic's)."""
    despike_rad_s: Optional[float] = None
    """rad/s: repair joint samples around frame-to-frame speeds above this (None: no repair)."""

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))
        for key in ("start_s", "end_s", "fps", "despike_rad_s"):
            value = getattr(self, key)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise MotionFileError(f"motion {self.path}: {key} {value!r} is not a finite number")
        if self.start_s is not None and self.start_s < 0:
            raise MotionFileError(f"motion {self.path}: start {self.start_s:g} s is negative")
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise MotionFileError(f"motion {self.path}: end {self.end_s:g} s is not after start {self.start_s:g} s")
        for key in ("fps", "despike_rad_s"):
            if getattr(self, key) is not None and not getattr(self, key) > 0:
                raise MotionFileError(f"motion {self.path}: {key} {getattr(self, key):g} must be > 0")
        if self.fps is not None and not FPS_RANGE[0] <= self.fps <= FPS_RANGE[1]:
            raise MotionFileError(f"motion {self.path}: fps {self.fps:g} is outside {FPS_RANGE[0]:g}-{FPS_RANGE[1]:g} "
                                  "frames/s")
        if self.joint_order is not None and self.joint_order not in JOINT_ORDERS:
            raise MotionFileError(f"motion {self.path}: joint_order {self.joint_order!r} is not one of "
                                  f"{', '.join(JOINT_ORDERS)}")

    @classmethod
    def parse(cls, spec: Union[str, Path, "MotionSource"]) -> "MotionSource":
        """`spec` as a MotionSource: a Path is a plain file; a string is a file when one exists at it,
        else the string form of the module docstring. MotionFileError names what does not parse."""
        if isinstance(spec, MotionSource):
            return spec
        if isinstance(spec, Path) or Path(spec).is_file():
            return cls(Path(spec))
        match = _SPEC.match(str(spec))
        if match is None:
            return cls(Path(spec))   # no suffix the loader knows: load_motion says so, naming the file
        fields: Dict[str, Any] = {"start_s": _number(spec, "start", match["start"]),
                                  "end_s": _number(spec, "end", match["end"])}
        for option in filter(None, match["options"].split(",")):
            key, value = _option(spec, option)
            fields[_OPTIONS[key]] = value if key == "joint_order" else _number(spec, key, value)
        return cls(Path(match["path"]), **fields)

    @property
    def label(self) -> str:
        """A name for files made from this motion: the file's stem and its window
        (`run1_subject2.csv@61:76` -> `run1_subject2_61-76`, `take.csv@5.5:` -> `take_5p5-end`)."""
        if self.start_s is None and self.end_s is None:
            return self.path.stem
        bounds = [_fmt(v).replace(".", "p") if v is not None else default
                  for v, default in ((self.start_s, "0"), (self.end_s, "end"))]
        return f"{self.path.stem}_{bounds[0]}-{bounds[1]}"

    def __str__(self) -> str:
        text = str(self.path)
        if self.start_s is not None or self.end_s is not None:
            text += f"@{_fmt(self.start_s)}:{_fmt(self.end_s)}"
        for key, field in _OPTIONS.items():
            value = getattr(self, field)
            if value is not None:
                text += f",{key}={value if key == 'joint_order' else _fmt(value)}"
        return text


def _option(spec, option: str) -> Tuple[str, str]:
    """(KEY, VALUE text) of one `,KEY=VALUE` option of the string form `spec`, read by the config
    grammar's KEY=VALUE reader (`bcg.config_check.split_assignment`); MotionFileError shaped as its
    errors ("'ITEM': what is wrong; expected what, e.g. ...") when it is not KEY=VALUE or names no option."""
    try:
        key, value = split_assignment(option, example=_OPTION_EXAMPLE, parse_value=False)
    except ConfigError as e:
        raise MotionFileError(f"motion {spec!r}: {e}") from None
    if key not in _OPTIONS:
        raise MotionFileError(f"motion {spec!r}: {option!r}: unknown option; expected {_OPTION_FORMS}, "
                              f"e.g. {_OPTION_EXAMPLE}")
    return key, value


def _number(spec, what: str, text: Optional[str]) -> Optional[float]:
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise MotionFileError(f"motion {spec!r}: {what} {text!r} is not a number ({SYNTAX})") from None


def _fmt(value: Optional[float]) -> str:
    return "" if value is None else f"{value:g}"
