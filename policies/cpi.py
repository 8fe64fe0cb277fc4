"""rubik's CPI interference detection, service `cpi` (../shared/reference/rubik.md §4.7;
openeuler rubik pkg/services/cpi/{cpi.go, config.go, podStatus.go, dataSeries.go}), after
Google's CPI² (Zhang et al., EuroSys 2013): an online pod whose cycles-per-instruction jumps
above its own history is a victim, and the offline pod whose CPU usage lines up with the jumps
is its antagonist, whose CFS quota is cut for a while.

* **Sampling** every collect interval (1 min): for `sample` seconds (10 s), each online pod's
  CPI = Δcycles / Δinstructions from its perf_event cgroup (a sample with no instruction is
  dropped), and every pod's CPU usage in cores from cpuacct.usage; both stamped with the
  sample's start.
* **Statistics** every expire interval (30 min): samples older than the window (10 min) leave
  the series; an online pod's leaving CPI samples are folded into its running mean and σ
  (population variance, combined with the stored count), except those taken below 0.25 cores
  and — once the count is at least min_count (60) — those above mean + 2σ.
* **Outlier** every identify interval (5 min): an online pod with more than min_count samples
  in its statistics and at least 3 samples in the last identify interval above mean + 2σ
  taken at ≥ 0.25 cores.
* **Antagonist**: an offline pod whose score over the window exceeds 0.15, the score being
  Σ over the victim's CPI samples of u × (1 − thr/cpi) if cpi > thr else u × (cpi/thr − 1),
  with u the offline pod's usage at the same stamp normalised so the window's usage sums to 1.
* **Action**: each antagonist's cpu.cfs_quota_us = 10000 (pod and containers) for 5 min,
  renewed if flagged again, then its previous quota back; an outlier with no antagonist
  limits the offline pod with the largest summed usage over the window instead.

Time is in integer nanoseconds, as upstream's UnixNano stamps.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.policy import PolicyError, known_table

MIN_USAGE = 0.25  # cores below which a CPI sample is not trusted
OUTLIER_SAMPLES = 3
NS = 1_000_000_000


class CpiError(ValueError):
    """What dataSeries.add returns as an error."""


@dataclass(frozen=True)
class Config:
    """config.go's constants (seconds), all tunable here as what-ifs."""

    collect: float = 60.0  # defaultCollectDur
    sample: float = 10.0  # defaultSampleDur
    expire: float = 1800.0  # defaultExpireDur
    identify: float = 300.0  # defaultIdentifyDur
    window: float = 600.0  # defaultWindowDur
    antagonist_metric: float = 0.15  # defaultAntagonistMetric
    limit: float = 300.0  # defaultLimitDur
    limit_quota: int = 10_000  # defaultLimitQuota (µs)
    min_count: int = 60  # defaultMinCount


class DataSeries:
    """dataSeries: ascending timestamps (ns) and a value at each."""

    def __init__(self, points: Iterable[tuple[int, float]] = ()) -> None:
        self.timeline: list[int] = []
        self.data: dict[int, float] = {}
        for t, v in points:
            self.add(v, t)

    def add(self, value: float, nano: int) -> None:
        if nano < 0:
            raise CpiError("the new data timestamp cannot be negative")
        if self.timeline and nano < self.timeline[-1]:
            raise CpiError("the new data timestamp must not be earlier than the last timestamp")
        self.data[nano] = value
        self.timeline.append(nano)

    def get(self, nano: int) -> float | None:
        return self.data.get(nano)

    def range_search(self, start: int, end: int) -> DataSeries | None:
        """rangeSearch: the points from the first at or after `start` through the first at or
        after `end` (that one included even when it lies past `end`, as upstream's slice
        does; the last point when none is at or after `end`); None if end < start or nothing
        is at or after start."""
        if end < start:
            return None
        i = bisect.bisect_left(self.timeline, start)
        if i == len(self.timeline):
            return None
        j = min(bisect.bisect_left(self.timeline, end), len(self.timeline) - 1)
        return DataSeries((t, self.data[t]) for t in self.timeline[i : j + 1] if t in self.data)

    def normalize(self) -> DataSeries:
        """Every value divided by the sum of all (so they sum to 1)."""
        total = sum(self.data.values())
        return DataSeries((t, self.data[t] / total) for t in self.timeline if t in self.data)

    def expire(self, before: int) -> DataSeries:
        """Remove and return the points stamped before `before`."""
        i = bisect.bisect_left(self.timeline, before)
        gone, self.timeline = self.timeline[:i], self.timeline[i:]
        return DataSeries((t, self.data.pop(t)) for t in gone)

    def points(self) -> list[tuple[int, float]]:
        return [(t, self.data[t]) for t in self.timeline if t in self.data]


@dataclass
class PodCpi:
    """podStatus: one pod's series and, for an online pod, its CPI statistics."""

    cgroup: str
    online: bool
    cpi: DataSeries = field(default_factory=DataSeries)
    usage: DataSeries = field(default_factory=DataSeries)
    mean: float = 0.0
    std: float = 0.0
    count: int = 0
    # a limited offline pod: its quota before, and when the limit ends (ns)
    pre_quota: int | None = None
    limited_until: int | None = None

    @property
    def threshold(self) -> float:
        return self.mean + 2 * self.std

    def fold(self, expired: DataSeries) -> None:
        """updateCPIStatistic: the expired CPI samples merged into mean, σ and count
        (population variances combined about the new mean)."""
        values = list(expired.data.values())
        if not values:
            return
        n, k = self.count, len(values)
        total = sum(values)
        e_mean = total / k
        e_var = sum((v - e_mean) ** 2 for v in values)
        new_mean = (n * self.mean + total) / (n + k)
        combined = (n * (self.std**2 + (self.mean - new_mean) ** 2) + k * (e_var / k + (e_mean - new_mean) ** 2)) / (n + k)
        self.mean, self.std, self.count = new_mean, math.sqrt(max(combined, 0.0)), n + k

    def expire_and_update(self, before: int, min_count: int) -> None:
        """expireAndUpdateThreshold: drop samples before `before`; an online pod folds its
        trusted CPI samples (taken at ≥ 0.25 cores, and not above mean + 2σ once the count
        reaches min_count) into its statistics."""
        usage = self.usage.expire(before)
        if not self.online:
            return
        cpi = self.cpi.expire(before)
        keep = []
        for t, v in cpi.points():
            u = usage.get(t)
            if u is None:  # upstream's `continue`: kept
                keep.append((t, v))
            elif u < MIN_USAGE or (self.count >= min_count and v > self.threshold):
                continue
            else:
                keep.append((t, v))
        self.fold(DataSeries(keep))

    def is_outlier(self, now: int, duration: int, min_count: int) -> bool:
        """checkOutlier: enough history, and at least 3 samples in (now − duration, now]
        above mean + 2σ taken at ≥ 0.25 cores."""
        if self.count <= min_count:
            return False
        cpis = self.cpi.range_search(now - duration, now)
        usage = self.usage.range_search(now - duration, now)
        if cpis is None:
            return False
        hot = 0
        for t, v in cpis.points():
            u = usage.get(t) if usage is not None else None
            if u is None or u < MIN_USAGE or v <= self.threshold:
                continue
            hot += 1
        return hot >= OUTLIER_SAMPLES

    def antagonist_score(self, now: int, window: int, offline: PodCpi) -> float | None:
        """checkAntagonists' correlation of this (victim) pod's CPI with `offline`'s
        normalised usage over the window; None where either series is empty."""
        victim = self.cpi.range_search(now - window, now)
        suspect = offline.usage.range_search(now - window, now)
        if victim is None or suspect is None or not victim.timeline or not suspect.timeline:
            return None
        norm = suspect.normalize()
        thr = self.threshold
        score = 0.0
        for t, cpi in victim.points():
            u = norm.get(t)
            if u is None:
                continue
            score += u * (1 - thr / cpi) if cpi > thr else u * (cpi / thr - 1)
        return score


def usage_sum(pod: PodCpi, now: int, window: int) -> float:
    """limitMaxUsageOffline's measure: the offline pod's usage samples summed over the window."""
    s = pod.usage.range_search(now - window, now)
    return sum(s.data.values()) if s is not None else 0.0


def antagonists(online: Iterable[PodCpi], offline: Iterable[PodCpi], now: int, c: Config) -> tuple[list[str], list[str], bool]:
    """identifyAntagonists: (outlier online pods, offline pods to limit, whether they are the
    max-usage fallback). An offline pod is an antagonist of the first outlier it scores
    above the metric against."""
    victims = [p for p in online if p.is_outlier(now, round(c.identify * NS), c.min_count)]
    if not victims:
        return [], [], False
    offline = list(offline)
    window = round(c.window * NS)
    found = []
    for o in offline:
        for v in victims:
            s = v.antagonist_score(now, window, o)
            if s is not None and s > c.antagonist_metric:
                found.append(o.cgroup)
                break
    if found or not offline:
        return [v.cgroup for v in victims], found, False
    best, best_sum = None, 0.0
    for o in offline:  # strictly the largest; none when every sum is 0
        total = usage_sum(o, now, window)
        if total > best_sum:
            best, best_sum = o.cgroup, total
    return [v.cgroup for v in victims], [best] if best else [], True


def parse(table: Any, where: str) -> Config | None:
    """`cpi = {}` (rubik's constants) or with any of collect, sample, expire, identify,
    window, limit (seconds), antagonist_metric, limit_quota (µs), min_count."""
    if table is None or table is False:
        return None
    if table is True:
        return Config()
    keys = tuple(Config.__dataclass_fields__)
    known_table(table, keys, where, "a table (rubik's defaults: {})", f"known: {', '.join(keys)}")
    d = Config()
    values: dict[str, Any] = {}
    for k in keys:
        v = table.get(k, getattr(d, k))
        integer = k in ("limit_quota", "min_count")
        if isinstance(v, bool) or not isinstance(v, int if integer else int | float) or v <= 0:
            kind = "an integer" if integer else "a number of seconds"
            raise PolicyError(f"{where}.{k}: must be {kind} > 0 (got {v!r})")
        values[k] = v
    c = Config(**values)
    if c.sample > c.collect:
        raise PolicyError(f"{where}.sample: must not exceed collect ({c.collect:g} s): a sample ends before the next begins")
    if c.limit_quota < 1000:
        raise PolicyError(f"{where}.limit_quota: cpu.cfs_quota_us must be at least 1000 µs (got {c.limit_quota})")
    return c


@dataclass
class Sampler:
    """The pending sample: when it started and the counters then."""

    start: int
    usage: Mapping[str, int]
    perf: Mapping[str, tuple[int, int]]


class Service:
    """CpiService on one node: its pods, the sample in progress, and the three timers
    (collect, expire, identify), which all fire first at the start, as wait.Until does."""

    def __init__(self, c: Config, online: Iterable[str], offline: Iterable[str]) -> None:
        self.c = c
        self.online = {cg: PodCpi(cg, True) for cg in online}
        self.offline = {cg: PodCpi(cg, False) for cg in offline if cg not in self.online}
        self.pending: Sampler | None = None
        self.next = {"collect": 0, "expire": 0, "identify": 0}
        self.started = False

    def cgroups(self) -> list[str]:
        return [*self.online, *self.offline]

    def due(self, timer: str, now: int, every: float) -> bool:
        """Whether `timer` fires at `now`; it then moves on by whole periods past now."""
        if now < self.next[timer]:
            return False
        step = max(round(every * NS), 1)
        self.next[timer] += step * ((now - self.next[timer]) // step + 1)
        return True

    def step(
        self, now: int, usage: Mapping[str, int], perf: Mapping[str, tuple[int, int]], quota: Mapping[str, int]
    ) -> list[tuple[str, str, int]]:
        """One look at the node at `now` (ns): cumulative CPU usage (ns) of every pod, (cycles,
        instructions) of every online pod, each offline pod's cfs_quota_us. Returns the quota
        writes as (why, cgroup, quota µs)."""
        c = self.c
        out: list[tuple[str, str, int]] = []
        if not self.started:
            self.started = True
            self.next = dict.fromkeys(self.next, now)
            for p in self.offline.values():
                p.pre_quota = quota[p.cgroup]  # newPodStatus → getAndSetOriginQuota
        for p in self.offline.values():
            if p.limited_until is not None and now >= p.limited_until:
                assert p.pre_quota is not None
                out.append((f"cpi: {p.cgroup}'s limit ended: quota back", p.cgroup, p.pre_quota))
                p.limited_until = None
        if self.pending is not None and now - self.pending.start >= round(c.sample * NS):
            s, self.pending = self.pending, None
            seconds = (now - s.start) / NS
            for cg, before in s.usage.items():
                pod = self.online.get(cg) or self.offline[cg]
                pod.usage.add((usage[cg] - before) / NS / seconds, s.start)
            for cg, (cyc, ins) in s.perf.items():
                d_ins = perf[cg][1] - ins
                if d_ins > 0:  # collectCPI drops a sample with no instruction
                    self.online[cg].cpi.add((perf[cg][0] - cyc) / d_ins, s.start)
        if self.due("collect", now, c.collect) and self.pending is None:
            self.pending = Sampler(now, {cg: usage[cg] for cg in self.cgroups()}, {cg: perf[cg] for cg in self.online})
        if self.due("expire", now, c.expire):
            for p in (*self.online.values(), *self.offline.values()):
                p.expire_and_update(now - round(c.window * NS), c.min_count)
        if self.due("identify", now, c.identify):
            victims, targets, fallback = antagonists(self.online.values(), self.offline.values(), now, c)
            for cg in targets:
                p = self.offline[cg]
                why = "the largest offline usage (no antagonist found)" if fallback else "antagonist"
                if p.limited_until is None:
                    out.append((f"cpi: {', '.join(victims)} CPI outlier; {cg} is {why}: quota {c.limit_quota} µs", cg, c.limit_quota))
                p.limited_until = now + round(c.limit * NS)  # renewed while flagged again
        return out
