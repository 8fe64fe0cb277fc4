"""The scenario file: what a user writes (TOML), validated, and turned into the core spec.

A scenario describes one node (topology, kernel knobs, cgroups, workloads) and, optionally,
several runs of it that differ by a few overrides (`[[runs]] set = {...}`).  Validation
happens here, before the core is touched, and every error names the field by its dotted path
(see `sim.overrides` for the quoting rule) and says why.

    scenario = load_scenario("experiments/clickhouse_stress.toml", ["kernel.hz=1000"])
    for variant in scenario.variants():
        spec = variant.scenario.core_spec(seed=1)    # the JSON document sim._core.Node takes
"""

from __future__ import annotations

import copy
import difflib
import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from policies.cgroup import Cpu
from policies.cpu_bind import DEFAULT_CPU_BIND_POLICY, DEFAULT_NUMA_STRATEGY, BindError, take_cpus
from policies.pods import (
    KubeQoS,
    Pod,
    PriorityClass,
    QoSClass,
    cpu_milli,
    kube_qos,
    kubelet_cgroup,
    kubelet_knobs,
    memory_bytes,
)
from sim.duration import format_duration, parse_duration
from sim.errors import ScenarioError
from sim.limits import DEFAULT_BACKLOG, MAX_BACKLOG, MAX_SMT, PID_MAX_LIMIT, topology_errors
from sim.overrides import apply_override, format_path, normalize, parse_path

__all__ = ["Scenario", "ScenarioError", "Variant", "load_scenario"]


# (path relative to the table that found it, message)
FieldError = tuple[tuple[str | int, ...], str]


class _FieldErrors(ValueError):
    """Raised by cross-field checks: each error carries its path relative to the model that
    raised it, because pydantic would otherwise report them all at the model itself."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(f"{format_path(p)}: {m}" for p, m in errors))
        self.errors = errors


def _positive(ns: int) -> int:
    if ns <= 0:
        raise ValueError(f"must be > 0 (got {format_duration(ns)})")
    return ns


# Durations are stored as integer nanoseconds, the core's unit.
Duration = Annotated[int, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[int, BeforeValidator(parse_duration), AfterValidator(_positive)]


class _Table(BaseModel):
    # strict: TOML is typed, so `threads = 2.5` or `enabled = "no"` is a mistake, not a hint.
    model_config = ConfigDict(extra="forbid", strict=True)


# --- distributions ---------------------------------------------------------------------


class Constant(_Table):
    dist: Literal["constant"]
    value: Duration

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "constant", "value_ns": self.value}


class Exponential(_Table):
    dist: Literal["exponential"]
    mean: PositiveDuration

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "exponential", "mean_ns": self.mean}


class Lognormal(_Table):
    dist: Literal["lognormal"]
    mean: PositiveDuration
    # sigma of the underlying normal, as numpy and the core take it
    sigma: float = Field(ge=0, allow_inf_nan=False)

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "lognormal", "mean_ns": self.mean, "sigma": self.sigma}


class Empirical(_Table):
    """A histogram: bin i spans edges[i]..edges[i+1] and is picked with weight weights[i]."""

    dist: Literal["empirical"]
    edges: list[Duration] = Field(min_length=2)
    weights: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Empirical:
        errors: list[FieldError] = []
        if len(self.edges) != len(self.weights) + 1:
            errors.append(
                (
                    ("edges",),
                    f"must have one more item than weights (got {len(self.edges)} edges, {len(self.weights)} weights)",
                )
            )
        for i in range(1, len(self.edges)):
            if self.edges[i] <= self.edges[i - 1]:
                errors.append((("edges", i), "must be greater than the edge before it"))
        if sum(self.weights) <= 0:
            errors.append((("weights",), "must not all be 0"))
        if errors:
            raise _FieldErrors(errors)
        return self

    def core_spec(self) -> dict[str, Any]:
        return {"dist": "empirical", "edges_ns": list(self.edges), "weights": list(self.weights)}


def _distribution_shorthand(value: Any) -> Any:
    # `think = "0s"` or `service = "48ms"`: a bare duration means a constant.
    if isinstance(value, dict):
        return value
    return {"dist": "constant", "value": value}


Distribution = Annotated[
    Constant | Exponential | Lognormal | Empirical,
    Field(discriminator="dist"),
    BeforeValidator(_distribution_shorthand),
]


# --- workloads -------------------------------------------------------------------------


def _fanout(value: Any) -> int | str:
    if value == "ncpus" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= PID_MAX_LIMIT):
        return value
    if isinstance(value, int) and value > PID_MAX_LIMIT:
        raise ValueError(f"must be at most {PID_MAX_LIMIT} threads (PID_MAX_LIMIT) (got {value})")
    raise ValueError(f'must be an integer >= 1 or "ncpus" (got {_show(value)})')


# clickhouse-benchmark's query in the seed experiment (../shared/seeds/002, test_demo.sh)
SEED_QUERY = "SELECT * FROM system.numbers LIMIT 10000000 OFFSET 10000000"

HOST_PROGRAMS = {
    "hog": ("builtin", "stress", "stress-ng", "command"),
    "closed_loop": ("builtin", "clickhouse", "nginx"),
    "open_loop": ("builtin",),
    "bursty": ("builtin",),
    "memory_hog": ("builtin", "stress"),
    "file_server": ("builtin", "nginx"),
    "cache_writer": ("builtin", "command"),
    "analytics": ("builtin",),
    "duty": ("builtin",),
    "dd": ("builtin",),
    "database": ("builtin",),
    "iperf": ("builtin",),
}


def _host_shorthand(value: Any) -> Any:
    return {"program": value} if isinstance(value, str) else value


class HostProgram(_Table):
    """[workloads.x.host]: what runs for this workload in `colosim replay` (the simulator
    ignores it). "builtin" is colosim-load, which executes the workload's own distributions;
    the others are the real programs of the seed experiments."""

    program: Literal["builtin", "stress", "stress-ng", "clickhouse", "nginx", "command"] = "builtin"
    command: list[str] | None = None  # program = "command": the argv of a CPU-bound job
    query: str = SEED_QUERY  # clickhouse: the query clickhouse-benchmark sends
    path: str = "/"  # nginx: the URL path wrk requests

    @model_validator(mode="after")
    def _check(self) -> HostProgram:
        if self.program == "command" and not self.command:
            raise _FieldErrors([(("command",), 'must be given (a non-empty list) when program = "command"')])
        if self.program != "command" and self.command is not None:
            raise _FieldErrors([(("command",), 'is only for program = "command"')])
        return self


class _Workload(_Table):
    # where its tasks run: a cgroup, or a pod (whose cgroup the kubelet layout gives it)
    cgroup: str = ""
    pod: str | None = None
    enabled: bool = True  # a disabled workload is left out of the core spec
    start: Duration = 0
    host: Annotated[HostProgram, BeforeValidator(_host_shorthand)] = Field(default_factory=HostProgram)

    @model_validator(mode="after")
    def _check_host(self) -> _Workload:
        if bool(self.cgroup) == (self.pod is not None):
            raise _FieldErrors([(("cgroup",), "give exactly one of cgroup or pod")])
        allowed = HOST_PROGRAMS[self.kind]  # type: ignore[attr-defined]
        if self.host.program not in allowed:
            raise _FieldErrors(
                [
                    (
                        ("host", "program"),
                        f"a {self.kind} workload runs on the host as {_alternatives(allowed)} (got {_show(self.host.program)})",
                    )
                ]  # type: ignore[attr-defined]
            )
        return self


class Hog(_Workload):
    """CPU hog threads that never sleep (`stress --cpu N`)."""

    kind: Literal["hog"]
    threads: int = Field(ge=1, le=PID_MAX_LIMIT)

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "hog",
            "name": name,
            "cgroup": self.cgroup,
            "threads": self.threads,
            "start_ns": self.start,
        }


class ClosedLoop(_Workload):
    """C clients that each send a request, wait for it, think, and send the next
    (clickhouse-benchmark -c, wrk -c).  A request fans out to `fanout` threads and completes
    when all of them have run their service time."""

    kind: Literal["closed_loop"]
    clients: int = Field(ge=1, le=PID_MAX_LIMIT)
    fanout: Annotated[int | str, PlainValidator(_fanout)] = 1
    think: Distribution = Constant(dist="constant", value=0)
    service: Distribution
    # a server with a fixed pool of worker threads (Go's GOMAXPROCS, a thread pool): requests
    # wait for a free worker; unset, each client has its own thread(s)
    workers: int | None = Field(None, ge=1, le=PID_MAX_LIMIT)

    @model_validator(mode="after")
    def _check_workers(self) -> ClosedLoop:
        if self.workers is not None and self.fanout != 1:
            raise _FieldErrors([(("workers",), "a worker pool serves requests of fanout 1")])
        return self

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        spec = {
            "kind": "closed_loop",
            "name": name,
            "cgroup": self.cgroup,
            "clients": self.clients,
            "fanout": ncpus if self.fanout == "ncpus" else self.fanout,
            "think": self.think.core_spec(),
            "service": self.service.core_spec(),
            "start_ns": self.start,
        }
        if self.workers is not None:
            spec["workers"] = self.workers
        return spec


class TraceRef(_Table):
    """[workloads.x.trace]: the workload's demand follows an entity of a trace file (the
    trace format, traces/format.py): a duty workload its `cpu_cores`, an open loop its
    `rate_per_s` (or its CPU ÷ the mean service time). `speed` compresses time (10: ten trace
    seconds a simulated second); `scale` multiplies the values."""

    file: str | None = Field(None, min_length=1)  # or `--trace FILE` on the command line
    entity: str = Field(min_length=1)
    speed: float = Field(1.0, gt=0, allow_inf_nan=False)
    scale: float = Field(1.0, gt=0, allow_inf_nan=False)


class OpenLoop(_Workload):
    """Poisson arrivals at `rate` requests/s served by a pool of `workers` threads (the rate
    follows `trace` when one is given)."""

    kind: Literal["open_loop"]
    rate: float = Field(gt=0, allow_inf_nan=False)
    workers: int = Field(ge=1, le=PID_MAX_LIMIT)
    service: Distribution
    trace: TraceRef | None = None
    # requests that may wait for a worker; arrivals beyond are dropped (and counted)
    backlog: int = Field(DEFAULT_BACKLOG, ge=0, le=MAX_BACKLOG)

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "open_loop",
            "name": name,
            "cgroup": self.cgroup,
            "rate_per_s": float(self.rate),
            "workers": self.workers,
            "backlog": self.backlog,
            "service": self.service.core_spec(),
            "start_ns": self.start,
        }


class Bursty(_Workload):
    """Steady load on `steady_threads` plus, every `every`, a spell in which each of
    `burst_threads` threads gets `length` of CPU work (seed 001, case 2).  Each spell counts
    as a request: its latency is how long the burst took, so throttling stretches it."""

    kind: Literal["bursty"]
    steady_threads: int = Field(1, ge=0, le=PID_MAX_LIMIT)
    burst_threads: int = Field(2, ge=1, le=PID_MAX_LIMIT)
    every: PositiveDuration
    length: PositiveDuration

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "bursty",
            "name": name,
            "cgroup": self.cgroup,
            "steady_threads": self.steady_threads,
            "burst_threads": self.burst_threads,
            "every_ns": self.every,
            "length_ns": self.length,
            "start_ns": self.start,
        }


class MemoryHog(_Workload):
    """`stress --vm N --vm-bytes B`: N worker processes that each allocate `bytes` in `chunk`
    steps, touching every page (`touch_per_page` of CPU), then keep and re-dirty it
    (`keep`, --vm-keep), sleep holding it for `hang` and free it (`hang`, --vm-hang), or free
    it at once and start over (`churn`, stress's default).  Needs [node] memory."""

    kind: Literal["memory_hog"]
    threads: int = Field(1, ge=1, le=PID_MAX_LIMIT)
    bytes: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)]
    chunk: Annotated[int, BeforeValidator(memory_bytes), Field(ge=4096)] = 1 << 20
    touch_per_page: PositiveDuration = 800
    mode: Literal["keep", "hang", "churn"] = "churn"
    hang: Duration = 0
    oom_score_adj: int = Field(0, ge=-1000, le=1000)

    @model_validator(mode="after")
    def _check_hang(self) -> MemoryHog:
        if self.mode == "hang" and self.hang == 0:
            raise _FieldErrors([(("hang",), 'mode "hang" needs a hang time, e.g. hang = "2s"')])
        return self

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "memory_hog",
            "name": name,
            "cgroup": self.cgroup,
            "threads": self.threads,
            "bytes": self.bytes,
            "chunk_bytes": self.chunk,
            "touch_ns_per_page": self.touch_per_page,
            "mode": self.mode,
            "hang_ns": self.hang,
            "oom_score_adj": self.oom_score_adj,
            "start_ns": self.start,
        }


class FileServer(_Workload):
    """A file-serving service (nginx) under siege-like clients: `clients` with one request in
    flight, each reading a file of `file_size` from a `working_set`; a request that finds its
    file in the cgroup's page cache costs `service` of CPU only, a miss first waits for the
    disk (one disk, reads in order, `disk_latency` + size / `disk_bandwidth` each) and brings
    the file into the cache.
    Needs [node] memory."""

    kind: Literal["file_server"]
    clients: int = Field(ge=1, le=PID_MAX_LIMIT)
    service: Distribution
    think: Distribution = Constant(dist="constant", value=0)
    working_set: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)]
    file_size: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)]
    disk_latency: Duration = 100_000
    disk_bandwidth: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)] = 500_000_000  # bytes/s

    @model_validator(mode="after")
    def _check_set(self) -> FileServer:
        if self.working_set < self.file_size:
            raise _FieldErrors(
                [(("working_set",), f"must hold at least one file of file_size ({self.file_size} bytes) (got {self.working_set})")]
            )
        return self

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "file_server",
            "name": name,
            "cgroup": self.cgroup,
            "clients": self.clients,
            "service": self.service.core_spec(),
            "think": self.think.core_spec(),
            "working_set_bytes": self.working_set,
            "file_bytes": self.file_size,
            "disk_latency_ns": self.disk_latency,
            "disk_bytes_per_s": self.disk_bandwidth,
            "start_ns": self.start,
        }


class CacheWriter(_Workload):
    """`dd` / `stress --hdd`: threads writing files forever, `chunk` at a time at
    `write_per_page` of CPU a page; what they write stays in their cgroup's page cache until
    reclaim takes it.  Needs [node] memory."""

    kind: Literal["cache_writer"]
    threads: int = Field(1, ge=1, le=PID_MAX_LIMIT)
    chunk: Annotated[int, BeforeValidator(memory_bytes), Field(ge=4096)] = 1 << 20
    write_per_page: PositiveDuration = 1_000

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "cache_writer",
            "name": name,
            "cgroup": self.cgroup,
            "threads": self.threads,
            "chunk_bytes": self.chunk,
            "write_ns_per_page": self.write_per_page,
            "start_ns": self.start,
        }


class Analytics(_Workload):
    """An in-memory analytics job (Spark's collaborative filtering, seed 001): `threads`
    workers load their part of a `working_set` (anonymous memory), then run tasks of `work`
    CPU one after another; a task takes `fault_penalty` × (share of the set in swap) longer,
    so the job slows when its set does not fit. Each task counts as a request: its duration
    and the tasks per second are the job's speed. Needs [node] memory."""

    kind: Literal["analytics"]
    threads: int = Field(1, ge=1, le=PID_MAX_LIMIT)
    working_set: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)]
    work: PositiveDuration
    fault_penalty: float = Field(20.0, ge=0, allow_inf_nan=False)

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "analytics",
            "name": name,
            "cgroup": self.cgroup,
            "threads": self.threads,
            "working_set_bytes": self.working_set,
            "work_ns": self.work,
            "fault_penalty": float(self.fault_penalty),
            "start_ns": self.start,
        }


class Duty(_Workload):
    """CPU demand of `cores` (following `trace` when given) spread over up to `max_threads`
    threads, each running its share of every `period` and sleeping the rest."""

    kind: Literal["duty"]
    max_threads: int = Field(ge=1, le=PID_MAX_LIMIT)
    cores: float = Field(0.0, ge=0, allow_inf_nan=False)
    period: PositiveDuration = 10_000_000
    trace: TraceRef | None = None

    @model_validator(mode="after")
    def _check_cores(self) -> Duty:
        if self.cores > self.max_threads:
            raise _FieldErrors([(("cores",), f"must be at most max_threads ({self.max_threads}) (got {self.cores:g})")])
        return self

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "duty",
            "name": name,
            "cgroup": self.cgroup,
            "max_threads": self.max_threads,
            "cores": float(self.cores),
            "period_ns": self.period,
            "start_ns": self.start,
        }


def rate_bytes(value: Any) -> int:
    """A rate in bytes/s: a byte quantity ("500M" = 500 MB/s, "20Mi" = 20 MiB/s) or, as
    network people write it, bits ("1Gbit" = 125 MB/s, "100Mbit")."""
    try:
        if isinstance(value, str) and value.endswith("bit"):
            return memory_bytes(value[: -len("bit")] or "x") // 8
        return memory_bytes(value)
    except ValueError:
        raise ValueError(f'must be a rate in bytes/s like "500M", "20Mi", or in bits like "1Gbit" (got {value!r})') from None


Rate = Annotated[int, BeforeValidator(rate_bytes)]


class Dd(_Workload):
    """`dd`: `threads` copies, each moving `block` per IO with one IO in flight, `size` in
    all per thread (none: until the run ends). `op` read or write; `direct` is O_DIRECT
    (oflag=direct) — without it writes go through the page cache and are written back later,
    by the flusher, as the root cgroup's IO on cgroup v1 (seed 004). Each block is a request:
    the service's QPS × block is dd's throughput. Needs [node.disk]."""

    kind: Literal["dd"]
    op: Literal["read", "write"] = "write"
    direct: bool = True
    block: Annotated[int, BeforeValidator(memory_bytes), Field(ge=512)] = 1 << 20
    size: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)] | None = None
    threads: int = Field(1, ge=1, le=PID_MAX_LIMIT)
    random: bool = False
    # CPU per block (syscall, filling the buffer, copy): default 10 µs + 0.4 µs per 4 KiB
    # page direct (≈ 120 µs per MiB, as measured on the host), 1 µs per page buffered
    cpu_per_block: PositiveDuration | None = None

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "dd",
            "name": name,
            "cgroup": self.cgroup,
            "op": self.op,
            "direct": self.direct,
            "block_bytes": self.block,
            "bytes": self.size,
            "threads": self.threads,
            "random": self.random,
            "cpu_ns_per_block": self.cpu_per_block,
            "start_ns": self.start,
        }


class Database(_Workload):
    """A database-like online service: `clients` with one request in flight; a request does
    `reads` random reads of `read_size` in a row (lookups missing its buffer pool, O_DIRECT as
    InnoDB's flush method), then `service` of CPU. Needs [node.disk]."""

    kind: Literal["database"]
    clients: int = Field(ge=1, le=PID_MAX_LIMIT)
    reads: int = Field(1, ge=0)
    read_size: Annotated[int, BeforeValidator(memory_bytes), Field(ge=512)] = 4096
    service: Distribution
    think: Distribution = Constant(dist="constant", value=0)

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "database",
            "name": name,
            "cgroup": self.cgroup,
            "clients": self.clients,
            "reads": self.reads,
            "read_bytes": self.read_size,
            "service": self.service.core_spec(),
            "think": self.think.core_spec(),
            "start_ns": self.start,
        }


class Iperf(_Workload):
    """`iperf3 -c … -P streams [-b rate]`: `streams` flows sending from this cgroup during
    each of `windows` ([start, stop] pairs, e.g. [["0s", "10s"], ["15s", "25s"]]; none: from
    `start` on), each at up to `rate` (none: as fast as the link lets it). Needs
    [node.network]."""

    kind: Literal["iperf"]
    streams: int = Field(1, ge=1, le=PID_MAX_LIMIT)
    rate: Rate | None = None
    windows: list[Annotated[list[Duration], Field(min_length=2, max_length=2)]] = []

    @model_validator(mode="after")
    def _check_windows(self) -> Iperf:
        errors: list[FieldError] = [
            (("windows", i), f"start {format_duration(a)} must be before stop {format_duration(b)}")
            for i, (a, b) in enumerate(self.windows)
            if a >= b
        ]
        if errors:
            raise _FieldErrors(errors)
        return self

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "iperf",
            "name": name,
            "cgroup": self.cgroup,
            "streams": self.streams,
            "rate_bytes_per_s": self.rate or 0,
            "windows_ns": [list(w) for w in self.windows],
            "start_ns": self.start,
        }


MEMORY_KINDS = ("memory_hog", "file_server", "cache_writer", "analytics")
IO_KINDS = ("dd", "database")
NET_KINDS = ("iperf",)

Workload = Annotated[
    Hog | ClosedLoop | OpenLoop | Bursty | MemoryHog | FileServer | CacheWriter | Analytics | Duty | Dd | Database | Iperf,
    Field(discriminator="kind"),
]


# --- node, kernel, cgroups -------------------------------------------------------------


class Disk(_Table):
    """[node.disk]: the node's block device in iocost's linear-model terms (bytes/s and
    4 KiB IO/s; a SATA SSD by default), its access latency, and its IO scheduler
    (/sys/block/<dev>/queue/scheduler: only bfq and cfq share by blkio.weight)."""

    rbps: Rate = Field(550_000_000, gt=0)
    rseqiops: int = Field(130_000, gt=0)
    rrandiops: int = Field(90_000, gt=0)
    wbps: Rate = Field(500_000_000, gt=0)
    wseqiops: int = Field(120_000, gt=0)
    wrandiops: int = Field(80_000, gt=0)
    latency: Duration = 80_000
    scheduler: Literal["none", "mq-deadline", "kyber", "bfq", "cfq"] = "mq-deadline"

    def core_spec(self) -> dict[str, Any]:
        return {**self.model_dump(exclude={"latency"}), "latency_ns": self.latency}


class Network(_Table):
    """[node.network]: the node's egress link ("10Gbit", "1250M")."""

    egress: Rate = Field(gt=0)

    def core_spec(self) -> dict[str, Any]:
        return {"egress_bytes_per_s": self.egress}


class Topology(_Table):
    """[node]: sockets -> NUMA nodes -> cores -> SMT threads, numbered as Linux does."""

    sockets: int = Field(1, ge=1)
    numa_nodes_per_socket: int = Field(1, ge=1)
    cores_per_socket: int = Field(8, ge=1)
    threads_per_core: int = Field(1, ge=1, le=MAX_SMT)
    # per-thread speed while both SMT siblings run
    smt_speed: float = Field(0.6, gt=0, le=1, allow_inf_nan=False)
    # speed of a task whose memory is on another NUMA node
    numa_remote_speed: float = Field(0.75, gt=0, le=1, allow_inf_nan=False)
    siblings: list[list[Annotated[int, Field(ge=0)]]] | None = None
    # the node's memory ("192Gi"): memory cgroups are modelled when it is given (and
    # Koordinator's batch-memory uses it); swap space, none by default
    memory: Annotated[int, BeforeValidator(memory_bytes)] | None = None
    swap: Annotated[int, BeforeValidator(memory_bytes)] = 0
    # the block device and the egress link: modelled when given
    disk: Disk | None = None
    network: Network | None = None

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
            raise _FieldErrors(errors)
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
            raise _FieldErrors(errors)
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


class Kernel(_Table):
    """[kernel]: scheduler tunables; unset ones take the kernel's defaults (scaled by
    1 + ilog2(min(ncpus, 8)) as the kernel scales them), which the core computes."""

    scheduler: Literal["cfs", "eevdf"] = "cfs"  # CFS (Linux <= 6.5) or EEVDF (>= 6.6)
    hz: int = Field(250, ge=1, le=10_000)
    sched_latency: PositiveDuration | None = None
    sched_min_granularity: PositiveDuration | None = None
    sched_wakeup_granularity: Duration | None = None
    sched_idle_min_granularity: PositiveDuration | None = None
    # EEVDF base slice as debugfs shows it (default: 0.70 ms scaled by CPU count, like the kernel)
    base_slice: PositiveDuration | None = None
    # openEuler SMT expeller: offline tasks stay off the SMT sibling of online work
    smt_expeller: bool = False
    # vendor memcg extensions: Alibaba Cloud Linux (memory.wmark_ratio/wmark_scale_factor,
    # memory.priority/use_priority_oom: Koordinator writes them) and openEuler
    # (memory.high_async_ratio: rubik writes it); writes fail on a kernel without them
    alinux_memcg: bool = False
    openeuler_memcg: bool = False
    # vm.watermark_scale_factor (1/10000 of memory between the node's watermarks)
    watermark_scale_factor: int = Field(10, ge=1, le=3000)
    # CPU a task spends per page it reclaims itself (a model constant: ≈ 1 µs, clean cache)
    reclaim_per_page: PositiveDuration = 1_000
    # vm.dirty_ratio / vm.dirty_background_ratio (% of dirtyable memory)
    dirty_ratio: int = Field(20, ge=1, le=100)
    dirty_background_ratio: int = Field(10, ge=0, le=99)
    # writeback charged to the cgroup that dirtied the pages (cgroup v2; openEuler's
    # cgroup1_writeback, which rubik's ioCost needs); off: the flusher's IO is the root's
    cgroup_writeback: bool = False

    @model_validator(mode="after")
    def _check_dirty(self) -> Kernel:
        if self.dirty_background_ratio >= self.dirty_ratio:
            raise _FieldErrors(
                [(("dirty_background_ratio",), f"must be below dirty_ratio ({self.dirty_ratio}) (got {self.dirty_background_ratio})")]
            )
        return self

    def core_spec(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
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
        }


def trace_series(workload: Any, ref: TraceRef, where: str):
    """(times, values, key) a workload's trace player plays."""
    from traces.format import TraceError
    from traces.player import load, series

    if ref.file is None:
        raise TraceError(f"{where}.file: which trace? give trace.file, or --trace FILE")
    trace = load(ref.file)
    if workload.kind == "duty":
        t, v = series(trace, ref.entity, "cpu_cores", None, where)
        return t, v, "cores"
    mean = _mean_s(workload.service)
    t, v = series(trace, ref.entity, "rate_per_s", mean, where)
    return t, v, "rate_per_s"


def trace_memory_series(workload: Any, ref: TraceRef):
    """(times, bytes) of a duty workload's trace entity, or None when it records no memory."""
    from traces.player import load

    e = load(ref.file).entities[ref.entity]
    return None if e.memory_bytes is None else (e.t_s, e.memory_bytes)


def _mean_s(d: Any) -> float:
    if d.dist == "constant":
        return d.value / 1e9
    if d.dist in ("exponential", "lognormal"):
        return d.mean / 1e9
    mids = [(a + b) / 2 for a, b in pairwise(d.edges)]
    return sum(m * w for m, w in zip(mids, d.weights, strict=True)) / sum(d.weights) / 1e9


def _check_trace(name: str, workload: Any, ref: TraceRef) -> list[FieldError]:
    from traces.format import TraceError

    where = f"workloads.{name}.trace"
    try:
        t, v, key = trace_series(workload, ref, where)
    except TraceError as err:
        return [(("workloads", name, "trace"), str(err))]
    if key == "cores" and len(v) and float(v.max()) * ref.scale > workload.max_threads:
        return [(("workloads", name, "max_threads"), f"the trace asks for up to {float(v.max()) * ref.scale:g} cores; raise max_threads")]
    return []


def _memory_limit(value: Any) -> int:
    """A memory limit: a size, or "max" / -1 for none."""
    if value == "max" or value == -1:
        return -1
    return memory_bytes(value)


def _one_of(*allowed: int) -> AfterValidator:
    # Not Literal[0, 1]: a Literal would take `true` for 1, and a knob file holds a number.
    def check(value: int) -> int:
        if value not in allowed:
            raise ValueError(f"must be {_alternatives(allowed)} (got {value})")
        return value

    return AfterValidator(check)


class Cgroup(_Table):
    """[cgroups."path"]: knobs under their kernel file names (cgroup v1 cpu controller)."""

    cpu_shares: int = Field(1024, alias="cpu.shares", ge=2, le=262_144)
    cpu_idle: Annotated[int, _one_of(0, 1)] = Field(0, alias="cpu.idle")
    # openEuler: -1 marks the group offline (runs only while no online task is runnable)
    cpu_qos_level: Annotated[int, _one_of(-1, 0)] = Field(0, alias="cpu.qos_level")
    # CFS bandwidth control, in the files' units (µs); quota -1 is "no limit"
    cpu_cfs_quota_us: int = Field(-1, alias="cpu.cfs_quota_us", ge=-1)
    cpu_cfs_period_us: int = Field(100_000, alias="cpu.cfs_period_us", ge=1_000, le=1_000_000)
    cpu_cfs_burst_us: int = Field(0, alias="cpu.cfs_burst_us", ge=0)
    # cpusets in the kernel's list format ("0-3,6"); unset = the parent's (checked by the core)
    cpuset_cpus: str | None = Field(None, alias="cpuset.cpus")
    cpuset_mems: str | None = Field(None, alias="cpuset.mems")
    # memcg (bytes, or "512Mi"; "max" or -1: no limit): v1 memory.limit_in_bytes is v2
    # memory.max; memory.high/low/min as v2 (and Alibaba Cloud Linux's v1) have them
    memory_limit: Annotated[int, BeforeValidator(_memory_limit)] = Field(-1, alias="memory.limit_in_bytes")
    memory_high: Annotated[int, BeforeValidator(_memory_limit)] = Field(-1, alias="memory.high")
    memory_low: Annotated[int, BeforeValidator(memory_bytes)] = Field(0, alias="memory.low")
    memory_min: Annotated[int, BeforeValidator(memory_bytes)] = Field(0, alias="memory.min")
    memory_oom_group: Annotated[int, _one_of(0, 1)] = Field(0, alias="memory.oom.group")
    # blkio: the proportional schedulers' weight (cfq blkio.weight, bfq blkio.bfq.weight, v2
    # io.bfq.weight), iocost's (v2 io.weight), blk-throttle limits (bytes/s, IO/s; 0: none)
    blkio_weight: int = Field(100, alias="blkio.weight", ge=1, le=1000)
    blkio_cost_weight: int = Field(100, alias="blkio.cost.weight", ge=1, le=10_000)
    blkio_read_bps: Rate = Field(0, alias="blkio.throttle.read_bps_device", ge=0)
    blkio_write_bps: Rate = Field(0, alias="blkio.throttle.write_bps_device", ge=0)
    blkio_read_iops: int = Field(0, alias="blkio.throttle.read_iops_device", ge=0)
    blkio_write_iops: int = Field(0, alias="blkio.throttle.write_iops_device", ge=0)
    # net_cls.classid (4294967295 marks offline traffic for rubik's bandwidth manager) and a
    # plain egress rate limit (tc on the pod's traffic; not a cgroup file)
    net_cls_classid: int = Field(0, alias="net_cls.classid", ge=0, le=4_294_967_295)
    net_egress_bps: Rate = Field(0, alias="net.egress_bps", ge=0)

    @model_validator(mode="after")
    def _check(self) -> Cgroup:
        # tg_set_cfs_bandwidth's rules; the parent/child rule is checked by the core.
        errors: list[FieldError] = []
        quota = self.cpu_cfs_quota_us
        if quota != -1 and quota < 1_000:
            errors.append((("cpu.cfs_quota_us",), f"must be -1 (no limit) or >= 1000 (got {quota})"))
        elif quota != -1 and self.cpu_cfs_burst_us > quota:
            errors.append(
                (
                    ("cpu.cfs_burst_us",),
                    f"must not exceed cpu.cfs_quota_us ({quota}) (got {self.cpu_cfs_burst_us})",
                )
            )
        if self.memory_limit >= 0 and self.memory_high > self.memory_limit:
            errors.append((("memory.high",), f"must not be above memory.limit_in_bytes ({self.memory_limit}) (got {self.memory_high})"))
        if errors:
            raise _FieldErrors(errors)
        return self

    def core_spec(self, path: str) -> dict[str, Any]:
        parent, _, _ = path.rpartition("/")
        return {
            "name": path,
            "parent": parent,
            "cpu.shares": self.cpu_shares,
            "cpu.idle": self.cpu_idle,
            "cpu.qos_level": self.cpu_qos_level,
            "cpu.cfs_quota_us": self.cpu_cfs_quota_us,
            "cpu.cfs_period_us": self.cpu_cfs_period_us,
            "cpu.cfs_burst_us": self.cpu_cfs_burst_us,
            "cpuset.cpus": self.cpuset_cpus,
            "cpuset.mems": self.cpuset_mems,
            "memory.limit_in_bytes": self.memory_limit,
            "memory.high": self.memory_high,
            "memory.low": self.memory_low,
            "memory.min": self.memory_min,
            "memory.oom.group": self.memory_oom_group,
            "blkio.weight": self.blkio_weight,
            "blkio.cost.weight": self.blkio_cost_weight,
            "blkio.throttle.read_bps_device": self.blkio_read_bps,
            "blkio.throttle.write_bps_device": self.blkio_write_bps,
            "blkio.throttle.read_iops_device": self.blkio_read_iops,
            "blkio.throttle.write_iops_device": self.blkio_write_iops,
            "net_cls.classid": self.net_cls_classid,
            "net.egress_bps": self.net_egress_bps,
        }


# --- pods and the kubelet layout -------------------------------------------------------

CpuQuantity = Annotated[int, BeforeValidator(cpu_milli)]
MemoryQuantity = Annotated[int, BeforeValidator(memory_bytes)]


class PodTable(_Table):
    """[pods.name]: a pod as Koordinator and the kubelet see it. CPU as Kubernetes writes it
    (2, 0.5, "500m"), memory as "16000Mi"; for a BE pod these are its batch-cpu/batch-memory.
    Without `cgroup` the pod gets the kubelet's cgroup (kubepods/[burstable|besteffort/]pod-name)."""

    qos: Literal["SYSTEM", "LSE", "LSR", "LS", "BE"] | None = None  # koordinator.sh/qosClass
    priority_class: Literal["koord-prod", "koord-mid", "koord-batch", "koord-free"] | None = None
    priority: int | None = Field(None, ge=0)  # spec.priority
    cpu_request: CpuQuantity = 0
    cpu_limit: CpuQuantity | None = None
    memory_request: MemoryQuantity = 0
    memory_limit: MemoryQuantity | None = None
    cgroup: str | None = None
    # koord-scheduler binds LSR/LSE koord-prod pods to CPUs (scheduling.koordinator.sh/resource-spec)
    cpu_bind_policy: Literal["Default", "FullPCPUs", "SpreadByPCPUs"] | None = None

    @model_validator(mode="after")
    def _check(self) -> PodTable:
        errors: list[FieldError] = []
        if self.cpu_limit is not None and self.cpu_limit < self.cpu_request:
            errors.append((("cpu_limit",), f"must be >= cpu_request ({self.cpu_request}m) (got {self.cpu_limit}m)"))
        if self.memory_limit is not None and self.memory_limit < self.memory_request:
            errors.append((("memory_limit",), "must be >= memory_request"))
        if errors:
            raise _FieldErrors(errors)
        return self

    def pod(self, name: str) -> Pod:
        raw = kube_qos(self.cpu_request, self.cpu_limit, self.memory_request, self.memory_limit)
        # GetPodQoSClassWithDefault: Guaranteed → LSR, Burstable → LS, BestEffort → BE
        default = {KubeQoS.GUARANTEED: QoSClass.LSR, KubeQoS.BURSTABLE: QoSClass.LS, KubeQoS.BESTEFFORT: QoSClass.BE}[raw]
        qos = QoSClass(self.qos) if self.qos else default
        if self.priority_class:
            klass = PriorityClass.named(self.priority_class)
        elif self.priority is not None:
            klass = next((p for p in PriorityClass if p.low <= self.priority <= p.high), PriorityClass.for_qos(qos))
        else:
            klass = PriorityClass.for_qos(qos)
        value = self.priority if self.priority is not None else klass.default
        pod = Pod(
            name=name,
            qos=qos,
            priority=klass,
            priority_value=value,
            cpu_request=self.cpu_request,
            cpu_limit=self.cpu_limit,
            memory_request=self.memory_request,
            memory_limit=self.memory_limit,
            cgroup=self.cgroup or "",
            bind_policy=self.cpu_bind_policy,
        )
        return pod if self.cgroup else replace(pod, cgroup=kubelet_cgroup(name, pod.kube_qos))


class Kubelet(_Table):
    """[kubelet]: the node's reservation (kube-reserved + system-reserved CPU): allocatable =
    capacity − reserved_cpu; kubepods' cpu.shares follow the allocatable CPU."""

    reserved_cpu: CpuQuantity = 0


class Scheduler(_Table):
    """[scheduler]: koord-scheduler's NUMA resource plugin (koordinator.md §6.1)."""

    numa_allocate_strategy: Literal["MostAllocated", "LeastAllocated", "DistributeEvenly"] = DEFAULT_NUMA_STRATEGY
    default_cpu_bind_policy: Literal["FullPCPUs", "SpreadByPCPUs"] = DEFAULT_CPU_BIND_POLICY


# --- the scenario ----------------------------------------------------------------------


def _policy_targets(policy: Any) -> set[str]:
    """Every cgroup a policy's configuration names (so that a typo is caught here)."""
    names: set[str] = set()
    for attr in ("offline", "online", "turbo", "be", "ls"):
        names.update(getattr(policy, attr, []))
    if getattr(policy, "besteffort", None):
        names.add(policy.besteffort)
    for attr in ("burst", "requests"):
        names.update(getattr(policy, attr, {}))
    return names


class Meta(_Table):
    """[scenario]: name, length of the run and what is measured."""

    name: str = Field(min_length=1)
    description: str = ""
    duration: PositiveDuration
    warmup: Duration = 0  # stats are reset at this time; only what follows is measured
    seed: int = Field(1, ge=0, lt=2**64)
    sample_interval: Duration = 100_000_000  # 0 = no time series

    @model_validator(mode="after")
    def _check(self) -> Meta:
        errors: list[FieldError] = []
        if "/" in self.name or self.name in (".", ".."):
            errors.append((("name",), f"must not contain '/' (got {_show(self.name)})"))
        if self.warmup >= self.duration:
            errors.append(
                (
                    ("warmup",),
                    f"must be less than scenario.duration ({format_duration(self.duration)}) (got {format_duration(self.warmup)})",
                )
            )
        if errors:
            raise _FieldErrors(errors)
        return self


class Run(_Table):
    """[[runs]]: one run of the scenario, changed by `set` (dotted path -> value)."""

    name: str = Field(min_length=1)
    description: str = ""
    baseline: bool = False
    # where the run sits in a results grid (the seeds' tables: a row per policy, a column
    # per offline load); both or neither
    row: str = ""
    column: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict, alias="set")

    @model_validator(mode="after")
    def _check(self) -> Run:
        if bool(self.row) != bool(self.column):
            raise _FieldErrors([(("column" if self.row else "row",), "give both row and column, or neither")])
        return self


@dataclass(frozen=True)
class Variant:
    """A run of the scenario: its name, whether it is the baseline, and the scenario as the
    run's overrides left it (with no runs of its own)."""

    name: str
    baseline: bool
    scenario: Scenario
    grid: tuple[str, str] | None = None  # (row, column) in the results grid


class Scenario(_Table):
    scenario: Meta
    node: Topology = Field(default_factory=Topology)
    kernel: Kernel = Field(default_factory=Kernel)
    cgroups: dict[str, Cgroup] = {}
    pods: dict[str, PodTable] = {}
    kubelet: Kubelet = Field(default_factory=Kubelet)
    scheduler: Scheduler = Field(default_factory=Scheduler)
    workloads: dict[str, Workload] = {}
    # the node agent ([policy] name = "none" | "static" | "rubik" and its configuration)
    policy: dict[str, Any] | None = None
    # `colosim tune`'s study ([tune]: policy, params, slo, objective, trials, seeds, batch);
    # validated by sim.tuning, ignored by run and replay
    tune: dict[str, Any] | None = None
    runs: list[Run] = []

    _variants: list[Variant] = PrivateAttr(default_factory=list)
    _pods: tuple[Pod, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        errors: list[FieldError] = []
        errors += self._place_pods()
        for path in self.cgroups:
            parent, _, leaf = path.rpartition("/")
            if not leaf or path.startswith("/") or "//" in path:
                errors.append((("cgroups", path), 'must be a path like "online" or "kubepods/besteffort"'))
            elif parent and parent not in self.cgroups:
                errors.append((("cgroups", path), f"parent cgroup {_show(parent)} is not declared"))
        declared = ", ".join(self.cgroups) or "none"
        pod_cgroups = {p.name: p.cgroup for p in self._pods}
        for name, workload in self.workloads.items():
            if workload.pod is not None:
                if workload.pod not in pod_cgroups:
                    known = ", ".join(pod_cgroups) or "none"
                    errors.append((("workloads", name, "pod"), f"no pod named {_show(workload.pod)} (declared: {known})"))
                    continue
                workload.cgroup = pod_cgroups[workload.pod]
            if workload.cgroup not in self.cgroups:
                errors.append(
                    (
                        ("workloads", name, "cgroup"),
                        f"no cgroup named {_show(workload.cgroup)} (declared: {declared})",
                    )
                )
        for name, workload in self.workloads.items():
            ref = getattr(workload, "trace", None)
            if ref is not None and workload.enabled:
                errors += _check_trace(name, workload, ref)
            if workload.kind in MEMORY_KINDS and workload.enabled and self.node.memory is None:
                errors.append((("workloads", name, "kind"), 'a memory workload needs the node\'s memory: give [node] memory = "64Gi"'))
            if workload.kind in IO_KINDS and workload.enabled and self.node.disk is None:
                errors.append(
                    (("workloads", name, "kind"), "an IO workload needs the node's disk: give [node.disk] (its defaults are a SATA SSD)")
                )
            if workload.kind in NET_KINDS and workload.enabled and self.node.network is None:
                errors.append(
                    (("workloads", name, "kind"), 'a network workload needs the node\'s link: give [node.network] egress = "10Gbit"')
                )
        if self.policy is not None:
            from policies import PolicyError

            try:
                policy = self.build_policy()
            except PolicyError as err:
                where, _, why = str(err).partition(": ")
                errors.append((tuple(where.split(".")), why))
            else:
                for cg in sorted(policy.watched_cgroups() | _policy_targets(policy)):
                    if cg not in self.cgroups:
                        errors.append((("policy",), f"names cgroup {_show(cg)}, which is not declared ({declared})"))
        seen: set[str] = set()
        for i, run in enumerate(self.runs):
            if run.name in seen:
                errors.append((("runs", i, "name"), f"duplicate run name {_show(run.name)}"))
            seen.add(run.name)
        baselines = [i for i, run in enumerate(self.runs) if run.baseline]
        for i in baselines[1:]:
            errors.append((("runs", i, "baseline"), "only one run can be the baseline"))
        if errors:
            raise _FieldErrors(errors)
        return self

    def _place_pods(self) -> list[FieldError]:
        """Bind LSR/LSE pods to CPUs (koord-scheduler), then give every pod the kubelet's
        cgroups; a cgroup the scenario also declares keeps the fields it sets."""
        errors: list[FieldError] = []
        topology = self.node.cpus()
        taken: set[int] = set()
        pods: list[Pod] = []
        for name, table in self.pods.items():
            where = ("pods", name)
            if not name or "/" in name or name in (".", ".."):
                errors.append((where, "a pod name must not be empty or contain '/'"))
                continue
            pod = table.pod(name)
            if table.cpu_bind_policy is not None:
                need, rest = divmod(pod.cpu_request, 1000)
                why = None
                if pod.qos not in (QoSClass.LSR, QoSClass.LSE) or pod.priority is not PriorityClass.PROD:
                    why = f"only LSR and LSE pods of koord-prod are bound to CPUs (this one is {pod.qos.value}, {pod.priority.label})"
                elif need == 0 or rest:
                    why = f"a bound pod requests a whole number of CPUs (got cpu_request {pod.cpu_request}m)"
                if why is None:
                    policy = table.cpu_bind_policy
                    if policy == "Default":
                        policy = self.scheduler.default_cpu_bind_policy
                    try:
                        cpus = take_cpus(topology, taken, need, policy, self.scheduler.numa_allocate_strategy)
                    except BindError as err:
                        why = f"cannot bind: {err}"
                    else:
                        taken.update(cpus)
                        pod = replace(pod, cpuset=tuple(cpus))
                if why is not None:
                    errors.append((where + ("cpu_bind_policy",), why))
            if table.cgroup is not None and table.cgroup not in self.cgroups:
                errors.append(
                    (
                        where + ("cgroup",),
                        f"no cgroup named {_show(table.cgroup)} (a pod needs a declared cgroup, or none for the kubelet's)",
                    )
                )
            pods.append(pod)
        self._pods = tuple(pods)
        if not pods:
            return errors
        layout = kubelet_knobs(pods, self.node.ncpus, self.kubelet.reserved_cpu)
        merged: dict[str, Cgroup] = {}
        for path, knobs in layout.items():
            mine = self.cgroups.get(path)
            if mine is not None:
                own = {Cgroup.model_fields[f].alias: getattr(mine, f) for f in mine.model_fields_set}
                knobs = {**knobs, **own}
            merged[path] = Cgroup.model_validate(knobs)
        self.cgroups = {**merged, **{k: v for k, v in self.cgroups.items() if k not in merged}}
        return errors

    def build_policy(self):
        """The node agent of [policy] (None without one), given the pods and the node's
        memory (Koordinator's batch-memory needs it)."""
        if self.policy is None:
            return None
        from policies import build_policy

        table = dict(self.policy)
        if table.get("name") == "koordinator" and self.node.memory and "node_memory" not in table:
            table["node_memory"] = self.node.memory
        return build_policy(table, pods=self._pods)

    def pod_list(self) -> tuple[Pod, ...]:
        """The pods, as the agents see them (bound CPUs included)."""
        return self._pods

    # -- convenient names for the [scenario] table

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @property
    def duration_s(self) -> float:
        return self.scenario.duration / 1e9

    @property
    def warmup_s(self) -> float:
        return self.scenario.warmup / 1e9

    @property
    def ncpus(self) -> int:
        return self.node.ncpus

    @property
    def baseline(self) -> str:
        """Name of the run the others are compared with (the first, unless one says so)."""
        return next(v.name for v in self.variants() if v.baseline)

    def variants(self) -> list[Variant]:
        """One variant per [[runs]] entry, or the scenario itself when there are none."""
        if not self._variants:
            self._variants = [Variant(self.name, True, self.model_copy(update={"runs": []}))]
        return list(self._variants)

    def core_spec(self, seed: int | None = None) -> dict[str, Any]:
        """The document `sim._core.Node` takes (see sim/_core.pyi); ignores [[runs]]."""
        ncpus = self.node.ncpus
        return {
            "seed": self.seed if seed is None else seed,
            "topology": self.node.core_spec(),
            "kernel": self.kernel.core_spec(),
            "cgroups": [self.cgroups[path].core_spec(path) for path in self._cgroup_order()],
            "workloads": [w.core_spec(name, ncpus) for name, w in self.workloads.items() if w.enabled],
            "sample_interval_ns": self.scenario.sample_interval,
            "memory": None
            if self.node.memory is None
            else {
                "total_bytes": self.node.memory,
                "swap_bytes": self.node.swap,
                "reclaim_ns_per_page": self.kernel.reclaim_per_page,
                "watermark_scale_factor": self.kernel.watermark_scale_factor,
            },
            "disk": None if self.node.disk is None else self.node.disk.core_spec(),
            "network": None if self.node.network is None else self.node.network.core_spec(),
        }

    def _cgroup_order(self) -> list[str]:
        # The core wants parents before children; otherwise keep the order of the file.
        order: list[str] = []
        for path in self.cgroups:
            chain = []
            while path and path not in order and path not in chain:
                chain.append(path)
                path = path.rpartition("/")[0]
            order.extend(reversed(chain))
        return order

    # -- construction

    @classmethod
    def from_document(
        cls,
        document: Mapping[str, Any],
        overrides: Iterable[str] | Mapping[str, Any] = (),
    ) -> Scenario:
        """Validate a parsed TOML document and every run; the first document that fails
        raises ScenarioError with all of its errors.  `overrides` (`key=value` strings or
        {path: value}) apply to every run and win over the runs' own `set`."""
        everywhere = normalize(overrides)
        for path, _ in everywhere:
            if path[0] == "runs":
                raise ScenarioError(f"--set {format_path(path)}: runs cannot be overridden")
        base = copy.deepcopy(dict(document))
        for path, value in everywhere:
            apply_override(base, path, value, where="--set ")
        scenario = _validate(cls, base, where="")

        variants = []
        for i, run in enumerate(scenario.runs):
            where = f"runs[{i}] {_show(run.name)}: set "
            doc = copy.deepcopy(dict(document))
            doc.pop("runs", None)
            for key, value in run.overrides.items():
                try:
                    path = parse_path(key)
                except ScenarioError as err:
                    raise ScenarioError(f"{where}{err}") from None
                if path[0] in ("scenario", "runs"):
                    raise ScenarioError(
                        f"{where}{format_path(path)}: a run cannot change [{path[0]}] (duration, warm-up and seed are shared by all runs)"
                    )
                apply_override(doc, path, value, where=where)
            for path, value in everywhere:
                apply_override(doc, path, value, where="--set ")
            variant = _validate(cls, doc, where=f"runs[{i}] {_show(run.name)}: ")
            variants.append(Variant(run.name, run.baseline, variant, (run.row, run.column) if run.row else None))
        if variants and not any(v.baseline for v in variants):
            first = variants[0]
            variants[0] = Variant(first.name, True, first.scenario, first.grid)
        scenario._variants = variants
        return scenario

    @classmethod
    def from_toml(
        cls,
        text: str,
        source: str = "scenario.toml",
        overrides: Iterable[str] | Mapping[str, Any] = (),
    ) -> Scenario:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ScenarioError(_toml_message(source, err)) from None
        return cls.from_document(document, overrides)


def read_document(path: str | Path) -> dict[str, Any]:
    """A TOML file's document; ScenarioError names what is wrong with the file."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a directory, not a scenario file") from None
    except OSError as err:
        raise ScenarioError(f"{path}: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {err.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(_toml_message(str(path), err)) from None


def load_scenario(path: str | Path, overrides: Iterable[str] | Mapping[str, Any] = ()) -> Scenario:
    """Read and validate a scenario file; ScenarioError names what is wrong."""
    return Scenario.from_document(read_document(path), overrides)


def trace_overrides(document: Mapping[str, Any], file: str | Path) -> dict[str, Any]:
    """`--trace FILE`: the file every trace-driven workload of the document plays."""
    out = {}
    for name, w in (document.get("workloads") or {}).items():
        if isinstance(w, Mapping) and isinstance(w.get("trace"), Mapping):
            out[format_path(("workloads", name, "trace", "file"))] = str(file)
    if not out:
        raise ScenarioError(
            f"--trace {file}: no workload of the scenario follows a trace (give one a [workloads.NAME.trace] table with its entity)"
        )
    return out


def policy_file(path: str | Path) -> dict[str, Any]:
    """A policy configuration file (what `colosim tune` writes): one `[policy]` table, as an
    override that replaces the policy in every run (`--policy FILE` of run and replay)."""
    document = read_document(path)
    extra = sorted(set(document) - {"policy"})
    if extra or not isinstance(document.get("policy"), dict):
        raise ScenarioError(
            f"{path}: a policy file holds one [policy] table and nothing else" + (f" (found {', '.join(extra)})" if extra else "")
        )
    return {"policy": document["policy"]}


# --- error messages --------------------------------------------------------------------


def _validate(cls: type[Scenario], document: dict[str, Any], where: str) -> Scenario:
    try:
        return cls.model_validate(document)
    except ValidationError as err:
        messages = [f"{format_path(p) or '(top level)'}: {m}" for p, m in _errors(err, document)]
        raise ScenarioError(where + "; ".join(messages)) from None


def _toml_message(source: str, err: tomllib.TOMLDecodeError) -> str:
    # tomllib says "Invalid value (at line 3, column 9)"; lead with the place, as compilers do.
    message = str(err)
    lineno = getattr(err, "lineno", None)  # Python >= 3.14 has it; parse the text before that
    if lineno is None and "(at line " in message:
        message, _, place = message.rpartition(" (at line ")
        line, _, column = place.rstrip(")").partition(", column ")
        return f"{source} line {line}: {message} (column {column})"
    if lineno is not None:
        message = getattr(err, "msg", message)
        return f"{source} line {lineno}: {message} (column {getattr(err, 'colno', '?')})"
    message = message.replace(" (at end of document)", "")
    return f"{source}: {message} (at end of document)"


# The tagged tables: each model's tag is the one value of its discriminator's Literal.
_TAGGED: dict[str, tuple[type[_Table], ...]] = {
    "kind": (Hog, ClosedLoop, OpenLoop, Bursty, MemoryHog, FileServer, CacheWriter, Analytics, Duty, Dd, Database, Iperf),
    "dist": (Constant, Exponential, Lognormal, Empirical),
}
_BY_TAG: dict[str, type[_Table]] = {
    get_args(model.model_fields[key].annotation)[0]: model for key, models in _TAGGED.items() for model in models
}
_TAGS = {key: tuple(get_args(m.model_fields[key].annotation)[0] for m in models) for key, models in _TAGGED.items()}
_ALL_TAGS = set(_BY_TAG)


def _document_path(loc: tuple[str | int, ...], document: Any) -> tuple[str | int, ...]:
    """The error's place in the user's document.

    pydantic puts the tag of a discriminated union into the location
    (workloads.web.open_loop.rate); walking the document alongside drops it.  Past a scalar
    (a shorthand like `service = "48ms"`) the rest of the location is pydantic's own.
    """
    out: list[str | int] = []
    node: Any = document
    skipped = False  # a tag never follows a tag
    for part in loc:
        if not skipped and part in _ALL_TAGS:
            if isinstance(node, dict):
                is_tag = any(node.get(key) == part for key in _TAGS)
            else:  # a scalar the shorthand turned into a table
                is_tag = node is not None and not isinstance(node, list)
            if is_tag:
                skipped = True
                continue
        skipped = False
        if isinstance(node, dict):
            out.append(part)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int):
            out.append(part)
            node = node[part] if 0 <= part < len(node) else None
        elif node is None:
            out.append(part)
        else:
            break
    return tuple(out)


def _errors(err: ValidationError, document: Any) -> list[FieldError]:
    out: list[FieldError] = []
    for error in err.errors():
        path = _document_path(error["loc"], document)
        kind, ctx, got = error["type"], error.get("ctx") or {}, error.get("input")
        if kind == "value_error" and isinstance(ctx.get("error"), _FieldErrors):
            out.extend((path + rel, message) for rel, message in ctx["error"].errors)
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            key = ctx.get("discriminator", "").strip("'\"")
            tags = _alternatives(_TAGS.get(key, ()))
            if kind == "union_tag_invalid":
                out.append((path + (key,), f"must be {tags} (got {_show(ctx.get('tag'))})"))
            else:
                out.append((path + (key,), f"required field missing: {tags}"))
        else:
            out.append((path, _describe(kind, ctx, got, error["msg"], path, document)))
    # An unknown field usually explains a missing one beside it (a typo), so it goes first.
    return sorted(out, key=lambda e: not e[1].startswith("unknown field"))


def _describe(kind: str, ctx: dict[str, Any], got: Any, msg: str, path: tuple, document: Any) -> str:
    bounds = {
        "greater_than": (">", "gt"),
        "greater_than_equal": (">=", "ge"),
        "less_than": ("<", "lt"),
        "less_than_equal": ("<=", "le"),
    }
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {_show(ctx[key])} (got {_show(got)})"
    if kind == "extra_forbidden":
        if len(path) == 3 and path[0] == "cgroups" and isinstance(got, dict):
            return f'unknown field (a child cgroup is declared by its quoted path, e.g. [cgroups."{path[1]}/{path[2]}"])'
        close = difflib.get_close_matches(str(path[-1]), _fields_at(path[:-1], document), n=1)
        return f'unknown field (did you mean "{close[0]}"?)' if close else "unknown field"
    if kind == "missing":
        return "required field missing"
    if kind == "value_error":
        return str(ctx.get("error", msg)).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"must be {ctx['expected'].replace(chr(39), chr(34))} (got {_show(got)})"
    simple = {
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "int_from_float": "must be an integer",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be a string",
        "dict_type": "must be a table",
        "model_type": "must be a table",
        "model_attributes_type": "must be a table",
        "list_type": "must be an array",
        "string_too_short": "must not be empty",
        "finite_number": "must be a finite number",
    }
    if kind in simple:
        return f"{simple[kind]} (got {_show(got)})"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} items (got {_show(got)})"
    return msg[:1].lower() + msg[1:]


def _fields_at(path: tuple[str | int, ...], document: Any) -> list[str]:
    """Field names of the table at `path`, for "did you mean" hints."""
    model: Any = None
    node: Any = document
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    tag = node.get("kind") or node.get("dist") if isinstance(node, dict) else None
    fixed = {"scenario": Meta, "node": Topology, "kernel": Kernel, "kubelet": Kubelet, "scheduler": Scheduler}
    if not path:
        model = Scenario
    elif len(path) == 1:
        model = fixed.get(str(path[0]))
    elif path[0] == "cgroups" and len(path) == 2:
        model = Cgroup
    elif path[0] == "pods" and len(path) == 2:
        model = PodTable
    elif path[0] == "runs" and len(path) == 2:
        model = Run
    elif path[0] == "workloads":
        model = _BY_TAG.get(tag) if isinstance(tag, str) else None
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _alternatives(values: Iterable[Any]) -> str:
    shown = [_show(v) for v in values]
    return " or ".join(shown) if len(shown) < 3 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _show(value: Any) -> str:
    """A value as it would be written in TOML, for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    return repr(value)
