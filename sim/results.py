"""What a run measured, read out of a finished NodeEnvironment, and how runs compare.

Everything measured is over the window after the warm-up (the core's stats are reset at its
end); the time series alone covers the whole run, warm-up included.  Times are in seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from sim.reported import Report, batch_mean_percentile, nearest_rank, wrk_histogram, wrk_interval_us, wrk_percentile

if TYPE_CHECKING:
    from sim.environment import NodeEnvironment

NS = 1e9
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def _u64(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<u8")


class Hits(TypedDict, total=False):
    """A file server's page-cache hits and misses, as ServiceResult's keyword arguments."""

    hits: int
    misses: int


def _hits(stats: dict[str, Any]) -> Hits:
    """A file server's hits and misses, when it served any (other kinds report 0 of each)."""
    hits, misses = int(stats.get("hits", 0)), int(stats.get("misses", 0))
    return {"hits": hits, "misses": misses} if hits + misses else {}


@dataclass
class ServiceResult:
    """One request-serving workload (closed_loop or open_loop)."""

    name: str
    latencies_s: np.ndarray  # in completion order
    completions_s: np.ndarray  # completion time of each request, seconds since the start
    started: int
    completed: int
    measured_s: float
    dropped: int = 0  # an open loop's arrivals refused: its backlog was full
    # a file server's requests that found their file in the page cache / waited for the disk
    # (None for other kinds)
    hits: int | None = None
    misses: int | None = None
    # a closed loop's messages with a cross_cpu cost, and those whose receiver ran on another
    # CPU than their sender (0 without cross_cpu)
    exchanges: int = 0
    crossed: int = 0
    # how its load generator prints its latencies (sim/reported.py: "wrk" corrects for
    # coordinated omission, "redis-benchmark" averages per batch); `connections` are wrk's
    report: Report = "exact"
    connections: int = 0

    @property
    def crossed_share(self) -> float:
        """The share of the messages that crossed CPUs (NaN: none counted)."""
        return self.crossed / self.exchanges if self.exchanges else math.nan

    @property
    def crossings_per_request(self) -> float:
        """The messages that crossed CPUs per request completed, per direction (a request and
        its reply count one): how many times a request paid each of its `cross_cpu` costs,
        on average (its rounds, when every message crossed). NaN: none counted."""
        return self.crossed / (2 * self.completed) if self.exchanges and self.completed else math.nan

    @cached_property
    def sorted_latencies_s(self) -> np.ndarray:
        return np.sort(self.latencies_s)

    @cached_property
    def wrk_histogram(self) -> np.ndarray:
        """The latencies as wrk holds them when it prints (µs bins, corrected)."""
        return wrk_histogram(self.latencies_s, wrk_interval_us(round(self.measured_s * 1e6), self.completed, self.connections))

    def percentile(self, p: float) -> float:
        """The p-th percentile as its load generator would print it (`report`)."""
        if self.report == "wrk":
            return wrk_percentile(self.wrk_histogram, p)
        if self.report == "redis-benchmark":
            return batch_mean_percentile(self.latencies_s, p)
        return nearest_rank(self.sorted_latencies_s, p)

    @property
    def p50_s(self) -> float:
        return self.percentile(50)

    @property
    def p90_s(self) -> float:
        return self.percentile(90)

    @property
    def p99_s(self) -> float:
        return self.percentile(99)

    @property
    def p999_s(self) -> float:
        return self.percentile(99.9)

    @property
    def mean_s(self) -> float:
        return float(self.latencies_s.mean()) if len(self.latencies_s) else math.nan

    @property
    def qps(self) -> float:
        return self.completed / self.measured_s if self.measured_s > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "qps": self.qps,
            "p50_s": self.p50_s,
            "p90_s": self.p90_s,
            "p99_s": self.p99_s,
            "p999_s": self.p999_s,
            "mean_s": self.mean_s,
            "started": self.started,
            "completed": self.completed,
            "dropped": self.dropped,
            # a file server's page-cache hits and misses (other kinds: none)
            **({"hits": self.hits, "misses": self.misses} if self.hits is not None else {}),
        }


@dataclass
class CgroupResult:
    """CPU a cgroup got (hierarchical, like cpuacct.usage) over the measured window."""

    name: str
    cpu_s: float
    cpu_share: float  # of node capacity: cpu_s / (ncpus x measured seconds)
    wait_s: float  # run-queue wait of its tasks
    nr_switches: int
    # times its tasks changed CPU (se.nr_migrations summed; a host run knows it only when probed)
    nr_migrations: int = 0
    # cpu.stat of the group's own bandwidth control (zero without a quota)
    nr_periods: int = 0
    nr_throttled: int = 0
    throttled_s: float = 0.0  # summed over CPUs, as the kernel sums it
    nr_bursts: int = 0
    burst_s: float = 0.0
    # cpu.pressure: time some / all of its runnable tasks waited for a CPU
    psi_some_s: float = 0.0
    psi_full_s: float = 0.0
    # memcg (bytes; None when the node's memory is not modelled): memory.current and its
    # anon/file/swap split, memory.peak, and memory.events (cumulative, hierarchical)
    memory: dict[str, int] | None = None
    # blkio over the measured window (None without [node.disk]): bytes and IOs the device
    # moved for the subtree (writeback counts to whoever owned the dirty pages: the root on
    # cgroup v1), and the time its tasks waited on IO; bytes it sent (None without a link)
    io: dict[str, int] | None = None
    net_tx_bytes: int | None = None
    # wake-to-run delays of its tasks, sim/runqlat.py's buckets (None: a host run not traced)
    runqlat: list[int] | None = None
    # its tasks' run segments by how they ended and the waits after preemption, the same
    # buckets: {"preempted", "blocked", "preempted_wait"} (None: a host run not traced)
    segments: dict[str, list[int]] | None = None
    # per CPU, the time (µs) it had k of its tasks runnable there, k = 0 … 15 (the last: that
    # many or more): how often its queue on a CPU runs dry (None: a host run not traced)
    runnable_us: list[list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "runqlat_us": self.runqlat,
            "segments_us": self.segments,
            "runnable_us": self.runnable_us,
            "memory": self.memory,
            "io": self.io,
            "net_tx_bytes": self.net_tx_bytes,
            "cpu_s": self.cpu_s,
            "cpu_share": self.cpu_share,
            "wait_s": self.wait_s,
            "nr_switches": self.nr_switches,
            "nr_migrations": self.nr_migrations,
            "nr_periods": self.nr_periods,
            "nr_throttled": self.nr_throttled,
            "throttled_s": self.throttled_s,
            "nr_bursts": self.nr_bursts,
            "burst_s": self.burst_s,
            "psi_some_s": self.psi_some_s,
            "psi_full_s": self.psi_full_s,
        }


@dataclass
class TimeSeries:
    """Per sample interval, whole run (warm-up included): t_s is each interval's end."""

    t_s: np.ndarray
    cpu_share: dict[str, np.ndarray]  # per cgroup, share of node capacity in the interval
    completions: dict[str, np.ndarray]  # per service, requests completed in the interval
    nr_throttled: dict[str, np.ndarray]  # per cgroup, cpu.stat nr_throttled in the interval
    # per cgroup, memory.current (bytes) at each interval's end; empty without memory
    memory: dict[str, np.ndarray] = field(default_factory=dict)
    # per cgroup subtree, disk bytes (read + written) and bytes sent per second in the
    # interval; empty without a disk / link
    io_rate: dict[str, np.ndarray] = field(default_factory=dict)
    net_rate: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_core(cls, raw: dict[str, Any], ncpus: int, cgroups: list[str], services: list[str]) -> TimeSeries:
        t = _u64(raw["t_ns"]).astype(np.int64)
        mem_raw = _u64(raw.get("memory_bytes", b""))
        memory = (
            {c: col for c, col in zip(cgroups, mem_raw.reshape(len(t), len(cgroups)).T.astype(np.int64), strict=True) if c}
            if len(mem_raw) and len(t)
            else {}
        )
        rates = {}
        for key in ("io_bytes", "net_bytes"):
            col = _u64(raw.get(key, b"")).astype(np.float64)
            if not (len(col) and len(t)):
                continue
            col, tt = col.reshape(len(t), len(cgroups)), t.astype(np.float64)
            if t[0] > 0:  # cumulative from time 0: the first interval starts at zero
                col, tt = np.vstack([np.zeros(len(cgroups)), col]), np.concatenate([[0.0], tt])
            per_s = np.diff(col, axis=0) / (np.diff(tt) / NS)[:, None]
            rates[key] = {c: per_s[:, i] for i, c in enumerate(cgroups) if c}
        usage = _u64(raw["usage_ns"]).astype(np.float64).reshape(len(t), len(cgroups))
        done = _u64(raw["completed"]).astype(np.int64).reshape(len(t), len(services))
        throttled = _u64(raw["nr_throttled"]).astype(np.int64).reshape(len(t), len(cgroups))
        if len(t) and t[0] > 0:
            # Counters are cumulative from time 0, so the first interval starts at zero.
            t = np.concatenate([[0], t])
            usage = np.vstack([np.zeros(len(cgroups)), usage])
            done = np.vstack([np.zeros(len(services), dtype=np.int64), done])
            throttled = np.vstack([np.zeros(len(cgroups), dtype=np.int64), throttled])
        if len(t) < 2:
            return cls(
                np.empty(0),
                {c: np.empty(0) for c in cgroups[1:]},
                {s: np.empty(0, dtype=np.int64) for s in services},
                {c: np.empty(0, dtype=np.int64) for c in cgroups[1:]},
            )
        dt = np.diff(t).astype(np.float64)
        share = np.diff(usage, axis=0) / (ncpus * dt)[:, None]
        completed = np.diff(done, axis=0)
        nr_throttled = np.diff(throttled, axis=0)
        return cls(
            t_s=t[1:] / NS,
            cpu_share={c: share[:, i] for i, c in enumerate(cgroups) if c},
            completions={s: completed[:, i] for i, s in enumerate(services)},
            nr_throttled={c: nr_throttled[:, i] for i, c in enumerate(cgroups) if c},
            # samples after the first (the intervals' ends), as for the rest
            memory={c: v[-len(t) + 1 :] if len(t) > 1 else v[:0] for c, v in memory.items()},
            io_rate=rates.get("io_bytes", {}),
            net_rate=rates.get("net_bytes", {}),
        )


@dataclass
class RunResult:
    """One run of a scenario, read from its finished environment."""

    name: str
    ncpus: int
    duration_s: float  # simulated time at the end
    warmup_s: float  # when the stats were last reset
    services: dict[str, ServiceResult]
    cgroups: dict[str, CgroupResult]  # every cgroup but the root
    cgroup_names: list[str]  # columns of cpu_busy_s, the core's order; index 0 is the root
    cpu_busy_s: np.ndarray  # ncpus x len(cgroup_names): time each CPU ran each leaf cgroup
    timeseries: TimeSeries
    decisions: list[dict[str, Any]] = field(default_factory=list)  # the policy's, in order
    # tasks each workload lost to the OOM killer (memory modelled), and the node's memory
    oom_kills: dict[str, int] = field(default_factory=dict)
    node_memory: dict[str, int] | None = None
    # per trace-driven workload: (what it sets, its cgroup, times (s, simulated), values)
    trace_demand: dict[str, tuple[str, str, Any, Any]] = field(default_factory=dict)
    # the whole node's disk IO and bytes sent (the root's subtree: the flusher's writeback on
    # cgroup v1 shows here and in no cgroup); None without a disk / link
    node_io: dict[str, int] | None = None
    node_net_tx_bytes: int | None = None
    # a host run's: the share of the node's capacity busy outside the run's cgroups (the host's
    # other tenants, replay itself); None in the simulator
    others_cpu_share: float | None = None
    # a host run's: the part of that which was the replay process itself (all its threads: the
    # sampling, a trace's reader), so a measurement that disturbs its run shows as such
    replay_cpu_share: float | None = None
    # a traced host run's: the CPU-weighted mean burst (s of CPU from a wakeup to a sleep) of
    # the threads outside the run's cgroups (replay/runqlat.py `_Others`): the shape the
    # prediction gives the other tenants (replay/background.py); None where not traced
    others_burst_s: float | None = None

    @property
    def measured_s(self) -> float:
        return self.duration_s - self.warmup_s

    @property
    def busy_share(self) -> float:
        """Share of node capacity that ran any task (the rest was idle)."""
        capacity = self.ncpus * self.measured_s
        return float(self.cpu_busy_s.sum()) / capacity if capacity > 0 else math.nan

    @classmethod
    def from_environment(cls, env: NodeEnvironment, name: str) -> RunResult:
        node = env.node
        ncpus = node.ncpus
        measured = env.now - env.stats_since
        capacity = ncpus * measured
        cgroup_names = list(node.cgroup_names())
        service_names = list(node.service_names())

        services = {}
        for svc in service_names:
            stats = node.service_stats(svc)
            services[svc] = ServiceResult(
                name=svc,
                latencies_s=_u64(node.service_latencies(svc)) / NS,
                completions_s=_u64(node.service_completions(svc)) / NS,
                started=int(stats["started"]),
                completed=int(stats["completed"]),
                dropped=int(stats.get("dropped", 0)),
                measured_s=measured,
                exchanges=int(stats.get("exchanges", 0)),
                crossed=int(stats.get("crossed", 0)),
                **_hits(stats),
            )
        cgroups = {}
        for cg in cgroup_names:
            if not cg:
                continue
            stats = node.cgroup_stats(cg)
            cpu_s = stats["usage_ns"] / NS
            cgroups[cg] = CgroupResult(
                name=cg,
                cpu_s=cpu_s,
                cpu_share=cpu_s / capacity if capacity > 0 else math.nan,
                wait_s=stats["wait_ns"] / NS,
                runqlat=node.runqlat(cg),
                segments=node.run_segments(cg),
                runnable_us=[[t // 1000 for t in row] for row in node.runnable_time(cg)],
                nr_switches=int(stats["nr_switches"]),
                nr_migrations=int(stats.get("nr_migrations", 0)),
                nr_periods=int(stats["nr_periods"]),
                nr_throttled=int(stats["nr_throttled"]),
                throttled_s=stats["throttled_time"] / NS,
                nr_bursts=int(stats["nr_bursts"]),
                burst_s=stats["burst_time"] / NS,
                psi_some_s=stats["psi_some_ns"] / NS,
                psi_full_s=stats["psi_full_ns"] / NS,
                memory={k[len("memory_") :]: int(v) for k, v in stats.items() if k.startswith("memory_")} or None,
                io={k[len("io_") :]: int(v) for k, v in stats.items() if k.startswith("io_")} or None,
                net_tx_bytes=None if "net_tx_bytes" not in stats else int(stats["net_tx_bytes"]),
            )
        busy = _u64(node.cpu_busy()).reshape(ncpus, len(cgroup_names)) / NS
        root = node.cgroup_stats("")
        return cls(
            name=name,
            ncpus=ncpus,
            duration_s=env.now,
            warmup_s=env.stats_since,
            services=services,
            cgroups=cgroups,
            cgroup_names=cgroup_names,
            cpu_busy_s=busy,
            timeseries=TimeSeries.from_core(node.timeseries(), ncpus, cgroup_names, service_names),
            oom_kills={k: int(v) for k, v in node.oom_kills().items() if v},
            node_memory=node.memory_stats(),
            node_io={k[len("io_") :]: int(v) for k, v in root.items() if k.startswith("io_")} or None,
            node_net_tx_bytes=None if "net_tx_bytes" not in root else int(root["net_tx_bytes"]),
        )

    def cpus(self) -> list[dict[str, float]]:
        """Per CPU, busy seconds by cgroup (the root column left out: tasks live in leaves)."""
        return [{cg: float(row[i]) for i, cg in enumerate(self.cgroup_names) if cg} for row in self.cpu_busy_s]

    def to_dict(self) -> dict[str, Any]:
        return {
            "services": {n: s.to_dict() for n, s in self.services.items()},
            "cgroups": {n: c.to_dict() for n, c in self.cgroups.items()},
            "cpus": self.cpus(),
            "decisions": self.decisions,
            "oom_kills": self.oom_kills,
            "node_memory": self.node_memory,
            "node_io": self.node_io,
            "node_net_tx_bytes": self.node_net_tx_bytes,
        }


@dataclass
class ExperimentResult:
    """The runs of one scenario, in order, and the one they are compared with."""

    scenario: str
    seed: int
    duration_s: float
    warmup_s: float
    baseline: str
    runs: dict[str, RunResult] = field(default_factory=dict)
    # run name -> (row, column): the runs laid out as the seeds' tables are
    grid: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def service_names(self) -> list[str]:
        return list(dict.fromkeys(s for run in self.runs.values() for s in run.services))

    @property
    def cgroup_names(self) -> list[str]:
        return list(dict.fromkeys(c for run in self.runs.values() for c in run.cgroups))

    def table(self) -> str:
        """Per run and service: QPS, P50, P90, P99 (seconds), each with its QoS change against
        the baseline in the seed's convention (seeds 000/002): QPS run/baseline - 1, latency
        baseline/run - 1, so a negative change is always a loss."""
        services = self.service_names
        header = ["Run"]
        for svc in services:
            prefix = f"{svc} " if len(services) > 1 else ""
            header += [f"{prefix}{col}" for col in ("QPS", "P50", "P90", "P99")]
        base = self.runs.get(self.baseline)
        rows = []
        for name, run in self.runs.items():
            row = [name]
            for svc in services:
                here = run.services.get(svc)
                there = base.services.get(svc) if base is not None else None
                for attr in ("qps", "p50_s", "p90_s", "p99_s"):
                    value = getattr(here, attr) if here else math.nan
                    cell = sig3(value)
                    if name != self.baseline and there is not None:
                        base_value = getattr(there, attr)
                        if attr == "qps":
                            cell += _change(value, base_value)
                        else:
                            cell += _change(base_value, value)
                    row.append(cell)
            rows.append(row)
        # dropped requests, for the services that dropped any in some run
        dropping = [svc for svc in services if any(run.services[svc].dropped for run in self.runs.values() if svc in run.services)]
        for svc in dropping:
            header.append(f"{svc} dropped" if len(services) > 1 else "dropped")
        for row, run in zip(rows, self.runs.values(), strict=True):
            row += [str(run.services[svc].dropped) if svc in run.services else "-" for svc in dropping]
        if not services:
            title = "(no request-serving workloads)\n"
        else:
            who = f"{services[0]}: " if len(services) == 1 else ""
            title = (
                f"{who}QPS and latency percentiles (s); in brackets the QoS change against the "
                "baseline (QPS run/base - 1, latency base/run - 1: negative = worse)\n"
            )
        return title + markdown(header, rows)

    def cpu_table(self) -> str:
        """Per run: each cgroup's share of node capacity, and how busy the node was."""
        cgroups = self.cgroup_names
        header = ["Run", *cgroups, "node busy"]
        rows = [
            [name] + [_percent(run.cgroups[c].cpu_share) if c in run.cgroups else "-" for c in cgroups] + [_percent(run.busy_share)]
            for name, run in self.runs.items()
        ]
        return "CPU share of node capacity\n" + markdown(header, rows)

    def memory_table(self) -> str | None:
        """Per run and cgroup of a workload: memory.current, its peak, and the memcg events
        that matter (high, max, oom_kill); None when no run models memory."""
        rows = []
        for name, run in self.runs.items():
            for c, cg in run.cgroups.items():
                m = cg.memory
                if m is None or not (m["peak"] or m["events_high"] or m["events_max"]):
                    continue
                rows.append(
                    [
                        name,
                        c,
                        _mib(m["current"]),
                        _mib(m["peak"]),
                        _mib(m["file"]),
                        str(m["events_high"]),
                        str(m["events_max"]),
                        str(m["events_oom_kill"]),
                    ]
                )
            for w, k in run.oom_kills.items():
                rows.append([name, f"(workload {w})", "", "", "", "", "", f"{k} killed"])
        if not rows:
            return None
        header = ["Run", "cgroup", "current (MiB)", "peak (MiB)", "cache (MiB)", "high events", "max events", "oom_kill"]
        return "Memory (at the end; events since the start)\n" + markdown(header, rows)

    def io_table(self) -> str | None:
        """Per run and leaf cgroup that used the disk or the link over the measured window:
        disk read and write throughput, IO/s, mean IO wait per IO, bytes sent per second;
        None when no run models IO."""
        rows = []
        for name, run in self.runs.items():
            m = run.measured_s
            if m <= 0:
                continue
            for c, cg in run.cgroups.items():
                io, tx = cg.io or {}, cg.net_tx_bytes or 0
                ios = io.get("read_ios", 0) + io.get("write_ios", 0)
                if not (ios or tx or io.get("write_bytes", 0)):
                    continue
                wait = io.get("wait_ns", 0) / ios / 1e6 if ios else math.nan
                rows.append(
                    [
                        name,
                        c or "(root)",
                        sig3(io.get("read_bytes", 0) / m / 1e6),
                        sig3(io.get("write_bytes", 0) / m / 1e6),
                        sig3(ios / m),
                        sig3(wait),
                        sig3(tx / m / 1e6),
                    ]
                )
            if run.node_io is not None and (run.node_io.get("write_bytes", 0) or run.node_io.get("read_bytes", 0) or run.node_net_tx_bytes):
                io = run.node_io
                ios = io.get("read_ios", 0) + io.get("write_ios", 0)
                tx = run.node_net_tx_bytes or 0
                rows.append(
                    [
                        name,
                        "(node)",
                        sig3(io.get("read_bytes", 0) / m / 1e6),
                        sig3(io.get("write_bytes", 0) / m / 1e6),
                        sig3(ios / m),
                        "",
                        sig3(tx / m / 1e6),
                    ]
                )
        if not rows:
            return None
        header = ["Run", "cgroup", "read (MB/s)", "write (MB/s)", "IO/s", "wait per IO (ms)", "sent (MB/s)"]
        return "Disk and network (after warm-up; writeback counts to the dirty pages' owner)\n" + markdown(header, rows)

    def bandwidth_table(self) -> str | None:
        """Per run and cgroup with bandwidth control: the cpu.stat counters, or None."""
        limited = [c for c in self.cgroup_names if any(c in r.cgroups and r.cgroups[c].nr_periods for r in self.runs.values())]
        if not limited:
            return None
        header = ["Run", "cgroup", "nr_periods", "nr_throttled", "throttled (s)", "nr_bursts", "burst (s)"]
        rows = [
            [name, c, str(cg.nr_periods), str(cg.nr_throttled), sig3(cg.throttled_s), str(cg.nr_bursts), sig3(cg.burst_s)]
            for name, run in self.runs.items()
            for c in limited
            if (cg := run.cgroups.get(c)) is not None
        ]
        return "CFS bandwidth (cpu.stat, after warm-up)\n" + markdown(header, rows)

    def grid_tables(self) -> str | None:
        """The runs in the seed's shape: a row per policy, a column per load; for each
        service its P50/P90/P99 (ms) and requests/s."""
        if not self.grid:
            return None
        rows = list(dict.fromkeys(r for r, _ in self.grid.values()))
        cols = list(dict.fromkeys(c for _, c in self.grid.values()))
        at = {rc: name for name, rc in self.grid.items()}
        out = []
        for svc in self.service_names:
            lat, qps = [], []
            for r in rows:
                cells = [self.runs[at[(r, c)]].services.get(svc) if (r, c) in at else None for c in cols]
                lat.append(
                    [r]
                    + ["-" if s is None else "/".join(f"{getattr(s, a) * 1000:.0f}" for a in ("p50_s", "p90_s", "p99_s")) for s in cells]
                )
                qps.append([r] + ["-" if s is None else sig3(s.qps) for s in cells])
            out.append(f"{svc}: P50/P90/P99 latency (ms)\n" + markdown(["", *cols], lat))
            out.append(f"{svc}: requests/s\n" + markdown(["", *cols], qps))
        return "\n\n".join(out) or None

    def __str__(self) -> str:
        parts = [self.grid_tables(), self.table(), self.cpu_table(), self.memory_table(), self.io_table(), self.bandwidth_table()]
        return "\n\n".join(p for p in parts if p)

    def to_dict(self) -> dict[str, Any]:
        """The results.json document; NaN (a service with no completions) becomes null."""
        return finite(
            {
                "scenario": self.scenario,
                "seed": self.seed,
                "duration_s": self.duration_s,
                "warmup_s": self.warmup_s,
                "baseline": self.baseline,
                "grid": {name: list(rc) for name, rc in self.grid.items()},
                "runs": {name: run.to_dict() for name, run in self.runs.items()},
            }
        )

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


# --- formatting ------------------------------------------------------------------------


def sig3(value: float) -> str:
    """Three significant digits, never in exponent form: 0.485, 1.89, 5000, 0.000123."""
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0:
        return "0"
    decimals = 2 - math.floor(math.log10(abs(value)))
    if decimals <= 0:
        return f"{round(value, decimals):.0f}"
    return f"{value:.{decimals}f}"


def _change(value: float, base: float) -> str:
    """value/base - 1 as a signed percentage."""
    if not (math.isfinite(value) and math.isfinite(base)) or base == 0:
        return ""
    return f" ({(value / base - 1) * 100:+.1f}%)"


def _mib(b: int) -> str:
    return f"{b / 2**20:.1f}"


def _percent(share: float) -> str:
    return f"{share * 100:.1f}%" if math.isfinite(share) else "-"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ("-" if i == 0 else ":") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value
