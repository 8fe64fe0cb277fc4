"""The host counterpart of each simulated workload kind.

    builtin     colosim-load (core_rs/load): the workload's own spec, distributions and random
                streams, service times burnt as thread CPU time — any kind
    stress      `stress --cpu N` (seed 000/002's offline job)            — hog
    stress-ng   `stress-ng --cpu N --cpu-method int64`                   — hog
    command     any CPU-bound argv, one copy per thread                  — hog
    clickhouse  clickhouse-server + clickhouse-benchmark -c C --json     — closed_loop
    nginx       nginx + wrk -c C --latency                               — closed_loop
    redis       redis-server + redis-benchmark -c C -t TEST -l --csv     — closed_loop
    postgres    postgres (as the postgres user) + pgbench -c C -b SCRIPT — closed_loop
    (dd)        coreutils dd, one copy per thread, 1 IO in flight        — dd (its "builtin")
    stress      `stress --vm N --vm-bytes B [--vm-keep|--vm-hang S]`     — memory_hog
    builtin     colosim-load's file reader over the working set's files  — file_server
    builtin     buffered dd rewriting a file per thread, forever         — cache_writer

Memory (docs/replay.md, "Memory on the host"): a memory_hog is `stress --vm`, whose workers
are processes of their own, as the simulator's OOM killer sees them; its oom_score_adj is set
with choom. A file_server's working set is working_set / file_size files of file_size made
before the run by replay and dropped from the page cache (fsync, then POSIX_FADV_DONTNEED),
so that the server's own reads fault them in, charged to its cgroup; colosim-load reads a
file per request through the page cache and tells a hit from a miss by asking mincore(2) before the read.
A cache_writer writes CACHE_WRITER_BYTES per thread through the page cache, over and over
(`dd conv=notrunc`): under a memory limit smaller than that, reclaim must take the oldest
pages as the simulator's endless writer has it; without one, the host's cache stops growing
at the file's size.

A dd workload writes (or reads) its own file per thread in the session's scratch directory
(io/ in the run's directory, removed on exit): `dd if=/dev/zero of=FILE oflag=direct bs=BLOCK count=N conv=notrunc`, or
`dd if=FILE of=/dev/null iflag=direct` from a file made before the run (outside the measured
window and outside the workload's cgroup). Without a `size` it loops over a file of
DD_LOOP_BYTES until the run ends (the same blocks rewritten: direct IO reaches the disk each
time, and the disk does not fill up). Buffered dd (direct = false) writes through the page
cache (written back by the flusher, as the root cgroup's IO on cgroup v1, as the simulator has
it — but rewriting one file's still-dirty pages costs no new IO, which the simulator's endless
writer does not model) and reads with iflag=nocache so that every pass reads the disk.
Random IO (random = true) and the database and iperf kinds do not replay.

Every process of a workload runs in the workload's cgroup (in the seed, clickhouse-benchmark
ran inside the ClickHouse container). Latency and QPS of real servers come from their load
generator's own report; colosim-load reports every request, and so does pgbench (its
per-transaction log, -l). redis-benchmark has no duration: it loops over fixed batches of
REDIS_BATCH requests (-l, one CSV line per batch, line-buffered by stdbuf) under `timeout`
for the measured window, and its QPS is the batches' mean rate, its percentiles the batches'
mean percentiles (the last, unfinished batch is not counted). PostgreSQL's cluster is made
(initdb, pgbench -i) and its server started in `prepare`, before the run's clock: the
server runs in the workload's cgroup as the `postgres` user (setpriv), with its data in the
run's directory.

A workload with a custom EEVDF slice (sched_runtime_ns) has it on every thread of every
process replay starts for it (replay/custom_slice.py): colosim-load sets it on itself, anything
else runs under colosim-load's wrapper, which sets it and execs.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from replay import custom_slice
from replay.cgroupfs import HostError, network_refusal
from sim.reported import REDIS_BATCH, Report
from sim.results import Hits, ServiceResult
from sim.scenario.workloads import Rearm

REPO = Path(__file__).resolve().parents[1]
# a dd without a size loops over a file this large (per thread)
DD_LOOP_BYTES = 512 << 20
# a cache_writer rewrites a file this large (per thread) through the page cache
CACHE_WRITER_BYTES = 1 << 30
# pgbench -i's scale (100,000 rows of pgbench_accounts per unit: a few MB, in memory)
PGBENCH_SCALE = 1


def load_command() -> list[str]:
    """How to start colosim-load: $COLOSIM_LOAD, the repository's release build, `colosim-load`
    on PATH or beside this Python (the console script of a pip-installed colosim, which runs
    the same code from the extension: replay/load.py), or else this Python with -m replay.load."""
    scripts = Path(sys.executable).parent / "colosim-load"
    for candidate in (os.environ.get("COLOSIM_LOAD"), REPO / "core_rs/target/release/colosim-load", shutil.which("colosim-load"), scripts):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    sim = importlib.util.find_spec("sim")
    if sim and any(Path(d).glob("_core.*") for d in sim.submodule_search_locations or []):
        return [sys.executable, "-m", "replay.load"]
    raise HostError(
        "colosim-load is not built: neither it nor the extension sim._core that holds it (`pip install .` builds the extension; "
        "`make setup` both) — or set COLOSIM_LOAD"
    )


def _need(program: str, where: str, package: str) -> str:
    path = shutil.which(program) or next((p for p in (f"/usr/sbin/{program}", f"/usr/bin/{program}") if os.access(p, os.X_OK)), None)
    if path is None:
        raise HostError(f"{where}: program {program!r} not found on this host (Debian package {package})")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise HostError(f"{what} exited at start (status {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise HostError(f"{what} did not listen on port {port} within {timeout:.0f} s")


@dataclass
class MeasuredService(ServiceResult):
    """A real server's service as its load generator measured it."""

    # the load generator's own CPU over its run (CPU·s/s; NaN: not measured). It runs in the
    # service's cgroup, so its CPU is part of that cgroup's (replay/calibration.py models it)
    generator_cpu: float = math.nan
    # its voluntary context switches per second over its run, all threads (NaN: not
    # measured): how often it waits for the server
    generator_switches: float = math.nan
    # the server's voluntary switches per second over the measured window, all its threads
    # however short-lived (NaN: not traced; replay/host_run.py with_server_switches): how often
    # its threads wait, for the client or each other (replay/calibration.py fits `rounds`)
    server_switches: float = math.nan


@dataclass
class ReportedService(MeasuredService):
    """A service measured by a load generator that reports percentiles, not each request."""

    reported: dict[float, float] | None = None  # percentile -> seconds
    reported_qps: float = math.nan

    def percentile(self, p: float) -> float:
        if not self.reported:
            return math.nan
        ps = sorted(self.reported)
        return float(np.interp(p, ps, [self.reported[q] for q in ps]))

    @property
    def mean_s(self) -> float:
        return math.nan

    @property
    def qps(self) -> float:
        return self.reported_qps


class HostWorkload:
    """One workload of a scenario, on the host, over a window [warmup, duration]."""

    def __init__(self, name: str, model: Any, core_spec: dict[str, Any], where: str) -> None:
        self.name = name
        self.model = model  # sim.scenario workload table
        self.spec = core_spec  # the same document the core gets (fanout resolved)
        self.program = model.host.program
        self.where = where
        self.is_service = model.role == "service"  # measured as a service (latency, QPS)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._t0 = 0.0  # time.monotonic() at the start
        self._files: list[Path] = []
        self.port: int | None = None  # a real server's port, once it listens
        self.generator_cpu = math.nan  # the load generator's CPU·s/s over its run, once it ended
        self.generator_switches = math.nan  # ... and its voluntary switches per second
        self._gen_exit: ExitClock | None = None  # notes when the load generator exits

    # -- before anything starts ----------------------------------------------------------

    def check(self) -> None:
        """Every program this workload needs exists (one clear error otherwise)."""
        p, where = self.program, f"{self.where}.host.program"
        if self.model.kind == "iperf":
            raise HostError(network_refusal(f"{self.where}: an iperf workload"))
        if not self.model.replays or getattr(self.model, "trace", None):
            what = "a trace-driven workload" if getattr(self.model, "trace", None) else f"a {self.model.kind} workload"
            raise HostError(f"{self.where}: {what} does not replay on the host yet (the simulator models it)")
        if self.model.sched_runtime_ns:
            custom_slice.check(self.where, self.model.sched_runtime_ns, load_command())
        if self.model.kind == "memory_hog":
            if p != "stress":
                raise HostError(
                    f'{where}: a memory_hog runs on the host as `stress --vm` only (host = "stress"): colosim-load does not '
                    "allocate memory, and stress's workers are the separate processes the OOM killer chooses among"
                )
            if self.model.mode == "hang" and self.model.hang % 1_000_000_000:
                raise HostError(f"{self.where}.hang: stress --vm-hang takes whole seconds (got {self.model.hang / 1e9:g} s)")
            _need("stress", where, "stress")
            if self.model.oom_score_adj:
                _need("choom", where, "util-linux")
            return
        if self.model.kind == "file_server" and p != "builtin":
            raise HostError(
                f'{where}: a file_server replays with colosim-load\'s file reader only (host = "builtin"), which tells a page-cache '
                "hit from a miss; nginx + wrk cannot say which requests hit"
            )
        if self.model.kind == "cache_writer" and p == "builtin":
            _need("dd", where, "coreutils")
            _need("sh", where, "dash")
            return
        if self.model.kind == "dd":
            if self.model.random:
                raise HostError(
                    f"{self.where}: random = true does not replay on the host (dd does sequential IO only; the simulator models it)"
                )
            if self.model.block % 512:
                raise HostError(f"{self.where}.block: {self.model.block} bytes is not a multiple of 512, which dd's direct IO needs")
            _need("dd", where, "coreutils")
            _need("sh", where, "dash")
            return
        if p == "builtin":
            for f in ("client_cpu", "delay"):
                if getattr(self.model, f, None) is not None:
                    # colosim-load's clients and their exchanges cost what they cost on the
                    # host: these fields model a real generator in the simulator, and replay
                    # fits them (replay/calibration.py)
                    raise HostError(f'{self.where}.{f}: does not replay with host = "builtin" (colosim-load\'s clients are real)')
            load_command()
        elif p in ("stress", "stress-ng"):
            _need(p, where, p)
        elif p == "command":
            argv0 = self.model.host.command[0]
            if shutil.which(argv0) is None:
                raise HostError(f"{self.where}.host.command: program {argv0!r} not found on this host")
        elif p == "clickhouse":
            for prog, pkg in (("clickhouse-server", "clickhouse-server"), ("clickhouse-benchmark", "clickhouse-tools")):
                _need(prog, where, pkg)
        elif p == "nginx":
            _need("nginx", where, "nginx")
            _need("wrk", where, "wrk")
        elif p == "redis":
            _need("redis-server", where, "redis-server")
            _need("redis-benchmark", where, "redis-tools")
            _need("stdbuf", where, "coreutils")
            _need("timeout", where, "coreutils")
        elif p == "postgres":
            postgres_bin(where)
            _need("setpriv", where, "util-linux")
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                raise HostError(f"{where}: no `postgres` user on this host (Debian's postgresql package makes it)") from None

    # -- running -------------------------------------------------------------------------

    def _sliced(self, session: Any) -> Any:
        """`session`, or with a custom slice (sched_runtime_ns) one whose programs run under
        colosim-load's slice wrapper (replay/custom_slice.py)."""
        ns = self.model.sched_runtime_ns
        return custom_slice.SlicedSession(session, ns, load_command()) if ns else session

    def _dd_count(self) -> int:
        """Blocks per dd invocation: the whole size, or one pass over the loop file."""
        size = self.model.size if self.model.size is not None else DD_LOOP_BYTES
        return max(1, math.ceil(size / self.model.block))

    def prepare(self, session) -> None:
        """Before the run's clock starts: a dd reader's files, written here (by replay, in its
        own cgroup), so that making them is neither measured nor charged to the workload; and
        a PostgreSQL cluster, made and started (its server in the workload's cgroup)."""
        session = self._sliced(session)
        if self.program == "postgres" and self.model.kind != "dd":
            self._prepare_postgres(session)
            return
        if self.model.kind == "file_server":
            self._prepare_files(session)
            return
        if self.model.kind == "cache_writer" and self.program == "builtin":
            d = session.scratch() / self.name
            if not session.dry_run:
                d.mkdir(exist_ok=True)
                _check_space(d, self.model.threads * CACHE_WRITER_BYTES, self.where)
            self._files = [d / f"w-{i}" for i in range(self.model.threads)]
            return
        if self.model.kind != "dd":
            return
        d = session.scratch() / self.name
        if not session.dry_run:
            d.mkdir(exist_ok=True)
        self._files = [d / f"dd-{i}" for i in range(self.model.threads)]
        if not session.dry_run:
            _check_space(d, len(self._files) * self._dd_count() * self.model.block, self.where)
        if self.model.op != "read":
            return
        for f in self._files:
            argv = ["dd", "if=/dev/zero", f"of={f}", "oflag=direct", f"bs={self.model.block}", f"count={self._dd_count()}", "status=none"]
            if session.dry_run:
                session.say(f"would prepare: {' '.join(argv)}")
                continue
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise HostError(f"{self.where}: could not make dd's input file {f}: {done.stderr.strip()[-300:]}")

    def _prepare_files(self, session) -> None:
        """A file server's working set: working_set / file_size files (f-0, f-1, …) of
        file_size bytes of data (not holes: a sparse file's reads would never reach the
        disk), written by replay in its own cgroup, flushed and dropped from the page cache
        (fsync, POSIX_FADV_DONTNEED) so that none of it is cached, nor charged to anyone,
        when the server starts."""
        m = self.model
        d = session.scratch() / self.name
        n = max(1, m.working_set // m.file_size)
        self._files = [d / f"f-{i}" for i in range(n)]
        if session.dry_run:
            session.say(f"would prepare {n} files of {m.file_size} bytes in {d}, dropped from the page cache")
            return
        d.mkdir(exist_ok=True)
        _check_space(d, n * m.file_size, self.where)
        block = bytes(range(256)) * 4096  # 1 MiB of data
        for f in self._files:
            fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                left = m.file_size
                while left > 0:
                    left -= os.write(fd, block[: min(left, len(block))])
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    def _cache_writer_argv(self, f: Path) -> list[str]:
        """A buffered dd rewriting `f` (CACHE_WRITER_BYTES) in the writer's chunks, pass
        after pass until the run ends."""
        count = max(1, CACHE_WRITER_BYTES // self.model.chunk)
        dd = ["dd", "if=/dev/zero", f"of={f}", f"bs={self.model.chunk}", f"count={count}", "conv=notrunc", "status=none"]
        return ["sh", "-c", 'while :; do "$@" || exit $?; done', "dd-loop", *dd]

    def _dd_argv(self, f: Path) -> list[str]:
        if self.model.kind == "cache_writer":
            return self._cache_writer_argv(f)
        m = self.model
        count = self._dd_count()
        if m.op == "write":
            dd = ["dd", "if=/dev/zero", f"of={f}", f"bs={m.block}", f"count={count}", "conv=notrunc", "status=none"]
            if m.direct:
                dd.append("oflag=direct")
        else:
            dd = [
                "dd",
                f"if={f}",
                "of=/dev/null",
                f"bs={m.block}",
                f"count={count}",
                "status=none",
                "iflag=direct" if m.direct else "iflag=nocache",
            ]
        if m.size is not None:
            return dd
        # until the run ends: pass after pass over the same file; a failing dd ends the loop
        # with its status (reported at the end of the run)
        return ["sh", "-c", 'while :; do "$@" || exit $?; done', "dd-loop", *dd]

    def _start_dd(self, session) -> None:
        for f in self._files:
            argv = self._dd_argv(f)
            if session.dry_run:
                session.spawn(argv, self.model.cgroup)
                continue
            err = open(f.with_name(f.name + ".err"), "w")  # noqa: SIM115 - closed below
            try:
                proc = session.spawn(argv, self.model.cgroup, stderr=err)
            finally:
                err.close()
            self._procs.append(proc)

    def _runs_dd(self) -> bool:
        return self.model.kind == "dd" or (self.model.kind == "cache_writer" and self.program == "builtin")

    def dd_failure(self) -> str | None:
        """A dd that exited with an error before the end of the run: what it said."""
        if not self._runs_dd():
            return None
        for p, f in zip(self._procs, self._files, strict=False):
            if p is not None and p.poll() is not None and p.returncode != 0:
                errf = f.with_name(f.name + ".err")
                text = errf.read_text().strip() if errf.exists() else ""
                return f"{self.where}: dd exited with status {p.returncode}: {text[-300:] or 'no message'}"
        return None

    def start(self, session, t0: float, duration_s: float, warmup_s: float, seed: int) -> None:
        """Start at `t0` (time.monotonic()); services measure from t0 + warmup."""
        own, session = session, self._sliced(session)
        if self._runs_dd():
            self._t0 = t0
            self._window = (warmup_s, duration_s)
            self._start_dd(session)
            return
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"{self.name}-", dir=session.run_dir())
        tmp = Path(self._tmp.name)
        self._t0 = t0
        # the wall clock at t0: pgbench logs completions in epoch time
        self._epoch0 = time.time() - (time.monotonic() - t0)
        self._window = (warmup_s, duration_s)
        cg = self.model.cgroup
        p = self.program
        if self.model.kind == "memory_hog":
            self._procs.append(session.spawn(self.stress_vm_argv(duration_s), cg))
        elif p == "builtin":
            argv = [
                *load_command(),
                "--spec",
                json.dumps(self.spec),
                "--seed",
                str(seed),
                "--duration-ns",
                str(round(duration_s * 1e9)),
                "--out",
                str(tmp / "result.json"),
            ]
            if self.model.kind == "file_server":
                argv += ["--files", str(self._files[0].parent)]
            if self.model.sched_runtime_ns:
                # colosim-load sets the slice itself: no wrapper, no second exec
                argv += custom_slice.flag(self.model.sched_runtime_ns)
            self._procs.append(own.spawn(argv, cg))
        elif p == "stress":
            self._procs.append(session.spawn(["stress", "--cpu", str(self.model.threads), "--timeout", f"{math.ceil(duration_s)}s"], cg))
        elif p == "stress-ng":
            self._procs.append(
                session.spawn(
                    ["stress-ng", "--cpu", str(self.model.threads), "--cpu-method", "int64", "--timeout", f"{math.ceil(duration_s)}s"], cg
                )
            )
        elif p == "command":
            for _ in range(self.model.threads):
                self._procs.append(session.spawn(list(self.model.host.command), cg))
        elif p == "clickhouse":
            self._start_clickhouse(session, tmp, cg, duration_s - warmup_s)
        elif p == "nginx":
            self._start_nginx(session, tmp, cg, duration_s - warmup_s)
        elif p == "redis":
            self._start_redis(session, tmp, cg, duration_s - warmup_s)
        elif p == "postgres":
            self._start_pgbench(tmp, duration_s - warmup_s)

    def stress_vm_argv(self, duration_s: float) -> list[str]:
        """`stress --vm`: the memory_hog's workers, each allocating `bytes` and touching every
        page (stress's stride, 4096), then re-dirtying it (keep), sleeping on it (hang) or
        freeing it at once (churn, stress's default); choom first for an oom_score_adj."""
        m = self.model
        argv = ["stress", "--vm", str(m.threads), "--vm-bytes", str(m.bytes)]
        if m.mode == "keep":
            argv.append("--vm-keep")
        elif m.mode == "hang":
            argv += ["--vm-hang", str(m.hang // 1_000_000_000)]
        argv += ["--timeout", f"{math.ceil(duration_s)}s"]
        return ["choom", "-n", str(m.oom_score_adj), "--", *argv] if m.oom_score_adj else argv

    def _start_clickhouse(self, session, tmp: Path, cg: str, seconds: float) -> None:
        port = _free_port()
        (tmp / "config.xml").write_text(CLICKHOUSE_CONFIG.format(port=port, dir=tmp))
        (tmp / "users.xml").write_text(CLICKHOUSE_USERS)
        log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed with the temp dir
        server = session.spawn(["clickhouse-server", f"--config-file={tmp / 'config.xml'}"], cg, stdout=log, stderr=log, cwd=tmp)
        if server is None:
            return
        _wait_port(port, server, "clickhouse-server")
        self.port = port
        self._generator = (clickhouse_benchmark_argv(port, self.model.clients, seconds, tmp / "bench.json"), self.model.host.query)

    def _start_nginx(self, session, tmp: Path, cg: str, seconds: float) -> None:
        port = start_nginx(session, tmp, cg)
        if port is None:
            return
        self.port = port
        self._generator = (wrk_argv(self.model.clients, seconds, f"http://127.0.0.1:{port}{self.model.host.path}"), None)

    def _start_redis(self, session, tmp: Path, cg: str, seconds: float) -> None:
        port = start_redis(session, tmp, cg)
        if port is None:
            return
        self._generator = (redis_benchmark_argv(port, self.model.clients, max(1.0, seconds), self.model.host.bench_test), None)

    def _prepare_postgres(self, session) -> None:
        """initdb, the server started in the workload's cgroup, pgbench -i: all before the clock."""
        import pwd

        bindir = postgres_bin(self.where)
        if session.dry_run:
            session.say(f"would make a PostgreSQL cluster ({bindir}/initdb, pgbench -i -s {PGBENCH_SCALE}) and start its server")
            session.spawn([str(bindir / "postgres"), "-D", "DATA"], self.model.cgroup)
            return
        pw = pwd.getpwnam("postgres")
        run_dir = session.run_dir()
        self._tmp = tempfile.TemporaryDirectory(prefix=f"{self.name}-", dir=run_dir)
        tmp = Path(self._tmp.name)
        # the postgres user walks through the run's directory to its own data (and no further)
        os.chmod(run_dir, 0o711)
        os.chmod(tmp, 0o711)
        data = tmp / "pgdata"
        data.mkdir(mode=0o700)
        os.chown(data, pw.pw_uid, pw.pw_gid)
        as_postgres = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups"]
        done = subprocess.run(
            [*as_postgres, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise HostError(f"{self.where}: initdb failed: {done.stderr.strip()[-300:]}")
        port = _free_port()
        log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed with the temp dir
        os.chown(tmp / "server.log", pw.pw_uid, pw.pw_gid)
        server = session.spawn(
            [
                *as_postgres,
                str(bindir / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "fsync=off",
                "-c",
                f"max_connections={self.model.clients + 10}",
            ],
            self.model.cgroup,
            stdout=log,
            stderr=log,
        )
        log.close()
        _wait_port(port, server, "postgres")
        init = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
        deadline = time.monotonic() + 30
        while True:  # the port opens before the server accepts connections
            ready = subprocess.run([str(bindir / "pg_isready"), *init, "-q"])
            if ready.returncode == 0:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise HostError(f"{self.where}: postgres did not accept connections: {(tmp / 'server.log').read_text()[-300:]}")
            time.sleep(0.2)
        done = subprocess.run(
            [str(bindir / "pgbench"), *init, "-i", "-q", "-s", str(PGBENCH_SCALE), "postgres"], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise HostError(f"{self.where}: pgbench -i failed: {done.stderr.strip()[-300:]}")
        self._pg = (bindir, port)

    def _start_pgbench(self, tmp: Path, seconds: float) -> None:
        pg = getattr(self, "_pg", None)
        if pg is None:  # a dry run
            return
        bindir, port = pg
        threads = generator_threads("postgres", self.model.clients)
        self._generator = (
            [
                str(bindir / "pgbench"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "postgres",
                "-c",
                str(self.model.clients),
                "-j",
                str(threads),
                "-T",
                str(max(1, round(seconds))),
                "-b",
                self.model.host.bench_test,
                "-n",  # no vacuum before the run
                "-l",
                f"--log-prefix={tmp / 'pgbench_log'}",
                "postgres",
            ],
            None,
        )

    def start_generator(self, session) -> None:
        """Real servers: the load generator starts at the end of the warm-up."""
        session = self._sliced(session)
        gen = getattr(self, "_generator", None)
        if gen is None:
            return
        argv, stdin_text = gen
        assert self._tmp is not None, "start_generator before start"
        tmp = Path(self._tmp.name)
        self._gen_out = open(tmp / "generator.out", "w")  # noqa: SIM115
        stdin: int | IO[str] = subprocess.DEVNULL
        if stdin_text is not None:
            # clickhouse-benchmark reads its queries from stdin
            (tmp / "queries.txt").write_text(stdin_text + "\n")
            stdin = open(tmp / "queries.txt")  # noqa: SIM115
        self._gen_started = time.monotonic()
        self._gen_proc = session.spawn(argv, self.model.cgroup, stdout=self._gen_out, stderr=subprocess.STDOUT, stdin=stdin)
        if not isinstance(stdin, int):
            stdin.close()
        if self._gen_proc is not None:
            self._gen_exit = ExitClock(self._gen_proc.pid)

    def _wait_generator(self, timeout: float) -> None:
        """Wait for the load generator to exit and, before reaping it, read its CPU time:
        a zombie's /proc/PID/stat still holds utime + stime summed over all its threads
        (proc(5)), and waitid(WNOWAIT) sees the exit without reaping. Reaping it with wait4
        gives its voluntary context switches summed over all its threads (ru_nvcsw:
        getrusage(2) of the child, which the kernel fills from the whole thread group)."""
        p = self._gen_proc
        deadline = time.monotonic() + max(0.1, timeout)
        while time.monotonic() < deadline:
            try:
                done = os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            except ChildProcessError:  # already reaped
                return
            if done is not None:
                # its own lifetime: the exit is noticed only after the run's end (a trace's
                # teardown can take seconds), and the CPU is a rate over the time it ran
                ended = self._gen_exit.at() if self._gen_exit is not None else time.monotonic()
                wall = ended - self._gen_started
                self.generator_cpu = generator_cpu_rate(p.pid, wall)
                self.generator_switches = reap_switches(p) / wall if wall > 0 else math.nan
                return
            time.sleep(0.02)

    def wait(self, timeout: float) -> None:
        """Wait for what ends by itself (workloads with a duration, load generators); servers
        run until the session kills them, and so do dd workloads (they stop with the run)."""
        if self._runs_dd():
            return
        if getattr(self, "_gen_proc", None) is not None:
            self._wait_generator(timeout)
        for p in self._procs:
            if p is None:
                continue
            try:
                p.wait(timeout=max(0.1, timeout))
            except subprocess.TimeoutExpired:
                pass

    def result(self) -> ServiceResult | None:
        if not self.is_service or self._tmp is None:
            return None
        tmp = Path(self._tmp.name)
        warmup, duration = self._window
        measured = duration - warmup
        if self.program == "builtin":
            f = tmp / "result.json"
            if not f.exists():
                raise HostError(f"{self.where}: colosim-load wrote no result (did it crash?)")
            doc = json.loads(f.read_text())
            t0_ns = round(self._t0 * 1e9)
            done = (np.asarray(doc["completions_ns"], dtype=np.int64) - t0_ns) / 1e9
            lat = np.asarray(doc["latencies_ns"], dtype=np.float64) / 1e9
            keep = (done >= warmup) & (done <= duration)
            hits: Hits = {}
            if "hits" in doc:  # a file server: which requests found their file cached
                h = np.asarray(doc["hits"], dtype=bool)[keep]
                hits = {"hits": int(h.sum()), "misses": int((~h).sum())}
            return ServiceResult(
                name=self.name,
                latencies_s=lat[keep],
                completions_s=done[keep],
                started=int(doc["started"]),
                completed=int(keep.sum()),
                measured_s=measured,
                **hits,
            )
        text = (tmp / "generator.out").read_text() if (tmp / "generator.out").exists() else ""
        if self.program == "clickhouse":
            f = tmp / "bench.json"
            if not f.exists():
                raise HostError(f"{self.where}: clickhouse-benchmark wrote no report: {text[-300:]}")
            svc: MeasuredService = parse_clickhouse_json(self.name, f.read_text(), measured)
        elif self.program == "redis":
            svc = parse_redis_csv(self.name, text, measured, REDIS_BATCH)
        elif self.program == "postgres":
            logs = sorted(tmp.glob("pgbench_log.*"))
            if not logs:
                raise HostError(f"{self.where}: pgbench wrote no transaction log: {text[-300:]}")
            svc = parse_pgbench_log(self.name, [f.read_text() for f in logs], self._epoch0, warmup, duration)
        else:
            svc = parse_wrk(self.name, text, measured)
        svc.generator_cpu = self.generator_cpu
        svc.generator_switches = self.generator_switches
        return svc

    def close(self) -> None:
        for f in self._files:  # dd's scratch files (the session removes the directory too)
            for g in (f, f.with_name(f.name + ".err")):
                try:
                    g.unlink()
                except OSError:
                    pass
        self._files = []
        if getattr(self, "_gen_out", None) is not None:
            self._gen_out.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _check_space(d: Path, need: int, where: str) -> None:
    """Room for `need` bytes of scratch files in `d`, with 1 GiB to spare."""
    free = shutil.disk_usage(d).free
    if need > free - (1 << 30):
        raise HostError(f"{where}: needs {need >> 20} MiB of scratch space in {d.parent}, {free >> 20} MiB free (set TMPDIR)")


def start_nginx(session, tmp: Path, cg: str) -> int | None:
    """nginx serving a small page from `tmp` (its config, logs and root there) in `cg`, one
    worker per CPU we may use; its port once it listens (None in a dry run)."""
    port = _free_port()
    for d in ("logs", "html", "tmp"):
        (tmp / d).mkdir()
    (tmp / "html" / "index.html").write_text("colosim\n" * 64)
    workers = len(os.sched_getaffinity(0))
    (tmp / "nginx.conf").write_text(NGINX_CONFIG.format(port=port, dir=tmp, workers=workers))
    server = session.spawn(["nginx", "-p", str(tmp), "-c", str(tmp / "nginx.conf")], cg)
    if server is None:
        return None
    _wait_port(port, server, "nginx")
    return port


def start_redis(session, tmp: Path, cg: str) -> int | None:
    """redis-server on loopback in `cg`, without persistence (its dir `tmp`); its port once it
    listens (None in a dry run)."""
    port = _free_port()
    server = session.spawn(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp)], cg
    )
    if server is None:
        return None
    _wait_port(port, server, "redis-server")
    return port


def redis_benchmark_argv(port: int, clients: int, seconds: float, test: str, keys: int | None = None) -> list[str]:
    """redis-benchmark looping (`-l`) over `test` with `clients` connections for `seconds`,
    its CSV line-buffered (a batch of REDIS_BATCH requests a line); `keys`: random keys of a
    keyspace that size (`-r`)."""
    argv = ["timeout", f"{seconds:g}s", "stdbuf", "-oL", "redis-benchmark", "-h", "127.0.0.1", "-p", str(port)]
    argv += ["-c", str(clients), "-n", str(REDIS_BATCH)]
    if keys is not None:
        argv += ["-r", str(keys)]
    return [*argv, "-t", test, "-l", "--csv"]


def clickhouse_benchmark_argv(port: int, clients: int, seconds: float, json_path: Path) -> list[str]:
    """clickhouse-benchmark: `clients` concurrent queries for `seconds`, no pause between
    reports, its statistics to `json_path` (the query comes on stdin)."""
    return [
        "clickhouse-benchmark",
        "--port",
        str(port),
        "-c",
        str(clients),
        "-i",
        "100000000",
        "-t",
        str(max(1, round(seconds))),
        "-d",
        "0",
        "--json",
        str(json_path),
    ]


def generator_threads(program: str, clients: int, ncpus: int | None = None) -> int | None:
    """The threads of the load generator replay runs for a real server's `program`, serving its
    `clients` connections in turn (the model's closed loop `client_threads`), or None: a thread
    per connection. wrk (nginx, command) and pgbench (postgres) run at most one thread per CPU
    (-t, -j) of the `ncpus` the run had (default: this process's); redis-benchmark is one
    event loop; clickhouse-benchmark has a thread per connection."""
    if program in ("nginx", "command", "postgres"):
        return min(clients, ncpus if ncpus is not None else len(os.sched_getaffinity(0)))
    if program == "redis":
        return 1
    return None


def generator_event_loop(program: str) -> Rearm | None:
    """How the load generator replay runs for `program` re-arms a connection's write, where it
    is an event loop that times a request from its write to its reply's read (the model's
    closed loop `event_loop`); None where it is not. wrk (nginx, command: socket_writeable
    starts c->start, response_complete records it and adds the write with EPOLL_CTL_MOD, the
    read staying registered): "modify". redis-benchmark (writeHandler sets c->start,
    readHandler takes the latency, and resetClient deletes both events, then adds the write:
    EPOLL_CTL_DEL, EPOLL_CTL_ADD): "readd". pgbench times a whole transaction of several
    statements, clickhouse-benchmark a query on its thread: neither."""
    rearm: dict[str, Rearm] = {"nginx": "modify", "command": "modify", "redis": "readd"}
    return rearm.get(program)


def generator_report(program: str) -> Report | None:
    """How the load generator replay runs for `program` prints latencies (sim/reported.py):
    wrk (nginx, command) corrected for coordinated omission, redis-benchmark -l per batch;
    None where replay reads every request's latency (pgbench -l, colosim-load) or
    clickhouse-benchmark's own percentiles of every query."""
    report: dict[str, Report] = {"nginx": "wrk", "command": "wrk", "redis": "redis-benchmark"}
    return report.get(program)


def wrk_argv(clients: int, seconds: float, url: str, script: Path | None = None) -> list[str]:
    """wrk: `clients` connections (on at most one thread per CPU) for `seconds`, with its latency
    distribution; `script` a Lua file (its done() may print more of the distribution)."""
    threads = generator_threads("nginx", clients)
    argv = ["wrk", "-t", str(threads), "-c", str(clients), "-d", f"{max(1, round(seconds))}s", "--latency"]
    if script is not None:
        argv += ["-s", str(script)]
    return [*argv, url]


class ExitClock:
    """When child `pid` exited, without reaping it: a thread blocks in waitid(WNOWAIT) and
    notes the time its exit wakes it (a zombie's /proc says when it started, not when it
    ended)."""

    def __init__(self, pid: int) -> None:
        self._at: float | None = None
        self._thread = threading.Thread(target=self._watch, args=(pid,), daemon=True)
        self._thread.start()

    def _watch(self, pid: int) -> None:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # reaped elsewhere: at() falls back to now
            return
        self._at = time.monotonic()

    def at(self) -> float:
        """The exit's time, once the child is a zombie (waits for the thread to note it)."""
        self._thread.join(timeout=1.0)
        return self._at if self._at is not None else time.monotonic()


def generator_cpu_rate(pid: int, wall_s: float) -> float:
    """CPU·s/s process `pid` and the children it reaped used over `wall_s`: fields 14-17 of
    /proc/PID/stat (utime, stime, cutime, cstime; clock ticks, all threads), read while it is a
    zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    # utime + stime, and cutime + cstime: the children it waited for (`timeout` runs
    # redis-benchmark as its child)
    ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK") / wall_s if wall_s > 0 else math.nan


def reap_switches(p: subprocess.Popen) -> float:
    """Reap exited child `p` (which Popen has not) and return its voluntary context switches,
    all threads; NaN if it was reaped elsewhere. `p.returncode` is set as Popen.wait sets it."""
    try:
        _, status, usage = os.wait4(p.pid, 0)
    except ChildProcessError:
        p.wait()
        return math.nan
    p.returncode = os.waitstatus_to_exitcode(status)
    return float(usage.ru_nvcsw)


def parse_clickhouse_json(name: str, text: str, measured_s: float) -> ReportedService:
    """clickhouse-benchmark --json: {"statistics": {"QPS", "num_queries"}, "query_time_percentiles"}
    (18.16 writes it bare; newer versions nest it under "host:port")."""
    doc = json.loads(text)
    if "statistics" not in doc and len(doc) == 1:
        doc = next(iter(doc.values()))
    stats, pct = doc["statistics"], doc["query_time_percentiles"]
    return _reported(name, int(stats.get("num_queries", 0)), measured_s, {float(k): float(v) for k, v in pct.items()}, float(stats["QPS"]))


_WRK_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def parse_wrk(name: str, text: str, measured_s: float) -> ReportedService:
    """wrk --latency: the "Latency Distribution" lines and "Requests/sec"."""
    pct = {}
    for p, value, unit in re.findall(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M):
        pct[float(p)] = float(value) * _WRK_UNITS[unit]
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in", text)
    if not pct or rps is None:
        raise HostError(f"wrk printed no latency distribution: {text[-300:]}")
    return _reported(name, int(total.group(1)) if total else 0, measured_s, pct, float(rps.group(1)))


def parse_redis_csv(name: str, text: str, measured_s: float, batch: int) -> ReportedService:
    """redis-benchmark -l --csv: a header, then per batch of `batch` requests
    "TEST","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms".
    QPS: the batches' total requests over their total time (sum of batch / rps); each
    percentile: the batches' mean of it (equal-sized batches: each weighs the same)."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip('"') for c in line.strip().split(",")]
        if len(cells) == 8 and cells[1] != "rps":
            try:
                rows.append([float(c) for c in cells[1:]])
            except ValueError:
                continue
    if not rows:
        raise HostError(f"redis-benchmark finished no batch of {batch} requests: {text[-300:]}")
    a = np.asarray(rows)
    rps = a[:, 0]
    qps = len(rps) / float(np.sum(1 / rps))
    ms = {0.0: a[:, 2], 50.0: a[:, 3], 95.0: a[:, 4], 99.0: a[:, 5], 100.0: a[:, 6]}
    return _reported(name, len(rows) * batch, measured_s, {p: float(v.mean()) / 1e3 for p, v in ms.items()}, qps)


def parse_pgbench_log(name: str, logs: list[str], epoch0: float, warmup_s: float, duration_s: float) -> MeasuredService:
    """pgbench -l: one line per transaction, "client_id transaction_no time_us script_no
    epoch_s epoch_us" (latency in microseconds; completion in epoch time): every transaction
    that completed in the window [warmup, duration] after `epoch0` (the run's start)."""
    lat, done = [], []
    for text in logs:
        for line in text.splitlines():
            f = line.split()
            if len(f) < 6:
                continue
            lat.append(int(f[2]) / 1e6)
            done.append(int(f[4]) + int(f[5]) / 1e6 - epoch0)
    latencies, completions = np.asarray(lat), np.asarray(done)
    order = np.argsort(completions, kind="stable")
    latencies, completions = latencies[order], completions[order]
    keep = (completions >= warmup_s) & (completions <= duration_s)
    return MeasuredService(
        name=name,
        latencies_s=latencies[keep],
        completions_s=completions[keep],
        started=int(keep.sum()),
        completed=int(keep.sum()),
        measured_s=duration_s - warmup_s,
    )


def postgres_bin(where: str) -> Path:
    """The newest PostgreSQL server's bin directory (/usr/lib/postgresql/VERSION/bin, Debian's
    layout), with initdb, postgres, pg_isready and pgbench."""
    found = []
    for d in Path("/usr/lib/postgresql").glob("*/bin"):
        if all((d / p).is_file() for p in ("initdb", "postgres", "pg_isready", "pgbench")) and d.parent.name.isdigit():
            found.append((int(d.parent.name), d))
    if not found:
        raise HostError(f"{where}: no PostgreSQL server with pgbench on this host (/usr/lib/postgresql/*/bin; Debian package postgresql)")
    return max(found)[1]


def _reported(name: str, n: int, measured_s: float, percentiles: dict[float, float], qps: float) -> ReportedService:
    """A service as its load generator reported it: n requests, latency percentiles (s) and
    QPS, no per-request records."""
    return ReportedService(
        name=name,
        latencies_s=np.empty(0),
        completions_s=np.empty(0),
        started=n,
        completed=n,
        measured_s=measured_s,
        reported=percentiles,
        reported_qps=qps,
    )


CLICKHOUSE_CONFIG = """<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><console>1</console></logger>
  <tcp_port>{port}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{dir}/data/</path>
  <tmp_path>{dir}/tmp/</tmp_path>
  <user_files_path>{dir}/user_files/</user_files_path>
  <format_schema_path>{dir}/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>5368709120</mark_cache_size>
</yandex>
"""

CLICKHOUSE_USERS = """<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
"""

NGINX_CONFIG = """daemon off;
worker_processes {workers};
error_log {dir}/logs/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/tmp;
  proxy_temp_path {dir}/tmp;
  fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp;
  scgi_temp_path {dir}/tmp;
  server {{
    listen 127.0.0.1:{port};
    root {dir}/html;
  }}
}}
"""
