"""`colosim shape PROGRAM`: measure a real service's request shape on this host and write the
scenario's closed_loop workload section for it.

    with Session() as s:                       # the replay lock, cgroups beneath our own
        service/  the server (clickhouse-server, nginx, or any command that serves HTTP)
        load/     its load generator (clickhouse-benchmark, wrk), apart so its CPU is its own

The server starts as replay starts it (replay/workloads.py's HostWorkload); a warm-up pass of
the load generator is thrown away; then the idle server is watched for `idle` seconds (its
background threads' CPU and switches are subtracted at that rate); then each pass drives it
with C clients for `duration`. During a pass every thread of the service cgroup is read:

    /proc/PID/task/TID/schedstat   run ns, run-queue wait ns, timeslices  (every `interval`)
    /proc/PID/task/TID/status      voluntary / nonvoluntary context switches (at both ends)
    /proc/PID/task/TID/stat        processor: the CPU it last ran on        (at the end)

and the service's and the load generator's cgroups' cpuacct.usage at both ends. The estimators
(replay/shape_estimate.py) turn these and the generator's report (requests, latency quantiles)
into fanout, service, bursts and wait. Nothing outside the run folder is written, and the
session kills and removes everything on every exit path.
"""

from __future__ import annotations

import json
import math
import os
import pwd
import shlex
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies.cgroup import Knob, KnobWrite
from replay.cgroupfs import HostBackend, HostError
from replay.probe import parse_schedstat, parse_stat, parse_switches, read_proc
from replay.session import Session
from replay.shape_estimate import (
    Crossing,
    Fit,
    Shape,
    ThreadCounters,
    Window,
    counter_delta,
    crossing,
    estimate,
    fit_service,
    histogram_quantiles,
    mean_from_quantiles,
    parallelism,
    workload_toml,
    wrk_uncorrected,
)
from replay.workloads import (
    HostWorkload,
    _free_port,
    _need,
    _wait_port,
    clickhouse_benchmark_argv,
    generator_event_loop,
    generator_threads,
    wrk_argv,
)
from sim.errors import ScenarioError

PROGRAMS = ("clickhouse", "nginx", "redis", "postgres", "command")
SERVICE, LOAD = "service", "load"

# wrk's done(): its run time and requests (what its correction for coordinated omission
# used) and its whole latency histogram (µs, count per value), which wrk_uncorrected undoes
WRK_SCRIPT = """
done = function(summary, latency, requests)
  io.write(string.format("colosim-summary %d %d\\n", summary.duration, summary.requests))
  for i = 1, #latency do
    local v, c = latency(i)
    io.write(string.format("colosim-bucket %d %d\\n", v, c))
  end
end
"""
QUANTILES = (0.0, *range(1, 100), 99.9, 100.0)


@dataclass
class ShapeRequest:
    """What `colosim shape` was asked to do (the command line, checked)."""

    program: str
    clients: list[int]
    duration_s: float = 10.0
    warmup_s: float = 2.0
    idle_s: float = 2.0
    interval_s: float = 0.002
    repeat: int = 1
    # passes at the most clients with the service and its generator on one CPU, beside the
    # free ones, for cross_cpu (skipped on a host of one CPU)
    cross_cpu: bool = True
    name: str = "web"
    query: str | None = None  # clickhouse: the query (default: the seed's)
    path: str = "/"  # nginx / command: the URL path
    command: list[str] | None = None  # command: the server's argv, "{port}" where its port goes

    def check(self) -> None:
        if self.program not in PROGRAMS:
            raise ScenarioError(f"shape: unknown program {self.program!r} (one of {', '.join(PROGRAMS)})")
        if not self.clients or any(c < 1 for c in self.clients):
            raise ScenarioError(f"--clients: must be integers >= 1 (got {self.clients})")
        for flag, v in (("duration", self.duration_s), ("interval", self.interval_s), ("repeat", self.repeat)):
            if not v > 0:
                raise ScenarioError(f"--{flag}: must be > 0 (got {v})")
        for flag, v in (("warmup", self.warmup_s), ("idle", self.idle_s)):
            if v < 0:
                raise ScenarioError(f"--{flag}: must be >= 0 (got {v})")
        if not self.name.replace("_", "").replace("-", "").isalnum():
            raise ScenarioError(f"--name: a workload name is letters, digits, - and _ (got {self.name!r})")
        if self.program == "command":
            if not self.command:
                raise ScenarioError('shape command: give the server with --command "ARGV ... {port} ..."')
            if not any("{port}" in a for a in self.command):
                raise ScenarioError(f"--command: must contain {{port}}, where the server's port goes (got {shlex.join(self.command)})")
            if shutil.which(self.command[0]) is None:
                raise HostError(f"--command: program {self.command[0]!r} not found on this host")
        elif self.command is not None:
            raise ScenarioError("--command: only for the program `command`")
        if self.query is not None and self.program != "clickhouse":
            raise ScenarioError("--query: only for the program `clickhouse`")


# --- reading the threads ----------------------------------------------------------------------


class ThreadReader:
    """Every thread of one cgroup, as (pid, tid) pairs listed from its cgroup.procs, and the
    last counters read of each — kept for threads that have exited since (a connection's
    thread ends with its connection, when the load generator leaves: its counts must not go
    with it)."""

    def __init__(self, backend: HostBackend, cgroup: str) -> None:
        self.backend, self.cgroup = backend, cgroup
        self.threads: list[tuple[int, int]] = []
        self.latest: dict[int, ThreadCounters] = {}
        self._listed = -math.inf

    def refresh(self) -> list[tuple[int, int]]:
        out = []
        for pid in self.backend.procs(self.cgroup):
            try:
                out += [(pid, int(t)) for t in os.listdir(f"/proc/{pid}/task")]
            except FileNotFoundError:
                continue
        self.threads = out
        self._listed = time.monotonic()
        return out

    def _read_full(self, pid: int, tid: int) -> ThreadCounters | None:
        base = f"/proc/{pid}/task/{tid}"
        sched, status = read_proc(base + "/schedstat"), read_proc(base + "/status")
        if sched is None or status is None:
            return None
        return ThreadCounters(*parse_schedstat(sched), *parse_switches(status))

    def full(self) -> dict[int, ThreadCounters]:
        """schedstat and status of every thread, and the last counts of those gone since."""
        for pid, tid in self.refresh():
            c = self._read_full(pid, tid)
            if c is not None:
                self.latest[tid] = c
        return dict(self.latest)

    def sweep(self) -> list[int]:
        """The run time each thread had since the last sweep (schedstat of every thread; the
        thread list refreshed every 0.25 s). A thread that ran is read in full too: a context
        switch needs a thread on a CPU, so one that did not run kept its switch counts."""
        if time.monotonic() - self._listed > 0.25:
            self.refresh()
        row = []
        for pid, tid in self.threads:
            text = read_proc(f"/proc/{pid}/task/{tid}/schedstat")
            if text is None:
                continue
            run = int(text.split()[0])
            last = self.latest.get(tid)
            if last is None or run != last.run_ns:
                c = self._read_full(pid, tid)
                if c is None:
                    continue
                row.append(c.run_ns - (last.run_ns if last else c.run_ns))
                self.latest[tid] = c
        return row

    def processors(self) -> dict[int, int]:
        """CPU -> threads that last ran on it."""
        cpus: dict[int, int] = {}
        for pid, tid in self.refresh():
            text = read_proc(f"/proc/{pid}/task/{tid}/stat")
            if text is not None:
                cpu = parse_stat(text).processor
                cpus[cpu] = cpus.get(cpu, 0) + 1
        return dict(sorted(cpus.items()))


# --- the service and its load generator ----------------------------------------------------------


@dataclass
class Report:
    requests: int
    quantiles: dict[float, float]  # percentile -> s
    mean_s: float
    synthetic: int = 0  # samples the generator made up (wrk's coordinated-omission correction), taken out


def parse_wrk_script(text: str, connections: int) -> Report:
    """What WRK_SCRIPT prints: the latency histogram, its correction for coordinated omission
    undone (the per-request latencies as measured)."""
    buckets: dict[int, int] = {}
    runtime_us = requests = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "colosim-bucket":
            buckets[int(float(parts[1]))] = int(float(parts[2]))
        elif len(parts) == 3 and parts[0] == "colosim-summary":
            runtime_us, requests = int(float(parts[1])), int(float(parts[2]))
    if not buckets or requests <= 0:
        raise HostError(f"wrk printed no latency distribution: {text.strip()[-300:]}")
    hist = wrk_uncorrected(buckets, runtime_us, requests, connections)
    n = sum(hist.values())
    mean = sum(v * c for v, c in hist.items()) / n / 1e6
    return Report(requests, histogram_quantiles(hist, 1e-6, QUANTILES), mean, synthetic=sum(buckets.values()) - n)


def parse_pgbench_logs(files: list[Path], output: str) -> Report:
    """pgbench -l: one line per transaction, its latency (µs) the third field — every
    request's own latency, not a summary."""
    hist: dict[int, int] = {}
    for f in files:
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                us = int(parts[2])
                hist[us] = hist.get(us, 0) + 1
    n = sum(hist.values())
    if n == 0:
        raise HostError(f"pgbench logged no transaction: {output.strip()[-300:]}")
    return Report(n, histogram_quantiles(hist, 1e-6, QUANTILES), sum(v * c for v, c in hist.items()) / n / 1e6)


def _pg_bin() -> Path:
    """The newest installed PostgreSQL server's bin directory."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0
    )
    if not found:
        raise HostError("shape postgres: no PostgreSQL server (/usr/lib/postgresql/*/bin/postgres; Debian package postgresql)")
    return found[-1].parent


def parse_redis_csv(text: str, requests: int) -> Report:
    """redis-benchmark --csv: "GET",rps,avg,min,p50,p95,p99,max (ms)."""
    for line in text.splitlines():
        cells = [c.strip('"') for c in line.strip().split(",")]
        if len(cells) == 8 and cells[0] == "GET":
            avg, lo, p50, p95, p99, hi = (float(c) / 1e3 for c in cells[2:])
            return Report(requests, {0.0: lo, 50.0: p50, 95.0: p95, 99.0: p99, 100.0: hi}, avg)
    raise HostError(f"redis-benchmark printed no GET line: {text.strip()[-300:]}")


def parse_clickhouse_report(text: str) -> Report:
    """clickhouse-benchmark --json: num_queries and query_time_percentiles (s)."""
    doc = json.loads(text)
    if "statistics" not in doc and len(doc) == 1:
        doc = next(iter(doc.values()))
    q = {float(k): float(v) for k, v in doc["query_time_percentiles"].items()}
    return Report(int(doc["statistics"].get("num_queries", 0)), q, mean_from_quantiles(q))


@dataclass
class Service:
    """The server, started in SERVICE; `pass_argv` gives a load generator's argv for a pass."""

    request: ShapeRequest
    session: Session
    port: int = 0
    _workload: HostWorkload | None = None
    _dir: Path = field(default_factory=Path)
    _query: str = ""
    _rate: float = 0.0  # redis: requests/s of the last pass
    _sent: int = 0  # redis: requests of this pass

    def start(self) -> None:
        s, r = self.session, self.request
        self._dir = s.run_dir() / "shape"
        self._dir.mkdir(exist_ok=True)
        (self._dir / "latency.lua").write_text(WRK_SCRIPT)
        if r.program == "postgres":
            self._start_postgres()
            return
        if r.program == "redis":
            _need("redis-server", "shape redis", "redis-server")
            _need("redis-benchmark", "shape redis", "redis-tools")
            self.port = _free_port()
            # no persistence: nothing written but to the run directory, no fork for snapshots
            argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            argv += ["--dir", str(self._dir), "--daemonize", "no"]
            log = open(self._dir / "server.log", "w")  # noqa: SIM115 - the session removes the directory
            server = s.spawn(argv, SERVICE, stdout=log, stderr=log)
            log.close()
            _wait_port(self.port, server, "redis-server")
            return
        if r.program == "command":
            assert r.command is not None
            self.port = _free_port()
            argv = [a.replace("{port}", str(self.port)) for a in r.command]
            log = open(self._dir / "server.log", "w")  # noqa: SIM115 - the session removes the directory
            server = s.spawn(argv, SERVICE, stdout=log, stderr=log)
            log.close()
            _wait_port(self.port, server, shlex.join(argv))
            return
        from sim.scenario.workloads import ClosedLoop

        host: dict[str, Any] = {"program": r.program, "path": r.path}
        if r.query is not None:
            host["query"] = r.query
        model = ClosedLoop.model_validate({"kind": "closed_loop", "cgroup": SERVICE, "clients": 1, "service": "1ms", "host": host})
        self._workload = HostWorkload(r.name, model, {}, f"shape {r.program}")
        self._workload.check()
        self._workload.start(s, time.monotonic(), 1.0, 0.0, 0)
        assert self._workload.port is not None
        self.port = self._workload.port
        self._query = model.host.query

    def _start_postgres(self) -> None:
        """A throwaway cluster in the run directory (initdb and the server as the `postgres`
        user: PostgreSQL refuses root), no fsync; pgbench's tables (scale 1) made before
        anything is measured."""
        s = self.session
        bin_dir = _pg_bin()
        _need("pgbench", "shape postgres", "postgresql-client")
        _need("runuser", "shape postgres", "util-linux")
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise HostError("shape postgres: no `postgres` system user (Debian package postgresql)") from None
        pg = self._dir / "pg"
        pg.mkdir()
        (pg / "sock").mkdir()
        (pg / "log").mkdir()
        for d in (s.run_dir(), self._dir):  # the postgres user passes through (and reads nothing)
            os.chmod(d, 0o711)
        for d in (pg, pg / "sock"):
            os.chown(d, pw.pw_uid, pw.pw_gid)
        as_pg = ["runuser", "-u", "postgres", "--"]
        done = subprocess.run(
            [*as_pg, str(bin_dir / "initdb"), "-D", str(pg / "data"), "-A", "trust", "-U", "postgres", "--no-sync"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise HostError(f"shape postgres: initdb failed: {(done.stderr or done.stdout).strip()[-300:]}")
        self.port = _free_port()
        log = open(self._dir / "server.log", "w")  # noqa: SIM115 - the session removes the directory
        argv = [*as_pg, str(bin_dir / "postgres"), "-D", str(pg / "data"), "-p", str(self.port), "-k", str(pg / "sock")]
        argv += ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off"]
        server = s.spawn(argv, SERVICE, stdout=log, stderr=log)
        _wait_port(self.port, server, "postgres")
        init = s.spawn([*self._pgbench(), "-i", "-s", "1", "-q", "postgres"], LOAD, stdout=log, stderr=log)
        log.close()
        if init.wait(timeout=300) != 0:
            raise HostError(f"shape postgres: pgbench -i exited with status {init.returncode} (see {self._dir / 'server.log'})")

    def _pgbench(self) -> list[str]:
        return ["pgbench", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]

    def generator(self, clients: int, seconds: float) -> tuple[list[str], Path | None]:
        """The load generator's argv and the file it reads its queries from (or None)."""
        if self.request.program == "clickhouse":
            queries = self._dir / "queries.txt"
            queries.write_text(self._query + "\n")
            return clickhouse_benchmark_argv(self.port, clients, seconds, self._dir / "bench.json"), queries
        if self.request.program == "postgres":
            # select-only transactions (-S: one indexed SELECT each), every one's latency
            # logged (-l: "client transaction latency_us script epoch epoch_us")
            for f in (self._dir / "pg" / "log").iterdir():
                f.unlink()
            threads = generator_threads("postgres", clients)
            argv = [*self._pgbench(), "-c", str(clients), "-j", str(threads), "-T", str(max(1, round(seconds))), "-S", "-n"]
            return [*argv, "-l", "--log-prefix", str(self._dir / "pg" / "log" / "tx"), "postgres"], None
        if self.request.program == "redis":
            # redis-benchmark runs a number of requests, not a time: as many as the last
            # pass's rate gives in `seconds` (the warm-up's first guess: 20 000)
            n = max(1000, round(self._rate * seconds)) if self._rate else 20_000
            self._sent = n
            argv = ["redis-benchmark", "-p", str(self.port), "-c", str(clients), "-n", str(n), "-t", "get", "--csv", "--precision", "3"]
            return argv, None
        url = f"http://127.0.0.1:{self.port}{self.request.path}"
        return wrk_argv(clients, seconds, url, self._dir / "latency.lua"), None

    def report(self, output: str, clients: int) -> Report:
        if self.request.program == "clickhouse":
            f = self._dir / "bench.json"
            if not f.exists():
                raise HostError(f"clickhouse-benchmark wrote no report: {output.strip()[-300:]}")
            return parse_clickhouse_report(f.read_text())
        if self.request.program == "redis":
            return parse_redis_csv(output, self._sent)
        if self.request.program == "postgres":
            return parse_pgbench_logs(sorted((self._dir / "pg" / "log").iterdir()), output)
        return parse_wrk_script(output, clients)

    def close(self) -> None:
        if self._workload is not None:
            self._workload.close()


def drive(service: Service, clients: int, seconds: float, interval_s: float, say: Callable[[str], Any]) -> Window:
    """One pass: `clients` clients for `seconds`, every service thread sampled meanwhile."""
    s = service.session
    backend = s.backend
    reader = ThreadReader(backend, SERVICE)
    argv, stdin_file = service.generator(clients, seconds)
    (service._dir / "bench.json").unlink(missing_ok=True)
    out_path = service._dir / "generator.out"
    before = reader.full()
    reader.latest = dict(before)
    cpu0, gen0 = backend.stats(SERVICE).usage_ns, backend.stats(LOAD).usage_ns
    t0 = time.monotonic()
    with open(out_path, "w") as out:
        stdin = open(stdin_file) if stdin_file is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            gen = s.spawn(argv, LOAD, stdout=out, stderr=subprocess.STDOUT, stdin=stdin)
        finally:
            if not isinstance(stdin, int):
                stdin.close()
    rows: list[list[int]] = []
    deadline = t0 + seconds + 60
    while gen.poll() is None:
        if time.monotonic() > deadline:
            raise HostError(f"{argv[0]} did not end within 60 s after its {seconds:g} s")
        time.sleep(interval_s)
        rows.append(reader.sweep())
    elapsed = time.monotonic() - t0
    after = reader.full()
    cpu1, gen1 = backend.stats(SERVICE).usage_ns, backend.stats(LOAD).usage_ns
    text = out_path.read_text()
    if gen.returncode != 0:
        raise HostError(f"{argv[0]} exited with status {gen.returncode}: {text.strip()[-300:]}")
    rep = service.report(text, clients)
    service._rate = rep.requests / elapsed
    synthetic = f" (wrk's {rep.synthetic} coordinated-omission samples taken out)" if rep.synthetic else ""
    say(f"  {clients} client(s), {elapsed:.1f} s: {rep.requests} requests{synthetic}, {len(rows)} samples of {len(after)} threads")
    return Window(
        seconds=elapsed,
        threads=counter_delta(before, after),
        cpu_ns=cpu1 - cpu0,
        requests=rep.requests,
        clients=clients,
        latency_mean_s=rep.mean_s,
        quantiles=rep.quantiles,
        generator_cpu_ns=gen1 - gen0,
        parallelism=parallelism(rows),
        samples=len(rows),
        nthreads=len(after),
        cpus=reader.processors(),
    )


def idle(service: Service, seconds: float) -> Window:
    """The server with no load: what its own threads do on their own."""
    reader = ThreadReader(service.session.backend, SERVICE)
    before, cpu0, t0 = reader.full(), service.session.backend.stats(SERVICE).usage_ns, time.monotonic()
    time.sleep(seconds)
    after, cpu1 = reader.full(), service.session.backend.stats(SERVICE).usage_ns
    return Window(seconds=time.monotonic() - t0, threads=counter_delta(before, after), cpu_ns=cpu1 - cpu0, nthreads=len(after))


# --- the whole measurement -------------------------------------------------------------------------


@dataclass
class Measured:
    request: ShapeRequest
    idle: Window | None
    passes: list[tuple[Window, Shape]]
    fit: Fit
    chosen: Shape  # the pass the section is written from
    toml: str
    one_cpu: list[tuple[Window, Shape]] = field(default_factory=list)
    cross: Crossing | None = None

    def to_json(self) -> str:
        def window(w: Window) -> dict[str, Any]:
            d = {k: v for k, v in w.__dict__.items() if k != "threads"}
            d["threads"] = w.threads.__dict__
            d["quantiles"] = {str(k): v for k, v in w.quantiles.items()}
            d["cpus"] = {str(k): v for k, v in w.cpus.items()}
            return d

        doc = {
            "request": self.request.__dict__,
            "idle": window(self.idle) if self.idle else None,
            "passes": [{"window": window(w), "shape": sh.to_dict()} for w, sh in self.passes],
            "one_cpu_passes": [{"window": window(w), "shape": sh.to_dict()} for w, sh in self.one_cpu],
            "cross_cpu": self.cross.to_dict() if self.cross else None,
            "fit": {
                "candidates": [c.__dict__ for c in self.fit.candidates],
                "chosen": self.fit.chosen,
                "fits": self.fit.fits,
                "points": self.fit.npoints,
            },
            "host": {"kernel": os.uname().release, "cpus": len(os.sched_getaffinity(0)), "loadavg": os.getloadavg()},
        }
        return json.dumps(_finite(doc), indent=1, allow_nan=False) + "\n"


def _finite(x: Any) -> Any:
    """NaN (a figure not measured) as JSON null, which every reader takes."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def measure(request: ShapeRequest, say: Callable[[str], Any] = print) -> Measured:
    request.check()
    with Session(log=say) as s:
        s.backend.create([SERVICE, LOAD])
        service = Service(request, s)
        try:
            service.start()
            if request.warmup_s > 0:
                say(f"warm-up: {request.warmup_s:g} s at {request.clients[0]} client(s)")
                drive(service, request.clients[0], request.warmup_s, request.interval_s, lambda _m: None)
            base = idle(service, request.idle_s) if request.idle_s > 0 else None
            passes = []
            for clients in request.clients:
                for _ in range(request.repeat):
                    w = drive(service, clients, request.duration_s, request.interval_s, say)
                    passes.append((w, estimate(w, base)))
            one_cpu = one_cpu_passes(service, base, say) if request.cross_cpu and len(os.sched_getaffinity(0)) > 1 else []
        finally:
            service.close()
    return summarise(request, base, passes, one_cpu)


def one_cpu_passes(service: Service, base: Window | None, say: Callable[[str], Any]) -> list[tuple[Window, Shape]]:
    """As many passes as each clients value had, at the most clients, with the service's and the
    generator's cgroups both on the first CPU of ours (cpuset.cpus, put back after): what their
    exchanges cost when nothing crosses CPUs."""
    request, backend = service.request, service.session.backend
    first = min(os.sched_getaffinity(0))
    before = {cg: backend.read(cg, Knob.CPUSET_CPUS) for cg in (SERVICE, LOAD)}
    say(f"on CPU {first} only (cpuset.cpus of both cgroups), for cross_cpu:")
    passes = []
    try:
        backend.apply([KnobWrite(cg, Knob.CPUSET_CPUS, str(first)) for cg in (SERVICE, LOAD)])
        for _ in range(request.repeat):
            w = drive(service, max(request.clients), request.duration_s, request.interval_s, say)
            passes.append((w, estimate(w, base)))
    finally:
        backend.apply([KnobWrite(cg, Knob.CPUSET_CPUS, str(v)) for cg, v in before.items()])
    return passes


def summarise(
    request: ShapeRequest, base: Window | None, passes: list[tuple[Window, Shape]], one_cpu: list[tuple[Window, Shape]] | None = None
) -> Measured:
    """The section is written from the lightest load's median pass (by CPU per request): the
    shape without queueing, which the simulator adds itself; `clients` is the most driven. With
    passes on one CPU, `cross_cpu` from them and the free passes at as many clients."""
    light = min(c for c in request.clients)
    at_light = sorted((p for p in passes if p[0].clients == light), key=lambda p: p[1].cpu_per_request_s)
    w, shape = at_light[(len(at_light) - 1) // 2]
    fit = fit_service(w.quantiles, shape.cpu_per_request_s)
    what = request.program if request.program != "command" else shlex.join(request.command or [])
    header = [
        f"measured by `colosim shape` of {what} on {os.uname().nodename} ({os.uname().release}, "
        f"{len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"from the median of {len(at_light)} pass(es) of {request.duration_s:g} s at {light} client(s); "
        f"idle service subtracted ({base.seconds:.1f} s)"
        if base
        else f"from the median of {len(at_light)} pass(es) of {request.duration_s:g} s at {light} client(s)",
    ]
    most = max(request.clients)
    cross = None
    if one_cpu:
        free = [sh for w_, sh in passes if w_.clients == most]
        cross = crossing(free, [sh for _, sh in one_cpu], shape.fanout)
    threads = generator_threads(request.program, most)
    toml = workload_toml(
        request.name, most, shape, fit, header, client_threads=threads, cross=cross, event_loop=generator_event_loop(request.program)
    )
    return Measured(request, base, passes, fit, shape, toml, one_cpu or [], cross)


def summary(m: Measured) -> str:
    """A few lines for the terminal: each figure's median and range over the passes."""
    lines = []
    for clients in sorted({w.clients for w, _ in m.passes}):
        shapes = [sh for w, sh in m.passes if w.clients == clients]
        lines.append(f"{clients} client(s), {len(shapes)} pass(es): median [min, max]")
        for label, get, unit in (
            ("QPS", lambda s: s.qps, 1),
            ("fanout (parallelism)", lambda s: s.parallelism, 1),
            ("CPU per request per thread (ms)", lambda s: s.cpu_per_request_s, 1e3),
            ("bursts (voluntary switches per request per thread)", lambda s: s.switches_per_request, 1),
            ("run-queue wait per request (ms)", lambda s: s.runqueue_wait_s, 1e3),
            ("mean latency (ms)", lambda s: s.latency_mean_s, 1e3),
            ("wait between bursts (ms)", lambda s: s.wait_s, 1e3),
            ("load generator CPU per request (ms)", lambda s: s.generator_cpu_per_request_s, 1e3),
        ):
            vals = [get(s) * unit for s in shapes]
            lines.append(f"  {label}: {statistics.median(vals):.4g} [{min(vals):.4g}, {max(vals):.4g}]")
    if m.cross is not None:
        x = m.cross
        lines.append(
            f"an exchange across CPUs: server {x.free_server_s * 1e6:.3g} µs a request apart, {x.one_cpu_server_s * 1e6:.3g} on one "
            f"CPU; generator {x.free_client_s * 1e6:.3g} / {x.one_cpu_client_s * 1e6:.3g} µs: cross_cpu server "
            f"{x.server_s * 1e6:.3g} µs, client {x.client_s * 1e6:.3g} µs"
        )
    best = m.fit.best
    lines.append(
        f"service family: {m.fit.chosen['dist']} (best fit {best.family}, quantile error {best.quantile_error:.1%}, KS {best.ks:.3f})"
        + ("" if m.fit.fits else " — no family fits: empirical")
    )
    return "\n".join(lines)


def shape_command(request: ShapeRequest, out: Path) -> int:
    m = measure(request, say=lambda msg: print(msg, flush=True))
    out.mkdir(parents=True, exist_ok=True)
    (out / "shape.toml").write_text(m.toml)
    (out / "shape.json").write_text(m.to_json())
    print(summary(m))
    print()
    print(m.toml, end="")
    print(f"\nwrote {out / 'shape.toml'} and {out / 'shape.json'}")
    return 0
