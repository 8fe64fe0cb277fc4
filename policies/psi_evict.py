"""rubik's PSI-based interference eviction (../shared/reference/rubik.md §4.2): every
`interval` s (10, range [10, 30]), for each configured resource, the first online pod whose
`some avg10` of {cpu,memory}.pressure is strictly above `avg10_threshold` (5.0, range
[5, 100]) gets one offline pod evicted: for memory the one using the most memory, for cpu
the one with the highest CPU utilisation; at most one per resource per tick, no cool-down."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.policy import PolicyError

RESOURCES = ("cpu", "memory")
INTERVAL_S = 10.0
AVG10_THRESHOLD = 5.0


def parse(table: Any, where: str) -> tuple[str, ...] | None:
    """`psi = { resource = ["memory", "cpu"] }`: which pressures are watched. The interval and
    the threshold are the policy's parameters `psi_interval` and `psi_avg10_threshold` (so the
    tuner can search them)."""
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: must be a table with resource")
    extra = set(table) - {"resource"}
    if extra:
        raise PolicyError(
            f"{where}.{sorted(extra)[0]}: unknown field (known: resource; interval and threshold are the parameters psi_interval, psi_avg10_threshold)"
        )
    res = table.get("resource")
    if not isinstance(res, list) or not res or not all(r in RESOURCES for r in res):
        raise PolicyError(f"{where}.resource: a non-empty list of {', '.join(RESOURCES)} (io is not modelled) (got {res!r})")
    return tuple(dict.fromkeys(res))


def some_avg10(text: str) -> float:
    """`some avg10=` of a pressure file."""
    first = str(text).splitlines()[0]
    return float(first.split("avg10=")[1].split()[0])


def pick(resource: str, offline: list[str], usage: Mapping[str, float]) -> str | None:
    """The offline pod to evict: the largest `usage` (memory bytes, or CPU used); ties to
    the later in the list (rubik: the more recently started)."""
    best = None
    for cg in offline:
        if best is None or usage[cg] >= usage[best] - 1e-9:
            best = cg
    return best
