"""The one config grammar (`bcg.config_check`): text -> value -> typed field, the rules a field
declares, the checks that relate fields, and the one shape of every error."""
from dataclasses import dataclass, field
from typing import Tuple

import pytest

from bcg.config_check import (
    FRACTION,
    LAYERS,
    POSITIVE,
    RANGE,
    ConfigError,
    Rule,
    Settings,
    apply_overrides,
    check,
    convert,
    convert_fields,
    one_of,
    setting,
    split_assignment,
    validate_config,
)


@dataclass
class Inner(Settings):
    rate: float = setting(1.0, POSITIVE)
    widths: Tuple[int, ...] = setting((8, 4), LAYERS)
    span: Tuple[float, float] = setting((0.5, 2.0), Rule(ordered=True, low=0, low_open=True))


@dataclass
class Outer(Settings):
    mode: str = setting("a", one_of("a", "b"))
    share: float = setting(0.5, FRACTION)
    cpu: int = setting(-1, Rule(low=0, also=(-1,), expected="a CPU number, or -1 (any)"))
    every: int = 4
    save_every: int = 8
    name: str = ""
    inner: Inner = field(default_factory=Inner)

    def check_relations(self) -> None:
        check(self.save_every % self.every == 0, "save_every", self.save_every, "not a multiple of every",
              "a multiple of every")


@pytest.mark.parametrize("value, hint, out", [
    (3, float, 3.0), (True, bool, True), (7, int, 7), ("x", str, "x"), (None, str, ""),
    ([1, 2], Tuple[float, float], (1.0, 2.0)), ([], Tuple[int, ...], ())])
def test_convert_gives_the_fields_type(value, hint, out):
    got = convert(value, hint, "k")
    assert got == out and type(got) is type(out)


@pytest.mark.parametrize("value, hint, message", [
    ("long", int, "k='long': a string; expected an integer"),
    (True, int, "k=true: a boolean; expected an integer"),
    (1.5, int, "k=1.5: a number; expected an integer"),
    (1, bool, "k=1: an integer; expected true or false"),
    (float("nan"), float, "k=nan: not finite; expected a finite number"),
    (5, str, "k=5: an integer; expected a string"),
    ([0.9], Tuple[float, float], r"k=\[0.9\]: 1 value; expected a list of 2 numbers"),
    ([1, "x"], Tuple[float, float], "k\\[1\\]='x': a string; expected a number"),
    (3, Tuple[int, ...], "k=3: an integer; expected a list of integers")])
def test_a_value_that_does_not_fit_is_named_with_what_was_expected(value, hint, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        convert(value, hint, "k")


@pytest.mark.parametrize("changes, message", [
    ({"mode": "c"}, "mode='c': not one of the choices; expected one of 'a', 'b'"),
    ({"share": 1.5}, r"share=1.5: too large; expected a number in \[0, 1\]"),
    ({"cpu": -2}, r"cpu=-2: too small; expected a CPU number, or -1 \(any\)"),
    ({"save_every": 6}, "save_every=6: not a multiple of every; expected a multiple of every"),
    ({"inner": {"rate": 0}}, "inner.rate=0.0: too small; expected a number > 0"),
    ({"inner": {"widths": []}}, r"inner.widths=\[\]: empty; expected a non-empty list of integers, each > 0"),
    ({"inner": {"widths": [8, 0]}}, r"inner.widths=\[8, 0\]: item 1 is too small; expected a non-empty list"),
    ({"inner": {"span": [2, 1]}}, r"inner.span=\[2.0, 1.0\]: low > high; expected a list of 2 numbers \[low, high\] "
                                  r"with low <= high, each > 0"),
    ({"inner": {"span": [0, 1]}}, r"inner.span=\[0.0, 1.0\]: item 0 is too small")])
def test_rules_and_relations_are_checked_with_the_dotted_key(changes, message):
    cfg = apply_overrides(Outer(), changes)
    with pytest.raises(ConfigError, match=f"^{message}"):
        cfg.validate()
    with pytest.raises(ConfigError, match=f"^top.{message}"):
        validate_config(cfg, "top.")


def test_the_defaults_and_the_values_a_rule_allows_besides_its_bounds_pass():
    Outer().validate()
    apply_overrides(Outer(), {"cpu": 3, "mode": "b", "inner": {"span": [1, 1]}}).validate()
    assert RANGE.problem((1.0, 1.0)) == "" and RANGE.problem((2.0, 1.0)) == "low > high"


def test_unknown_keys_and_sections_are_refused_by_name():
    with pytest.raises(ConfigError, match="^inner.rte=2: unknown key; expected one of rate, widths, span$"):
        apply_overrides(Outer(), {"inner": {"rte": 2}})
    with pytest.raises(ConfigError, match="^inner=3: an integer; expected a mapping of keys$"):
        apply_overrides(Outer(), {"inner": 3})
    with pytest.raises(ConfigError, match="^node.evry=1: unknown key; expected one of mode, "):
        convert_fields(Outer, {"evry": 1}, "node.")
    assert convert_fields(Outer, {"share": 1}) == {"share": 1.0}


@pytest.mark.parametrize("item, separator, out", [
    ("shac.iterations=50", "=", ("shac.iterations", 50)), ("a=[1, 2]", "=", ("a", [1, 2])),
    ("a=", "=", ("a", None)), ("domain:=3", ":=", ("domain", 3)), ("x=a=b", "=", ("x", "a=b"))])
def test_one_reader_for_key_value_items(item, separator, out):
    assert split_assignment(item, separator) == out


@pytest.mark.parametrize("item, separator, message", [
    ("shac.iterations", "=", "'shac.iterations': no '='; expected KEY=VALUE, e.g. "),
    ("a..b=1", "=", "'a..b=1': an empty key or key part; expected KEY=VALUE"),
    ("domain=3", ":=", "'domain=3': no ':='; expected KEY:=VALUE"),
    ("a=[", "=", r"'a=\[': not a YAML value \(.*\); expected KEY=VALUE with VALUE in YAML")])
def test_items_that_do_not_read_name_themselves(item, separator, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        split_assignment(item, separator)
