"""Koordinator's koordlet (and the slo-controller's batch resources) as a `Policy`
(../shared/reference/koordinator.md) with koordlet's defaults:

* CPU suppress (policies/cpu_suppress.py, §1): cpuset or cfsQuota policy on the besteffort
  QoS directory, with the LSR/LSE pools of bound pods;
* CPU burst (policies/cpu_burst.py, §2): static cfs_burst_us and the CFS-quota burst state
  machine for LS pods with a CPU limit;
* memory QoS (policies/memory_qos.py, §3): memory.min/low/high and the Alibaba Cloud Linux
  files (wmark_ratio, wmark_scale_factor, wmark_min_adj, priority) per QoS class;
* evictions (§4; policies/evict_tasks.py, evict_round.py): the CPU evictor (BECPUEvict by
  satisfaction — off unless its percents are set —, CPUAllocatableEvict, CPUEvict) and the
  memory evictor (BEMemoryEvict, MemoryAllocatableEvict, MemoryEvict) as koordlet runs them,
  one round each with its cool-down, the features enabled as koordlet's feature gates
  (`evict_features`); victims are killed with `cgroup.kill`;
* resctrl QoS (policies/resctrl_qos.py, §8 "Resctrl"): the LSR / LS / BE groups' L3 ways and
  memory bandwidth from NodeSLO resctrlQOS, and the pods' tasks in their class's group;
* batch resources and the Mid tier (policies/batch_resource.py, peak_prediction.py, §5): the
  batch-cpu/batch-memory and mid-cpu/mid-memory the node would advertise, recorded as
  decisions (nothing is written: it is the scheduler's input) and read by the allocatable
  evictors.

With pods in the scenario everything is taken from them (BE = BE pods under
kubepods/besteffort, LS = the others, LSR/LSE pools from their bound CPUs); without pods,
the cgroups are named in the configuration: `besteffort`, `be`, `ls`, `cpu_burst`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from policies import batch_resource as br
from policies import blkio_qos as bq
from policies import cpu_burst as cb
from policies import cpu_evict as ce
from policies import cpu_suppress as cs
from policies import evict_tasks as et
from policies import memory_evict as me
from policies import memory_qos as mq
from policies import peak_prediction as pp
from policies import resctrl_qos as rq
from policies.cgroup import CgroupStats, Knob, KnobWrite, NodeStats, format_cpus, parse_cpus
from policies.evict_round import kill_and_evict
from policies.pods import BESTEFFORT, Pod, QoSClass
from policies.policy import Decision, Observation, Param, Policy, PolicyError, cgroup_names

BURST_POLICIES = ("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")


class Koordinator(Policy):
    name = "koordinator"
    params = (
        Param("cpu_suppress_threshold_percent", 0, 100, 65, integer=True, doc="NodeSLO cpuSuppressThresholdPercent"),
        Param("cpu_suppress_interval", 0.1, 60, 1.0, doc="cpu-suppress-interval-seconds"),
        Param("cpu_burst_percent", 0, 10_000, cb.CPU_BURST_PERCENT, integer=True, doc="cpuBurstStrategy.cpuBurstPercent"),
        Param("cfs_quota_burst_percent", 0, 10_000, cb.CFS_QUOTA_BURST_PERCENT, integer=True, doc="cfsQuotaBurstPercent"),
        Param("share_pool_threshold_percent", 0, 100, cb.SHARE_POOL_THRESHOLD_PERCENT, integer=True, doc="sharePoolThresholdPercent"),
        Param("cfs_quota_burst_period_seconds", -1, 3600, -1, integer=True, doc="-1: unlimited"),
        # BECPUEvict: the two satisfaction percents have no default (0 here: off)
        Param(
            "cpu_evict_be_satisfaction_lower_percent", 0, 60, 0, integer=True, doc="cpuEvictBESatisfactionLowerPercent, (0, 60]; 0 = off"
        ),
        Param("cpu_evict_be_satisfaction_upper_percent", 0, 100, 0, integer=True, doc="cpuEvictBESatisfactionUpperPercent, (0, 100)"),
        Param(
            "cpu_evict_be_usage_threshold_percent", 0, 100, ce.USAGE_THRESHOLD_PERCENT, integer=True, doc="cpuEvictBEUsageThresholdPercent"
        ),
        Param("cpu_evict_time_window_seconds", 1, 3600, 1, integer=True, doc="cpuEvictTimeWindowSeconds (at least 1 s)"),
        # CPUEvict / CPUAllocatableEvict / MemoryEvict / MemoryAllocatableEvict (with their
        # feature in `evict_features`): NodeSLO thresholds with no upstream default; -1 = unset
        *(
            Param(name, -1, 100, -1, integer=True, doc=doc)
            for name, doc in (
                ("cpu_evict_threshold_percent", "cpuEvictThresholdPercent (CPUEvict: node CPU usage, window average)"),
                ("cpu_evict_lower_percent", "cpuEvictLowerPercent; -1 = threshold − 2"),
                ("cpu_allocatable_evict_threshold_percent", "cpuAllocatableEvictThresholdPercent (requests / allocatable)"),
                ("cpu_allocatable_evict_lower_percent", "cpuAllocatableEvictLowerPercent"),
                ("memory_allocatable_evict_threshold_percent", "memoryAllocatableEvictThresholdPercent (requests / allocatable)"),
                ("memory_allocatable_evict_lower_percent", "memoryAllocatableEvictLowerPercent"),
            )
        ),
        Param(
            "evict_enabled_priority_threshold",
            -1,
            2**31 - 1,
            -1,
            integer=True,
            doc="evictEnabledPriorityThreshold: CPUEvict/MemoryEvict take eviction-enabled pods at or below it; -1 = unset",
        ),
        Param(
            "allocatable_evict_priority_threshold",
            -1,
            ce.PRIORITY_MID_MAX,
            -1,
            integer=True,
            doc="allocatableEvictPriorityThreshold (at most koord-mid's 7999); -1 = unset",
        ),
        # memory QoS percents of the LS and BE classes as flat, tunable parameters: a value
        # above 0 enables the class with it (over the `memory_qos` table's)
        *(
            Param(f"memory_qos_{c.lower()}_{f}", 0, 100, 0, integer=True, doc=f"NodeSLO memoryQOS {c} {f}")
            for c in ("LS", "BE")
            for f in ("min_limit_percent", "low_limit_percent", "throttling_percent")
        ),
        Param(
            "memory_evict_threshold_percent",
            0,
            100,
            me.THRESHOLD_PERCENT,
            integer=True,
            doc="memoryEvictThresholdPercent (with memory_evict = true)",
        ),
        Param("memory_evict_lower_percent", 0, 100, 0, integer=True, doc="memoryEvictLowerPercent; 0 = threshold − 2"),
        Param(
            "cpu_reclaim_threshold_percent",
            0,
            100,
            br.CPU_RECLAIM_THRESHOLD_PERCENT,
            integer=True,
            doc="colocation cpuReclaimThresholdPercent",
        ),
        Param(
            "memory_reclaim_threshold_percent",
            0,
            100,
            br.MEMORY_RECLAIM_THRESHOLD_PERCENT,
            integer=True,
            doc="memoryReclaimThresholdPercent",
        ),
        # blkioQOS of the BE class (with blkio_qos = true): 0 = no limit
        Param(
            "batch_cpu_threshold_percent",
            -1,
            1000,
            -1,
            integer=True,
            doc="batchCPUThresholdPercent: batch-cpu ≤ capacity × this %; -1 = unset (no cap)",
        ),
        Param(
            "batch_memory_threshold_percent",
            -1,
            1000,
            -1,
            integer=True,
            doc="batchMemoryThresholdPercent: batch-memory ≤ capacity × this %; -1 = unset (no cap)",
        ),
        # the Mid tier (slo-controller midresource, ColocationStrategy) and koordlet's peak
        # prediction flags it is computed from
        Param("mid_cpu_threshold_percent", 0, 100, 100, integer=True, doc="midCPUThresholdPercent: mid-cpu ≤ capacity × this %"),
        Param("mid_memory_threshold_percent", 0, 100, 100, integer=True, doc="midMemoryThresholdPercent"),
        Param("mid_unallocated_percent", 0, 100, 0, integer=True, doc="midUnallocatedPercent: share of the unallocated added"),
        Param(
            "prediction_cold_start_seconds",
            0,
            30 * 86400,
            pp.COLD_START_S,
            doc="koordlet --prediction-cold-start-duration: a younger prod pod counts its requests as peak",
        ),
        Param(
            "prediction_safety_margin_percent",
            0,
            100,
            pp.SAFETY_MARGIN_PERCENT,
            integer=True,
            doc="koordlet --prediction-safety-margin-percent: above the predicted peaks",
        ),
        # resctrlQOS of the BE class as flat, tunable parameters (policies/resctrl_qos.py): a value
        # above 0 turns resctrl QoS on and enables BE with it (over the `resctrl_qos` table's)
        *(Param(f"resctrl_be_{f}", 0, 100, 0, integer=True, doc=f"NodeSLO beClass resctrlQOS {f}; 0 = unset") for f in rq.FLAT_FIELDS),
        Param("blkio_be_io_weight_percent", 1, 100, bq.IO_WEIGHT_PERCENT, integer=True, doc="beClass blkioQOS ioCfg.ioWeightPercent"),
        Param("blkio_be_read_iops", 0, 1_000_000, 0, integer=True, doc="beClass blkioQOS ioCfg.readIOPS"),
        Param("blkio_be_write_iops", 0, 1_000_000, 0, integer=True, doc="beClass blkioQOS ioCfg.writeIOPS"),
        Param("blkio_be_read_bps", 0, 10_000_000_000, 0, integer=True, doc="beClass blkioQOS ioCfg.readBPS (bytes/s)"),
        Param("blkio_be_write_bps", 0, 10_000_000_000, 0, integer=True, doc="beClass blkioQOS ioCfg.writeBPS (bytes/s)"),
    )
    # NodeSLO's percents are int64 in Koordinator's API, hence integer Params above
    tuned = ("cpu_suppress_threshold_percent", "cpu_burst_percent", "cfs_quota_burst_percent", "share_pool_threshold_percent")

    def __init__(self, config: Mapping[str, Any] | None = None, where: str = "policy") -> None:
        config = dict(config or {})
        self.besteffort: str = config.pop("besteffort", "")
        if not isinstance(self.besteffort, str):
            raise PolicyError(f"{where}.besteffort: must name the best-effort QoS cgroup")
        self.be = cgroup_names(config.pop("be", []), f"{where}.be")
        self.ls = cgroup_names(config.pop("ls", []), f"{where}.ls")
        self.mode = config.pop("cpu_suppress_policy", "cpuset")
        if self.mode not in ("cpuset", "cfsQuota"):
            raise PolicyError(f'{where}.cpu_suppress_policy: must be "cpuset" or "cfsQuota" (got {self.mode!r})')
        self.cpu_evict_policy = config.pop("cpu_evict_policy", "evictByRealLimit")
        if self.cpu_evict_policy not in ("evictByRealLimit", "evictByAllocatable"):
            raise PolicyError(
                f'{where}.cpu_evict_policy: must be "evictByRealLimit" or "evictByAllocatable" (got {self.cpu_evict_policy!r})'
            )
        self.burst_cgroups = cgroup_names(config.pop("cpu_burst", []), f"{where}.cpu_burst")
        self.burst_policy = config.pop("cpu_burst_policy", "auto" if self.burst_cgroups else "none")
        if self.burst_policy not in BURST_POLICIES:
            raise PolicyError(f"{where}.cpu_burst_policy: must be one of {', '.join(BURST_POLICIES)} (got {self.burst_policy!r})")
        self.reserved = config.pop("reserved_cpus", 0)
        if isinstance(self.reserved, bool) or not isinstance(self.reserved, int | float) or self.reserved < 0:
            raise PolicyError(f"{where}.reserved_cpus: must be a number of cores >= 0")
        self.memory_qos = mq.parse_classes(config.pop("memory_qos", {}), f"{where}.memory_qos")
        self.blkio_qos = config.pop("blkio_qos", False)
        if not isinstance(self.blkio_qos, bool):
            raise PolicyError(
                f"{where}.blkio_qos: must be true or false (the BE class's blkioQOS.enable; its ioCfg are the blkio_be_* parameters)"
            )
        self.memory_evict = config.pop("memory_evict", False)
        if not isinstance(self.memory_evict, bool):
            raise PolicyError(f"{where}.memory_evict: must be true or false (BEMemoryEvict; off by default, as in koordlet)")
        self.last_memory_evict = -1e18  # the memory evictor starts at time 0: no initial cool-down
        features = config.pop("evict_features", [])
        if not isinstance(features, list) or any(f not in et.FEATURES for f in features):
            raise PolicyError(f"{where}.evict_features: must be a list of koordlet feature gates among {', '.join(et.FEATURES)}")
        self.evict_features: list[str] = list(features)
        # resctrl QoS (policies/resctrl_qos.py): the table present = the RdtResctrl gate on
        self.resctrl_qos = rq.parse(config.pop("resctrl_qos", None), f"{where}.resctrl_qos")
        memory = config.pop("node_memory", None)
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
            raise PolicyError(f"{where}.node_memory: must be the node's memory in bytes")
        self.node_memory: int | None = memory
        super().__init__(config, where)
        self.resctrl_qos = rq.with_flat(self.resctrl_qos, {f: int(self.values[f"resctrl_be_{f}"]) for f in rq.FLAT_FIELDS}, where)
        lower = self.values["cpu_evict_be_satisfaction_lower_percent"]
        upper = self.values["cpu_evict_be_satisfaction_upper_percent"]
        if (lower > 0) != (upper > 0) or (lower > 0 and not (upper >= lower and upper < 100)):
            raise PolicyError(
                f"{where}.cpu_evict_be_satisfaction_upper_percent: BE CPU eviction needs both percents, "
                f"lower in (0, 60] and upper in [lower, 100) (got lower {lower:g}, upper {upper:g})"
            )
        self.evict_on = lower > 0
        if self.evict_on and "BECPUEvict" not in self.evict_features:
            self.evict_features.append("BECPUEvict")  # the satisfaction percents switch it on
        if self.memory_evict and "BEMemoryEvict" not in self.evict_features:
            self.evict_features.append("BEMemoryEvict")
        self.thresholds = self._thresholds()
        for feature in self.evict_features:
            why = et.config_error(feature, self.thresholds)
            if why:
                raise PolicyError(f"{where}.evict_features: {feature} is enabled but its thresholds are not valid: {why}")
        self.node_window: list[float] = []  # node CPU used (cores) per round, CPUEvict's window
        self.lsr_cpus: set[int] = set()
        self.lse_cpus: set[int] = set()
        self.by_cgroup: dict[str, Pod] = {}
        self.prev: tuple[NodeStats, dict[str, CgroupStats]] | None = None
        self.base: dict[str, int] = {}  # each burst container's limit as quota (µs)
        self.limiters: dict[str, cb.Limiter] = {}
        self.pool_usage: list[float] = []  # share-pool usage of the last rounds (5 s window)
        self.evict_window: list[ce.BEState] = []
        self.last_evict = 0.0
        self.evicted: set[str] = set()
        self.usage_window: list[dict[str, float]] = []  # per-second usages for the NodeMetric
        self.batch: tuple[int, int | None] | None = None  # last advertised (cpu milli, memory)
        self.mid: tuple[int, int] | None = None  # last advertised mid-cpu (milli), mid-memory (bytes)
        self.predictor = pp.PredictServer()
        self.started = 0.0
        self.batch_at = 0.0

    def use_pods(self, pods: tuple[Pod, ...]) -> None:
        super().use_pods(pods)
        if pods:
            self.besteffort = self.besteffort or BESTEFFORT
            self.be = self.be or [p.cgroup for p in pods if p.is_be]
            self.ls = self.ls or [p.cgroup for p in pods if not p.is_be]
            self.lsr_cpus = {c for p in pods if p.qos is QoSClass.LSR for c in p.cpuset}
            self.lse_cpus = {c for p in pods if p.qos is QoSClass.LSE for c in p.cpuset}
            if not self.burst_cgroups and self.burst_policy != "none":
                self.burst_cgroups = [p.cgroup for p in pods if p.cpu_burstable and p.cpu_limit]
            self.by_cgroup = {p.cgroup: p for p in pods}
        if not self.besteffort:
            raise PolicyError(f"{self.where}.besteffort: must name the best-effort QoS cgroup (or the scenario must have pods)")

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

    def uses_resctrl(self) -> bool:
        return self.resctrl_qos is not None

    def attach(self, obs: Observation) -> list[Decision]:
        out = self._memory_qos(obs) + self._blkio_qos(obs) + self._resctrl_qos(obs)
        return out + self._attach_cpu(obs)

    def _resctrl_qos(self, obs: Observation) -> list[Decision]:
        """koordlet's ResctrlReconcile (policies/resctrl_qos.py): the NodeSLO and the pods are
        static in a scenario, so the groups' schemata and the pods' groups are set once."""
        if self.resctrl_qos is None:
            return []
        writes, skipped = rq.policy_writes(self.resctrl_qos, obs.resctrl)
        tasks = rq.assignments(self.resctrl_qos, rq.pod_classes(self.pods, self.ls, self.be))
        what = "; ".join([*(str(w) for w in writes), *(str(a) for a in tasks), *skipped])
        return [Decision(obs.now, self.name, f"resctrlQOS: {what}", resctrl=(*writes, *tasks))]

    def _blkio_qos(self, obs: Observation) -> list[Decision]:
        """koordlet's BlkIOReconcile for the BE class (policies/blkio_qos.py)."""
        if not self.blkio_qos:
            return []
        v = {k: int(self.values[f"blkio_be_{k}"]) for k in ("read_iops", "write_iops", "read_bps", "write_bps", "io_weight_percent")}
        what = ", ".join(f"{k} {n}" for k, n in v.items())
        return [Decision(obs.now, self.name, f"blkioQOS {self.besteffort}: {what}", tuple(bq.writes(self.besteffort, **v)))]

    def _memory_qos(self, obs: Observation) -> list[Decision]:
        """koordlet's CgroupReconcile (policies/memory_qos.py): the pods are static in a
        scenario, so the values are written once, parents first."""
        classes = dict(self.memory_qos)
        for c in ("LS", "BE"):
            flat = {
                f: int(self.values[f"memory_qos_{c.lower()}_{f}"]) for f in ("min_limit_percent", "low_limit_percent", "throttling_percent")
            }
            if any(flat.values()):
                base = classes.get(c, mq.ClassConfig())
                # a class's flat value, where set (not 0), overrides its memory_qos entry
                classes[c] = replace(
                    base,
                    enable=True,
                    min_limit_percent=flat["min_limit_percent"] or base.min_limit_percent,
                    low_limit_percent=flat["low_limit_percent"] or base.low_limit_percent,
                    throttling_percent=flat["throttling_percent"] or base.throttling_percent,
                )
        if not classes or not self.pods:
            return []
        knob = {k.v1: k for k in Knob if k.v1.startswith("memory.")}
        out = []
        for cg, values in mq.cgroup_values(self.pods, classes, self.node_memory or 0).items():
            writes = tuple(KnobWrite(cg, knob[k], v) for k, v in values.items())
            shown = ", ".join(f"{k} {'max' if v < 0 and k == 'memory.high' else v}" for k, v in values.items())
            out.append(Decision(obs.now, self.name, f"memory QoS {cg}: {shown}", writes, {k: float(v) for k, v in values.items()}))
        return out

    def _attach_cpu(self, obs: Observation) -> list[Decision]:
        self.prev = (obs.node, dict(obs.cgroups))
        # The CPU evictor starts with lastEvictTime = now: no eviction in the first cool-down.
        self.last_evict = obs.now
        self.started = obs.now  # the pods' creation, for the predictor's cold start
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
        assert self.prev is not None, "tick before attach"
        node0, cg0 = self.prev
        self.prev = (obs.node, dict(obs.cgroups))
        dt = (obs.node.total_ns - node0.total_ns) / obs.node.ncpus
        if dt <= 0:
            return []

        def cores(cg: str) -> float:
            return (obs.cgroups[cg].usage_ns - cg0[cg].usage_ns) / dt

        live_ls = [cg for cg in self.ls if cg not in self.evicted]
        ls_used = sum(cores(cg) for cg in live_ls)
        be_used = cores(self.besteffort)
        pods_used = ls_used + be_used
        node_used = (obs.node.busy_ns - node0.busy_ns) / dt
        ncpus = obs.node.ncpus
        threshold = self.values["cpu_suppress_threshold_percent"]
        milli = cs.suppress_milli(ncpus, threshold, ls_used, node_used, pods_used, self.reserved)
        system = max(node_used - pods_used, self.reserved)
        why = f"LS used {ls_used:.2f}, system {system:.2f} of {ncpus} × {threshold:g}%"
        inputs = {"ls_used": ls_used, "node_used": node_used, "suppress_milli": milli}
        if self.mode == "cpuset":
            out = self._by_cpuset(obs, milli, why, inputs)
        else:
            out = self._by_cfs_quota(obs, milli, why, inputs)
        # CPU burst: the share pool is the CPUs not reserved by LSE/LSR pods; its usage leaves
        # out LSE/LSR/BE pods (system usage stays in, by design).
        reserved_pods = [p for p in self.pods if p.qos in (QoSClass.LSE, QoSClass.LSR)]
        pool_cpus = ncpus - sum(p.cpu_request for p in reserved_pods) / 1000
        pool_used = node_used - be_used - sum(cores(p.cgroup) for p in reserved_pods if p.cgroup in obs.cgroups)
        self.pool_usage = (self.pool_usage + [pool_used])[-5:]
        pool = cb.pool_state(pool_cpus, sum(self.pool_usage) / len(self.pool_usage), self.values["share_pool_threshold_percent"])
        for cg in self.base:
            out += self._burst(obs, cg, cores(cg), cg0[cg], pool, dt)
        if any(f in et.CPU_FEATURES for f in self.evict_features):
            out += self._cpu_evict(obs, cores, be_used, node_used)
        if any(f in et.MEMORY_FEATURES for f in self.evict_features):
            out += self._memory_evict(obs, cores)
        out += self._batch_resource(obs, cores, node_used, pods_used)
        return out

    def _burst(self, obs: Observation, cg: str, used: float, before: CgroupStats, pool: cb.PoolState, dt: float) -> list[Decision]:
        """`applyCPUBurst` for one container: the static burst, then the CFS-quota burst."""
        base = self.base[cg]
        limit = base / cb.CFS_PERIOD_US
        out = []
        # `applyCPUBurst`: without the static part (none, cfsQuotaBurstOnly) the burst is 0
        static_on = self.burst_policy in ("cpuBurstOnly", "auto")
        want = cb.container_static_burst_us(self.burst_policy, limit, self.values["cpu_burst_percent"])
        if int(obs.knob(cg, Knob.CPU_CFS_BURST_US)) != want:
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"CPU burst: {cg} cfs_burst_us = {want} ({self.values['cpu_burst_percent'] if static_on else 0:g}% of the limit)",
                    (KnobWrite(cg, Knob.CPU_CFS_BURST_US, want),),
                )
            )
        # The CFS-quota part runs under every policy: with it off (none, cpuBurstOnly) the
        # operation is koordlet's cfsReset, which brings a quota raised earlier back to base.
        s = obs.cgroups[cg]
        periods = s.nr_periods - before.nr_periods
        ratio = (s.nr_throttled - before.nr_throttled) / periods if periods > 0 else None
        on = cb.quota_burst_enabled(self.burst_policy)
        allowed = self.limiters[cg].allow(int(used / limit * 100), dt / 1e9) if on else True
        current = int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US))
        c = cb.ContainerQuota(base, current, ratio, allowed)
        op = cb.node_override(cb.container_op(on, allowed, ratio), pool)
        _, (target,) = cb.apply_cfs_quota_burst(self.burst_policy, self.values["cfs_quota_burst_percent"], [c], -1, pool)
        if target != current:
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"CFS quota burst: {cg} {op.value} {current}→{target} µs (throttled {0 if ratio is None else ratio:.0%} of periods, pool {pool.value})",
                    (KnobWrite(cg, Knob.CPU_CFS_QUOTA_US, target),),
                    {"throttle_ratio": ratio or 0.0, "used_cores": used},
                )
            )
        return out

    def _thresholds(self) -> et.Thresholds:
        """The NodeSLO's resourceUsedThresholdWithBE as the evictors read it (None: unset)."""
        v = self.values

        def given(name: str, unset: float = -1) -> int | None:
            return None if v[name] == unset else int(v[name])

        return et.Thresholds(
            memory_evict_threshold_percent=int(v["memory_evict_threshold_percent"]),
            memory_evict_lower_percent=given("memory_evict_lower_percent", 0),
            memory_allocatable_evict_threshold_percent=given("memory_allocatable_evict_threshold_percent"),
            memory_allocatable_evict_lower_percent=given("memory_allocatable_evict_lower_percent"),
            cpu_evict_threshold_percent=given("cpu_evict_threshold_percent"),
            cpu_evict_lower_percent=given("cpu_evict_lower_percent"),
            cpu_allocatable_evict_threshold_percent=given("cpu_allocatable_evict_threshold_percent"),
            cpu_allocatable_evict_lower_percent=given("cpu_allocatable_evict_lower_percent"),
            cpu_evict_be_satisfaction_lower_percent=given("cpu_evict_be_satisfaction_lower_percent", 0),
            cpu_evict_be_satisfaction_upper_percent=given("cpu_evict_be_satisfaction_upper_percent", 0),
            evict_enabled_priority_threshold=given("evict_enabled_priority_threshold"),
            allocatable_evict_priority_threshold=given("allocatable_evict_priority_threshold"),
        )

    def _states(self, obs: Observation, cores) -> list[et.PodState]:
        """The pods not yet evicted, with this round's CPU (millicores) and memory (no page
        cache) samples: the metrics the evictors read last."""
        out = []
        for p in self.pods:
            if p.cgroup in self.evicted or p.cgroup not in obs.cgroups:
                continue
            s = obs.cgroups[p.cgroup]
            out.append(et.PodState(p, cores(p.cgroup) * 1000, float(max(0, s.memory_bytes - s.memory_file))))
        return out

    def _evictions(self, obs: Observation, tasks: list, what: dict[str, tuple[str, dict[str, float]]]) -> list[Decision]:
        """Run one round (policies.evict_round) and kill its victims with cgroup.kill: one
        decision per task that took pods, its text and inputs from `what` by feature."""
        r = kill_and_evict(tasks)
        self.evicted.update(v.name for v in r.evicted)
        out = []
        for reason, took in r.by_task:
            if not took:
                continue
            feature = reason.removeprefix(et.REASON)
            text, inputs = what[feature]
            names = ", ".join(v.label for v in took)
            released = {
                f"released_{k}": float(q) for k, q in r.released.get(next(t.target for t in tasks if t.reason == reason), {}).items()
            }
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    text.format(names=names),
                    tuple(KnobWrite(v.name, Knob.CGROUP_KILL, 1) for v in took),
                    {**inputs, **released},
                )
            )
        return out

    def _cpu_evict(self, obs: Observation, cores, be_used: float, node_used: float) -> list[Decision]:
        """koordlet's CPU evictor (§4.1–4.3): BECPUEvict (satisfaction of the BE requests by
        their real limit, averaged over the time window), CPUAllocatableEvict (requests
        against the node's batch-cpu / mid-cpu allocatable) and CPUEvict (node usage,
        window average) in one round; then a 20 s cool-down."""
        window = self.values["cpu_evict_time_window_seconds"]
        keep = max(1, round(window / self.interval))
        self.node_window = (self.node_window + [node_used])[-keep:]
        release, what = 0, {}
        if "BECPUEvict" in self.evict_features:
            release, be_text = self._be_cpu_release(obs, be_used, keep, window)
            what["BECPUEvict"] = be_text
        if obs.now - self.last_evict < ce.COOL_DOWN_S:
            return []
        t = self.thresholds
        capacity = obs.node.ncpus * 1000
        node_avg = sum(self.node_window) / len(self.node_window)
        allocatable = {
            "cpu": capacity - int(self.reserved * 1000),
            "batch-cpu": None if self.batch is None else self.batch[0],
            "mid-cpu": None if self.mid is None else self.mid[0],
        }
        tasks, _ = et.cpu_tasks(self.evict_features, t, self._states(obs, cores), capacity, node_avg, allocatable, release)
        usage = int(node_avg * 1000) * 100 // capacity
        what["CPUEvict"] = (
            f"CPUEvict: {{names}} (node CPU {usage}% ≥ {t.cpu_evict_threshold_percent}% over {window} s)",
            {"node_usage_percent": float(usage)},
        )
        what["CPUAllocatableEvict"] = (
            f"CPUAllocatableEvict: {{names}} (requests above {t.cpu_allocatable_evict_threshold_percent}% of the allocatable)",
            {},
        )
        out = self._evictions(obs, tasks, what)
        if out:
            self.last_evict = obs.now
        return out

    def _be_cpu_release(self, obs: Observation, be_used: float, keep: int, window: float) -> tuple[int, tuple[str, dict[str, float]]]:
        """BECPUEvict's release (§4.2) from the BE triplet's window average and latest sample."""
        cpuset = parse_cpus(str(obs.knob(self.besteffort, Knob.CPUSET_CPUS)))
        quota = int(obs.knob(self.besteffort, Knob.CPU_CFS_QUOTA_US))
        live = [self.by_cgroup[cg] for cg in self.be if cg in self.by_cgroup and cg not in self.evicted]
        # cpuEvictPolicy: satisfaction against the real limit, or the advertised batch-cpu
        batch_cpu = None if self.batch is None else self.batch[0]
        limit = ce.be_limit(self.cpu_evict_policy, ce.real_limit(len(cpuset), quota), batch_cpu)
        latest = ce.BEState(be_used * 1000, sum(p.cpu_request for p in live), int(limit))
        self.evict_window = (self.evict_window + [latest])[-keep:]
        if len(self.evict_window) * self.interval < window / 3:
            return 0, ("", {})
        n = len(self.evict_window)
        avg = ce.BEState(
            sum(s.usage for s in self.evict_window) / n,
            int(sum(s.request for s in self.evict_window) / n),
            int(sum(s.limit for s in self.evict_window) / n),
        )
        lower = self.values["cpu_evict_be_satisfaction_lower_percent"]
        upper = self.values["cpu_evict_be_satisfaction_upper_percent"]
        release = ce.to_release(avg, latest, lower, upper, self.values["cpu_evict_be_usage_threshold_percent"])
        satisfaction = avg.limit / avg.request if avg.request else 0.0
        text = (
            f"BE CPU evict: {{names}} (BE limit {avg.limit / 1000:g} of {avg.request / 1000:g} CPUs requested = "
            f"{satisfaction:.0%} ≤ {lower:g}%, used {avg.usage / 1000:.2f}; give back {release}m to reach {upper:g}%)"
        )
        inputs = {"be_limit_milli": avg.limit, "be_request_milli": avg.request, "be_used_milli": avg.usage, "release_milli": release}
        return release, (text, inputs)

    def _memory_evict(self, obs: Observation, cores) -> list[Decision]:
        """koordlet's memory evictor (§4.4): BEMemoryEvict and MemoryEvict (node memory used =
        MemTotal − MemAvailable against the threshold) and MemoryAllocatableEvict (requests
        against the node's memory / batch-memory allocatable) in one round, killed with
        cgroup.kill; then a 4 s cool-down."""
        n = obs.node
        if n.mem_total <= 0 or obs.now - self.last_memory_evict < me.COOL_DOWN_S:
            return []
        t = self.thresholds
        used = n.mem_total - n.mem_available
        allocatable = {
            "memory": self.node_memory or n.mem_total,
            "batch-memory": None if self.batch is None else self.batch[1],
            "mid-memory": None if self.mid is None else self.mid[1],
        }
        states = self._states(obs, cores)
        tasks, _ = et.memory_tasks(self.evict_features, t, states, n.mem_total, used, allocatable)
        usage = used * 100 // n.mem_total
        threshold = t.memory_evict_threshold_percent
        release = next((task.to_release["memory"] for task in tasks if task.reason.endswith("MemoryEvict")), 0)
        node = f"node memory {usage}% ≥ {threshold}%; release {release / 2**20:.0f} MiB"
        what = {
            "BEMemoryEvict": (f"BE memory evict: {{names}} ({node})", {"usage_percent": float(usage), "release_bytes": float(release)}),
            "MemoryEvict": (f"MemoryEvict: {{names}} ({node})", {"usage_percent": float(usage), "release_bytes": float(release)}),
            "MemoryAllocatableEvict": (
                f"MemoryAllocatableEvict: {{names}} (requests above {t.memory_allocatable_evict_threshold_percent}% of the allocatable)",
                {},
            ),
        }
        out = self._evictions(obs, tasks, what)
        if out:
            self.last_memory_evict = obs.now
        return out

    def _batch_resource(self, obs: Observation, cores, node_used: float, pods_used: float) -> list[Decision]:
        """The slo-controller's batch-cpu/batch-memory (§5) from the NodeMetric koordlet
        reports every 60 s (usages averaged over 300 s), recorded when it would patch the
        node (a change above 10%, or 300 s since the last patch)."""
        if not self.pods:
            return []
        sample = {p.cgroup: cores(p.cgroup) for p in self.pods if p.cgroup in obs.cgroups and p.cgroup not in self.evicted}
        sample["system"] = max(node_used - pods_used, 0.0)
        keep = max(1, round(br.AGGREGATE_SECONDS / self.interval))
        self.usage_window = (self.usage_window + [sample])[-keep:]
        if int(obs.now // br.REPORT_INTERVAL_S) == int((obs.now - self.interval) // br.REPORT_INTERVAL_S):
            return []  # not a report time
        n = len(self.usage_window)
        # The NodeMetric averages every pod reported in the window, an evicted one too: it is
        # then "dangling" (metric, no longer listed) and counts by its metric's priority.
        keys = {k: None for s in self.usage_window for k in s}
        avg = {k: sum(s.get(k, 0.0) for s in self.usage_window) / n for k in keys}
        live = [p for p in self.pods if p.cgroup not in self.evicted]
        cpu_usage = {cg: v * 1000 for cg, v in avg.items() if cg != "system"}
        hp = br.hp_sums(live, cpu_usage, "cpu", {p.cgroup: p.is_hp for p in self.pods})
        capacity = obs.node.ncpus * 1000
        reserved = int(self.reserved * 1000)
        system = int(avg["system"] * 1000)
        cap_cpu, cap_mem = (
            self.values[k] if self.values[k] >= 0 else None for k in ("batch_cpu_threshold_percent", "batch_memory_threshold_percent")
        )
        cpu = br.batch_allocatable(capacity, self.values["cpu_reclaim_threshold_percent"], system, reserved, hp, threshold_percent=cap_cpu)
        memory = None
        if self.node_memory:
            # no memory model yet: every pod counts as one without a memory metric (its request)
            mem_hp = br.hp_sums(live, {}, "memory")
            memory = br.batch_allocatable(
                self.node_memory, self.values["memory_reclaim_threshold_percent"], 0, 0, mem_hp, threshold_percent=cap_mem
            )
        mid, reclaim = self._mid_resource(obs, cores, node_used, capacity, reserved, system, live)
        old, old_mid = self.batch, self.mid
        if (
            old is not None
            and old_mid is not None
            and not br.needs_sync(old[0], cpu, obs.now - self.batch_at)
            and (memory is None or not br.needs_sync(old[1], memory, obs.now - self.batch_at))
            and not any(br.needs_sync(old_mid[i], mid[i], obs.now - self.batch_at) for i in (0, 1))
        ):
            return []
        self.batch = (cpu, memory)
        self.mid = mid
        self.batch_at = obs.now
        margin = br.safety_margin(capacity, self.values["cpu_reclaim_threshold_percent"])
        mem_text = f", batch-memory {memory / 2**30:.1f} GiB" if memory is not None else ""
        return [
            Decision(
                obs.now,
                self.name,
                f"batch resources: batch-cpu {cpu / 1000:.2f} CPUs{mem_text} (capacity {capacity / 1000:g} − margin "
                f"{margin / 1000:g} − system {max(system, reserved) / 1000:.2f} − HP used {hp.used / 1000:.2f}, "
                f"{br.AGGREGATE_SECONDS} s averages over {n} samples); mid-cpu {mid[0] / 1000:.2f} CPUs, mid-memory "
                f"{mid[1] / 2**30:.1f} GiB (prod reclaimable {reclaim[0] / 1000:.2f} CPUs, {reclaim[1] / 2**30:.1f} GiB)",
                (),
                {
                    "batch_cpu_milli": cpu,
                    "batch_memory_bytes": memory or 0,
                    "mid_cpu_milli": mid[0],
                    "mid_memory_bytes": mid[1],
                    "prod_reclaimable_cpu_milli": reclaim[0],
                    "prod_reclaimable_memory_bytes": reclaim[1],
                    "hp_used_milli": hp.used,
                    "hp_request_milli": hp.request,
                    "system_used_milli": system,
                    "margin_milli": margin,
                },
            )
        ]

    def _mid_resource(
        self, obs: Observation, cores, node_used: float, capacity: int, reserved: int, system: int, live: list[Pod]
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        """koordlet's peak predictor trained on this report's last samples (one a minute, as
        its training interval), its prod reclaimable, and the slo-controller's Mid tier
        from it (policies/peak_prediction.py, batch_resource.mid_allocatable)."""
        n = obs.node
        memory = self.node_memory or n.mem_total
        node_memory_used = max(n.mem_total - n.mem_available, 0) if n.mem_total > 0 else 0
        samples = []
        for p in live:
            if p.cgroup in obs.cgroups:
                c = obs.cgroups[p.cgroup]
                samples.append((p.cgroup, pp.priority_class(p), cores(p.cgroup), float(max(c.memory_bytes - c.memory_file, 0))))
        self.predictor.train(obs.now, samples, node_used, float(node_memory_used))
        self.predictor.gc(obs.now)
        infos = [pp.PodInfo(p, obs.now - self.started, p.cgroup) for p in live]
        reclaim = pp.prod_reclaimable(
            infos,
            self.predictor,
            (capacity - reserved, memory),
            pp.Flags(self.values["prediction_cold_start_seconds"], int(self.values["prediction_safety_margin_percent"])),
        ).result
        # the Running/Pending pods that are neither mid, batch nor free: their own requests
        prod = [i.requests for i in infos if pp.priority_class(i.pod) in pp.RECLAIMABLE_FOR_PROD]
        requests = (sum(r[0] for r in prod), sum(r[1] for r in prod))
        unallocated = br.mid_unallocated((capacity, memory), (reserved, 0), (system, 0), requests)
        strategy = br.MidStrategy(
            cpu_threshold_percent=int(self.values["mid_cpu_threshold_percent"]),
            memory_threshold_percent=int(self.values["mid_memory_threshold_percent"]),
            unallocated_percent=int(self.values["mid_unallocated_percent"]),
        )
        usage = (int(node_used * 1000), node_memory_used)
        return br.mid_allocatable(strategy, (capacity, memory), unallocated, usage, reclaim), reclaim

    def _by_cpuset(self, obs: Observation, milli: int, why: str, inputs: dict[str, float]) -> list[Decision]:
        old = parse_cpus(str(obs.knob(self.besteffort, Knob.CPUSET_CPUS)))
        nprocs = len(obs.cpus)
        size = cs.cpuset_size(milli, len(old), nprocs)
        reserved = set(range(int(round(self.reserved))))  # reserved CPUs: the lowest ids
        new = cs.be_cpuset(obs.cpus, size, self.lsr_cpus, self.lse_cpus, reserved)
        writes: list[KnobWrite] = []
        if int(obs.knob(self.besteffort, Knob.CPU_CFS_QUOTA_US)) != -1:
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

    def _by_cfs_quota(self, obs: Observation, milli: int, why: str, inputs: dict[str, float]) -> list[Decision]:
        current = int(obs.knob(self.besteffort, Knob.CPU_CFS_QUOTA_US))
        new = cs.cfs_quota(milli, current, obs.node.ncpus)
        writes: list[KnobWrite] = []
        # all CPUs but the reserved ones and LSE pods' (§1.2)
        all_cpus = format_cpus({c.cpu for c in obs.cpus} - set(range(int(round(self.reserved)))) - self.lse_cpus)
        if str(obs.knob(self.besteffort, Knob.CPUSET_CPUS)) != all_cpus:
            # applying one policy recovers the other: BE cpusets back to all CPUs, parent first
            writes += [KnobWrite(cg, Knob.CPUSET_CPUS, all_cpus) for cg in [self.besteffort, *self.be]]
        if new != current:
            writes.append(KnobWrite(self.besteffort, Knob.CPU_CFS_QUOTA_US, new))
        if not writes:
            return []
        return [Decision(obs.now, self.name, f"CPU suppress: BE cfs_quota {current}→{new} µs ({why})", tuple(writes), inputs)]
