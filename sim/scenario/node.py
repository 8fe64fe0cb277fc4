"""[node] and [kernel]: the machine (topology, memory, disk, link) and the scheduler's knobs."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from policies.cgroup import Cpu
from policies.pods import memory_bytes
from sim.duration import NS_PER_UNIT, format_duration, parse_duration
from sim.limits import MAX_SMT, topology_errors
from sim.scenario.base import Duration, FieldError, FieldErrors, PositiveDuration, Rate, Table, show
from sim.scenario.distributions import Distribution
from sim.scenario.hardware import Llc, MemoryBandwidth


class Disk(Table):
    """[node.disk]: the node's block device in iocost's linear-model terms (bytes/s and
    4 KiB IO/s; a SATA SSD by default), its access latency, and its IO scheduler
    (/sys/block/<dev>/queue/scheduler: only bfq and cfq share by blkio.weight)."""

    rbps: Rate = Field(default=550_000_000, gt=0)
    rseqiops: int = Field(default=130_000, gt=0)
    rrandiops: int = Field(default=90_000, gt=0)
    wbps: Rate = Field(default=500_000_000, gt=0)
    wseqiops: int = Field(default=120_000, gt=0)
    wrandiops: int = Field(default=80_000, gt=0)
    latency: Duration = 80_000
    scheduler: Literal["none", "mq-deadline", "kyber", "bfq", "cfq"] = "mq-deadline"

    def core_spec(self) -> dict[str, Any]:
        return {**self.model_dump(exclude={"latency"}), "latency_ns": self.latency}


class Network(Table):
    """[node.network]: the node's egress link ("10Gbit", "1250M")."""

    egress: Rate = Field(gt=0)

    def core_spec(self) -> dict[str, Any]:
        return {"egress_bytes_per_s": self.egress}


class DeeperIdleState(Table):
    """One of [node.cpuidle]'s `deeper` states: a halt that has lasted `target_residency` or
    longer exits with this `exit_latency` (`struct cpuidle_state`'s two fields)."""

    target_residency: PositiveDuration
    exit_latency: Distribution

    def core_spec(self) -> dict[str, Any]:
        return {"target_residency_ns": self.target_residency, "exit_latency": self.exit_latency.core_spec()}


class Cpuidle(Table):
    """[node.cpuidle]: the idle state a CPU with nothing to run enters, and how long a wakeup
    of it waits before it runs (its `exit_latency`, a distribution: "40us" or a table); with
    `deeper` states, a longer halt exits slower (`[{target_residency = "1ms", exit_latency =
    "15us"}, ...]`, by increasing residency). In a virtual machine the state is a halted vCPU,
    and the latency the hypervisor's; measure it with `colosim host-kernel --idle-exit`
    (replay/cpuidle.py). Not given: a wakeup of an idle CPU runs at once
    (core_rs/model/src/cpuidle.rs)."""

    exit_latency: Distribution
    deeper: list[DeeperIdleState] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_order(self) -> Cpuidle:
        for i in range(1, len(self.deeper)):
            before, this = self.deeper[i - 1].target_residency, self.deeper[i].target_residency
            if this <= before:
                raise FieldErrors(
                    [
                        (
                            ("deeper", i, "target_residency"),
                            f"must be above the state before it's ({format_duration(before)}; deeper states go by increasing "
                            f"residency), got {format_duration(this)}",
                        )
                    ]
                )
        return self

    def core_spec(self) -> dict[str, Any]:
        return {"exit_latency": self.exit_latency.core_spec(), "deeper": [d.core_spec() for d in self.deeper]}


class RemoteWakeup(Table):
    """[node.remote_wakeup]: the CPU a wakeup across CPUs costs its two ends — the woken task
    (`wakee`) and the task that woke it (`waker`): the interrupt to the other CPU, in a guest
    a VM exit on each side. A host's property (docs/replay.md, "A wakeup across CPUs"); not
    given: nothing (core_rs/model/src/remote_wakeup.rs)."""

    wakee: Duration = 0
    waker: Duration = 0

    def core_spec(self) -> dict[str, Any]:
        return {"wakee_ns": self.wakee, "waker_ns": self.waker}


class Steal(Table):
    """[node.steal]: the hypervisor takes a busy vCPU away — `rate` stalls a second on each
    CPU, each `length` long (a distribution), striking a CPU that has run without going idle
    for at least `after` (a vCPU that halts often gives the host its gaps instead). The time
    is charged to nobody (the guest's steal clock). A host's property; measure it with
    `colosim host-kernel --steal` (replay/steal.py). Not given: none
    (core_rs/model/src/steal.rs)."""

    rate: float = Field(gt=0, allow_inf_nan=False)
    length: Distribution
    after: Duration = 0

    def core_spec(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate, "length": self.length.core_spec(), "after_ns": self.after}


class Topology(Table):
    """[node]: sockets -> NUMA nodes -> cores -> SMT threads, numbered as Linux does."""

    sockets: int = Field(default=1, ge=1)
    numa_nodes_per_socket: int = Field(default=1, ge=1)
    cores_per_socket: int = Field(default=8, ge=1)
    threads_per_core: int = Field(default=1, ge=1, le=MAX_SMT)
    # per-thread speed while both SMT siblings run
    smt_speed: float = Field(default=0.6, gt=0, le=1, allow_inf_nan=False)
    # speed of a task whose memory is on another NUMA node
    numa_remote_speed: float = Field(default=0.75, gt=0, le=1, allow_inf_nan=False)
    siblings: list[list[Annotated[int, Field(ge=0)]]] | None = None
    # the node's memory ("192Gi"): memory cgroups are modelled when it is given (and
    # Koordinator's batch-memory uses it); swap space, none by default
    memory: Annotated[int, BeforeValidator(memory_bytes)] | None = None
    swap: Annotated[int, BeforeValidator(memory_bytes)] = 0
    # the block device and the egress link: modelled when given
    disk: Disk | None = None
    network: Network | None = None
    # shared hardware (contention model, resctrl, perf counters): core clock, LLC, DRAM
    ghz: float = Field(default=2.5, gt=0, allow_inf_nan=False)
    llc: Llc = Field(default_factory=Llc)
    memory_bandwidth: MemoryBandwidth = Field(default_factory=MemoryBandwidth)
    # the CPUs' idle state: a wakeup of an idle CPU waits its exit latency
    cpuidle: Cpuidle | None = None
    # what a wakeup across CPUs costs the woken task and its waker
    remote_wakeup: RemoteWakeup | None = None
    # the hypervisor's stalls of busy CPUs
    steal: Steal | None = None

    @property
    def ncpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    def cpus(self) -> list[Cpu]:
        """Each logical CPU's core, socket and NUMA node, numbered as the core numbers them
        (core_rs/model/src/topology.rs: Linux's x86 order, all first threads then all second
        threads, unless `siblings` says otherwise)."""
        ncores = self.sockets * self.cores_per_socket
        siblings = self.siblings or [[c + k * ncores for k in range(self.threads_per_core)] for c in range(ncores)]
        per_node = self.cores_per_socket // self.numa_nodes_per_socket
        out = [Cpu(cpu, core, core // self.cores_per_socket, core // per_node) for core, group in enumerate(siblings) for cpu in group]
        return sorted(out, key=lambda c: c.cpu)

    @model_validator(mode="after")
    def _check(self) -> Topology:
        errors: list[FieldError] = list(
            topology_errors(self.sockets, self.numa_nodes_per_socket, self.cores_per_socket, self.threads_per_core)
        )
        if errors:
            raise FieldErrors(errors)
        if self.cores_per_socket % self.numa_nodes_per_socket:
            errors.append(
                (
                    ("numa_nodes_per_socket",),
                    f"must divide cores_per_socket ({self.cores_per_socket}) evenly (got {self.numa_nodes_per_socket})",
                )
            )
        for i, group in enumerate(self.siblings or []):
            for j, cpu in enumerate(group):
                if cpu >= self.ncpus:
                    errors.append((("siblings", i, j), f"no CPU {cpu} (CPUs are 0..{self.ncpus - 1})"))
        if errors:
            raise FieldErrors(errors)
        return self

    def core_spec(self) -> dict[str, Any]:
        return {
            "sockets": self.sockets,
            "numa_nodes_per_socket": self.numa_nodes_per_socket,
            "cores_per_socket": self.cores_per_socket,
            "threads_per_core": self.threads_per_core,
            "smt_speed": float(self.smt_speed),
            "numa_remote_speed": float(self.numa_remote_speed),
            "siblings": self.siblings,
        }


def kernel_release(value: Any) -> Any:
    """[kernel] version is text: a TOML or --set number (6.10) would lose what tells releases
    apart (6.10 reads as 6.1), so it is refused with the quoting that keeps it."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(
            f'must be a quoted kernel release such as "6.18.44" (got the number {value!r}: write version = "{value}", or --set \'kernel.version="{value}"\')'
        )
    return value


def period_phase(value: Any) -> int | None:
    """[kernel] cfs_period_phase: "random" (None: the core draws it from the seed) or a
    duration in [0, 1 s) at which every CFS period timer has a boundary."""
    if value == "random":
        return None
    try:
        ns = parse_duration(value)
    except ValueError:
        ns = -1
    if not 0 <= ns < NS_PER_UNIT["s"]:
        raise ValueError(f'must be "random" or a duration below 1s (the longest cpu.cfs_period_us) such as "0ms" (got {show(value)})')
    return ns


def _sched_feature_names() -> list[str] | None:
    """The features.h names the core takes (modelled first), or None before the extension is
    built — the core then names an unknown one itself when the node is built."""
    try:
        from sim._core import SCHED_FEATURES
    except ImportError:
        return None
    return SCHED_FEATURES


class Kernel(Table):
    """[kernel]: scheduler tunables; unset ones take the kernel's defaults (scaled by
    1 + ilog2(min(ncpus, 8)) as the kernel scales them), which the core computes."""

    scheduler: Literal["cfs", "eevdf"] = "cfs"  # CFS (Linux <= 6.5) or EEVDF (>= 6.6)
    hz: int = Field(default=250, ge=1, le=10_000)
    sched_latency: PositiveDuration | None = None
    sched_min_granularity: PositiveDuration | None = None
    sched_wakeup_granularity: Duration | None = None
    sched_idle_min_granularity: PositiveDuration | None = None
    # EEVDF base slice as debugfs shows it (default: 0.70 ms scaled by CPU count, like the kernel)
    base_slice: PositiveDuration | None = None
    # openEuler SMT expeller: offline tasks stay off the SMT sibling of online work
    smt_expeller: bool = False
    # vendor memcg extensions: Alibaba Cloud Linux (memory.wmark_ratio/wmark_scale_factor/wmark_min_adj,
    # memory.priority/use_priority_oom: Koordinator writes them) and openEuler
    # (memory.high_async_ratio: rubik writes it); writes fail on a kernel without them
    alinux_memcg: bool = False
    openeuler_memcg: bool = False
    # vm.watermark_scale_factor (1/10000 of memory between the node's watermarks)
    watermark_scale_factor: int = Field(default=10, ge=1, le=3000)
    # CPU a task spends per page it reclaims itself (a model constant: ≈ 1 µs, clean cache)
    reclaim_per_page: PositiveDuration = 1_000
    # vm.dirty_ratio / vm.dirty_background_ratio (% of dirtyable memory)
    dirty_ratio: int = Field(default=20, ge=1, le=100)
    dirty_background_ratio: int = Field(default=10, ge=0, le=99)
    # writeback charged to the cgroup that dirtied the pages (cgroup v2; openEuler's
    # cgroup1_writeback, which rubik's ioCost needs); off: the flusher's IO is the root's
    cgroup_writeback: bool = False
    # the memory controller is cgroup v1's (legacy memcg): a task's limit reclaim waits for the
    # writeback of dirty pages it meets again (mm/vmscan.c writeback_throttling_sane); off: v2's.
    # Replay sets it from the host's memory hierarchy.
    memcg_v1: bool = False
    # Where the CFS bandwidth period boundaries fall. Linux >= 6.4 starts each group's period
    # timer at a random phase (init_cfs_bandwidth): "random" draws one per group from the
    # seed; a duration pins a boundary of every group's timer at that time after the start.
    cfs_period_phase: Annotated[int | None, BeforeValidator(period_phase)] = None
    # kernel.sched_autogroup_enabled: a workload of the root cgroup (cgroup = "/") runs in its
    # session's task group, weight 1024, beside the root's cgroups (kernel/sched/autogroup.c);
    # off by default, as every scenario ran before. Replay sets it from the host.
    autogroup: bool = False

    # The Linux release whose EEVDF the core follows ("6.6", "6.12", "6.18.44"; unset: 6.6, the
    # EEVDF the model had first) and features.h switches (/sys/kernel/debug/sched/features)
    # overriding that release's defaults, e.g. {DELAY_DEQUEUE = false}. docs/model.md.
    version: Annotated[str | None, BeforeValidator(kernel_release)] = None
    sched_features: dict[str, bool] = Field(default_factory=dict)
    # Where calc_group_shares takes a CPU's load from: "instant" (queue weights when a queue's
    # entities change; every result before PELT) or "pelt" (the kernel's: PELT load_avg against
    # the group's published sum, re-weighed at every enqueue, dequeue and tick). docs/model.md.
    group_shares: Literal["instant", "pelt"] = "instant"

    @model_validator(mode="after")
    def _check_fair_class(self) -> Kernel:
        errors: list[FieldError] = []
        if self.version is not None and not re.fullmatch(r"\d+\.\d+(\.\d+)?", self.version):
            errors.append((("version",), f'must be a kernel release such as "6.6", "6.12" or "6.18.44" (got {show(self.version)})'))
        names = _sched_feature_names()
        for name in self.sched_features:
            if names is not None and name not in names:
                errors.append((("sched_features", name), f"is not a scheduler feature the core knows ({', '.join(names[:9])}, ...)"))
        if errors:
            raise FieldErrors(errors)
        return self

    @model_validator(mode="after")
    def _check_dirty(self) -> Kernel:
        if self.dirty_background_ratio >= self.dirty_ratio:
            raise FieldErrors(
                [(("dirty_background_ratio",), f"must be below dirty_ratio ({self.dirty_ratio}) (got {self.dirty_background_ratio})")]
            )
        return self

    def core_spec(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "version": self.version,
            "sched_features": self.sched_features,
            "group_shares": self.group_shares,
            "hz": self.hz,
            "sched_latency_ns": self.sched_latency,
            "sched_min_granularity_ns": self.sched_min_granularity,
            "sched_wakeup_granularity_ns": self.sched_wakeup_granularity,
            "sched_idle_min_granularity_ns": self.sched_idle_min_granularity,
            "base_slice_ns": self.base_slice,
            "smt_expeller": self.smt_expeller,
            "alinux_memcg": self.alinux_memcg,
            "openeuler_memcg": self.openeuler_memcg,
            "dirty_ratio": self.dirty_ratio,
            "dirty_background_ratio": self.dirty_background_ratio,
            "cgroup_writeback": self.cgroup_writeback,
            "memcg_v1": self.memcg_v1,
            "cfs_period_phase_ns": self.cfs_period_phase,
            "autogroup": self.autogroup,
        }
