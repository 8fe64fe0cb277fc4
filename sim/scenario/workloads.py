"""[workloads.NAME]: what runs on the node, one model per `kind`, and the traces that drive them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

from pydantic import BeforeValidator, Field, PlainValidator, model_validator

from policies.pods import memory_bytes
from sim.duration import format_duration
from sim.limits import DEFAULT_BACKLOG, MAX_BACKLOG, PID_MAX_LIMIT
from sim.reported import Report
from sim.scenario.base import Duration, FieldError, FieldErrors, PositiveDuration, Rate, Table, alternatives, show
from sim.scenario.distributions import Constant, Distribution, mean_s
from sim.scenario.hardware import Contention


def _fanout(value: Any) -> int | str:
    if value == "ncpus" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= PID_MAX_LIMIT):
        return value
    if isinstance(value, int) and value > PID_MAX_LIMIT:
        raise ValueError(f"must be at most {PID_MAX_LIMIT} threads (PID_MAX_LIMIT) (got {value})")
    raise ValueError(f'must be an integer >= 1 or "ncpus" (got {show(value)})')


# clickhouse-benchmark's query in the seed experiment (../shared/seeds/002, test_demo.sh)
# A workload's `cgroup` naming the root cgroup (the core's "" path): its tasks are in the root
# task group, where [kernel] autogroup applies (core_rs/model/src/autogroup.rs).
ROOT_CGROUP = "/"

SEED_QUERY = "SELECT * FROM system.numbers LIMIT 10000000 OFFSET 10000000"


# what each load generator can run: redis-benchmark's tests (-t) and pgbench's built-in
# scripts (-b); the first is the default (a cache read; a primary-key SELECT)
HOST_TESTS: dict[str, tuple[str, ...]] = {
    "redis": ("get", "set", "incr", "lpush", "rpush", "lpop", "rpop", "sadd", "hset", "spop", "zadd", "ping_inline", "ping_mbulk"),
    "postgres": ("select-only", "simple-update", "tpcb-like"),
}


def _host_shorthand(value: Any) -> Any:
    return {"program": value} if isinstance(value, str) else value


class HostProgram(Table):
    """[workloads.x.host]: what runs for this workload in `colosim replay` (the simulator
    ignores it). "builtin" is colosim-load, which executes the workload's own distributions;
    the others are the real programs of the seed experiments."""

    program: Literal["builtin", "stress", "stress-ng", "clickhouse", "nginx", "redis", "postgres", "command"] = "builtin"
    command: list[str] | None = None  # program = "command": the argv of a CPU-bound job
    query: str = SEED_QUERY  # clickhouse: the query clickhouse-benchmark sends
    path: str = "/"  # nginx: the URL path wrk requests
    # redis: the redis-benchmark test (-t); postgres: the pgbench built-in script (-b)
    test: str | None = None

    @model_validator(mode="after")
    def _check(self) -> HostProgram:
        if self.program == "command" and not self.command:
            raise FieldErrors([(("command",), 'must be given (a non-empty list) when program = "command"')])
        if self.program != "command" and self.command is not None:
            raise FieldErrors([(("command",), 'is only for program = "command"')])
        if self.test is not None:
            tests = HOST_TESTS.get(self.program)
            if tests is None:
                raise FieldErrors([(("test",), 'is only for program = "redis" or "postgres"')])
            if self.test not in tests:
                raise FieldErrors([(("test",), f"a {self.program} test is {alternatives(tests)} (got {show(self.test)})")])
        return self

    @property
    def bench_test(self) -> str:
        """The load generator's test: the one given, or the program's first (its default)."""
        return self.test or HOST_TESTS[self.program][0]


# The most bursts a request may come in (core_rs/model/src/shape.rs MAX_BURSTS).
MAX_BURSTS = 1_000_000


class Shape(Table):
    """[workloads.x.shape]: a request's CPU on each of its threads (every fanout thread, or
    the pool worker) comes in `bursts` equal parts, and between two consecutive parts the
    thread sleeps for a draw of `wait` — off the run queue, charged nothing, woken through
    the scheduler's ordinary wakeup path (a read, a lock, a network round trip). The
    request's latency includes the waits. One burst (the default) is the unshaped model."""

    bursts: int = Field(default=1, ge=1, le=MAX_BURSTS)
    wait: Distribution | None = None

    @model_validator(mode="after")
    def _check(self) -> Shape:
        if self.bursts > 1 and self.wait is None:
            raise FieldErrors(
                [
                    (
                        ("wait",),
                        f'required with bursts = {self.bursts}: the sleep between two bursts, e.g. wait = {{ dist = "exponential", mean = "1ms" }}',
                    )
                ]
            )
        return self

    def core_spec(self) -> dict[str, Any] | None:
        """The core's shape, or None for one burst (the unshaped model, bit for bit)."""
        if self.bursts == 1 or self.wait is None:
            return None
        return {"bursts": self.bursts, "wait": self.wait.core_spec()}


def _with_shape(spec: dict[str, Any], shape: Shape | None) -> dict[str, Any]:
    core = shape.core_spec() if shape is not None else None
    if core is not None:
        spec["shape"] = core
    return spec


Role = Literal["service", "batch"]
# how an event-loop generator re-arms a connection's write (EventLoop.rearm)
Rearm = Literal["readd", "modify"]
Need = Literal["memory", "disk", "network"]


# sched_setattr's clamp of a custom slice (kernel/sched/syscalls.c: 0.1 ms – 100 ms).
SLICE_MIN_NS = 100_000
SLICE_MAX_NS = 100_000_000


class _Workload(Table):
    """What every kind shares. A kind also declares, once, on its class, what it is:

    * `role`: "service", an online service whose latency has SLOs (the tuner's services and
      replay's measured services), or "batch", work whose throughput counts;
    * `requests`: its results have requests (latency percentiles and QPS): the core keeps
      service statistics for it (a batch kind may too: dd's blocks, analytics' tasks);
    * `host_programs`: what `colosim replay` may run for it ([workloads.x.host] program);
    * `replays`: whether replay runs it on the host at all (the others are simulated only);
    * `needs`: the [node] table it needs (memory, disk or network), if any.
    """

    role: ClassVar[Role]
    requests: ClassVar[bool]
    host_programs: ClassVar[tuple[str, ...]] = ("builtin",)
    replays: ClassVar[bool] = False
    needs: ClassVar[Need | None] = None

    # where its tasks run: a cgroup ("/" is the root cgroup), or a pod (whose cgroup the
    # kubelet layout gives it)
    cgroup: str = ""
    pod: str | None = None
    # its session, for [kernel] autogroup: workloads of the root cgroup naming one session
    # share its autogroup; without it a workload is a session of its own
    session: str | None = Field(default=None, min_length=1)
    enabled: bool = True  # a disabled workload is left out of the core spec
    start: Duration = 0
    host: Annotated[HostProgram, BeforeValidator(_host_shorthand)] = Field(default_factory=HostProgram)
    # how its threads use the LLC and memory bandwidth (none: CPU time is its only channel)
    contention: Contention | None = None
    # EEVDF custom slice of its threads, by the kernel's name: sched_attr.sched_runtime as
    # sched_setattr takes it (Linux 6.12+; 0 = base_slice). docs/model.md, EEVDF.
    sched_runtime_ns: int | None = None
    # its threads read their own CPU clock while they compute (clock_gettime with
    # CLOCK_THREAD_CPUTIME_ID, Python's time.thread_time): every read runs the kernel's
    # update_curr, so a slice ends when it is used up, not at the next tick. docs/model.md
    reads_cpu_clock: bool = False
    if TYPE_CHECKING:
        kind: str  # each kind's Literal tag

    @model_validator(mode="after")
    def _check_host(self) -> _Workload:
        if bool(self.cgroup) == (self.pod is not None):
            raise FieldErrors([(("cgroup",), "give exactly one of cgroup or pod")])
        if self.session is not None and self.cgroup != ROOT_CGROUP:
            raise FieldErrors(
                [
                    (
                        ("session",),
                        f'a session groups workloads of the root cgroup (cgroup = "/"); this one is in {show(self.cgroup or self.pod)}',
                    )
                ]
            )
        rt = self.sched_runtime_ns
        if rt is not None and rt != 0 and not SLICE_MIN_NS <= rt <= SLICE_MAX_NS:
            raise FieldErrors(
                [
                    (
                        ("sched_runtime_ns",),
                        f"must be 0 (base_slice) or in [{SLICE_MIN_NS}, {SLICE_MAX_NS}] ns, the range sched_setattr clamps a slice to (got {rt})",
                    )
                ]
            )
        allowed = self.host_programs
        if self.host.program not in allowed:
            raise FieldErrors(
                [
                    (
                        ("host", "program"),
                        f"a {self.kind} workload runs on the host as {alternatives(allowed)} (got {show(self.host.program)})",
                    )
                ]
            )
        return self


class Hog(_Workload):
    """CPU hog threads that never sleep (`stress --cpu N`)."""

    kind: Literal["hog"]
    role = "batch"
    requests = False
    host_programs = ("builtin", "stress", "stress-ng", "command")
    replays = True
    threads: int = Field(ge=1, le=PID_MAX_LIMIT)

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        return {
            "kind": "hog",
            "name": name,
            "cgroup": self.cgroup,
            "threads": self.threads,
            "start_ns": self.start,
        }


class CrossCpu(Table):
    """A closed loop's `cross_cpu`: the CPU a request costs the server's thread (`server`), and
    a reply the client's task (`client`), when its sender last ran on another CPU. Only with
    `client_cpu` (the generator on the node; calibration sets it from the alone run): without
    it the clients run no task, and no message crosses."""

    server: Duration = 0
    client: Duration = 0


class EventLoop(Table):
    """A closed loop's `event_loop`: the load generator's threads are event loops (wrk,
    redis-benchmark; core_rs event_loop.rs). Each owns its clients (client c on thread c mod
    client_threads); a pass takes what was on the epoll ready list when it began, and a read
    re-arms its connection's write for a later pass; a latency runs from a request's write to
    its reply's read, as those generators time it. `read_share`: the share of a request's
    client CPU that reads its reply. `rearm`: how the generator re-arms the write, and so
    where it stands in the next pass — "readd" (redis-benchmark deletes the connection from
    epoll and adds it back: behind whatever became ready before it) or "modify" (wrk's
    EPOLL_CTL_MOD: the last pass's connections lead the next, in its order). Only with
    client_cpu and client_threads (calibration sets both from the alone run), no think time,
    one round."""

    read_share: Annotated[float, Field(ge=0, le=1)] = 0.5
    rearm: Rearm = "readd"


class ClosedLoop(_Workload):
    """C clients that each send a request, wait for it, think, and send the next
    (clickhouse-benchmark -c, wrk -c).  A request fans out to `fanout` threads and completes
    when all of them have run their service time."""

    kind: Literal["closed_loop"]
    role = "service"
    requests = True
    host_programs = ("builtin", "clickhouse", "nginx", "redis", "postgres")
    replays = True
    clients: int = Field(ge=1, le=PID_MAX_LIMIT)
    fanout: Annotated[int | str, PlainValidator(_fanout)] = 1
    think: Distribution = Constant(dist="constant", value=0)
    service: Distribution
    # a server with a fixed pool of worker threads (Go's GOMAXPROCS, a thread pool): requests
    # wait for a free worker; unset, each client has its own thread(s)
    workers: int | None = Field(default=None, ge=1, le=PID_MAX_LIMIT)
    # how the workers take requests (core_rs workload.rs `Pool`): "queue", one FIFO whose oldest
    # request the first free worker takes (a thread pool); "connection", each client's
    # connection belongs to one worker (drawn per seed), which alone serves it (an event-loop
    # server's worker processes: nginx's, each serving the connections it accepted). Only with
    # workers
    dispatch: Literal["queue", "connection"] = "queue"
    # when the workers write their replies (core_rs workload.rs `Passes`): "each", as its
    # request is done; "pass", an event loop's: every reply of the requests a pass found ready
    # at its end (redis-server's beforeSleep writes the replies its pass queued). Only with workers
    replies: Literal["each", "pass"] = "each"
    shape: Shape | None = None
    # the load generator's own CPU per request (wrk, clickhouse-benchmark running beside the
    # server, in this cgroup): each client's task spends it before sending its request. Replay
    # fits it from the generator's measured CPU (replay/calibration.py); unset, clients are free
    client_cpu: Distribution | None = None
    # a wait per request inside its latency, between the client's CPU and the server (the
    # loopback round trip and wake-ups: neither CPU nor queueing; the gaps a real server
    # leaves on its CPUs). With it or client_cpu, latency runs from when the client is ready
    delay: Distribution | None = None
    # the client<->server exchange in this many rounds (core_rs shape.rs `Rounds`): client_cpu
    # and each server thread's service split into equal parts that alternate, as a generator
    # parsing result blocks while the server produces the next. Replay fits it from the
    # generator's voluntary switches per request (replay/calibration.py); unset: one round
    rounds: int = Field(default=1, ge=1, le=MAX_BURSTS)
    # how the rounds go (core_rs spec.rs `Exchange`): "alternate", one side at a time;
    # "stream", the client's part and the server's of each round after the first run at once
    # (a result streamed over a socket: the client parses one block while the server produces
    # the next, as clickhouse-benchmark and ClickHouse's TCPHandler do), the next round when
    # all are done. Needs a generator task per client (no client_threads)
    exchange: Literal["alternate", "stream"] = "alternate"
    # what each message between a client and the server costs its receiver when the two ran
    # on different CPUs (core_rs spec.rs `CrossCpu`; replay measures it: the service alone,
    # and alone on one CPU). Only with client_cpu (the generator's task is a message's other
    # end; replay's calibration sets both); unset: nothing
    cross_cpu: CrossCpu | None = None
    # the load generator's threads, serving its clients in turn (redis-benchmark's one event
    # loop, wrk -t, pgbench -j); unset: a task per client (clickhouse-benchmark's thread per
    # connection; "clients" says so explicitly, where replay's calibration would otherwise set
    # the threads as it runs the generator). Only with client_cpu (without it the generator
    # costs nothing, whatever its threads)
    client_threads: Annotated[int, Field(ge=1, le=PID_MAX_LIMIT)] | Literal["clients"] | None = None
    # the generator's threads as event loops, timing a request from write to reply read
    # (EventLoop); None: a latency runs round the whole loop
    event_loop: EventLoop | None = None
    # how its load generator prints the latencies (sim/reported.py): None, every request's
    # exactly; "wrk" corrected for coordinated omission, "redis-benchmark" averaged over
    # batches, as those print them. Replay's prediction sets it from the host program's
    # generator (replay.workloads.generator_report)
    report: Report | None = None

    @model_validator(mode="after")
    def _check_workers(self) -> ClosedLoop:
        if self.workers is not None and self.fanout != 1:
            raise FieldErrors([(("workers",), "a worker pool serves requests of fanout 1")])
        if self.workers is None and self.dispatch != "queue":
            raise FieldErrors([(("dispatch",), "dispatches to a pool's workers: set workers too")])
        if self.workers is None and self.replies != "each":
            raise FieldErrors([(("replies",), "a pool's workers' replies: set workers too")])
        if self.event_loop is not None:
            if mean_s(self.think) > 0:
                raise FieldErrors([(("event_loop",), "an event loop writes the next request at once: no think time")])
            if self.rounds > 1:
                raise FieldErrors([(("event_loop",), "an event loop runs one round a request")])
            if self.client_threads == "clients":
                raise FieldErrors([(("event_loop",), "an event loop needs client_threads (its threads), not a task per client")])
        if self.exchange == "stream" and isinstance(self.client_threads, int):
            raise FieldErrors([(("exchange",), "a streamed exchange needs a generator task per client (no client_threads)")])
        if self.rounds > 1:
            if self.client_cpu is None:
                raise FieldErrors([(("rounds",), "rounds > 1 split the client's CPU: set client_cpu too")])
            if self.workers is not None:
                raise FieldErrors([(("rounds",), "rounds > 1 need a thread per client (no workers)")])
            if self.shape is not None and self.shape.bursts > 1:
                raise FieldErrors([(("rounds",), "rounds > 1 are the server's bursts already: drop shape, or set rounds = 1")])
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
        if self.dispatch != "queue":
            spec["dispatch"] = self.dispatch
        if self.replies != "each":
            spec["replies"] = self.replies
        if self.client_cpu is not None:
            spec["client_cpu"] = self.client_cpu.core_spec()
        if self.delay is not None:
            spec["delay"] = self.delay.core_spec()
        if self.rounds > 1:
            spec["rounds"] = self.rounds
        if self.exchange != "alternate":
            spec["exchange"] = self.exchange
        if isinstance(self.client_threads, int):
            spec["client_threads"] = self.client_threads
        if self.cross_cpu is not None:
            spec["cross_cpu"] = {"server_ns": self.cross_cpu.server, "client_ns": self.cross_cpu.client}
        if self.event_loop is not None:
            spec["event_loop"] = {"read_share": self.event_loop.read_share, "rearm": self.event_loop.rearm}
        return _with_shape(spec, self.shape)


class TraceRef(Table):
    """[workloads.x.trace]: the workload's demand follows an entity of a trace file (the
    trace format, traces/format.py): a duty workload its `cpu_cores`, an open loop its
    `rate_per_s` (or its CPU ÷ the mean service time). `speed` compresses time (10: ten trace
    seconds a simulated second); `scale` multiplies the values."""

    file: str | None = Field(default=None, min_length=1)  # or `--trace FILE` on the command line
    entity: str = Field(min_length=1)
    speed: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    scale: float = Field(default=1.0, gt=0, allow_inf_nan=False)


class OpenLoop(_Workload):
    """Poisson arrivals at `rate` requests/s served by a pool of `workers` threads (the rate
    follows `trace` when one is given)."""

    kind: Literal["open_loop"]
    role = "service"
    requests = True
    replays = True
    rate: float = Field(gt=0, allow_inf_nan=False)
    workers: int = Field(ge=1, le=PID_MAX_LIMIT)
    service: Distribution
    trace: TraceRef | None = None
    # requests that may wait for a worker; arrivals beyond are dropped (and counted)
    backlog: int = Field(DEFAULT_BACKLOG, ge=0, le=MAX_BACKLOG)
    shape: Shape | None = None

    def core_spec(self, name: str, ncpus: int) -> dict[str, Any]:
        spec = {
            "kind": "open_loop",
            "name": name,
            "cgroup": self.cgroup,
            "rate_per_s": float(self.rate),
            "workers": self.workers,
            "backlog": self.backlog,
            "service": self.service.core_spec(),
            "start_ns": self.start,
        }
        return _with_shape(spec, self.shape)


class Bursty(_Workload):
    """Steady load on `steady_threads` plus, every `every`, a spell in which each of
    `burst_threads` threads gets `length` of CPU work (seed 001, case 2).  Each spell counts
    as a request: its latency is how long the burst took, so throttling stretches it."""

    kind: Literal["bursty"]
    role = "service"
    requests = True
    replays = True
    steady_threads: int = Field(default=1, ge=0, le=PID_MAX_LIMIT)
    burst_threads: int = Field(default=2, ge=1, le=PID_MAX_LIMIT)
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
    role = "batch"
    requests = False
    host_programs = ("builtin", "stress")
    replays = True
    needs = "memory"
    threads: int = Field(default=1, ge=1, le=PID_MAX_LIMIT)
    bytes: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)]
    chunk: Annotated[int, BeforeValidator(memory_bytes), Field(ge=4096)] = 1 << 20
    touch_per_page: PositiveDuration = 800
    mode: Literal["keep", "hang", "churn"] = "churn"
    hang: Duration = 0
    oom_score_adj: int = Field(default=0, ge=-1000, le=1000)

    @model_validator(mode="after")
    def _check_hang(self) -> MemoryHog:
        if self.mode == "hang" and self.hang == 0:
            raise FieldErrors([(("hang",), 'mode "hang" needs a hang time, e.g. hang = "2s"')])
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
    file in the cgroup's page cache (its LRU: a second read activates it) costs `service` of
    CPU only, a miss first waits for the disk and brings the file into the cache: the node's
    `[node.disk]` when it has one (one queue with the writeback of buffered writers), else
    the server's own (reads in order, `disk_latency` + size / `disk_bandwidth` each).
    Needs [node] memory."""

    kind: Literal["file_server"]
    role = "service"
    requests = True
    host_programs = ("builtin", "nginx")
    replays = True
    needs = "memory"
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
            raise FieldErrors(
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
    """`dd conv=notrunc` / `stress --hdd`: threads rewriting a 1 GiB file each, forever,
    `chunk` at a time at `write_per_page` of CPU a page; what they write stays in their
    cgroup's page cache (on its inactive list: a write does not mark a page accessed) until
    reclaim takes it, and with `[node.disk]` the flusher writes it back there.  Needs [node]
    memory."""

    kind: Literal["cache_writer"]
    role = "batch"
    requests = False
    host_programs = ("builtin", "command")
    replays = True
    needs = "memory"
    threads: int = Field(default=1, ge=1, le=PID_MAX_LIMIT)
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
    role = "batch"
    requests = True
    needs = "memory"
    threads: int = Field(default=1, ge=1, le=PID_MAX_LIMIT)
    working_set: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)]
    work: PositiveDuration
    fault_penalty: float = Field(default=20.0, ge=0, allow_inf_nan=False)

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
    role = "batch"
    requests = False
    replays = True  # at a constant `cores` (colosim-load's duty); a trace-driven one is refused
    max_threads: int = Field(ge=1, le=PID_MAX_LIMIT)
    cores: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    period: PositiveDuration = 10_000_000
    trace: TraceRef | None = None

    @model_validator(mode="after")
    def _check_cores(self) -> Duty:
        if self.cores > self.max_threads:
            raise FieldErrors([(("cores",), f"must be at most max_threads ({self.max_threads}) (got {self.cores:g})")])
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


class Dd(_Workload):
    """`dd`: `threads` copies, each moving `block` per IO with one IO in flight, `size` in
    all per thread (none: until the run ends). `op` read or write; `direct` is O_DIRECT
    (oflag=direct) — without it writes go through the page cache and are written back later,
    by the flusher, as the root cgroup's IO on cgroup v1 (seed 004). Each block is a request:
    the service's QPS × block is dd's throughput. Needs [node.disk]."""

    kind: Literal["dd"]
    role = "batch"
    requests = True
    replays = True
    needs = "disk"
    op: Literal["read", "write"] = "write"
    direct: bool = True
    block: Annotated[int, BeforeValidator(memory_bytes), Field(ge=512)] = 1 << 20
    size: Annotated[int, BeforeValidator(memory_bytes), Field(gt=0)] | None = None
    threads: int = Field(default=1, ge=1, le=PID_MAX_LIMIT)
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
    role = "service"
    requests = True
    needs = "disk"
    clients: int = Field(ge=1, le=PID_MAX_LIMIT)
    reads: int = Field(default=1, ge=0)
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
    role = "batch"
    requests = False
    needs = "network"
    streams: int = Field(default=1, ge=1, le=PID_MAX_LIMIT)
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
            raise FieldErrors(errors)
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


Workload = Annotated[
    Hog | ClosedLoop | OpenLoop | Bursty | MemoryHog | FileServer | CacheWriter | Analytics | Duty | Dd | Database | Iperf,
    Field(discriminator="kind"),
]

# Every kind by its tag, and the views of what the kinds declare.
KINDS: dict[str, type[_Workload]] = {get_args(m.model_fields["kind"].annotation)[0]: m for m in get_args(get_args(Workload)[0])}
HOST_PROGRAMS = {kind: m.host_programs for kind, m in KINDS.items()}
SHAPED_KINDS = tuple(kind for kind, m in KINDS.items() if "shape" in m.model_fields)
SERVICE_KINDS = tuple(kind for kind, m in KINDS.items() if m.role == "service")
BATCH_KINDS = tuple(kind for kind, m in KINDS.items() if m.role == "batch")
MEMORY_KINDS = tuple(kind for kind, m in KINDS.items() if m.needs == "memory")
IO_KINDS = tuple(kind for kind, m in KINDS.items() if m.needs == "disk")
NET_KINDS = tuple(kind for kind, m in KINDS.items() if m.needs == "network")


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
    mean = mean_s(workload.service)
    t, v = series(trace, ref.entity, "rate_per_s", mean, where)
    return t, v, "rate_per_s"


def trace_memory_series(workload: Any, ref: TraceRef):
    """(times, bytes) of a duty workload's trace entity, or None when it records no memory."""
    from traces.player import load

    assert ref.file is not None, "checked by the scenario (trace_series)"
    e = load(ref.file).entities[ref.entity]
    return None if e.memory_bytes is None else (e.t_s, e.memory_bytes)


def check_trace(name: str, workload: Any, ref: TraceRef) -> list[FieldError]:
    from traces.format import TraceError

    where = f"workloads.{name}.trace"
    try:
        t, v, key = trace_series(workload, ref, where)
    except TraceError as err:
        return [(("workloads", name, "trace"), str(err))]
    if key == "cores" and len(v) and float(v.max()) * ref.scale > workload.max_threads:
        return [(("workloads", name, "max_threads"), f"the trace asks for up to {float(v.max()) * ref.scale:g} cores; raise max_threads")]
    return []
