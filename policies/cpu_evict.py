"""Koordinator's BE CPU eviction (koordlet qosmanager plugin `cpuevict`, BECPUEvict;
../shared/reference/koordinator.md §4.1–4.2): when best-effort pods are using nearly all of
the CPU they are allowed ("real limit": the besteffort cpuset or quota) and that limit
satisfies too little of what they requested, evict BE pods until the requests given back
lift the satisfaction to the upper percent.

    satisfaction = real limit / Σ BE batch-cpu requests
    release      = int(request × (upper/100 − satisfaction))   if satisfaction ≤ lower/100

Victims: lower spec.priority first, then the higher usage per request. Pure functions,
tested against hand-worked cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

COOL_DOWN_S = 20.0  # cpu-evict-cool-time-seconds
USAGE_THRESHOLD_PERCENT = 90  # cpuEvictBEUsageThresholdPercent


@dataclass(frozen=True)
class BEState:
    """The BE CPU triplet (collectors/beresource), in millicores."""

    usage: float
    request: int
    limit: int


def real_limit(cpuset_size: int, quota_us: int, period_us: int = 100_000) -> int:
    """min(|besteffort cpuset| × 1000, quota × 1000 / period); a quota of -1 is ignored."""
    limit = cpuset_size * 1000
    if quota_us > 0:
        limit = min(limit, quota_us * 1000 // period_us)
    return limit


def usage_high_enough(s: BEState, threshold_percent: float = USAGE_THRESHOLD_PERCENT) -> bool:
    """`isBECPUUsageHighEnough`: a limit under one core counts as high enough (a mistake the
    maintainers confirmed, issue #1825, kept for fidelity); a limit ≤ 0 never does."""
    if s.limit <= 0:
        return False
    if s.limit < 1000:
        return True
    return s.usage / s.limit * 100 >= threshold_percent


def release_milli(s: BEState, lower_percent: float, upper_percent: float) -> int:
    """The batch-cpu request to give back; 0 while satisfaction is above the lower percent."""
    if s.request <= 0:
        return 0
    satisfaction = s.limit / s.request
    if satisfaction > lower_percent / 100:
        return 0
    return int(s.request * (upper_percent / 100 - satisfaction))


def to_release(avg: BEState, latest: BEState, lower: float, upper: float, threshold: float = USAGE_THRESHOLD_PERCENT) -> int:
    """Computed on the window average, confirmed on the latest sample; when request or
    limit moved since, the smaller of the two releases."""
    if not usage_high_enough(avg, threshold):
        return 0
    release = release_milli(avg, lower, upper)
    if release <= 0 or not usage_high_enough(latest, threshold):
        return 0
    if (latest.request, latest.limit) == (avg.request, avg.limit):
        return release
    return min(release, release_milli(latest, lower, upper))


@dataclass(frozen=True)
class Candidate:
    name: str
    priority: int
    used: float  # millicores
    request: int  # batch-cpu millicores


def victims(candidates: Sequence[Candidate], release: float) -> list[Candidate]:
    """BE pods in eviction order, taken until their requests cover `release`."""

    def ratio(c: Candidate) -> float:
        if c.request > 0:
            return c.used / c.request
        return math.inf if c.used > 0 else 0.0

    order = sorted(candidates, key=lambda c: (c.priority, -ratio(c), c.name))
    out: list[Candidate] = []
    freed = 0
    for c in order:
        if freed >= release:
            break
        out.append(c)
        freed += c.request
    return out


# --- evictByAllocatable, CPUEvict (node usage) and CPUAllocatableEvict (§4.2–4.3) ---------

MIN_ALLOCATABLE_BATCH_MILLI = 1  # defaultMinAllocatableBatchMilliCPU
RELEASE_BUFFER_PERCENT = 2  # cpuReleaseBufferPercent: lower = threshold − 2 when unset
PRIORITY_MID_MAX = 7999  # koord-mid's highest value: allocatable eviction never reaches prod


def be_limit(policy: str, real: float, batch_allocatable: int | None) -> float:
    """The "limit" BECPUEvict measures satisfaction against: the BE real limit
    (evictByRealLimit, the default) or the node's batch-cpu allocatable
    (evictByAllocatable; missing → −1, so nothing is evicted; 0 → 1 milli, so a node whose
    batch resources were reclaimed to nothing still evicts)."""
    if policy == "evictByRealLimit":
        return real
    if policy != "evictByAllocatable":
        raise ValueError(f"unknown CPU evict policy {policy!r} (evictByRealLimit, evictByAllocatable)")
    if batch_allocatable is None or batch_allocatable < 0:
        return -1
    return batch_allocatable or MIN_ALLOCATABLE_BATCH_MILLI


def window_valid(window_s: int, interval_s: int, count: int) -> bool:
    """`isAvgQueryResultValid`: the average needs samples covering a third of the window."""
    return count * interval_s >= window_s // 3


def satisfaction_config_error(lower: int | None, upper: int | None) -> str | None:
    """`isSatisfactionConfigValid`: lower in (0, 60], upper in (0, 100), upper ≥ lower."""
    if lower is None or upper is None:
        return "CPUEvictBESatisfactionLowerPercent or CPUEvictBESatisfactionUpperPercent not config"
    if not 0 < lower <= 60:
        return f"CPUEvictBESatisfactionLowerPercent({lower}) is not valid! must (0,60]"
    if not 0 < upper < 100:
        return f"CPUEvictBESatisfactionUpperPercent({upper}) is not valid,must (0,100)"
    if upper < lower:
        return f"CPUEvictBESatisfactionUpperPercent({upper}) < CPUEvictBESatisfactionLowerPercent({lower})"
    return None


def used_threshold_config_error(threshold: int | None, lower: int | None, priority_threshold: int | None) -> str | None:
    """`isUsedThresholdConfigValid` (CPUEvict): a threshold > 0, a lower percent (if set)
    below it, and the eviction-enabled priority threshold set."""
    if threshold is None:
        return "CPUEvictThresholdPercent not config"
    if threshold < 0:
        return f"threshold percent({threshold}) should greater than 0"
    low = lower if lower is not None else threshold - RELEASE_BUFFER_PERCENT
    if low >= threshold:
        return f"lower percent({low}) should less than threshold percent({threshold})"
    if priority_threshold is None:
        return "EvictEnabledPriorityThreshold not config"
    return None


def allocatable_config_error(threshold: int | None, lower: int | None, priority_threshold: int | None, resource: str = "CPU") -> str | None:
    """`isAllocatableThresholdConfigValid` of CPUAllocatableEvict (`resource` "CPU") and
    MemoryAllocatableEvict ("Memory"): threshold ≥ 0, lower set and below it, priority
    threshold set and at most koord-mid's (prod is never evicted). The two copies upstream
    word a negative threshold differently; each message is kept."""
    if threshold is None:
        return f"{resource}AllocatableEvictThresholdPercent not config"
    if threshold < 0:
        should = "should equal or greater than 0" if resource == "CPU" else "should greater than 0"
        return f"threshold percent({threshold}) {should}"
    if lower is None:
        return f"{resource}AllocatableEvictLowerPercent not config"
    if lower >= threshold:
        return f"lower percent({lower}) should less than threshold percent({threshold})"
    if priority_threshold is None:
        return "AllocatableEvictPriorityThreshold not config"
    if priority_threshold > PRIORITY_MID_MAX:
        return f"priorityThresholdPercent({priority_threshold}) should less than {PRIORITY_MID_MAX}, koor-prod pods should not be killed"
    return None


def release_by_used_threshold(capacity_milli: int, node_used_cores: float, threshold: int, lower: int | None = None) -> int:
    """CPUEvict: millicores of pods' usage to release when node usage (integer percent of
    capacity, window average) reaches the threshold, down to lower (default threshold − 2)."""
    if capacity_milli <= 0:
        return 0
    usage = int(node_used_cores * 1000) * 100 // capacity_milli
    if usage < threshold:
        return 0
    low = lower if lower is not None else threshold - RELEASE_BUFFER_PERCENT
    return capacity_milli * (usage - low) // 100
