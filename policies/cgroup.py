"""The one seam (../shared/DESIGN.md): a node and its cgroups as a policy sees them.

Every operation maps 1:1 to a kernel file. A `Knob` knows its cgroup v1 and v2 file names and
how a value converts between them, so a policy speaks one vocabulary (the v1 names and units,
which are the simulator's) and each backend writes what its kernel has. Policies never touch
a backend directly: they return `KnobWrite`s, and the runner applies them through a backend —
the simulator's here, the host's (v1 or v2) in `replay/`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from policies import resctrl as rc
from policies.perf import PerfCounters
from policies.resctrl import ResctrlAction, ResctrlInfo

if TYPE_CHECKING:
    from sim.environment import NodeEnvironment


@dataclass(frozen=True)
class Values:
    """What a knob file takes. An integer in lo..hi (None: unbounded), or only the values of
    `only`; `none` is the value beside the range that means "no limit" (-1). Or text (a CPU
    list, a node-wide setting, a pressure reading)."""

    lo: int | None = None
    hi: int | None = None
    only: tuple[int, ...] | None = None
    none: int | None = None
    text: bool = False

    def accepts(self, v: object) -> bool:
        if self.text:
            return isinstance(v, str)
        if isinstance(v, bool) or not isinstance(v, int):
            return False
        if self.only is not None:
            return v in self.only
        if self.none is not None and v == self.none:
            return True
        return (self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)

    def bounds(self) -> dict[str, int]:
        """The range as pydantic's Field takes it (ge/le), "no limit" included."""
        lo = self.lo if self.none is None or self.lo is None else min(self.lo, self.none)
        return {k: v for k, v in (("ge", lo), ("le", self.hi)) if v is not None}


TEXT = Values(text=True)
FLAG = Values(only=(0, 1))
COUNT = Values(lo=0)  # bytes, bytes/s, IO/s: >= 0 (0 is "none" for a throttle)
LIMIT = Values(lo=0, none=-1)  # a size in bytes, -1: no limit


class Knob(enum.Enum):
    """Every cgroup file colosim knows, declared once: its v1 name, its v2 counterpart (None
    where v2 has none), its controller, what it takes (`Values`), its unit, and whether it
    exists only at the root (a node-wide setting) or is read-only. The seam, the scenario's
    [cgroups] bounds and the host backends' checks derive from this table."""

    CPU_SHARES = ("cpu.shares", "cpu.weight", "cpu", Values(lo=2, hi=262_144))  # MIN_SHARES..MAX_SHARES (2^18)
    CPU_IDLE = ("cpu.idle", "cpu.idle", "cpu", FLAG)
    CPU_QOS_LEVEL = ("cpu.qos_level", "cpu.qos_level", "cpu", Values(only=(-1, 0)))  # openEuler only (v1)
    # CFS bandwidth (tg_set_cfs_bandwidth's limits; burst <= quota is checked across knobs)
    CPU_CFS_QUOTA_US = ("cpu.cfs_quota_us", "cpu.max", "cpu", Values(lo=1_000, none=-1), "µs")
    CPU_CFS_PERIOD_US = ("cpu.cfs_period_us", "cpu.max", "cpu", Values(lo=1_000, hi=1_000_000), "µs")
    CPU_CFS_BURST_US = ("cpu.cfs_burst_us", "cpu.max.burst", "cpu", COUNT, "µs")
    CPUSET_CPUS = ("cpuset.cpus", "cpuset.cpus", "cpuset", TEXT)
    CPUSET_MEMS = ("cpuset.mems", "cpuset.mems", "cpuset", TEXT)
    # write-only, 1 kills every task of the subtree (v2, Linux >= 5.14; replay emulates it on
    # v1 by signalling cgroup.procs): an agent's eviction
    CGROUP_KILL = ("cgroup.kill", "cgroup.kill", "cgroup", Values(only=(1,)))
    # memcg, in bytes (-1: no limit); memory.high/low/min exist on v1 only in vendor kernels
    # (Alibaba Cloud Linux, openEuler)
    MEMORY_LIMIT = ("memory.limit_in_bytes", "memory.max", "memory", LIMIT, "bytes")
    MEMORY_HIGH = ("memory.high", "memory.high", "memory", LIMIT, "bytes")
    MEMORY_LOW = ("memory.low", "memory.low", "memory", COUNT, "bytes")
    MEMORY_MIN = ("memory.min", "memory.min", "memory", COUNT, "bytes")
    MEMORY_OOM_GROUP = ("memory.oom.group", "memory.oom.group", "memory", FLAG)
    # vendor memcg files: Alibaba Cloud Linux (async reclaim watermarks, OOM priority) and
    # openEuler (memory.high_async_ratio)
    MEMORY_WMARK_RATIO = ("memory.wmark_ratio", "memory.wmark_ratio", "memory", Values(lo=0, hi=100), "%")
    MEMORY_WMARK_SCALE_FACTOR = ("memory.wmark_scale_factor", "memory.wmark_scale_factor", "memory", Values(lo=1, hi=1000), "1/10000")
    # Alibaba Cloud Linux's memcg global-min-watermark adjustment (cgroup v1 only, not on the
    # root; Documentation/alibaba/interfaces.rst): −25..50 % of [0, WMARK_MIN] below the
    # global min or of [WMARK_MIN, WMARK_LOW] above it
    MEMORY_WMARK_MIN_ADJ = ("memory.wmark_min_adj", None, "memory", Values(lo=-25, hi=50), "%")
    MEMORY_PRIORITY = ("memory.priority", "memory.priority", "memory", Values(lo=0, hi=12))
    MEMORY_USE_PRIORITY_OOM = ("memory.use_priority_oom", "memory.use_priority_oom", "memory", FLAG)
    MEMORY_HIGH_ASYNC_RATIO = ("memory.high_async_ratio", "memory.high_async_ratio", "memory", Values(lo=11, hi=100), "%")
    # blkio, in the v1 files' units: the proportional schedulers' weight (cfq blkio.weight;
    # bfq's blkio.bfq.weight / v2 io.bfq.weight: BFQ_MIN_WEIGHT..BFQ_MAX_WEIGHT), iocost's
    # weight (Alibaba Cloud Linux and openEuler v1 blkio.cost.weight, v2 io.weight:
    # CGROUP_WEIGHT_MIN..MAX), blk-throttle limits (bytes/s, IO/s; 0 = none; the files take
    # "MAJ:MIN VALUE", v2 puts all four in io.max)
    BLKIO_WEIGHT = ("blkio.weight", "io.bfq.weight", "blkio", Values(lo=1, hi=1000))
    BLKIO_COST_WEIGHT = ("blkio.cost.weight", "io.weight", "blkio", Values(lo=1, hi=10_000))
    BLKIO_READ_BPS = ("blkio.throttle.read_bps_device", "io.max", "blkio", COUNT, "bytes/s")
    BLKIO_WRITE_BPS = ("blkio.throttle.write_bps_device", "io.max", "blkio", COUNT, "bytes/s")
    BLKIO_READ_IOPS = ("blkio.throttle.read_iops_device", "io.max", "blkio", COUNT, "IO/s")
    BLKIO_WRITE_IOPS = ("blkio.throttle.write_iops_device", "io.max", "blkio", COUNT, "IO/s")
    # node-wide iocost files, written on the root ("" cgroup): the linear model and the QoS
    # ("enable=1 ctrl=user min=100.00 max=100.00"), as text
    BLKIO_COST_MODEL = ("blkio.cost.model", "io.cost.model", "blkio", TEXT, "", True)
    BLKIO_COST_QOS = ("blkio.cost.qos", "io.cost.qos", "blkio", TEXT, "", True)
    # network: net_cls.classid (4294967295 = offline for oncn-bwm; v2 uses a cgroup BPF
    # program instead), a plain egress rate (bytes/s; tc on the pod's traffic, no cgroup
    # file), and oncn-bwm's node-wide /proc/qos files (on the root "" cgroup, as text)
    NET_CLS_CLASSID = ("net_cls.classid", None, "net_cls", Values(lo=0, hi=4_294_967_295))
    NET_EGRESS_BPS = ("net.egress_bps", None, "net", COUNT, "bytes/s")
    NET_QOS_ENABLE = ("net_qos_enable", None, "net", TEXT, "", True)
    NET_QOS_WATERLINE = ("net_qos_waterline", None, "net", TEXT, "", True)
    NET_QOS_BANDWIDTH = ("net_qos_bandwidth", None, "net", TEXT, "", True)
    # pressure (PSI) files, read-only text: "some avg10=… avg60=… avg300=… total=…\nfull …"
    CPU_PRESSURE = ("cpu.pressure", "cpu.pressure", "cpu", TEXT, "", False, True)
    MEMORY_PRESSURE = ("memory.pressure", "memory.pressure", "memory", TEXT, "", False, True)

    def __init__(
        self,
        v1: str,
        v2: str | None,
        controller: str,
        values: Values,
        unit: str = "",
        root_only: bool = False,
        read_only: bool = False,
    ) -> None:
        self.v1 = v1
        self.v2 = v2
        self.controller = controller
        self.values = values
        self.unit = unit
        self.root_only = root_only
        self.read_only = read_only

    @classmethod
    def named(cls, name: str) -> Knob:
        for k in cls:
            if k.v1 == name:
                return k
        known = ", ".join(k.v1 for k in cls)
        raise ValueError(f"unknown knob {name!r} (known: {known})")


# The memcg knobs: the simulator models them all; replay writes those the host's kernel has
# (cgroup v1: memory.limit_in_bytes; v2: memory.max/high/low/min/oom.group) and refuses the
# others with the stand-in the kernel lacks (V1_MEMORY_REFUSALS).
# The pressure files are read, never written: replay does not probe them.
PRESSURE_KNOBS = frozenset(k for k in Knob if k.read_only)
MEMORY_KNOBS = frozenset(k for k in Knob if k.controller == "memory" and not k.read_only)
BLKIO_KNOBS = frozenset(k for k in Knob if k.controller == "blkio")
NET_KNOBS = frozenset(k for k in Knob if k.controller in ("net", "net_cls"))
# files that exist only at the root: node-wide settings
ROOT_KNOBS = frozenset(k for k in Knob if k.root_only)


# --- memcg sizes as the kernel keeps them ------------------------------------------------

# The page the memcg page counters count in (mm/page_counter.c: limits and usage are whole
# pages); 4 KiB on x86-64 and on this host (getconf PAGESIZE).
PAGE_SIZE = 4096
# Pages a memcg charges ahead per CPU (include/linux/memcontrol.h MEMCG_CHARGE_BATCH 64U):
# try_charge_memcg charges a batch and keeps the surplus as per-CPU stock; a charge that must
# not fail (a dying or OOM-killed task's, __GFP_NOFAIL: its "force" label) is taken past the
# limit, by at most the pages asked — so a usage reading may pass the limit by this much.
MEMCG_CHARGE_BATCH = 64
# "No limit" as the page counter stores it: PAGE_COUNTER_MAX pages, which v1's
# memory.limit_in_bytes reads back as LONG_MAX rounded down to a page (9223372036854771712).
PAGE_COUNTER_MAX_BYTES = (2**63 - 1) // PAGE_SIZE * PAGE_SIZE


def memory_limit_pages(value: int) -> int:
    """A memory limit in bytes as the kernel stores it, in bytes again: -1 stays -1 (no
    limit); otherwise rounded down to whole pages, as page_counter_memparse does
    (memparse(buf) / PAGE_SIZE), so 1000000 becomes 999424."""
    if value < 0:
        return -1
    return value // PAGE_SIZE * PAGE_SIZE


def parse_memory_limit(text: str) -> int:
    """memory.limit_in_bytes (v1: PAGE_COUNTER_MAX_BYTES for no limit) or memory.max /
    memory.high (v2: "max") → bytes, -1 for no limit."""
    t = text.strip()
    if t == "max" or int(t) >= PAGE_COUNTER_MAX_BYTES:
        return -1
    return int(t)


# What cgroup v1 (mainline) lacks of the simulator's memcg knobs, and what would stand in for
# each — none of which replay writes, because none promises what the knob does. (Alibaba
# Cloud Linux and openEuler add some of these files to v1; a kernel that has the file gets
# the write.)
V1_MEMORY_REFUSALS: dict[Knob, str] = {
    Knob.MEMORY_HIGH: (
        "cgroup v1 has no memory.high; this host's stand-in would be memory.soft_limit_in_bytes, which only acts "
        "under global pressure (no throttling of the group's allocations) — not replayed"
    ),
    Knob.MEMORY_LOW: (
        "cgroup v1 has no memory.low (best-effort protection from reclaim); v1's only reclaim preference is "
        "memory.soft_limit_in_bytes, which reclaims groups above it first under global pressure and protects "
        "nothing — not replayed"
    ),
    Knob.MEMORY_MIN: "cgroup v1 has no memory.min (hard protection from reclaim) and nothing stands in for it — not replayed",
    Knob.MEMORY_OOM_GROUP: ("cgroup v1 has no memory.oom.group: its OOM killer kills one process, never the whole group — not replayed"),
}


def memory_refusal(knob: Knob, where: str = "") -> str:
    """Why a memcg knob this host's kernel lacks is not replayed (one message)."""
    why = V1_MEMORY_REFUSALS.get(
        knob, f"this kernel has no {knob.v1} (a vendor memcg file: Alibaba Cloud Linux or openEuler) — not replayed"
    )
    return f"{where}: {why}; the simulator models it (colosim run)" if where else f"{why}; the simulator models it (colosim run)"


# --- unit conversions between the v1 and v2 files ---------------------------------------


def shares_to_weight(shares: int) -> int:
    """cpu.shares → cpu.weight, inverting the kernel's weight → shares (w × 1024 / 100,
    kernel-and-anchors.md §A2), clamped to [1, 10000]."""
    return max(1, min(10_000, round(shares * 100 / 1024)))


def weight_to_shares(weight: int) -> int:
    """cpu.weight → the tg->shares the kernel uses: round(w × 1024 / 100) (§A2)."""
    return round(weight * 1024 / 100)


def cpu_max(quota_us: int, period_us: int) -> str:
    """cpu.cfs_quota_us + cpu.cfs_period_us → cpu.max ("max 100000" for no limit)."""
    return f"{'max' if quota_us < 0 else quota_us} {period_us}"


def parse_cpu_max(text: str) -> tuple[int, int]:
    """cpu.max → (quota µs, -1 for "max"; period µs)."""
    quota, _, period = text.strip().partition(" ")
    return (-1 if quota == "max" else int(quota)), int(period or 100_000)


def parse_cpus(text: str) -> list[int]:
    """A kernel CPU list ("0-3,6") → [0, 1, 2, 3, 6]."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part.strip():
            continue
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def format_cpus(cpus: Iterable[int]) -> str:
    """CPU ids → the kernel's list format: {0, 1, 2, 3, 6} → "0-3,6"."""
    ids = sorted(set(cpus))
    runs: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        runs.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(runs)


# --- what a policy reads ---------------------------------------------------------------


@dataclass(frozen=True)
class CgroupStats:
    """Cumulative counters of one cgroup, as the kernel keeps them (cpuacct.usage, cpu.stat,
    cpu.pressure totals); a policy takes differences between two reads."""

    usage_ns: int
    nr_periods: int
    nr_throttled: int
    throttled_ns: int
    nr_bursts: int
    burst_ns: int
    psi_some_ns: int
    nr_running: int
    # memory.current and its page cache (bytes; 0 where memory is not known)
    memory_bytes: int = 0
    memory_file: int = 0
    # memory.events max / oom_kill (v1: memory.failcnt, memory.oom_control's oom_kill)
    memory_max_events: int = 0
    memory_oom_kills: int = 0
    # blkio.throttle.io_service_bytes / io_serviced totals and bytes sent (0 where not known)
    io_bytes: int = 0
    io_ios: int = 0
    net_tx_bytes: int = 0


@dataclass(frozen=True)
class NodeStats:
    """The node as /proc/stat shows it: CPUs, and cumulative busy and total CPU time."""

    ncpus: int
    busy_ns: int
    total_ns: int
    # /proc/meminfo MemTotal and MemFree, bytes (0 where memory is not known)
    mem_total: int = 0
    mem_free: int = 0
    mem_available: int = 0


@dataclass(frozen=True)
class Cpu:
    """A logical CPU as /sys/devices/system/cpu describes it."""

    cpu: int
    core: int
    socket: int
    node: int


@dataclass(frozen=True)
class KnobWrite:
    """One write a policy asks for: `value` in the v1 file's units (int or list text)."""

    cgroup: str
    knob: Knob
    value: int | str

    def __str__(self) -> str:
        return f"{self.cgroup}/{self.knob.v1} = {self.value}"


class Backend(Protocol):
    """What every backend (simulator, host v1, host v2) offers a policy runner."""

    def now(self) -> float: ...
    def read(self, cgroup: str, knob: Knob) -> int | str: ...
    def write(self, w: KnobWrite) -> None: ...
    def stats(self, cgroup: str) -> CgroupStats: ...
    def node(self) -> NodeStats: ...
    def cpus(self) -> list[Cpu]: ...
    # resctrl and perf counters (policies/resctrl.py, policies/perf.py): what a backend without
    # them (this host: no /sys/fs/resctrl) refuses with one message
    def resctrl(self, action: ResctrlAction) -> None: ...
    def resctrl_info(self) -> ResctrlInfo: ...
    def perf_counters(self, cgroup: str) -> PerfCounters: ...


class SimBackend:
    """The simulator backend: the cgroup files of a `sim._core.Node`, at SimPy's clock."""

    def __init__(self, env: NodeEnvironment) -> None:
        self.env = env
        # The run's warm-up zeroes the core's counters (reset_stats); the kernel's never go
        # back, so each counter is kept monotonic here: (last raw reading, offset added).
        self._last: dict[tuple[str, str], tuple[int, int]] = {}

    # readings that are levels, not counters: passed through as they are
    _LEVELS = frozenset({"nr_running", "memory_current", "memory_anon", "memory_file", "memory_swap", "memory_peak"})

    def _monotonic(self, cgroup: str, raw: dict[str, int]) -> dict[str, int]:
        out = dict(raw)
        for key, value in raw.items():
            if key in self._LEVELS:
                continue
            last, offset = self._last.get((cgroup, key), (0, 0))
            if value < last:
                offset += last
            self._last[(cgroup, key)] = (value, offset)
            out[key] = value + offset
        return out

    def now(self) -> float:
        return self.env.now

    def read(self, cgroup: str, knob: Knob) -> int | str:
        return self.env.node.read(cgroup, knob.v1)

    def write(self, w: KnobWrite) -> None:
        self.env.node.write(w.cgroup, w.knob.v1, w.value)

    def stats(self, cgroup: str) -> CgroupStats:
        s = self._monotonic(cgroup, self.env.node.cgroup_stats(cgroup))
        return CgroupStats(
            usage_ns=s["usage_ns"],
            nr_periods=s["nr_periods"],
            nr_throttled=s["nr_throttled"],
            throttled_ns=s["throttled_time"],
            nr_bursts=s["nr_bursts"],
            burst_ns=s["burst_time"],
            psi_some_ns=s["psi_some_ns"],
            nr_running=s["nr_running"],
            memory_bytes=s.get("memory_current", 0),
            memory_file=s.get("memory_file", 0),
            memory_max_events=s.get("memory_events_max", 0),
            memory_oom_kills=s.get("memory_events_oom_kill", 0),
            io_bytes=s.get("io_read_bytes", 0) + s.get("io_write_bytes", 0),
            io_ios=s.get("io_read_ios", 0) + s.get("io_write_ios", 0),
            net_tx_bytes=s.get("net_tx_bytes", 0),
        )

    def cpus(self) -> list[Cpu]:
        return [Cpu(i, core, socket, numa) for i, (core, socket, numa) in enumerate(self.env.node.cpu_topology())]

    def resctrl(self, action: ResctrlAction) -> None:
        rc.apply(self.env.node, action)

    def resctrl_info(self) -> ResctrlInfo:
        return ResctrlInfo.from_dict(self.env.node.resctrl_info())

    def perf_counters(self, cgroup: str) -> PerfCounters:
        raw = self.env.node.perf_counters(cgroup)
        # kept monotonic across the warm-up's reset, like the cgroup counters
        return PerfCounters.from_dict(self._monotonic(f"perf:{cgroup}", dict(raw)))

    def node(self) -> NodeStats:
        node = self.env.node
        busy = self._monotonic("", node.cgroup_stats(""))["usage_ns"]
        mem = node.memory_stats() or {}
        return NodeStats(
            ncpus=node.ncpus,
            busy_ns=busy,
            total_ns=node.ncpus * node.now(),
            mem_total=mem.get("total", 0),
            mem_free=mem.get("free", 0),
            mem_available=mem.get("available", 0),
        )


# --- knobs a kernel may lack, and the upstream knob that stands in for each -------------------

# cpu.qos_level exists only on openEuler; mainline's nearest is cpu.idle=1 (a SCHED_IDLE group,
# Linux >= 5.15): offline work then gets a minimal weight instead of absolute preemption.
SUBSTITUTES: dict[Knob, Knob] = {Knob.CPU_QOS_LEVEL: Knob.CPU_IDLE}


def substitute(w: KnobWrite) -> KnobWrite:
    """The write that stands in for `w` on a kernel without its knob."""
    if w.knob is Knob.CPU_QOS_LEVEL:
        return KnobWrite(w.cgroup, Knob.CPU_IDLE, 1 if int(w.value) < 0 else 0)
    raise ValueError(f"{w.cgroup}/{w.knob.v1}: no stand-in for this knob")


class Substituting:
    """A backend as a kernel without some knobs sees it: writes and reads of a missing knob go
    to its stand-in (SUBSTITUTES). Replay wraps the host backend in it, and the simulator
    backend too, so the prediction simulates the knob the host really got."""

    def __init__(self, inner: Backend, missing: Iterable[Knob]) -> None:
        self.inner = inner
        self.missing = set(missing)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read(self, cgroup: str, knob: Knob) -> int | str:
        if knob in self.missing and knob is Knob.CPU_QOS_LEVEL:
            return -1 if self.inner.read(cgroup, Knob.CPU_IDLE) == 1 else 0
        return self.inner.read(cgroup, knob)

    def write(self, w: KnobWrite) -> None:
        self.inner.write(substitute(w) if w.knob in self.missing else w)


def utilisation(before: NodeStats, after: NodeStats) -> float:
    """Node CPU utilisation in percent between two reads, as rubik computes it from
    /proc/stat: 100 × Δbusy / Δtotal, 0 if nothing was busy, 100 if no time passed."""
    d_busy = after.busy_ns - before.busy_ns
    d_total = after.total_ns - before.total_ns
    if d_busy <= 0:
        return 0.0
    if d_total <= 0:
        return 100.0
    return max(0.0, min(100.0, 100.0 * d_busy / d_total))
