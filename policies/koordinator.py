"""Koordinator's koordlet as a `Policy` — for now its CPU suppress
(policies/cpu_suppress.py; ../shared/reference/koordinator.md §1) with koordlet's defaults.

Configuration: `besteffort` (the BE QoS directory, whose children are the BE pods), `ls` (the
cgroups of non-BE pods, whose usage is subtracted), `cpu_suppress_policy` ("cpuset" or
"cfsQuota"), `reserved_cpus` (the node's reservation, in cores), and the tunables below.
CPU burst, CPU evict and the bind policies are still to come.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policies import cpu_burst as cb
from policies import cpu_suppress as cs
from policies.cgroup import CgroupStats, Knob, KnobWrite, NodeStats, format_cpus, parse_cpus
from policies.policy import Decision, Observation, Param, Policy, PolicyError, cgroup_names


BURST_POLICIES = ("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")


class Koordinator(Policy):
    name = "koordinator"
    params = (
        Param("cpu_suppress_threshold_percent", 0, 100, 65, doc="NodeSLO cpuSuppressThresholdPercent"),
        Param("cpu_suppress_interval", 0.1, 60, 1.0, doc="cpu-suppress-interval-seconds"),
        Param("cpu_burst_percent", 0, 10_000, cb.CPU_BURST_PERCENT, doc="cpuBurstStrategy.cpuBurstPercent"),
        Param("cfs_quota_burst_percent", 0, 10_000, cb.CFS_QUOTA_BURST_PERCENT, doc="cfsQuotaBurstPercent"),
        Param("share_pool_threshold_percent", 0, 100, cb.SHARE_POOL_THRESHOLD_PERCENT, doc="sharePoolThresholdPercent"),
        Param("cfs_quota_burst_period_seconds", -1, 3600, -1, integer=True, doc="-1: unlimited"),
    )

    def __init__(self, config: Mapping[str, Any] | None = None, where: str = "policy") -> None:
        config = dict(config or {})
        self.besteffort: str = config.pop("besteffort", "")
        if not isinstance(self.besteffort, str) or not self.besteffort:
            raise PolicyError(f"{where}.besteffort: must name the best-effort QoS cgroup")
        self.be = cgroup_names(config.pop("be", []), f"{where}.be")
        self.ls = cgroup_names(config.pop("ls", []), f"{where}.ls")
        self.mode = config.pop("cpu_suppress_policy", "cpuset")
        if self.mode not in ("cpuset", "cfsQuota"):
            raise PolicyError(f'{where}.cpu_suppress_policy: must be "cpuset" or "cfsQuota" (got {self.mode!r})')
        self.burst_cgroups = cgroup_names(config.pop("cpu_burst", []), f"{where}.cpu_burst")
        self.burst_policy = config.pop("cpu_burst_policy", "auto" if self.burst_cgroups else "none")
        if self.burst_policy not in BURST_POLICIES:
            raise PolicyError(f"{where}.cpu_burst_policy: must be one of {', '.join(BURST_POLICIES)} (got {self.burst_policy!r})")
        self.reserved = config.pop("reserved_cpus", 0)
        if isinstance(self.reserved, bool) or not isinstance(self.reserved, int | float) or self.reserved < 0:
            raise PolicyError(f"{where}.reserved_cpus: must be a number of cores >= 0")
        super().__init__(config, where)
        self.prev: tuple[NodeStats, dict[str, CgroupStats]] | None = None
        self.base: dict[str, int] = {}  # each burst container's limit as quota (µs)
        self.limiters: dict[str, cb.Limiter] = {}
        self.pool_usage: list[float] = []  # share-pool usage of the last rounds (5 s window)

    @property
    def interval(self) -> float:
        return self.values["cpu_suppress_interval"]

    def watch(self) -> Iterable[tuple[str, Knob]]:
        yield (self.besteffort, Knob.CPUSET_CPUS)
        yield (self.besteffort, Knob.CPU_CFS_QUOTA_US)
        for cg in self.be:
            yield (cg, Knob.CPUSET_CPUS)
        for cg in self.burst_cgroups:
            yield (cg, Knob.CPU_CFS_QUOTA_US)
            yield (cg, Knob.CPU_CFS_BURST_US)

    def watched_cgroups(self) -> Iterable[str]:
        return {self.besteffort, *self.be, *self.ls, *self.burst_cgroups}

    def attach(self, obs: Observation) -> list[Decision]:
        self.prev = (obs.node, dict(obs.cgroups))
        out = []
        for cg in self.burst_cgroups:
            quota = int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US))
            if quota <= 0:
                out.append(Decision(obs.now, self.name, f"CPU burst: {cg} has no CPU limit, left alone"))
                continue
            self.base[cg] = quota
            limiter = cb.Limiter(self.values["cfs_quota_burst_period_seconds"], self.values["cfs_quota_burst_percent"])
            # koordlet starts the bucket at capacity × rand[0, 0.5); we take the mean, 1/4.
            limiter.tokens = limiter.capacity * 0.25 if limiter.period_s >= 0 else 0.0
            self.limiters[cg] = limiter
        return out

    def tick(self, obs: Observation) -> list[Decision]:
        node0, cg0 = self.prev
        self.prev = (obs.node, dict(obs.cgroups))
        dt = (obs.node.total_ns - node0.total_ns) / obs.node.ncpus
        if dt <= 0:
            return []

        def cores(cg: str) -> float:
            return (obs.cgroups[cg].usage_ns - cg0[cg].usage_ns) / dt

        ls_used = sum(cores(cg) for cg in self.ls)
        pods_used = ls_used + cores(self.besteffort)
        node_used = (obs.node.busy_ns - node0.busy_ns) / dt
        ncpus = obs.node.ncpus
        threshold = self.values["cpu_suppress_threshold_percent"]
        milli = cs.suppress_milli(ncpus, threshold, ls_used, node_used, pods_used, self.reserved)
        why = (
            f"LS used {ls_used:.2f}, system {max(node_used - pods_used, self.reserved):.2f} "
            f"of {ncpus} × {threshold:g}%"
        )
        inputs = {"ls_used": ls_used, "node_used": node_used, "suppress_milli": milli}
        if self.mode == "cpuset":
            out = self._by_cpuset(obs, milli, why, inputs)
        else:
            out = self._by_cfs_quota(obs, milli, why, inputs)
        # CPU burst: the share pool is the whole node here (no LSE/LSR reservations yet),
        # and its usage leaves out the best-effort pods (system usage stays in, by design).
        self.pool_usage = (self.pool_usage + [node_used - cores(self.besteffort)])[-5:]
        pool = cb.pool_state(ncpus, sum(self.pool_usage) / len(self.pool_usage), self.values["share_pool_threshold_percent"])
        for cg in self.base:
            out += self._burst(obs, cg, cores(cg), cg0[cg], pool, dt)
        return out

    def _burst(self, obs: Observation, cg: str, used: float, before: CgroupStats, pool: cb.PoolState, dt: float) -> list[Decision]:
        """`applyCPUBurst` for one container: the static burst, then the CFS-quota burst."""
        base = self.base[cg]
        limit = base / cb.CFS_PERIOD_US
        out = []
        if self.burst_policy in ("cpuBurstOnly", "auto"):
            want = cb.static_burst_us(limit, self.values["cpu_burst_percent"])
            if int(obs.knob(cg, Knob.CPU_CFS_BURST_US)) != want:
                out.append(Decision(obs.now, self.name, f"CPU burst: {cg} cfs_burst_us = {want} ({self.values['cpu_burst_percent']:g}% of the limit)",
                                    (KnobWrite(cg, Knob.CPU_CFS_BURST_US, want),)))
        if self.burst_policy not in ("cfsQuotaBurstOnly", "auto"):
            return out
        s = obs.cgroups[cg]
        periods = s.nr_periods - before.nr_periods
        ratio = (s.nr_throttled - before.nr_throttled) / periods if periods > 0 else None
        allowed = self.limiters[cg].allow(int(used / limit * 100), dt / 1e9)
        op = cb.node_override(cb.container_op(True, allowed, ratio), pool)
        current = int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US))
        target = cb.target_quota(op, current, base, cb.quota_ceiling(base, self.values["cfs_quota_burst_percent"]))
        if target != current:
            out.append(Decision(
                obs.now, self.name,
                f"CFS quota burst: {cg} {op.value} {current}→{target} µs (throttled {0 if ratio is None else ratio:.0%} of periods, pool {pool.value})",
                (KnobWrite(cg, Knob.CPU_CFS_QUOTA_US, target),),
                {"throttle_ratio": ratio or 0.0, "used_cores": used},
            ))
        return out

    def _by_cpuset(self, obs: Observation, milli: int, why: str, inputs: dict) -> list[Decision]:
        old = parse_cpus(str(obs.knob(self.besteffort, Knob.CPUSET_CPUS)))
        nprocs = len(obs.cpus)
        size = cs.cpuset_size(milli, len(old), nprocs)
        reserved = set(range(int(round(self.reserved))))  # reserved CPUs: the lowest ids
        pool = [c for c in obs.cpus if c.cpu not in reserved]
        new = cs.pick_cpus(pool, size)
        writes: list[KnobWrite] = []
        if obs.knob(self.besteffort, Knob.CPU_CFS_QUOTA_US) != -1:
            # applying one policy recovers the other
            writes.append(KnobWrite(self.besteffort, Knob.CPU_CFS_QUOTA_US, -1))
        if not new or set(new) == set(old):
            if not writes:
                return []
            return [Decision(obs.now, self.name, f"CPU suppress: BE cpuset stays {len(old)} CPUs ({why})", tuple(writes), inputs)]
        union = format_cpus(set(old) | set(new))
        target = format_cpus(set(new))
        # kubelet cpu manager "none": the union top-down, then the new set bottom-up.
        writes += [KnobWrite(cg, Knob.CPUSET_CPUS, union) for cg in [self.besteffort, *self.be]]
        writes += [KnobWrite(cg, Knob.CPUSET_CPUS, target) for cg in [*reversed(self.be), self.besteffort]]
        return [Decision(obs.now, self.name, f"CPU suppress: BE cpuset {len(old)}→{len(new)} CPUs ({why})", tuple(writes), inputs)]

    def _by_cfs_quota(self, obs: Observation, milli: int, why: str, inputs: dict) -> list[Decision]:
        current = int(obs.knob(self.besteffort, Knob.CPU_CFS_QUOTA_US))
        new = cs.cfs_quota(milli, current, obs.node.ncpus)
        writes: list[KnobWrite] = []
        all_cpus = format_cpus({c.cpu for c in obs.cpus} - set(range(int(round(self.reserved)))))
        if str(obs.knob(self.besteffort, Knob.CPUSET_CPUS)) != all_cpus:
            # applying one policy recovers the other: BE cpusets back to all CPUs, parent first
            writes += [KnobWrite(cg, Knob.CPUSET_CPUS, all_cpus) for cg in [self.besteffort, *self.be]]
        if new != current:
            writes.append(KnobWrite(self.besteffort, Knob.CPU_CFS_QUOTA_US, new))
        if not writes:
            return []
        return [Decision(obs.now, self.name, f"CPU suppress: BE cfs_quota {current}→{new} µs ({why})", tuple(writes), inputs)]

