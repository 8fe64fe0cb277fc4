"""rubik's PSI-based interference eviction (../shared/reference/rubik.md §4.2): every
`interval` s (10, range [10, 30]), for each configured resource, the first online pod whose
`some avg10` of {cpu,memory}.pressure is strictly above `avg10_threshold` (5.0, range
[5, 100]) gets one offline pod evicted: for memory the one using the most memory, for cpu
the one with the highest CPU utilisation; at most one per resource per tick, no cool-down."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.policy import PolicyError

RESOURCES = ("cpu", "memory")
INTERVAL_S = 10.0
AVG10_THRESHOLD = 5.0


@dataclass(frozen=True)
class PsiConfig:
    resources: tuple[str, ...]
    interval: float = INTERVAL_S
    avg10_threshold: float = AVG10_THRESHOLD


def parse(table: Any, where: str) -> PsiConfig | None:
    """`psi = { resource = ["memory"], interval = 10, avg10_threshold = 5.0 }` (rubik's keys)."""
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: must be a table with resource, interval, avg10_threshold")
    extra = set(table) - {"resource", "interval", "avg10_threshold"}
    if extra:
        raise PolicyError(f"{where}.{sorted(extra)[0]}: unknown field (known: resource, interval, avg10_threshold)")
    res = table.get("resource")
    if not isinstance(res, list) or not res or not all(r in RESOURCES for r in res):
        raise PolicyError(f"{where}.resource: a non-empty list of {', '.join(RESOURCES)} (io is not modelled) (got {res!r})")
    interval = table.get("interval", INTERVAL_S)
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not 10 <= interval <= 30:
        raise PolicyError(f"{where}.interval: must be in [10, 30] seconds (got {interval!r})")
    thr = table.get("avg10_threshold", AVG10_THRESHOLD)
    if isinstance(thr, bool) or not isinstance(thr, int | float) or not 5.0 <= thr <= 100.0:
        raise PolicyError(f"{where}.avg10_threshold: must be in [5.0, 100] (got {thr!r})")
    return PsiConfig(tuple(dict.fromkeys(res)), float(interval), float(thr))


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
