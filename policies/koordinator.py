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

from policies import cpu_suppress as cs
from policies.cgroup import CgroupStats, Knob, KnobWrite, NodeStats, format_cpus, parse_cpus
from policies.policy import Decision, Observation, Param, Policy, PolicyError


class Koordinator(Policy):
    name = "koordinator"
    params = (
        Param("cpu_suppress_threshold_percent", 0, 100, 65, doc="NodeSLO cpuSuppressThresholdPercent"),
        Param("cpu_suppress_interval", 0.1, 60, 1.0, doc="cpu-suppress-interval-seconds"),
    )

    def __init__(self, config: Mapping[str, Any] | None = None, where: str = "policy") -> None:
        config = dict(config or {})
        self.besteffort: str = config.pop("besteffort", "")
        if not isinstance(self.besteffort, str) or not self.besteffort:
            raise PolicyError(f"{where}.besteffort: must name the best-effort QoS cgroup")
        be = config.pop("be", [])
        ls = config.pop("ls", [])
        for key, value in (("be", be), ("ls", ls)):
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise PolicyError(f"{where}.{key}: must be a list of cgroup names")
        self.be, self.ls = list(be), list(ls)
        self.mode = config.pop("cpu_suppress_policy", "cpuset")
        if self.mode not in ("cpuset", "cfsQuota"):
            raise PolicyError(f'{where}.cpu_suppress_policy: must be "cpuset" or "cfsQuota" (got {self.mode!r})')
        self.reserved = config.pop("reserved_cpus", 0)
        if isinstance(self.reserved, bool) or not isinstance(self.reserved, int | float) or self.reserved < 0:
            raise PolicyError(f"{where}.reserved_cpus: must be a number of cores >= 0")
        super().__init__(config, where)
        self.prev: tuple[NodeStats, dict[str, CgroupStats]] | None = None

    @property
    def interval(self) -> float:
        return self.values["cpu_suppress_interval"]

    def watch(self) -> Iterable[tuple[str, Knob]]:
        yield (self.besteffort, Knob.CPUSET_CPUS)
        yield (self.besteffort, Knob.CPU_CFS_QUOTA_US)
        for cg in self.be:
            yield (cg, Knob.CPUSET_CPUS)

    def watched_cgroups(self) -> Iterable[str]:
        return {self.besteffort, *self.be, *self.ls}

    def attach(self, obs: Observation) -> list[Decision]:
        self.prev = (obs.node, dict(obs.cgroups))
        return []

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
            return self._by_cpuset(obs, milli, why, inputs)
        return self._by_cfs_quota(obs, milli, why, inputs)

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

