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


def victims(candidates: Sequence[Candidate], release: int) -> list[Candidate]:
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
