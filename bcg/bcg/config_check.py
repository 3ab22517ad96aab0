"""Validated dataclass configs: the one error type and the checks every typed config of the suite uses.

A config is a dataclass whose `validate()` raises `ConfigError` with a message that starts with the
dotted key of the bad value ("shac.horizon: must be > 0, got 0"); a section that holds other configs
validates them with `validate_section`, which prefixes the section's name. `apply_overrides` builds a
config from nested mappings (YAML), converting each value to its field's type (numbers must be
finite); `read_yaml_mapping` reads such a mapping from a file, `parse_assignments` from a command
line's KEY=VALUE items, and `parse_named_assignments` its 'NAME:key=value,...' variant; what does not
parse is a ConfigError naming the file or the item.
"""
import dataclasses
import math
import typing
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Sequence, Tuple, Union

import yaml


class ConfigError(ValueError):
    """A setting is unknown or invalid; the message starts with the dotted key."""


def check(ok: bool, key: str, message: str) -> None:
    """ConfigError("key: message") unless `ok`."""
    if not ok:
        raise ConfigError(f"{key}: {message}")


def require_positive(cfg, *names: str) -> None:
    for n in names:
        check(getattr(cfg, n) > 0, n, f"must be > 0, got {getattr(cfg, n)!r}")


def require_non_negative(cfg, *names: str) -> None:
    for n in names:
        check(getattr(cfg, n) >= 0, n, f"must be >= 0, got {getattr(cfg, n)!r}")


def require_fraction(cfg, *names: str) -> None:
    for n in names:
        check(0.0 <= getattr(cfg, n) <= 1.0, n, f"must be in [0, 1], got {getattr(cfg, n)!r}")


def _is_integer(value: Any) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_count(cfg, *names: str, minimum: int = 1) -> None:
    """Whole numbers >= `minimum` (booleans refused)."""
    for n in names:
        v = getattr(cfg, n)
        check(_is_integer(v) and v >= minimum, n, f"must be an integer >= {minimum}, got {v!r}")


def require_layers(cfg, *names: str) -> None:
    """Non-empty sequences of positive layer widths."""
    for n in names:
        v = getattr(cfg, n)
        check(len(v) > 0 and all(h > 0 for h in v), n, f"must be a non-empty list of positive layer widths, got "
                                                        f"{list(v)!r}")


def require_range(cfg, *names: str) -> None:
    """(low, high) pairs with low <= high."""
    for n in names:
        v = getattr(cfg, n)
        check(len(v) == 2 and v[0] <= v[1], n, f"must be [low, high] with low <= high, got {list(v)!r}")


def validate_section(name: str, cfg) -> None:
    """cfg.validate(), its ConfigError prefixed with `name.`."""
    try:
        cfg.validate()
    except ConfigError as e:
        raise ConfigError(f"{name}.{e}") from None


def _convert(value: Any, hint: Any, key: str) -> Any:
    """`value` (from YAML) as type `hint`; ConfigError naming `key` when it does not fit."""
    if hint is bool:
        check(isinstance(value, bool), key, f"expected true/false, got {value!r}")
        return value
    if hint is int:
        check(_is_integer(value), key, f"expected an integer, got {value!r}")
        return value
    if hint is float:
        check(isinstance(value, (int, float)) and not isinstance(value, bool), key, f"expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:      # an int past the float range
            number = math.inf
        check(math.isfinite(number), key, f"expected a finite number, got {number!r}")
        return number
    if hint is str:
        check(isinstance(value, str), key, f"expected a string, got {value!r}")
        return value
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        check(isinstance(value, (list, tuple)), key, f"expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
        check(len(value) == len(args), key, f"expected {len(args)} values, got {len(value)}")
        return tuple(_convert(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    raise TypeError(f"{key}: unsupported field type {hint!r}")


def dotted_leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[Tuple[str, Any]]:
    """(dotted key, value) of every non-mapping value of nested `overrides`-style mappings:
    {"a": {"b": 1}} -> ("a.b", 1)."""
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from dotted_leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def apply_overrides(cfg: Any, overrides: Mapping[str, Any], prefix: str = "") -> Any:
    """A copy of dataclass `cfg` with `overrides` (nested mappings, as in YAML) applied."""
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or '<top level>'}: expected a mapping of keys, got {overrides!r}")
    hints = typing.get_type_hints(type(cfg))
    names = [f.name for f in dataclasses.fields(cfg)]
    changes = {}
    for key, value in overrides.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"{dotted}: unknown key (known: {', '.join(names)})")
        current = getattr(cfg, key)
        if dataclasses.is_dataclass(current):
            changes[key] = apply_overrides(current, value, f"{dotted}.")
        else:
            changes[key] = _convert(value, hints[key], dotted)
    return dataclasses.replace(cfg, **changes)


def parse_named_assignments(text: str) -> Tuple[str, Dict[str, Any]]:
    """'NAME:key=value,key=value' -> (NAME, {key: value parsed as YAML}); ValueError naming `text`
    when the name, the colon or an '=' is missing (the keys are the caller's to check)."""
    name, colon, body = text.partition(":")
    assignments = {}
    for item in filter(None, body.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"{text!r}: expected NAME:key=value,...")
        assignments[key.strip()] = yaml.safe_load(value)
    if not colon or not name or not assignments:
        raise ValueError(f"{text!r}: expected NAME:key=value,...")
    return name, assignments


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
        raise ConfigError(f"{path}: expected a mapping of keys, got {type(data).__name__} {data!r:.80}")
    return data


def parse_assignments(items: Sequence[str]) -> Dict[str, Any]:
    """A command line's KEY=VALUE items (`--set shac.iterations=50 ...`) -> nested mappings
    ({"shac": {"iterations": 50}}), values read as YAML. ConfigError naming the item when it has no
    '=', an empty key or key part, a value that is not YAML, or sets a key that another item made a
    section (or the reverse)."""
    out: Dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        parts = key.split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE with a dotted KEY, e.g. shac.iterations=50")
        try:
            value = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError) as e:
            raise ConfigError(f"--set {item!r}: the value is not valid YAML ({' '.join(str(e).split())})") from None
        node = out
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {'.'.join(parts[:depth + 1])} is set as a value by another "
                                  "item, not a section")
        if isinstance(node.get(parts[-1]), dict):
            raise ConfigError(f"--set {item!r}: {key} is a section set by another item, not a value")
        node[parts[-1]] = value
    return out
