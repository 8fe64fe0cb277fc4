"""rubik's quotaTurbo: the elastic CPU limit of throttled containers
(../shared/reference/rubik.md §2; rubik `pkg/lib/cpu/quotaturbo`).

Each round (every syncInterval) it reads the node's CPU utilisation and, per container, its
quota, period, cpu.stat and usage; then, in this order: slowly hands back a fraction of the
boost of unthrottled containers when the node is above the high water mark, quickly removes
boost above the alarm mark, and — unless utilisation fluctuated sharply in the last minute —
raises throttled containers' quotas by what they were short, at most 1% of the node's CPUs per
round; finally clamps each quota to [limit, min(2 × limit, getMaxQuota)].

Each step is its own rule, as upstream's `EventDriver` (driverevent.go): `slow_fallback`,
`fast_fallback`, `sharp_fluctuates`, `elevate`, composed by `adjust_quota`. Around them the
StatusStore's bookkeeping (statusstore.go, cpuquota.go): which containers qualify
(`qualifies`), the node-utilisation window (`record_util`), the writes of a quota change up
the cgroup path (`quota_writes`), the quota recovery of a container that leaves
(`recover_quota`) and the service's pod-quota reset at start and stop (`reset_pod_quotas`).
All are pure; tests/conformance/rubik ports upstream's unit tests case by case.
"""

from __future__ import annotations

import posixpath
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from policies.cgroup import Knob, KnobWrite

# Defaults (rubik.md §2.1).
HIGH_WATER_MARK = 60.0
ALARM_WATER_MARK = 80.0
ELEVATE_LIMIT = 1.0  # % of node cores per round
SLOW_FALLBACK_RATIO = 0.1
CPU_FLOATING_LIMIT = 10.0  # utilisation points over the last minute
USAGE_SAMPLES = 59  # numberOfRestrictedCycles = 60: at 60 samples the oldest goes
UTIL_HISTORY_S = 60.0
LIMIT_MULTIPLIER = 3
EASING_MULTIPLE = 2.0  # the ceiling: 2 × cpuLimit × period
MAX_UTIL, MIN_UTIL = 100.0, 0.0  # sharpFluctuates starts its min at 100 and its max at 0
SYNC_INTERVAL_MS = (100, 10_000)  # the service's syncInterval range (quotaturbo.go Validate)


class QuotaTurboError(ValueError):
    """A write rubik refuses or cannot make (its error, as a message)."""


@dataclass(frozen=True)
class Marks:
    """The library's `Config`: water marks (%), the per-round elevation cap (% of the node's
    CPUs), the slow-fallback ratio and the sharp-fluctuation limit (utilisation points)."""

    high: float = HIGH_WATER_MARK
    alarm: float = ALARM_WATER_MARK
    elevate_limit: float = ELEVATE_LIMIT
    slow_fallback_ratio: float = SLOW_FALLBACK_RATIO
    floating_limit: float = CPU_FLOATING_LIMIT


def check_marks(high: float, alarm: float) -> str | None:
    """validateWaterMark (config.go): 0 <= high < alarm <= 100, else why not."""
    if alarm <= high or not 0 <= high <= 100 or not 0 <= alarm <= 100:
        return f"alarm water mark ({alarm:g}) must be above the high water mark ({high:g}), both in [0, 100]"
    return None


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
    delta: float = 0.0  # quotaDelta, what the rules add up this round

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


def _div(dividend: float, divisor: float, max_value: float, accuracy: float) -> float:
    """rubik's util.Div: `max_value` when the divisor is within `accuracy` of 0."""
    return max_value if abs(divisor) <= accuracy else dividend / divisor


def max_quota(c: Container, height: float | None = None) -> float:
    """getMaxQuota (rubik.md §2.3): the boost allowed by the usage budget of the window, which
    shrinks linearly as the window's average approaches the limit. `height` is the ceiling
    adjustQuota sets first (2 × cpuLimit × period); upstream's own test gives it directly."""
    h = c.height if height is None else height
    n = len(c.usage)
    if n <= 1:
        return h
    (t0, u0), (t1, u1) = c.usage[0], c.usage[-1]
    span_us = (t1 - t0) / 1000
    max_avail = c.limit * span_us * (n / (n - 1))
    rem = max_avail - (u1 - u0) / 1000
    origin = c.limit * c.period  # a float here, unlike the origin of the fallbacks
    threshold = LIMIT_MULTIPLIER * h
    r = _div(rem, span_us, sys.float_info.max, 1e-10) * (n - 1) * c.period
    # gradually lower the ceiling as the window's budget runs out, not all at once
    res = r if r > threshold else origin + _div((h - origin) * r, threshold, threshold, 1e-10)
    return max(min(res, h), origin)


def slow_fallback(containers: list[Container], util: float, m: Marks) -> None:
    """Rule a (slowFallback): at or above the high water mark, every boosted container that
    was not throttled this round gives back the fraction (U − H)/(A − H) × ratio of its boost."""
    if m.high > util:
        return
    k = (util - m.high) / (m.alarm - m.high) * m.slow_fallback_ratio
    for c in containers:
        origin = c.origin  # int64(cpuLimit × period)
        if c.quota > origin and c.new_nr_throttled == 0:
            c.delta += k * (origin - c.quota)


def fast_fallback(containers: list[Container], util: float, m: Marks, ncpus: int) -> None:
    """Rule b (fastFallback): at or above the alarm mark, take away as many cores as the node
    is over it, from each container in proportion to its boost."""
    if m.alarm > util:
        return
    sub = (m.alarm - util) / 100 * ncpus  # <= 0, cores
    excess = [c.quota / c.period - c.limit for c in containers]
    total = sum(excess)
    if total <= 0:
        return
    for c, e in zip(containers, excess, strict=True):
        c.delta += e / total * sub * c.period


def sharp_fluctuates(util_history: list[float], floating_limit: float) -> bool:
    """Rule c (sharpFluctuates): the node's utilisation moved by more than the limit within
    the window (a minute), which holds elevation back."""
    lo, hi = MAX_UTIL, MIN_UTIL
    for u in util_history:
        lo, hi = min(lo, u), max(hi, u)
    return hi - lo > floating_limit


def elevate(containers: list[Container], util: float, m: Marks, ncpus: int) -> None:
    """Rule d (elevate): while the alarm mark is at least `elevate_limit` away, each container
    throttled this round is raised by what it was short (its mean throttled time per throttled
    period, as a fraction of the period), all together at most elevate_limit % of the node."""
    if m.alarm - util < m.elevate_limit:
        return
    need = {
        c.cgroup: (c.new_throttled_ns / 1000) / c.new_nr_throttled / c.period  # cores short
        for c in containers
        if c.new_nr_throttled > 0
    }
    total = sum(need.values())
    if total == 0:
        return
    coef = min(total, m.elevate_limit / 100 * ncpus) / total
    for c in containers:
        if c.cgroup in need:
            c.delta += coef * need[c.cgroup] * c.period


def adjust_quota(
    containers: list[Container], util: float, util_history: list[float], ncpus: int, marks: Marks | None = None
) -> dict[str, int]:
    """`EventDriver.adjustQuota` (rubik.md §2.2 step 4): the rules in upstream's order, then the
    clamp into [limit, min(2 × limit, getMaxQuota)]; the next quota of each container."""
    m = marks or Marks()
    for c in containers:
        c.delta = 0.0  # updateQuota zeroes quotaDelta each round
    slow_fallback(containers, util, m)
    fast_fallback(containers, util, m, ncpus)
    if not sharp_fluctuates(util_history, m.floating_limit):
        elevate(containers, util, m, ncpus)
    out = {}
    for c in containers:
        h = EASING_MULTIPLE * c.limit * c.period
        out[c.cgroup] = int(max(min(c.quota + c.delta, max_quota(c, h)), c.limit * c.period))
    return out


def record_util(history: list[tuple[int, float]], now_ns: int, util: float) -> list[tuple[int, float]]:
    """updateCPUUtils' window: append (now, util), then drop the leading samples more than a
    minute old (a sample exactly a minute old stays)."""
    out = [*history, (now_ns, util)]
    keep = next(i for i, (t, _) in enumerate(out) if now_ns - t <= UTIL_HISTORY_S * 1e9)
    return out[keep:]


def qualifies(exists: bool, limit: float, ncpus: int) -> bool:
    """isAdjustmentAllowed: the container's cpu cgroup exists and 0 < cpuLimit < NumCPU (a
    container without a limit, or limited to the whole node, has nothing to turbo)."""
    return exists and 0 < limit < ncpus


def quota_chain(cgroup: str) -> list[str]:
    """The cgroups a quota change is written to (CPUQuota.writeQuota): the container and each
    ancestor up to, not including, `kubepods` (or the root), nearest first."""
    if not cgroup:
        raise QuotaTurboError(f"invalid cgroup path: {cgroup!r}")
    out = []
    p = cgroup
    while p not in (".", "/", "kubepods", "/kubepods"):
        out.append(p)
        p = posixpath.dirname(p.rstrip("/")) or "."
    if not out:
        raise QuotaTurboError(f"empty cgroup path: {cgroup!r}")
    return out


def quota_writes(cgroup: str, quotas: Mapping[str, int], delta: int) -> list[KnobWrite]:
    """writeQuota: the same `delta` on every cgroup of the chain whose quota is not -1,
    parents first when growing (a child may not exceed its parent), children first when
    shrinking. `quotas` holds each readable cgroup's current cpu.cfs_quota_us; if one cannot be
    read rubik rolls back what it wrote, so nothing is written and the error is raised."""
    if delta == 0:
        return []
    chain = quota_chain(cgroup)
    if delta > 0:
        chain.reverse()
    out = []
    for p in chain:
        if p not in quotas:
            raise QuotaTurboError(f"failed to get cgroup {p} quota (rolled back)")
        if quotas[p] != -1:
            out.append(KnobWrite(p, Knob.CPU_CFS_QUOTA_US, quotas[p] + delta))
    return out


def recover_quota(c: Container, exists: bool, quotas: Mapping[str, int]) -> list[KnobWrite]:
    """RemoveCgroup: a container that leaves quotaTurbo (its pod stopped, or lost the
    annotation) gets its quota back to cpuLimit × period, with the delta propagated up; a
    cgroup that no longer exists is just forgotten."""
    if not exists:
        return []
    return quota_writes(c.cgroup, quotas, int(c.limit * c.period) - c.quota)


def sync_plan(tracked: list[str], wanted: Mapping[str, float]) -> tuple[list[str], list[str]]:
    """syncCgroups: containers are matched by id (the cgroup's last component). Returns the
    tracked cgroups to remove (and recover) and the wanted ones to add, in order."""
    wanted_ids = {posixpath.basename(cg) for cg in wanted}
    tracked_ids = {posixpath.basename(cg) for cg in tracked}
    remove = [cg for cg in tracked if posixpath.basename(cg) not in wanted_ids]
    add = [cg for cg in wanted if posixpath.basename(cg) not in tracked_ids]
    return remove, add


def reset_pod_quotas(pod: str, limits: Mapping[str, float], periods: Mapping[str, int]) -> list[KnobWrite]:
    """recoverOnePodQuota, at the service's PreStart and Terminate: the pod to -1 first, each
    container to int(limit × period) (-1 when it has no limit), then the pod to the sum of its
    containers' quotas, unless one of them is unlimited."""
    out = [KnobWrite(pod, Knob.CPU_CFS_QUOTA_US, -1)]
    total, unlimited = 0, False
    for cg, limit in limits.items():
        if limit == 0:
            unlimited = True
            out.append(KnobWrite(cg, Knob.CPU_CFS_QUOTA_US, -1))
            continue
        q = int(limit * periods[cg])
        total += q
        out.append(KnobWrite(cg, Knob.CPU_CFS_QUOTA_US, q))
    if not unlimited:
        out.append(KnobWrite(pod, Knob.CPU_CFS_QUOTA_US, total))
    return out


def last_util(history: list[tuple[int, float]]) -> float:
    """getLastCPUUtil: the newest node utilisation, 0 before the first sample."""
    return history[-1][1] if history else 0.0


def new_container(
    cgroup: str,
    limit: float,
    ncpus: int,
    exists: bool,
    readings: Mapping[str, int | None],
    now_ns: int = 0,
) -> Container:
    """AddCgroup + NewCPUQuota: a container enters quotaTurbo if its path is set, it
    qualifies, and its period, cpu.stat, quota and usage can all be read (`readings`: keys
    period, nr_throttled, throttled_ns, quota, usage; None = the file is missing). The
    previous throttle stats equal the current ones, so its first round sees no throttling."""
    if not cgroup:
        raise QuotaTurboError("cgroup path should not be empty")
    if not qualifies(exists, limit, ncpus):
        raise QuotaTurboError(f"{cgroup}: not allowed to adjust (limit {limit:g} CPUs, {ncpus} CPUs on the node)")
    missing = [k for k in ("period", "nr_throttled", "throttled_ns", "quota", "usage") if readings.get(k) is None]
    if missing:
        raise QuotaTurboError(f"{cgroup}: cannot read {', '.join(missing)}")
    r = {k: int(v) for k, v in readings.items() if v is not None}
    c = Container(cgroup, limit, r["period"], r["quota"], r["nr_throttled"], r["throttled_ns"], r["nr_throttled"], r["throttled_ns"])
    c.usage.append((now_ns, r["usage"]))
    return c
