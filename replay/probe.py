"""What each thread got from the scheduler during a host run (`colosim replay --probe`).

A sampler thread reads, ~20 times a second, for every thread of every watched group (a
workload's cgroup, or a set of processes outside any of ours):

    /proc/TID/schedstat   run ns, run-queue wait ns, timeslices    (sched_info: run_delay, pcount)
    /proc/TID/sched       se.nr_migrations, nr_switches (vol/invol) (CONFIG_SCHED_DEBUG)
    /proc/TID/status      voluntary/nonvoluntary_ctxt_switches      (fallback without /sched)
    /proc/TID/stat        state, processor (the CPU it last ran on), session
and once per thread its cpu cgroup (/proc/TID/cgroup) and its process's autogroup
(/proc/PID/autogroup: the kernel schedules a task of the root cpu cgroup in its session's
autogroup when kernel.sched_autogroup_enabled=1). Per group and CPU it reads the cgroup's
cpuacct.usage_percpu, and, when /sys/kernel/debug/sched/debug is readable, each watched
cfs_rq's load_avg, tg_load_avg(_contrib) and its group entity's weight (calc_group_shares'
inputs and output) a few times a second.

The counters are cumulative, so a figure over the measured window is the last sample minus
the first (zero for a thread born inside the window); a thread that exits loses at most one
sampling interval. The sampler measures its own CPU time (time.thread_time) and reports it.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.results import markdown, sig3

if TYPE_CHECKING:
    import plotly.graph_objects as go

PROC = Path("/proc")
SERIES_STEP_S = 0.25  # the CPU-over-time series' step (the report's plot)
SCHED_DEBUG = Path("/sys/kernel/debug/sched/debug")

# -- parsing /proc text (pure: tested against hand-made text) ----------------------------------


def parse_schedstat(text: str) -> tuple[int, int, int]:
    """/proc/TID/schedstat: "run_ns wait_ns timeslices" (sum_exec_runtime, sched_info.run_delay,
    sched_info.pcount)."""
    run, wait, slices = text.split()[:3]
    return int(run), int(wait), int(slices)


@dataclass(frozen=True)
class TaskStat:
    """The fields of /proc/TID/stat the probe uses."""

    comm: str
    state: str
    session: int
    processor: int


def parse_stat(text: str) -> TaskStat:
    """/proc/TID/stat: "pid (comm) state ppid pgrp session ... processor(39) ...". The comm may
    hold spaces and parentheses, so the fields are counted from its last ')'."""
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    f = rest.split()  # f[0] is field 3 (state)
    return TaskStat(comm=comm, state=f[0], session=int(f[3]), processor=int(f[36]))


def parse_switches(text: str) -> tuple[int, int]:
    """(voluntary, involuntary) context switches from /proc/TID/status or /proc/TID/sched."""
    vol = re.search(r"^(?:voluntary_ctxt_switches:|nr_voluntary_switches\s*:)\s*(\d+)", text, re.M)
    inv = re.search(r"^(?:nonvoluntary_ctxt_switches:|nr_involuntary_switches\s*:)\s*(\d+)", text, re.M)
    if vol is None or inv is None:
        raise ValueError("no context-switch counts")
    return int(vol[1]), int(inv[1])


def parse_migrations(text: str) -> int:
    """se.nr_migrations from /proc/TID/sched."""
    m = re.search(r"^se\.nr_migrations\s*:\s*(\d+)", text, re.M)
    if m is None:
        raise ValueError("no se.nr_migrations")
    return int(m[1])


def parse_autogroup(text: str) -> str:
    """/proc/PID/autogroup: "/autogroup-1924 nice 0" -> "/autogroup-1924"."""
    return text.split()[0] if text.strip() else ""


def parse_cpu_cgroup(text: str) -> str:
    """The cpu controller's path in /proc/TID/cgroup (v1 "N:cpu,cpuacct:/path", else v2 "0::/path")."""
    v2 = ""
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
        if controllers == "":
            v2 = path
    return v2


# fields of a cfs_rq block in sched/debug the probe keeps (calc_group_shares: the group
# entity's weight = tg shares x load_avg / (tg_load_avg - tg_load_avg_contrib + load_avg))
SCHED_DEBUG_FIELDS = (
    "load",
    "load_avg",
    "runnable_avg",
    "util_avg",
    "tg_load_avg_contrib",
    "tg_load_avg",
    "h_nr_runnable",
    "se->load.weight",
    # absolute virtual times (ms): only their difference means anything — the group entity's
    # lag on its parent queue, avg_vruntime(parent) - se->vruntime (see sched_debug_lags)
    "avg_vruntime",
    "se->vruntime",
)


def sched_debug_lags(snap: dict[tuple[int, str], dict[str, float]]) -> dict[tuple[int, str], float]:
    """Each group entity's lag on its parent's queue, in virtual ms: V - v_i, where V is the
    parent cfs_rq's avg_vruntime (EEVDF: the entity is eligible when this is >= 0)."""
    out = {}
    for (cpu, path), fields in snap.items():
        parent = path.rsplit("/", 1)[0] or "/"
        if path == "/" or "se->vruntime" not in fields or "avg_vruntime" not in snap.get((cpu, parent), {}):
            continue
        out[(cpu, path)] = snap[(cpu, parent)]["avg_vruntime"] - fields["se->vruntime"]
    return out


def parse_sched_debug(text: str) -> dict[tuple[int, str], dict[str, float]]:
    """sched/debug's "cfs_rq[CPU]:/path" blocks: {(cpu, path): {field: value}} for the fields
    in SCHED_DEBUG_FIELDS (se->load.weight scaled down to cpu.shares units, as the kernel's
    scale_load_down does on 64-bit)."""
    out: dict[tuple[int, str], dict[str, float]] = {}
    cur: dict[str, float] | None = None
    for line in text.splitlines():
        m = re.match(r"cfs_rq\[(\d+)\]:(\S+)", line)
        if m:
            cur = out.setdefault((int(m[1]), m[2]), {})
            continue
        if cur is None:
            continue
        m = re.match(r"\s+\.(\S+)\s*:\s*(-?[\d.]+)", line)
        if m is None:
            if line.strip() and not line.startswith(" "):
                cur = None  # the block ended (rt_rq, runnable tasks ...)
            continue
        if m[1] in SCHED_DEBUG_FIELDS:
            v = float(m[2])
            cur[m[1]] = v / 1024 if m[1] == "se->load.weight" else v
    return out


# -- what the probe reports ---------------------------------------------------------------------


@dataclass
class ThreadFigures:
    """One thread over the measured window."""

    tid: int
    pid: int
    comm: str
    process: str  # its thread-group leader's comm
    group: str  # the watched group it belongs to
    cgroup: str  # its cpu cgroup path
    autogroup: str  # its process's autogroup ("" when the kernel has none)
    session: int
    run_s: float
    wait_s: float
    timeslices: int
    voluntary: int
    involuntary: int
    migrations: int  # -1: /proc/TID/sched unreadable
    cpu_samples: list[int]  # samples that saw it runnable (state R) on each CPU
    samples: int  # samples that saw it at all


@dataclass
class GroupFigures:
    """A watched group: its threads summed, and what its cgroup's cpuacct says."""

    run_s: float
    wait_s: float
    switches: int
    voluntary: int
    involuntary: int
    migrations: int
    timeslices: int
    threads: int
    cpuacct_s: float  # cpuacct.usage over the window (NaN: not a cgroup of ours)
    cpuacct_percpu_s: list[float]
    runnable_on_cpu: list[float]  # mean runnable (state R) threads seen on each CPU


# sched/debug fields kept snapshot by snapshot (ProbeResult.sched_debug_series)
SERIES_FIELDS = ("h_nr_runnable", "se->load.weight", "se lag (ms)")


@dataclass
class ProbeResult:
    window_s: float
    hz: float
    ncpus: int
    samples: int
    cost_cpu_s: float  # the sampler thread's own CPU time over the whole run
    wall_s: float
    groups: dict[str, GroupFigures]
    threads: list[ThreadFigures]
    # per group, per CPU: CPUs used (cpuacct.usage_percpu rate) at each sample time t_s
    t_s: list[float] = field(default_factory=list)
    cpu_series: dict[str, list[list[float]]] = field(default_factory=dict)
    # sched/debug: (cpu, cfs_rq path) -> field -> mean over the window's snapshots
    sched_debug: dict[str, dict[str, float]] = field(default_factory=dict)
    sched_debug_snapshots: int = 0
    # the same cfs_rqs snapshot by snapshot (their times in sched_debug_t_s, from the probe's
    # start like t_s): SERIES_FIELDS only — how many runnable, the group entity's weight and
    # lag — enough to see a group switch between regimes as it happens (docs/model.md, "Two
    # regimes"); NaN where a snapshot lacks the queue
    sched_debug_t_s: list[float] = field(default_factory=list)
    sched_debug_series: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    @property
    def cost(self) -> float:
        """The sampler's CPU time per second of wall time (CPUs it used)."""
        return self.cost_cpu_s / self.wall_s if self.wall_s > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cost_cpus"] = self.cost
        return d

    def table(self, top: int = 12) -> str:
        w = self.window_s
        rows = []
        for name, g in self.groups.items():
            rows.append(
                [
                    name,
                    str(g.threads),
                    sig3(g.run_s / w),
                    sig3(g.cpuacct_s / w),
                    " / ".join(f"{x / w:.2f}" for x in g.cpuacct_percpu_s) or "-",
                    sig3(g.wait_s / w),
                    sig3(g.switches / w),
                    sig3(g.involuntary / w),
                    sig3(g.migrations / w) if g.migrations >= 0 else "-",
                    " / ".join(f"{x:.1f}" for x in g.runnable_on_cpu),
                ]
            )
        head = [
            "group",
            "threads",
            "run (CPUs)",
            "cpuacct (CPUs)",
            "per CPU",
            "wait (s/s)",
            "switches/s",
            "invol./s",
            "migr./s",
            "runnable on CPU",
        ]
        out = [
            f"probe: {self.samples} samples at {self.hz:g} Hz over {w:.1f} s; the sampler used {self.cost * 100:.2f}% of a CPU",
            markdown(head, rows),
        ]
        busiest = sorted(self.threads, key=lambda t: -(t.run_s + t.wait_s))[:top]
        trow = [
            [
                t.group,
                f"{t.process}/{t.comm}",
                str(t.tid),
                t.autogroup or "-",
                sig3(t.run_s / w),
                sig3(t.wait_s / w),
                sig3((t.voluntary + t.involuntary) / w),
                sig3(t.migrations / w) if t.migrations >= 0 else "-",
                "/".join(str(c) for c in t.cpu_samples),
            ]
            for t in busiest
        ]
        out.append(f"busiest {len(trow)} of {len(self.threads)} threads (run + wait)")
        out.append(
            markdown(
                ["group", "process/thread", "tid", "autogroup", "run (s/s)", "wait (s/s)", "switches/s", "migr./s", "R samples per CPU"],
                trow,
            )
        )
        if self.sched_debug:
            srow = [
                [
                    k,
                    *(
                        sig3(v.get(f, math.nan))
                        for f in ("h_nr_runnable", "load_avg", "tg_load_avg_contrib", "tg_load_avg", "se->load.weight", "se lag (ms)")
                    ),
                ]
                for k, v in self.sched_debug.items()
            ]
            out.append(f"sched/debug, mean of {self.sched_debug_snapshots} snapshots (cfs_rq[CPU]:path)")
            out.append(
                markdown(
                    ["cfs_rq", "h_nr_runnable", "load_avg", "tg_load_avg_contrib", "tg_load_avg", "group se weight", "se lag (virtual ms)"],
                    srow,
                )
            )
        return "\n".join(out)


# -- the sampler ----------------------------------------------------------------------------------


@dataclass
class Watch:
    """A group to watch: how to list its thread ids now, and (a cgroup of ours) how to read its
    cpuacct.usage_percpu and usage; `paths` are its cfs_rq paths in sched/debug."""

    tids: Callable[[], list[int]]
    percpu: Callable[[], list[int] | None] = lambda: None
    paths: tuple[str, ...] = ()


@dataclass
class _Sample:
    t: float
    run: int
    wait: int
    slices: int
    state: str
    cpu: int
    # from /proc/TID/sched (or status), read every `detail_every` samples: None when not read
    switches: tuple[int, int, int] | None = None  # voluntary, involuntary, migrations (-1: unknown)


@dataclass
class _Thread:
    tid: int
    group: str
    pid: int = 0
    comm: str = ""
    process: str = ""
    cgroup: str = ""
    autogroup: str = ""
    session: int = 0
    samples: list[_Sample] = field(default_factory=list)


def read_proc(path: str | Path) -> str | None:
    """A /proc file's text, or None when its task is gone (it exited between listing and reading)."""
    # os.open/os.read rather than Path.read_text: a fifth of the cost per /proc file, and the
    # probe reads thousands a second
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _tgid(status: str) -> int:
    m = re.search(r"^Tgid:\s*(\d+)", status, re.M)
    return int(m[1]) if m else 0


class Probe:
    """Start it, mark the start of the measured window, stop it: a ProbeResult.

    Reads only; writes nothing. `hz` ~ 20: slower misses short-lived threads' last moments,
    faster costs CPU the workloads would have had (the result says how much)."""

    def __init__(
        self,
        watch: dict[str, Watch],
        ncpus: int,
        hz: float = 20.0,
        detail_every: int = 5,
        debug_every: int = 5,
        proc: Path = PROC,
        sched_debug: Path = SCHED_DEBUG,
    ) -> None:
        self.watch = watch
        self.ncpus = ncpus
        self.hz = hz
        # switches and migrations are cumulative: read at hz / detail_every (and at the
        # window's first and last samples); run and wait at every sample
        self.detail_every = detail_every
        self.debug_every = debug_every
        self._detail_next = True
        self.proc = proc
        self.sched_debug_path = sched_debug
        self.threads: dict[int, _Thread] = {}
        self.percpu: list[tuple[float, dict[str, list[int] | None]]] = []
        self.debug: list[tuple[float, dict[tuple[int, str], dict[str, float]]]] = []
        self.window_start: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cost = 0.0
        self._t_start = self._t_end = 0.0
        self._debug_readable = True

    # -- running --

    def start(self) -> None:
        self._t_start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="colosim-probe", daemon=True)
        self._thread.start()

    def mark(self) -> None:
        """The measured window starts now (the next sample is its baseline)."""
        self.window_start = time.monotonic()
        self._detail_next = True

    def abort(self) -> None:
        """Stop sampling (the run failed: nothing to sum up)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def stop(self) -> ProbeResult:
        self.abort()
        self._t_end = time.monotonic()
        self.sample(self._t_end, detail=True)  # the window's last sample, in this thread
        return self.result()

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        period = 1.0 / self.hz
        n = 0
        next_t = time.monotonic()
        while not self._stop.is_set():
            detail, self._detail_next = self._detail_next or n % self.detail_every == 0, False
            self.sample(time.monotonic(), detail=detail, debug=n % self.debug_every == 0)
            n += 1
            next_t += period
            self._stop.wait(max(0.0, next_t - time.monotonic()))
        self._cost = time.thread_time() - cpu0

    def sample(self, t: float, detail: bool = True, debug: bool = False) -> None:
        """One reading of every watched thread and group (at monotonic time t); `detail`:
        switches and migrations too."""
        for name, w in self.watch.items():
            for tid in w.tids():
                self._sample_thread(name, tid, t, detail)
        self.percpu.append((t, {name: w.percpu() for name, w in self.watch.items()}))
        if debug and self._debug_readable:
            text = read_proc(self.sched_debug_path)
            if text is None:
                self._debug_readable = False
            else:
                self.debug.append((t, parse_sched_debug(text)))

    def _sample_thread(self, group: str, tid: int, t: float, detail: bool) -> None:
        d = self.proc / str(tid)
        th = self.threads.get(tid)
        if th is None:
            status = read_proc(d / "status")
            if status is None:
                return
            th = _Thread(tid, group, pid=_tgid(status))
            th.cgroup = parse_cpu_cgroup(read_proc(d / "cgroup") or "")
            th.autogroup = parse_autogroup(read_proc(self.proc / str(th.pid) / "autogroup") or "")
            leader = read_proc(self.proc / str(th.pid) / "stat")
            th.process = parse_stat(leader).comm if leader else ""
            self.threads[tid] = th
        sched = read_proc(d / "schedstat")
        stat = read_proc(d / "stat")
        if sched is None or stat is None:
            return  # it exited between the listing and the read
        switches = None
        if detail or not th.samples:
            text = read_proc(d / "sched")
            migr = -1 if text is None else parse_migrations(text)
            text = text if text is not None else read_proc(d / "status")
            if text is None:
                return
            switches = (*parse_switches(text), migr)
        run, wait, slices = parse_schedstat(sched)
        st = parse_stat(stat)
        th.comm, th.session = st.comm, st.session
        th.samples.append(_Sample(t, run, wait, slices, st.state, st.processor, switches))

    # -- summing up --

    def result(self) -> ProbeResult:
        start = self.window_start if self.window_start is not None else self._t_start
        end = self._t_end
        threads = [f for th in self.threads.values() if (f := self._figures(th, start)) is not None]
        groups = {}
        pc = [(t, v) for t, v in self.percpu if t >= start]
        # the window is what the samples span: every counter below is a difference of two of them
        window = pc[-1][0] - pc[0][0] if len(pc) > 1 else math.nan
        for name in self.watch:
            mine = [t for t in threads if t.group == name]
            runnable = [0.0] * self.ncpus
            for t in mine:
                for c, k in enumerate(t.cpu_samples):
                    runnable[c] += k
            p0, p1 = (pc[0][1].get(name), pc[-1][1].get(name)) if pc else (None, None)
            percpu = [(b - a) / 1e9 for a, b in zip(p0[: self.ncpus], p1[: self.ncpus], strict=True)] if p0 and p1 else []
            groups[name] = GroupFigures(
                run_s=sum(t.run_s for t in mine),
                wait_s=sum(t.wait_s for t in mine),
                switches=sum(t.voluntary + t.involuntary for t in mine),
                voluntary=sum(t.voluntary for t in mine),
                involuntary=sum(t.involuntary for t in mine),
                migrations=sum(t.migrations for t in mine) if all(t.migrations >= 0 for t in mine) else -1,
                timeslices=sum(t.timeslices for t in mine),
                threads=len(mine),
                cpuacct_s=sum(percpu) if percpu else math.nan,
                cpuacct_percpu_s=percpu,
                runnable_on_cpu=[r / max(1, len(pc)) for r in runnable],
            )
        # CPUs used per group and CPU between samples at least SERIES_STEP_S apart: cpuacct
        # is charged at ticks and switches, so over one 50 ms sampling gap a CPU can seem to
        # run 1.5 CPUs' worth and the next gap 0.5
        t_s: list[float] = []
        series: dict[str, list[list[float]]] = {name: [[] for _ in range(self.ncpus)] for name in self.watch}
        kept = self.percpu[:1]
        for at, usage in self.percpu[1:]:
            if at - kept[-1][0] >= SERIES_STEP_S or at == self.percpu[-1][0]:
                kept.append((at, usage))
        for (ta, a), (tb, b) in zip(kept, kept[1:], strict=False):
            if tb - ta <= 0:
                continue
            t_s.append(tb - self._t_start)
            for name in self.watch:
                pa, pb = a.get(name), b.get(name)
                for c in range(self.ncpus):
                    series[name][c].append((pb[c] - pa[c]) / 1e9 / (tb - ta) if pa and pb else math.nan)
        kept_debug = [(t, d) for t, d in self.debug if t >= start]
        snaps = [d for _, d in kept_debug]
        paths = {p for w in self.watch.values() for p in w.paths} | {th.autogroup for th in self.threads.values() if th.autogroup}
        debug: dict[str, dict[str, float]] = {}
        dseries: dict[str, dict[str, list[float]]] = {}
        for i, snap in enumerate(snaps):
            lags = sched_debug_lags(snap)
            for (cpu, path), fields in sorted(snap.items()):
                if path in paths:
                    key_ = f"[{cpu}]:{path}"
                    acc = debug.setdefault(key_, {})
                    row = {**fields, **({"se lag (ms)": lags[(cpu, path)]} if (cpu, path) in lags else {})}
                    for key, value in row.items():
                        if key not in ("avg_vruntime", "se->vruntime"):
                            acc[key] = acc.get(key, 0.0) + value / len(snaps)
                    per = dseries.setdefault(key_, {name: [math.nan] * len(snaps) for name in SERIES_FIELDS})
                    for name in SERIES_FIELDS:
                        if name in row:
                            per[name][i] = row[name]
        return ProbeResult(
            window_s=window,
            hz=self.hz,
            ncpus=self.ncpus,
            samples=len(pc),
            cost_cpu_s=self._cost,
            wall_s=end - self._t_start,
            groups=groups,
            threads=threads,
            t_s=t_s,
            cpu_series=series,
            sched_debug=debug,
            sched_debug_snapshots=len(snaps),
            sched_debug_t_s=[t - self._t_start for t, _ in kept_debug],
            sched_debug_series=dseries,
        )

    def _figures(self, th: _Thread, start: float) -> ThreadFigures | None:
        inside = [s for s in th.samples if s.t >= start]
        if not inside:
            return None
        last = inside[-1]
        before = [s for s in th.samples if s.t < start]
        # a thread seen before the window counts from its first sample in the window; one
        # first seen inside it was born there: its counters started at 0
        born = not before and inside[0].t > start + 1.5 / self.hz
        base = _Sample(start, 0, 0, 0, "", 0, (0, 0, 0)) if born else inside[0]
        detailed = [s.switches for s in inside if s.switches is not None]
        sw0 = (0, 0, 0) if born else (detailed[0] if detailed else None)
        sw1 = detailed[-1] if detailed else None
        vol, inv, migr = (sw1[0] - sw0[0], sw1[1] - sw0[1], sw1[2] - sw0[2] if sw1[2] >= 0 else -1) if sw0 and sw1 else (0, 0, -1)
        on_cpu = [0] * self.ncpus
        for s in inside:
            if s.state == "R" and s.cpu < self.ncpus:
                on_cpu[s.cpu] += 1
        return ThreadFigures(
            tid=th.tid,
            pid=th.pid,
            comm=th.comm,
            process=th.process,
            group=th.group,
            cgroup=th.cgroup,
            autogroup=th.autogroup,
            session=th.session,
            run_s=(last.run - base.run) / 1e9,
            wait_s=(last.wait - base.wait) / 1e9,
            timeslices=last.slices - base.slices,
            voluntary=vol,
            involuntary=inv,
            migrations=migr,
            cpu_samples=on_cpu,
            samples=len(inside),
        )


def cpu_figure(probes: dict[str, ProbeResult]) -> go.Figure | None:
    """Per probed run, each group's CPUs used on each CPU over time (cpuacct.usage_percpu
    between the probe's samples): where each group ran, and when."""
    # plotly only for the report: the sampler itself stays light to import
    from plotly.colors import qualitative  # type: ignore[attr-defined]  # plotly-stubs 0.1.4 lacks it
    from plotly.subplots import make_subplots

    runs = {name: p for name, p in probes.items() if p.t_s and any(p.cpu_series.values())}
    if not runs:
        return None
    fig = make_subplots(
        rows=len(runs), cols=1, shared_xaxes=True, subplot_titles=list(runs), vertical_spacing=min(0.08, 0.5 / max(len(runs) - 1, 1))
    )
    palette = qualitative.Plotly
    groups = list(dict.fromkeys(g for p in runs.values() for g in p.cpu_series))
    for row, p in enumerate(runs.values(), start=1):
        for gi, group in enumerate(groups):
            for cpu, series in enumerate(p.cpu_series.get(group, [])):
                if not any(math.isfinite(v) for v in series):
                    continue
                fig.add_scatter(
                    x=p.t_s,
                    y=series,
                    mode="lines",
                    line={"shape": "hv", "color": palette[gi % len(palette)], "dash": ("solid", "dot", "dash", "dashdot")[cpu % 4]},
                    name=f"{group} CPU {cpu}",
                    legendgroup=f"{group} CPU {cpu}",
                    showlegend=row == 1,
                    hovertemplate="%{x:.2f}s: %{y:.2f}<extra>" + f"{group} on CPU {cpu}" + "</extra>",
                    row=row,
                    col=1,
                )
        fig.update_yaxes(title_text="CPUs used", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text="time since the run started (s)", row=len(runs), col=1)
    fig.update_layout(
        title="Probe: CPU each group got on each CPU (cpuacct.usage_percpu)",
        height=260 * len(runs) + 160,
        legend={"orientation": "h", "y": -0.1},
    )
    return fig
