"""Validated dataclass configs: the one error type and the checks every typed config of the suite uses.

A config is a dataclass whose `validate()` raises `ConfigError` with a message that starts with the
dotted key of the bad value ("shac.horizon: must be > 0, got 0"); a section that holds other configs
validates them with `validate_section`, which prefixes the section's name. `apply_overrides` builds a
config from nested mappings (YAML), converting each value to its field's type; `parse_named_assignments`
reads a command line's 'NAME:key=value,...' variant.
"""
import dataclasses
import typing
from typing import Any, Dict, Iterator, Mapping, Tuple

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
        return float(value)
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
