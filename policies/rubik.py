"""openEuler rubik's features as a `Policy` (../shared/reference/rubik.md): absolute
preemption (offline cgroups get cpu.qos_level = -1, policies/preemption.py; the SMT expeller
is the kernel's `kernel.smt_expeller`), quota burst (policies/quota_burst.py), quotaTurbo
(policies/quota_turbo.py) at its syncInterval, dynMemory (policies/dyn_memory.py: FSSR, the
offline pods' memory.high from MemFree every 5 s, or rubik 1.0's dynlevel), PSI interference
eviction (policies/psi_evict.py), the node watermark evictions cpuevict / memoryevict
(policies/watermark_evict.py), ioCost and ioLimit (policies/io_cost.py), pod bandwidth
management (policies/net_qos.py), dynCache's resctrl groups and dynamic level
(policies/dyn_cache.py, through the seam's resctrl actions) and the CPI interference detector
(policies/cpi.py). docs/conformance.md ("rubik"): how each follows rubik's own unit tests.

Configuration (the scenario's `[policy]` table): which cgroups are offline, which are under
quotaTurbo, the burst of each quota-burst cgroup, `dyn_memory = "fssr"` or `"dynlevel"`,
`psi = { resource = ["memory"] }` (with `online`, default the pods that are not offline),
`cpu_evict = { interval, windows, threshold, cooldown }`, `memory_evict = { interval,
threshold, cooldown }`, `dyn_cache = { default_limit_mode, adjust_interval, perf_duration,
l3_percent = {low, mid, high}, mem_band_percent = {…} }` with `cache_limit = {
cgroup = level }`, `cpi = {}` (or with its timers, policies/cpi.py), and quotaTurbo's tunables with rubik's defaults; `io_cost = { rbps = …, …
}` (the linear model), `io_limit = { cgroup = { device_write_bps = … } }`, `net = true`
(preemption of the network).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policies import cpi as ci
from policies import dyn_cache as dc
from policies import dyn_memory as dm
from policies import io_cost as ic
from policies import net_qos as nq
from policies import preemption as pre
from policies import psi_evict as pe
from policies import quota_burst as qb
from policies import quota_turbo as qt
from policies import watermark_evict as we
from policies.cgroup import Knob, KnobWrite, NodeStats, utilisation
from policies.pods import Pod
from policies.policy import Decision, Observation, Param, Policy, PolicyError, cgroup_names
from policies.resctrl import ResctrlAssign, ResctrlWrite


class Rubik(Policy):
    name = "rubik"
    params = (
        Param("high_water_mark", 0, 100, qt.HIGH_WATER_MARK, integer=True, doc="quotaTurbo.highWaterMark (%)"),
        Param("alarm_water_mark", 0, 100, qt.ALARM_WATER_MARK, integer=True, doc="quotaTurbo.alarmWaterMark (%)"),
        Param("sync_interval", 0.1, 10.0, 0.1, doc="quotaTurbo.syncInterval (s)"),
        Param("elevate_limit", 0, 100, qt.ELEVATE_LIMIT, doc="% of node CPUs added per round at most"),
        Param("slow_fallback_ratio", 0, 1, qt.SLOW_FALLBACK_RATIO),
        Param("cpu_floating_limit", 0, 100, qt.CPU_FLOATING_LIMIT),
        Param("psi_interval", 10, 30, pe.INTERVAL_S, doc="psi.interval (s)"),
        Param("psi_avg10_threshold", 5.0, 100.0, pe.AVG10_THRESHOLD, doc="psi.avg10threshold (%)"),
        # ioCost: rubik's offline weight is a constant (10); here a what-if to tune
        Param("io_cost_offline_weight", 1, 1000, ic.OFFLINE_WEIGHT, integer=True, doc="blkio.cost.weight of offline pods (rubik: 10)"),
        Param("net_waterline_mb", 20, nq.MAX_MB, nq.WATERLINE_MB, integer=True, doc="preemption.net.waterline (MiB/s)"),
        Param("net_low_mb", 1, nq.MAX_MB, nq.LOW_MB, integer=True, doc="preemption.net.bandwidthLow (MiB/s)"),
        Param("net_high_mb", 1, nq.MAX_MB, nq.HIGH_MB, integer=True, doc="preemption.net.bandwidthHigh (MiB/s)"),
    )
    # the water marks are quotaTurbo's config-file keys (rubik.md: integers, 0 <= H < A <= 100)
    tuned = ("high_water_mark", "alarm_water_mark", "elevate_limit")

    def __init__(self, config: Mapping[str, Any] | None = None, where: str = "policy") -> None:
        config = dict(config or {})
        self.offline = cgroup_names(config.pop("offline", []), f"{where}.offline")
        self.turbo = cgroup_names(config.pop("quota_turbo", []), f"{where}.quota_turbo")
        burst = config.pop("quota_burst", {})
        if not isinstance(burst, Mapping) or not all(isinstance(v, int) and v >= 0 for v in burst.values()):
            raise PolicyError(f"{where}.quota_burst: must map cgroup names to burst µs (integers >= 0)")
        self.burst: dict[str, int] = dict(burst)
        # dynMemory: {"policy": "fssr"} in rubik's config (the only policy rubik 2 accepts), or
        # rubik 1.0's "dynlevel" strategy
        self.dyn_memory = config.pop("dyn_memory", None)
        if self.dyn_memory not in (None, "fssr", "dynlevel"):
            raise PolicyError(
                f'{where}.dyn_memory: "fssr" (rubik\'s dynMemory policy) or "dynlevel" (rubik 1.0\'s) (got {self.dyn_memory!r})'
            )
        self.fssr: dm.Fssr | None = None
        self.dynlevel: dm.DynLevel | None = None
        self.next_fssr = 0.0
        # PSI interference eviction: which cgroups are online (default: the pods that are
        # not offline)
        self.psi = pe.parse(config.pop("psi", None), f"{where}.psi")
        self.online = cgroup_names(config.pop("online", []), f"{where}.online")
        self.next_psi = 0.0
        self.io_model = ic.parse_model(config.pop("io_cost", None), f"{where}.io_cost")
        self.io_limits = ic.parse_limits(config.pop("io_limit", None), f"{where}.io_limit")
        # dynCache (policies/dyn_cache.py): its configuration and each offline pod's
        # `volcano.sh/cache-limit` level; the cache's cbm_mask and domains are the node's
        self.dyn_cache = dc.parse(config.pop("dyn_cache", None), f"{where}.dyn_cache")
        self.dynamic: dc.Dynamic | None = None
        self.numa = 1
        self.ways = 0
        self.cache_limit = config.pop("cache_limit", {})
        if not isinstance(self.cache_limit, Mapping) or not all(v in dc.LEVELS for v in self.cache_limit.values()):
            raise PolicyError(f"{where}.cache_limit: must map offline cgroups to a level ({', '.join(dc.LEVELS)})")
        # CPI interference detection (policies/cpi.py): its pods are set in use_pods
        self.cpi = ci.parse(config.pop("cpi", None), f"{where}.cpi")
        self.cpi_service: ci.Service | None = None
        self.net = config.pop("net", False)
        if not isinstance(self.net, bool):
            raise PolicyError(f'{where}.net: must be true or false (rubik\'s preemption.resource contains "net")')
        self.evicted: set[str] = set()
        # each service's last reading of the offline pods' CPU usage (its own sample pairs)
        self.prev_usage: dict[str, dict[str, int]] = {}
        # the node watermark eviction services (policies/watermark_evict.py)
        self.cpu_evict = None if (t := config.pop("cpu_evict", None)) is None else we.cpu_config(t, f"{where}.cpu_evict")
        self.memory_evict = None if (t := config.pop("memory_evict", None)) is None else we.memory_config(t, f"{where}.memory_evict")
        self.cpu_window = we.CpuWindow(self.cpu_evict.windows if self.cpu_evict else 0)
        self.cooldowns = {"cpu": we.Cooldown(), "memory": we.Cooldown()}
        self.next_evict = {"cpu": 0.0, "memory": 0.0}
        super().__init__(config, where)
        if qt.check_marks(self.values["high_water_mark"], self.values["alarm_water_mark"]) is not None:
            raise PolicyError(f"{where}.high_water_mark: must be below alarm_water_mark")
        if not self.values["net_low_mb"] < self.values["net_high_mb"]:
            raise PolicyError(f"{where}.net_low_mb: must be below net_high_mb (rubik: bandwidthLow < bandwidthHigh)")
        self.containers: list[qt.Container] = []
        self.util_history: list[tuple[int, float]] = []  # (t ns, node util %)
        self.prev_node: NodeStats | None = None

    def use_pods(self, pods: tuple[Pod, ...]) -> None:
        super().use_pods(pods)
        # with pods and no `offline` list: the BE pods are rubik's offline pods
        self.offline = self.offline or [p.cgroup for p in pods if p.is_be]
        self.online = self.online or [p.cgroup for p in pods if p.cgroup not in self.offline]
        if self.cpi is not None:
            # rubik's volcano.sh/cpi annotation: the online pods are watched, the offline limited
            self.cpi_service = ci.Service(self.cpi, self.online, self.offline)

    @property
    def interval(self) -> float:
        return self.values["sync_interval"]

    def watch(self) -> Iterable[tuple[str, Knob]]:
        if self.turbo:  # quotaTurbo's PreStart reads every pod's quota and period
            for p in self.pods:
                yield (p.cgroup, Knob.CPU_CFS_QUOTA_US)
                yield (p.cgroup, Knob.CPU_CFS_PERIOD_US)
        for cg in self.turbo:
            yield (cg, Knob.CPU_CFS_QUOTA_US)
            yield (cg, Knob.CPU_CFS_PERIOD_US)
            for anc in qt.quota_chain(cg)[1:]:
                yield (anc, Knob.CPU_CFS_QUOTA_US)
        for cg in self.burst:
            yield (cg, Knob.CPU_CFS_QUOTA_US)
            yield (cg, Knob.CPU_CFS_PERIOD_US)
        if self.psi:
            for cg in self.online:
                for r in self.psi:
                    yield (cg, Knob.CPU_PRESSURE if r == "cpu" else Knob.MEMORY_PRESSURE)
        if self.dyn_memory == "dynlevel":
            for cg in self.offline:
                yield (cg, Knob.MEMORY_LIMIT)
        if self.cpi_service is not None:
            for cg in self.cpi_service.offline:
                yield (cg, Knob.CPU_CFS_QUOTA_US)

    def perf_watch(self) -> Iterable[str]:
        cgs = set(self.cpi_service.online) if self.cpi_service is not None else set()
        if self.dyn_cache is not None and "dynamic" in self._dyn_levels().values():
            cgs |= set(self.online)
        return sorted(cgs)

    def watched_cgroups(self) -> Iterable[str]:
        cgs = {cg for cg, _ in self.watch()}
        evict = self.cpu_evict or self.memory_evict
        pods = set(self.offline) | (set(self.online) if self.memory_evict else set())
        cpi = set(self.cpi_service.cgroups()) if self.cpi_service is not None else set()
        return (cgs | pods if self.psi or self.dyn_memory == "dynlevel" or evict else cgs) | cpi

    def attach(self, obs: Observation) -> list[Decision]:
        # preemption (policies/preemption.py): an offline pod's cpu.qos_level = -1
        out = [
            Decision(
                obs.now,
                self.name,
                f"{cg} is offline: cpu.qos_level = -1 (absolute preemption)",
                tuple(k for q in pre.set_qos_level(pre.PodInfo(cg, (), pre.OFFLINE_POD), ("cpu",)) if (k := q.knob_write())),
            )
            for cg in self.offline
        ]
        ncpus = obs.node.ncpus
        for cg, burst in self.burst.items():
            quota, period = int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US)), int(obs.knob(cg, Knob.CPU_CFS_PERIOD_US))
            # quotaburst.go's checks (policies/quota_burst.py): below the node's capacity and
            # not above the quota; each configured cgroup is a container of its own
            files = {qb.BURST: "0", qb.QUOTA: str(quota), qb.PERIOD: str(period)}
            why = qb.refusal(burst, files, ncpus)
            if why is None:
                out.append(
                    Decision(
                        obs.now,
                        self.name,
                        f"{cg}: quota burst {burst} µs",
                        (KnobWrite(cg, Knob.CPU_CFS_BURST_US, burst),),
                        {"quota_us": quota},
                    )
                )
            else:
                out.append(Decision(obs.now, self.name, f"{cg}: quota burst {burst} µs refused ({why})"))
        recovered = self._turbo_prestart(obs)
        out += recovered
        reset = {w.cgroup: int(w.value) for d in recovered for w in d.writes}  # the last write of each wins
        for cg in self.turbo:
            quota, period = int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US)), int(obs.knob(cg, Knob.CPU_CFS_PERIOD_US))
            quota = reset.get(cg, quota)  # AddCgroup runs after PreStart: it reads the recovered quota
            limit = quota / period if quota > 0 else 0.0
            s = obs.cgroups[cg]
            readings = {
                "period": period,
                "quota": quota,
                "nr_throttled": s.nr_throttled,
                "throttled_ns": s.throttled_ns,
                "usage": s.usage_ns,
            }
            try:  # AddCgroup: 0 < cpuLimit < NumCPU; its first usage sample is taken now
                self.containers.append(qt.new_container(cg, limit, ncpus, True, readings, round(obs.now * 1e9)))
            except qt.QuotaTurboError:
                out.append(Decision(obs.now, self.name, f"{cg}: not under quotaTurbo (limit {limit:g} CPUs)"))
        self.prev_node = obs.node
        self.util_history = [(round(obs.now * 1e9), 0.0)]  # the very first sample records 0 (rubik.md §2.2)
        if self.dyn_memory == "fssr":
            out += self._fssr_start(obs)
        elif self.dyn_memory == "dynlevel":
            self.dynlevel = dm.DynLevel()
            self.next_fssr = obs.now + dm.FSSR_INTERVAL_S
        return out + self._io_net(obs) + self._dyn_cache(obs) + self._cpi_tick(obs)

    def uses_resctrl(self) -> bool:
        return self.dyn_cache is not None

    def _dyn_levels(self) -> dict[str, str]:
        """syncLevel for every offline pod: its group's level."""
        assert self.dyn_cache is not None
        return {cg: dc.level(self.cache_limit.get(cg), self.dyn_cache.default_limit_mode) for cg in self.offline}

    def _dyn_cache(self, obs: Observation) -> list[Decision]:
        """initCacheLimitDir and syncCacheLimit: the five rubik_<level> groups' schemata, one
        L3 and one MB entry per NUMA node with the node's cbm_mask (a NUMA node without an L3
        domain of its own is refused by the kernel, as on a host), then each offline pod's
        tasks to its level's group."""
        if self.dyn_cache is None or obs.resctrl is None:
            return []
        self.numa = len({c.node for c in obs.cpus}) or 1
        self.ways = dc.cbm_ways(obs.resctrl.cbm_mask)
        groups = dc.groups(self.dyn_cache, self.numa, obs.resctrl.cbm_mask)
        writes = [ResctrlWrite(g, text) for g, text in groups.items()]
        tasks = [ResctrlAssign(dc.PREFIX + lv, cg) for cg, lv in self._dyn_levels().items()]
        out = [Decision(obs.now, self.name, "dynCache: " + "; ".join(str(a) for a in (*writes, *tasks)), resctrl=(*writes, *tasks))]
        if "dynamic" in self._dyn_levels().values():
            c = self.dyn_cache
            self.dynamic = dc.Dynamic(c, (c.l3.low, c.mb.low), obs.now)
        return out

    def _dyn_cache_tick(self, obs: Observation) -> list[Decision]:
        """startDynamic: the dynamic group's percents from the online pods' cache misses."""
        if self.dynamic is None:
            return []
        nxt = self.dynamic.step(obs.now, {cg: obs.perf[cg] for cg in self.online})
        if nxt is None:
            return []
        text = dc.schemata(nxt[0], nxt[1], self.numa, self.ways)
        return [
            Decision(
                obs.now,
                self.name,
                f"dynCache dynamic: L3 {nxt[0]} %, MB {nxt[1]} %",
                resctrl=(ResctrlWrite(dc.PREFIX + "dynamic", text),),
                inputs={"l3_percent": nxt[0], "mb_percent": nxt[1]},
            )
        ]

    def _io_net(self, obs: Observation) -> list[Decision]:
        """ioCost, ioLimit and the network's preemption: static, written once at start."""
        out = []
        if self.io_model is not None:
            model = ic.model_text(self.io_model)
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"ioCost: blkio.cost.model {model}; vrate pinned at 100%",
                    (KnobWrite("", Knob.BLKIO_COST_MODEL, model), KnobWrite("", Knob.BLKIO_COST_QOS, ic.QOS)),
                )
            )
            w = int(self.values["io_cost_offline_weight"])
            online = [cg for cg in self.online if cg not in self.offline]
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"ioCost: blkio.cost.weight {ic.ONLINE_WEIGHT} online, {w} offline",
                    tuple(ic.weights(online, self.offline, w)),
                )
            )
        for cg, limits in self.io_limits.items():
            what = ", ".join(f"{k.v1.removeprefix('blkio.throttle.')} {v}" for k, v in limits.items()) or "cleared"
            out.append(Decision(obs.now, self.name, f"ioLimit {cg}: {what}", tuple(ic.limit_writes({cg: limits}))))
        if self.net:
            v = {k: int(self.values[f"net_{k}_mb"]) for k in ("waterline", "low", "high")}
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"net: offline at {v['low']} MiB/s while online ≥ {v['waterline']} MiB/s, else {v['high']} MiB/s",
                    tuple(nq.writes(self.offline, v["waterline"], v["low"], v["high"])),
                )
            )
        return out

    def _fssr_start(self, obs: Observation) -> list[Decision]:
        total = obs.node.mem_total
        if total <= 0:
            return [Decision(obs.now, self.name, "dynMemory fssr: the node's memory is unknown ([node] memory): off")]
        self.fssr = dm.Fssr.start(total)
        self.next_fssr = obs.now + dm.FSSR_INTERVAL_S
        # rubik writes memory.high_async_ratio = 80 first (openEuler kernels; refused elsewhere)
        ratio = Decision(
            obs.now,
            self.name,
            f"dynMemory fssr: offline memory.high_async_ratio = {dm.HIGH_ASYNC_RATIO}",
            tuple(KnobWrite(cg, Knob.MEMORY_HIGH_ASYNC_RATIO, dm.HIGH_ASYNC_RATIO) for cg in self.offline),
        )
        return [
            ratio,
            self._fssr_write(obs.now, self.fssr.high, f"dynMemory fssr: offline memory.high = 80% of {total / 2**30:.1f} GiB", {}),
        ]

    def _fssr_write(self, now: float, high: int, what: str, inputs: dict[str, float]) -> Decision:
        return Decision(now, self.name, what, tuple(KnobWrite(cg, Knob.MEMORY_HIGH, high) for cg in self.offline), inputs)

    def _dynlevel_tick(self, obs: Observation) -> list[Decision]:
        """rubik 1.0's dynlevel (policies/dyn_memory.py), every checkInterval (5 s): the
        pressure level from MemFree / MemTotal, then that level's writes to the offline
        cgroups. memory.limit_in_bytes is applied; the files the simulator has no knob for
        (soft limit, force_empty, drop_caches) are recorded in the decision only."""
        d = self.dynlevel
        if d is None or obs.now < self.next_fssr or obs.node.mem_total <= 0:
            return []
        self.next_fssr += dm.FSSR_INTERVAL_S
        free = obs.node.mem_free
        before = d.level
        d.transition(free / obs.node.mem_total)
        live = [cg for cg in self.offline if cg not in self.evicted]
        usage = {cg: obs.cgroups[cg].memory_bytes for cg in live}
        limits = {cg: int(obs.knob(cg, Knob.MEMORY_LIMIT)) for cg in live}
        writes = d.reclaim(free, usage, limits)
        if not writes and d.level == before:
            return []
        applied = tuple(k for w in writes if (k := w.knob_write()) is not None)
        unmodelled = "; ".join(str(w) for w in writes if w.knob_write() is None)
        what = f"dynMemory dynlevel: {before.name.lower()} → {d.level.name.lower()} (MemFree {free / 2**30:.2f} GiB)"
        return [Decision(obs.now, self.name, what + (f"; not modelled: {unmodelled}" if unmodelled else ""), applied, {"mem_free": free})]

    def _fssr_tick(self, obs: Observation) -> list[Decision]:
        if self.fssr is None or obs.now < self.next_fssr:
            return []
        self.next_fssr += dm.FSSR_INTERVAL_S
        f, free = self.fssr, obs.node.mem_free
        before = f.high
        new = f.step(free)
        if new is None:
            return []
        way = "suppress" if new < before else "recover"
        return [
            self._fssr_write(
                obs.now,
                new,
                f"dynMemory fssr {way}: MemFree {free / 2**30:.2f} GiB, offline memory.high {before / 2**30:.2f} → {new / 2**30:.2f} GiB",
                {"mem_free": free, "memory_high": new},
            )
        ]

    def _cpu_used(self, obs: Observation, live: list[str], service: str) -> dict[str, float]:
        """Each offline pod's CPU time since `service` last looked (the pod CPU utilisation
        rubik's analyzer computes from its last two samples, up to the common 1/Δt factor)."""
        prev = self.prev_usage.get(service, {})
        self.prev_usage[service] = {cg: obs.cgroups[cg].usage_ns for cg in live}
        return {cg: float(obs.cgroups[cg].usage_ns - prev.get(cg, 0)) for cg in live}

    def _evict_tick(self, obs: Observation) -> list[Decision]:
        """cpuevict and memoryevict (policies/watermark_evict.py): each at its interval,
        unless cooling down after its last check."""
        out = []
        for kind, cfg in (("cpu", self.cpu_evict), ("memory", self.memory_evict)):
            if cfg is None or obs.now + we.EPS < self.next_evict[kind]:
                continue
            self.next_evict[kind] = obs.now + cfg.interval
            if kind == "cpu":
                self.cpu_window.collect(obs.now, obs.node)  # sampled even while blocked
            if not self.cooldowns[kind].ready(obs.now):
                continue
            live = [cg for cg in self.offline if cg not in self.evicted]
            self.cooldowns[kind].start(obs.now, cfg.cooldown)  # every check, evicting or not
            if not live:
                continue
            if kind == "cpu":
                level, usage = self.cpu_window.util(), self._cpu_used(obs, live, "cpuevict")
            else:
                cached = sum(obs.cgroups[cg].memory_file for cg in set(self.online) | set(live))  # Cached, as far as seen
                level = we.mem_used_percent(obs.node.mem_total, obs.node.mem_free, cached=cached)
                usage = {cg: float(obs.cgroups[cg].memory_bytes) for cg in live}
            if level < cfg.threshold:
                continue
            victim = pe.pick(kind, live, usage)
            if victim is None:
                continue
            self.evicted.add(victim)
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"{kind}evict: node {kind} {level:.1f}% >= {cfg.threshold}%: evict {victim}",
                    (KnobWrite(victim, Knob.CGROUP_KILL, 1),),
                    {"util": level},
                )
            )
        return out

    def _psi_tick(self, obs: Observation) -> list[Decision]:
        """PSI interference eviction (policies/psi_evict.py)."""
        if not self.psi or obs.now < self.next_psi:
            return []
        self.next_psi = obs.now + self.values["psi_interval"]
        live = [cg for cg in self.offline if cg not in self.evicted]
        cpu_used = self._cpu_used(obs, live, "psi")
        if not self.online or not live:
            return []
        out = []
        threshold = self.values["psi_avg10_threshold"]
        for r in self.psi:
            knob = Knob.CPU_PRESSURE if r == "cpu" else Knob.MEMORY_PRESSURE
            hot = next(((cg, a) for cg in self.online if (a := pe.some_avg10(str(obs.knob(cg, knob)))) > threshold), None)
            if hot is None:
                continue
            usage = (
                {cg: float(obs.cgroups[cg].memory_bytes) for cg in live} if r == "memory" else {cg: float(v) for cg, v in cpu_used.items()}
            )
            victim = pe.pick(r, live, usage)
            if victim is None:
                continue
            live.remove(victim)
            self.evicted.add(victim)
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"PSI eviction: {hot[0]} {r}.pressure some avg10 {hot[1]:.2f} > {threshold:g}: evict {victim}",
                    (KnobWrite(victim, Knob.CGROUP_KILL, 1),),
                    {"avg10": hot[1]},
                )
            )
        return out

    def _turbo_prestart(self, obs: Observation) -> list[Decision]:
        """The quotaTurbo service's PreStart (recoverOnePodQuota, policies/quota_turbo.py):
        every pod's CPU quota back to its limit × period (-1 without a limit), whatever an
        earlier run left there. One container per pod: the pod's cgroup is its container.
        Only pods whose quota differs get a decision (on a fresh node none do)."""
        if not self.turbo:
            return []
        out = []
        for p in self.pods:
            period = int(obs.knob(p.cgroup, Knob.CPU_CFS_PERIOD_US))
            writes = qt.reset_pod_quotas(p.cgroup, {p.cgroup: (p.cpu_limit or 0) / 1000}, {p.cgroup: period})
            current, target = int(obs.knob(p.cgroup, Knob.CPU_CFS_QUOTA_US)), int(writes[-1].value)
            if current != target:
                text = f"quotaTurbo PreStart: {p.cgroup} quota {current}→{target} µs (its limit × period)"
                out.append(Decision(obs.now, self.name, text, tuple(writes)))
        return out

    def _turbo_sync(self, obs: Observation) -> list[Decision]:
        """syncCgroups: a quotaTurbo container that left (here: its pod was evicted) gets its
        quota back to cpuLimit × period before it is forgotten (RemoveCgroup)."""
        wanted = {cg: 0.0 for cg in self.turbo if cg not in self.evicted}
        remove, _ = qt.sync_plan([c.cgroup for c in self.containers], wanted)
        out = []
        for c in [c for c in self.containers if c.cgroup in remove]:
            self.containers.remove(c)
            quotas = {cg: int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US)) for cg in qt.quota_chain(c.cgroup)}
            writes = tuple(qt.recover_quota(c, True, quotas))
            out.append(Decision(obs.now, self.name, f"quotaTurbo {c.cgroup} left: quota back to {c.origin} µs", writes))
        return out

    def _cpi_tick(self, obs: Observation) -> list[Decision]:
        """CPI interference detection (policies/cpi.py)."""
        svc = self.cpi_service
        if svc is None:
            return []
        usage = {cg: obs.cgroups[cg].usage_ns for cg in svc.cgroups()}
        perf = {cg: (obs.perf[cg].cycles, obs.perf[cg].instructions) for cg in svc.online}
        quota = {cg: int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US)) for cg in svc.offline}
        writes = svc.step(round(obs.now * 1e9), usage, perf, quota)
        return [Decision(obs.now, self.name, why, (KnobWrite(cg, Knob.CPU_CFS_QUOTA_US, q),)) for why, cg, q in writes]

    def tick(self, obs: Observation) -> list[Decision]:
        fssr = self._fssr_tick(obs) + self._dynlevel_tick(obs) + self._psi_tick(obs) + self._evict_tick(obs)
        fssr += self._cpi_tick(obs) + self._dyn_cache_tick(obs)
        fssr += self._turbo_sync(obs)
        if not self.containers:
            return fssr
        assert self.prev_node is not None  # attach sets it, and fills self.containers
        util = utilisation(self.prev_node, obs.node)
        self.prev_node = obs.node
        self.util_history = qt.record_util(self.util_history, round(obs.now * 1e9), util)
        for c in self.containers:
            s = obs.cgroups[c.cgroup]
            c.period = int(obs.knob(c.cgroup, Knob.CPU_CFS_PERIOD_US))
            c.quota = int(obs.knob(c.cgroup, Knob.CPU_CFS_QUOTA_US))
            c.prev_nr_throttled, c.prev_throttled_ns = c.nr_throttled, c.throttled_ns
            c.nr_throttled, c.throttled_ns = s.nr_throttled, s.throttled_ns
            c.usage.append((round(obs.now * 1e9), s.usage_ns))
        v = self.values
        marks = qt.Marks(v["high_water_mark"], v["alarm_water_mark"], v["elevate_limit"], v["slow_fallback_ratio"], v["cpu_floating_limit"])
        nxt = qt.adjust_quota(self.containers, util, [u for _, u in self.util_history], obs.node.ncpus, marks)
        out = []
        for c in self.containers:
            delta = nxt[c.cgroup] - c.quota
            if delta == 0:
                continue
            # The same delta on the pod cgroups above (quota_writes: parents first when growing).
            quotas = {cg: int(obs.knob(cg, Knob.CPU_CFS_QUOTA_US)) for cg in qt.quota_chain(c.cgroup)}
            quotas[c.cgroup] = c.quota
            writes = tuple(qt.quota_writes(c.cgroup, quotas, delta))
            why = f"throttled {c.new_nr_throttled} periods" if c.new_nr_throttled else "not throttled"
            out.append(
                Decision(
                    obs.now,
                    self.name,
                    f"quotaTurbo {c.cgroup}: quota {c.quota}→{nxt[c.cgroup]} µs ({why}, node {util:.1f}% busy)",
                    writes,
                    {"util": util, "new_nr_throttled": c.new_nr_throttled, "limit_cpus": c.limit},
                )
            )
        return fssr + out
