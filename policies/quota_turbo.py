"""rubik's quotaTurbo: the elastic CPU limit of throttled containers
(../shared/reference/rubik.md §2; rubik `pkg/lib/cpu/quotaturbo`).

Each round (every syncInterval) it reads the node's CPU utilisation and, per container, its
quota, period, cpu.stat and usage; then, in this order: slowly hands back a fraction of the
boost of unthrottled containers when the node is above the high water mark, quickly removes
boost above the alarm mark, and — unless utilisation fluctuated sharply in the last minute —
raises throttled containers' quotas by what they were short, at most 1% of the node's CPUs per
round; finally clamps each quota to [limit, min(2 × limit, getMaxQuota)]. The decision
functions below are pure and tested against the reference's worked cases.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

# Defaults (rubik.md §2.1).
HIGH_WATER_MARK = 60.0
ALARM_WATER_MARK = 80.0
ELEVATE_LIMIT = 1.0  # % of node cores per round
SLOW_FALLBACK_RATIO = 0.1
CPU_FLOATING_LIMIT = 10.0  # utilisation points over the last minute
USAGE_SAMPLES = 59  # numberOfRestrictedCycles = 60: at 60 samples the oldest goes
UTIL_HISTORY_S = 60.0
LIMIT_MULTIPLIER = 3


@dataclass
class Container:
    """One container quotaTurbo manages, with what it read this round and before."""

    cgroup: str
    limit: float  # cores (cpuLimit)
    period: int = 100_000  # µs
    quota: int = 0  # µs, current cpu.cfs_quota_us
    nr_throttled: int = 0
    throttled_ns: int = 0
    prev_nr_throttled: int = 0
    prev_throttled_ns: int = 0
    usage: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=USAGE_SAMPLES))  # (t ns, usage ns)
    delta: float = 0.0

    @property
    def origin(self) -> int:
        return int(self.limit * self.period)

    @property
    def height(self) -> float:
        """The easing ceiling: 2 × cpuLimit × period."""
        return 2 * self.limit * self.period

    @property
    def new_nr_throttled(self) -> int:
        return self.nr_throttled - self.prev_nr_throttled

    @property
    def new_throttled_ns(self) -> int:
        return self.throttled_ns - self.prev_throttled_ns


def max_quota(c: Container) -> float:
    """getMaxQuota (rubik.md §2.3): the boost allowed by the usage budget of the window, which
    shrinks linearly as the window's average approaches the limit."""
    n = len(c.usage)
    if n <= 1:
        return c.height
    (t0, u0), (t1, u1) = c.usage[0], c.usage[-1]
    span_us = (t1 - t0) / 1000
    max_avail = c.limit * span_us * n / (n - 1)
    used = (u1 - u0) / 1000
    rem = max_avail - used
    r = math.inf if abs(span_us) <= 1e-10 else rem / span_us * (n - 1) * c.period
    threshold = LIMIT_MULTIPLIER * c.height
    res = c.origin + (c.height - c.origin) * r / threshold if r <= threshold else r
    return min(max(res, c.origin), c.height)


def adjust_quota(
    containers: list[Container],
    util: float,
    util_history: list[float],
    ncpus: int,
    high: float = HIGH_WATER_MARK,
    alarm: float = ALARM_WATER_MARK,
    elevate_limit: float = ELEVATE_LIMIT,
    slow_fallback_ratio: float = SLOW_FALLBACK_RATIO,
    floating_limit: float = CPU_FLOATING_LIMIT,
) -> dict[str, int]:
    """`EventDriver.adjustQuota` (rubik.md §2.2 step 4): the next quota of each container."""
    for c in containers:
        c.delta = 0.0
    # a. slow fallback above the high water mark: give back a fraction of unthrottled boosts
    if util >= high:
        k = (util - high) / (alarm - high) * slow_fallback_ratio
        for c in containers:
            if c.quota > c.origin and c.new_nr_throttled == 0:
                c.delta += k * (c.origin - c.quota)
    # b. fast fallback above the alarm mark: remove as many cores as the node is over it
    if util >= alarm:
        s = (alarm - util) / 100 * ncpus
        excess = [c.quota / c.period - c.limit for c in containers]
        total = sum(excess)
        if total > 0:
            for c, e in zip(containers, excess, strict=True):
                c.delta += e / total * s * c.period
    # c/d. elevate throttled containers, unless utilisation fluctuated sharply
    fluctuating = (max(util_history, default=0.0) - min(util_history, default=100.0)) > floating_limit
    if not fluctuating and alarm - util >= elevate_limit:
        need = {c.cgroup: (c.new_throttled_ns / 1000) / c.new_nr_throttled / c.period for c in containers if c.new_nr_throttled > 0}
        total_need = sum(need.values())
        if total_need > 0:
            cap = min(total_need, elevate_limit / 100 * ncpus)
            coef = cap / total_need
            for c in containers:
                if c.cgroup in need:
                    c.delta += coef * need[c.cgroup] * c.period
    # e. clamp into [limit, min(2 × limit, getMaxQuota)]
    return {c.cgroup: int(max(min(c.quota + c.delta, max_quota(c)), c.limit * c.period)) for c in containers}


def ancestors_to_adjust(cgroup: str) -> list[str]:
    """The cgroups whose quota moves with a container's: its ancestors up to, not including,
    `kubepods` (rubik writes the same delta to the pod cgroup), nearest first."""
    parts = cgroup.split("/")
    out = []
    for i in range(len(parts) - 1, 0, -1):
        anc = "/".join(parts[:i])
        if parts[i - 1] == "kubepods":
            break
        out.append(anc)
    return out
