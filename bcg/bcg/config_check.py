"""The suite's one config grammar: typed dataclass settings, their rules, their text and their errors.

Training presets, the policy node's and the sim bridge's parameters all read the same way:
- A config is a dataclass (subclass of `Settings`); a field's annotation is its type (bool, int,
  float, str, or a tuple of those) and `setting(default, RULE)` declares the values it takes besides
  its type (bounds, choices, a non-empty list, a [low, high] pair: `Rule`). Checks that relate
  several fields are the config's `check_relations`.
- Text becomes a value once: a KEY=VALUE item (`split_assignment`; `parse_assignments` for a
  command line's `--set` items) or a YAML file (`read_yaml_mapping`) is read as YAML, and `convert`
  turns that value into the field's type (`apply_overrides` for nested sections, `convert_fields`
  for one flat config).
- `validate_config` checks every field (its type, finite numbers, its rule) of a config and its
  sections, then their relations.
Every error is a `ConfigError` shaped "KEY=VALUE: what is wrong; expected what" (`config_error`),
KEY the dotted key ("shac.horizon=0: too small; expected an integer >= 1"); a file's error names the file.
"""
import dataclasses
import math
import numbers
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import yaml


class ConfigError(ValueError):
    """A setting is unknown or invalid; the message starts with KEY=VALUE (or the file or item)."""


MAX_VALUE_TEXT = 60
"""Characters of a value an error message shows at most."""


def value_text(value: Any) -> str:
    """`value` as an error message shows it: YAML's spelling of booleans, lists and null, strings quoted."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(value_text(v) for v in value) + "]"
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k}: {value_text(v)}" for k, v in value.items()) + "}"
    else:
        text = repr(value)
    return text if len(text) <= MAX_VALUE_TEXT else text[:MAX_VALUE_TEXT - 3] + "..."


def config_error(key: str, value: Any, problem: str, expected: str) -> ConfigError:
    """ConfigError("KEY=VALUE: problem; expected ...")."""
    return ConfigError(f"{key}={value_text(value)}: {problem}; expected {expected}")


def check(ok: bool, key: str, value: Any, problem: str, expected: str) -> None:
    """`config_error(key, value, problem, expected)` unless `ok` (for `check_relations`)."""
    if not ok:
        raise config_error(key, value, problem, expected)


# -- types -------------------------------------------------------------------------------------------
def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    """What `value` is, in an error message."""
    if isinstance(value, bool):
        return "a boolean"
    if _is_integer(value):
        return "an integer"
    if _is_number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return "empty" if value is None else f"a {type(value).__name__}"


_NOUNS = {bool: ("true or false", "booleans"), int: ("an integer", "integers"), float: ("a number", "numbers"),
          str: ("a string", "strings")}


def type_text(hint: Any) -> str:
    """What a value of type `hint` is, in an error message's 'expected ...'."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_NOUNS[args[0]][1]}"
        return f"a list of {len(args)} {_NOUNS[args[0]][1]}"
    return _NOUNS[hint][0]


def convert(value: Any, hint: Any, key: str) -> Any:
    """`value` (as YAML reads it) as type `hint`: bool, int (not a bool), float (any finite number),
    str (YAML's empty value, None, is ''), a tuple of those (from a list). ConfigError naming `key`
    when it does not fit."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        return _convert_tuple(value, hint, key)
    ok = {bool: lambda v: isinstance(v, bool), int: _is_integer, float: _is_number,
          str: lambda v: isinstance(v, str) or v is None}.get(hint)
    if ok is None:
        raise TypeError(f"{key}: unsupported field type {hint!r}")
    if not ok(value):
        raise config_error(key, value, _kind(value), type_text(hint))
    if hint is float:
        try:
            number = float(value)
        except OverflowError:      # an int past the float range
            number = math.inf
        check(math.isfinite(number), key, value, "not finite", "a finite number")
        return number
    if hint is int:
        return int(value)
    return "" if value is None else value


def _convert_tuple(value: Any, hint: Any, key: str) -> Tuple[Any, ...]:
    args = typing.get_args(hint)
    if not isinstance(value, (list, tuple)):
        raise config_error(key, value, _kind(value), type_text(hint))
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(convert(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
    check(len(value) == len(args), key, value, f"{len(value)} value{'s' * (len(value) != 1)}", type_text(hint))
    return tuple(convert(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))


# -- rules -------------------------------------------------------------------------------------------
RULE = "bcg.rule"
"""The key of a field's `Rule` in its dataclass metadata."""


@dataclass(frozen=True)
class Rule:
    """The values a setting takes besides its type. Bounds apply to a number, or to each item of a list."""

    low: Optional[float] = None
    """Smallest value (None: no bound)."""
    low_open: bool = False
    """`low` itself excluded."""
    high: Optional[float] = None
    """Largest value (None: no bound)."""
    high_open: bool = False
    """`high` itself excluded."""
    choices: Tuple[Any, ...] = ()
    """The values it may take (empty: any)."""
    non_empty: bool = False
    """A list or string with something in it."""
    ordered: bool = False
    """A [low, high] pair with low <= high."""
    also: Tuple[Any, ...] = ()
    """Values accepted besides the rule's (e.g. -1: unset)."""
    expected: str = ""
    """How an error states what is expected; empty: said from the type and the rule."""

    def bounds_text(self) -> str:
        """' > 0', ' in [0, 1)', ...; '' without bounds."""
        if self.low is not None and self.high is not None:
            return f" in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f" {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f" {'<' if self.high_open else '<='} {self.high:g}"
        return ""

    def expectation(self, hint: Any) -> str:
        if self.expected:
            return self.expected
        if self.choices:
            text = f"one of {', '.join(value_text(c) for c in self.choices)}"
        else:
            text = "a non-empty " + type_text(hint)[2:] if self.non_empty else type_text(hint)
            if typing.get_origin(hint) is tuple:
                text += " [low, high] with low <= high" * self.ordered
                text += f", each{self.bounds_text()}" if self.bounds_text() else ""
            else:
                text += self.bounds_text()
        return text + "".join(f", or {value_text(v)}" for v in self.also)

    def out_of_bounds(self, x: Any) -> str:
        """'too small', 'too large' or '' for a number `x`."""
        if self.low is not None and (x < self.low or (self.low_open and x == self.low)):
            return "too small"
        if self.high is not None and (x > self.high or (self.high_open and x == self.high)):
            return "too large"
        return ""

    def problem(self, value: Any) -> str:
        """What is wrong with `value` (of the field's type); '' when it follows the rule."""
        if value in self.also:
            return ""
        if self.choices and value not in self.choices:
            return "not one of the choices"
        if self.non_empty and len(value) == 0:
            return "empty"
        if isinstance(value, tuple):
            for i, x in enumerate(value):
                if self.out_of_bounds(x):
                    return f"item {i} is {self.out_of_bounds(x)}"
            return "low > high" if self.ordered and value[0] > value[1] else ""
        return self.out_of_bounds(value) if _is_number(value) else ""


def setting(default: Any, rule: Rule) -> Any:
    """A dataclass field with `default` and the `rule` its values follow (`validate_config` checks it)."""
    return dataclasses.field(default=default, metadata={RULE: rule})


POSITIVE = Rule(low=0, low_open=True)
NON_NEGATIVE = Rule(low=0)
FRACTION = Rule(low=0, high=1)
LAYERS = Rule(low=0, low_open=True, non_empty=True)
"""Hidden-layer widths of an MLP."""
RANGE = Rule(ordered=True)
"""A [low, high] range to draw from."""
NOT_EMPTY = Rule(non_empty=True)


def at_least(low: float) -> Rule:
    return Rule(low=low)


def between(low: float, high: float, high_open: bool = False) -> Rule:
    return Rule(low=low, high=high, high_open=high_open)


def one_of(*choices: Any) -> Rule:
    return Rule(choices=choices)


# -- configs -----------------------------------------------------------------------------------------
def check_value(key: str, value: Any, hint: Any, rule: Optional[Rule] = None) -> Any:
    """`value` as type `hint` (`convert`), checked against `rule`; ConfigError naming `key`."""
    converted = convert(value, hint, key)
    problem = rule.problem(converted) if rule else ""
    if rule and problem:
        raise config_error(key, value, problem, rule.expectation(hint))
    return converted


class Settings:
    """Base of a config dataclass: `validate()` checks it (`validate_config`)."""

    def validate(self) -> None:
        """ConfigError naming the dotted key of the first bad value (relative to this config)."""
        validate_config(self)

    def check_relations(self) -> None:
        """Checks that relate several fields (`check(...)`, keys relative to this config); none here."""


def validate_config(cfg: Any, prefix: str = "") -> None:
    """Every field of dataclass `cfg` and of its sections: its type (`convert`), its `Rule`
    (`setting`), then each config's `check_relations`. ConfigError naming `prefix` + the dotted key."""
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value, key = getattr(cfg, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            validate_config(value, key + ".")
            continue
        check_value(key, value, hints[f.name], f.metadata.get(RULE))
    try:
        getattr(cfg, "check_relations", lambda: None)()
    except ConfigError as e:
        raise ConfigError(f"{prefix}{e}") from None


def _unknown(key: str, value: Any, names: Sequence[str]) -> ConfigError:
    return config_error(key, value, "unknown key", f"one of {', '.join(names)}")


def convert_fields(cls: Any, values: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """`values` converted to the types of the fields of the flat dataclass `cls` they name
    (ConfigError for an unknown name or a value that does not fit)."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    out = {}
    for name, value in values.items():
        if name not in names:
            raise _unknown(f"{prefix}{name}", value, names)
        out[name] = convert(value, hints[name], f"{prefix}{name}")
    return out


def apply_overrides(cfg: Any, overrides: Any, prefix: str = "") -> Any:
    """A copy of dataclass `cfg` with `overrides` (nested mappings, as in YAML) applied, each value
    converted to its field's type (not validated: `validate_config`)."""
    if not isinstance(overrides, Mapping):
        raise config_error(prefix.rstrip(".") or "<top level>", overrides, _kind(overrides), "a mapping of keys")
    hints = typing.get_type_hints(type(cfg))
    names = [f.name for f in dataclasses.fields(cfg)]
    changes = {}
    for key, value in overrides.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            raise _unknown(dotted, value, names)
        current = getattr(cfg, key)
        if dataclasses.is_dataclass(current):
            changes[key] = apply_overrides(current, value, f"{dotted}.")
        else:
            changes[key] = convert(value, hints[key], dotted)
    return dataclasses.replace(cfg, **changes)


def dotted_leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[Tuple[str, Any]]:
    """(dotted key, value) of every non-mapping value of nested `overrides`-style mappings:
    {"a": {"b": 1}} -> ("a.b", 1)."""
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from dotted_leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


# -- text --------------------------------------------------------------------------------------------
def yaml_value(text: str, where: str) -> Any:
    """`text` read as a YAML value (what KEY=VALUE's VALUE means everywhere); ConfigError naming `where`."""
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as e:   # ValueError: a scalar YAML cannot build (a date, a huge int)
        raise ConfigError(f"{where}: not a YAML value ({' '.join(str(e).split())}); expected KEY=VALUE with "
                          f"VALUE in YAML (50, 0.5, true, [64, 32], text)") from None


def split_assignment(item: str, separator: str = "=", example: str = "shac.iterations=50",
                     parse_value: bool = True) -> Tuple[str, Any]:
    """The one KEY=VALUE reader: `item` -> (KEY, VALUE read as YAML, or the text when not
    `parse_value`). `separator` is '=' (`--set`) or ':=' (ROS 2 `-p`, launch arguments).
    ConfigError naming the item when the separator is missing, the key or one of its dotted parts is
    empty, or the value is not YAML."""
    key, sep, text = item.partition(separator)
    if not sep or not all(key.split(".")):
        problem = f"no {separator!r}" if not sep else "an empty key or key part"
        raise ConfigError(f"{item!r}: {problem}; expected KEY{separator}VALUE, e.g. {example}")
    return key, (yaml_value(text, repr(item)) if parse_value else text)


def parse_assignments(items: Sequence[str]) -> Dict[str, Any]:
    """A command line's KEY=VALUE items (`--set shac.iterations=50 ...`) -> nested mappings
    ({"shac": {"iterations": 50}}), values read as YAML (`split_assignment`). ConfigError naming the
    item when it does not parse or sets a key that another item made a section (or the reverse)."""
    out: Dict[str, Any] = {}
    for item in items:
        key, value = split_assignment(item)
        parts = key.split(".")
        node = out
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{item!r}: {'.'.join(parts[:depth + 1])} is set as a value by another item; "
                                  "expected a section")
        if isinstance(node.get(parts[-1]), dict):
            raise ConfigError(f"{item!r}: {key} is a section set by another item; expected a value")
        node[parts[-1]] = value
    return out


def parse_named_assignments(text: str) -> Tuple[str, Dict[str, Any]]:
    """'NAME:key=value,key=value' -> (NAME, {key: value read as YAML}); ConfigError naming `text`
    when the name, the colon or an '=' is missing (the keys are the caller's to check)."""
    name, colon, body = text.partition(":")
    items = [item for item in body.split(",") if item]
    if not colon or not name or not items or any("=" not in item for item in items):
        raise ConfigError(f"{text!r}: not NAME:key=value,...; expected NAME:key=value,..., e.g. grippy:friction=2")
    pairs = (split_assignment(item, example="friction=2") for item in items)
    return name, {key.strip(): value for key, value in pairs}


def read_yaml_mapping(path: Union[str, Path]) -> Dict[str, Any]:
    """The mapping a YAML file holds ({} when empty); ConfigError naming the file when it cannot be read,
    is not YAML (with the line) or holds something else than a mapping."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e})") from None
    except (yaml.YAMLError, ValueError) as e:   # ValueError: a scalar YAML cannot build (a date, a huge int)
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(e).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {_kind(data)} {data!r:.80}; expected a mapping of keys")
    return data
