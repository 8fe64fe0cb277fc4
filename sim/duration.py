"""Durations as people write them ("48ms", "2.5s", 30) and as the core counts them (int ns)."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation

NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
}

# The longest duration: the core's clock counts u64 ns and adds times up, so 10^18 ns
# (about 31.7 years) leaves room.
MAX_NS = 10**18

# A plain decimal number, optionally with an exponent, then an optional unit.
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*$")


def parse_duration(value: object) -> int:
    """Nanoseconds from a number of seconds or a string with a unit (ns, us, ms, s, m).

    Decimal arithmetic keeps "2.5s" exactly 2_500_000_000 ns; fractions of a nanosecond are
    rounded to the nearest one.  Raises ValueError with a message fit for a field error.
    """
    if isinstance(value, bool):  # bool is an int in Python; `duration = true` is a mistake
        raise ValueError(f'must be a duration such as 30, "48ms" or "2.5s" (got {_show(value)})')
    if isinstance(value, int):
        seconds, unit = Decimal(value), "s"
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"must be a finite duration (got {_show(value)})")
        seconds, unit = Decimal(repr(value)), "s"
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            sign = " >= 0" if value.strip().startswith("-") else ""
            raise ValueError(f'must be a duration{sign} such as "48ms" or "2.5s" (got {_show(value)})')
        try:
            seconds = Decimal(match.group(1))
        except InvalidOperation:  # pragma: no cover - the regex admits only decimals
            raise ValueError(f"must be a duration (got {_show(value)})") from None
        unit = match.group(2) or "s"
        if unit not in NS_PER_UNIT:
            units = ", ".join(u for u in NS_PER_UNIT if u != "µs")
            raise ValueError(f"unknown unit {unit!r} in {_show(value)} (units: {units})")
    else:
        raise ValueError(f'must be a duration such as 30, "48ms" or "2.5s" (got {_show(value)})')
    if seconds < 0:
        raise ValueError(f"must be a duration >= 0 (got {_show(value)})")
    if seconds > MAX_NS // NS_PER_UNIT[unit]:
        raise ValueError(f"must be at most 10^18 ns, about 31 years (got {_show(value)})")
    return int((seconds * NS_PER_UNIT[unit]).to_integral_value())


def format_duration(ns: int) -> str:
    """The shortest exact spelling of ns with one unit, for messages ("48ms", "2.5s")."""
    if ns == 0:
        return "0s"
    for unit in ("m", "s", "ms", "us"):
        scale = NS_PER_UNIT[unit]
        if ns >= scale:
            text = f"{Decimal(ns) / scale:f}"
            if "." in text:
                text = text.rstrip("0").rstrip(".")
            return text + unit
    return f"{ns}ns"


def _show(value: object) -> str:
    # As TOML would write it: "48ms", true, -2
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return json.dumps(value)
    return repr(value)
