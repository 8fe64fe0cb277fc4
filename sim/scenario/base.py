"""What every table of the scenario shares: strict tables, durations and rates, the
errors a cross-field check raises, and how values are shown in messages."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from policies.pods import memory_bytes
from sim.duration import format_duration, parse_duration
from sim.overrides import format_path

# (path relative to the table that found it, message)
FieldError = tuple[tuple[str | int, ...], str]


class FieldErrors(ValueError):
    """Raised by cross-field checks: each error carries its path relative to the model that
    raised it, because pydantic would otherwise report them all at the model itself."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(f"{format_path(p)}: {m}" for p, m in errors))
        self.errors = errors


def _positive(ns: int) -> int:
    if ns <= 0:
        raise ValueError(f"must be > 0 (got {format_duration(ns)})")
    return ns


# Durations are stored as integer nanoseconds, the core's unit.
Duration = Annotated[int, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[int, BeforeValidator(parse_duration), AfterValidator(_positive)]


class Table(BaseModel):
    # strict: TOML is typed, so `threads = 2.5` or `enabled = "no"` is a mistake, not a hint.
    model_config = ConfigDict(extra="forbid", strict=True)


def rate_bytes(value: Any) -> int:
    """A rate in bytes/s: a byte quantity ("500M" = 500 MB/s, "20Mi" = 20 MiB/s) or, as
    network people write it, bits ("1Gbit" = 125 MB/s, "100Mbit")."""
    try:
        if isinstance(value, str) and value.endswith("bit"):
            return memory_bytes(value[: -len("bit")] or "x") // 8
        return memory_bytes(value)
    except ValueError:
        raise ValueError(f'must be a rate in bytes/s like "500M", "20Mi", or in bits like "1Gbit" (got {value!r})') from None


Rate = Annotated[int, BeforeValidator(rate_bytes)]


def alternatives(values: Iterable[Any]) -> str:
    shown = [show(v) for v in values]
    return " or ".join(shown) if len(shown) < 3 else ", ".join(shown[:-1]) + " or " + shown[-1]


def show(value: Any) -> str:
    """A value as it would be written in TOML, for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    return repr(value)
