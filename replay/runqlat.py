"""Scheduling delay on the host, per group of threads: wake-to-run latency from the kernel's
own sched tracepoints, the way BCC's runqlat measures it.

    with RunqLat(CgroupResolver({"online": backend.dir("cpu", "online")})) as rq:
        ...                                   # run the workload
    figures = rq.result()["online"]           # log2 histogram (µs), count, busy_count, P50/90/99

How (docs/replay.md, "Scheduling delay on the host (runqlat)"):

* tracefs. Where the host has it mounted (/sys/kernel/tracing/instances exists) it is used as
  it is. Otherwise — this host: replay writes nothing else on the host, a mount included — a
  *holder* child mounts it in a private mount namespace of its own (`unshare --mount
  --propagation private`) and waits on a pipe; we reach that mount through the holder's root,
  /proc/HOLDER/root/sys/kernel/tracing. The namespace, and the mount, end with the holder,
  which ends when we close the pipe or die (its stdin's EOF).
* A trace *instance* (instances/colosim-PID-N, a buffer of its own), never the top-level
  buffer other tools use: only sched:sched_wakeup, sched_wakeup_new and sched_switch are
  enabled in it, on the `mono` clock (timestamps comparable across CPUs: the default `local`
  clock is per-CPU). A thread reads its per-CPU raw pages (trace_pipe_raw) as they fill and
  keeps them; they are decoded when the trace ends (replay/ftrace_raw.py: reading trace_pipe's
  text took 0.8 of this 2-CPU node beside nginx, the run it measured), merged across CPUs by
  time, and fed to the same accounting trace_pipe's lines are (`Accumulator.feed`, which reads
  the text a saved trace holds).
* Per wakeup (the wakee's tid, target CPU, time) a pending entry; at the sched_switch that
  runs the wakee (next_pid), latency = switch time − wakeup time, attributed to the group the
  caller's resolver names for the tid. A sched_switch that switches a pending tid *out*
  drops its entry: it ran since that wakeup (a wakeup of a task still on its runqueue —
  ttwu_runnable — is traced too, and the task is already on the CPU). BCC's runqlat also counts
  a preempted task's wait (prev_state R) as run-queue latency; this module counts wakeups
  only, the delay the simulator's per-cgroup histogram models.
* Busy CPU: the wakee's target CPU ran another task at the wakeup (the last sched_switch seen
  there had next_pid ≠ 0 and ≠ the wakee). A CPU no switch has been seen on yet counts as not
  busy. These wakeups are counted (and histogrammed) separately too.
* Lost events: a raw page flags them (and stores how many), trace_pipe says "CPU:N [LOST M
  EVENTS]", when the buffer overflowed; M is counted and every pending wakeup and the CPU's running task are forgotten (one of the lost
  events may have been their switch), so no latency spans a gap.

Instances are global kernel objects: a replay killed by SIGKILL leaves its instance behind
(the holder dies with it; the host's tracefs, if mounted, keeps it).
`remove_stale_instances` (run by `colosim replay --cleanup`) removes every colosim-PID-N whose
PID no longer lives.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import math
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from replay.ftrace_raw import LAYOUT_64, EventFormat, PageLayout, decode_page, page_layout, parse_format
from sim import liveness
from sim.errors import HostError
from sim.runqlat import BUCKETS, bucket, lower_us, percentile, upper_us

# The buckets are the simulator's (sim/runqlat.py): bucket k holds latencies of k significant
# bits in whole µs — bucket 0 is 0 µs (< 1 µs), bucket k ≥ 1 is [2^(k-1), 2^k − 1] µs, BCC's
# runqlat buckets as it prints them ("2 -> 3", "4 -> 7", ...), with 0 µs apart. The last
# bucket, [2^22 µs ≈ 4.2 s, ∞), is open-ended.
BUFFER_KB = 4096  # per CPU, the instance's own ring buffer
# how often the reader drains it (4 MiB per CPU holds seconds of this host's sched events)
READ_INTERVAL_S = 0.05
# raw pages a trace keeps (decoded after it ends) before it stops itself: at nginx's 46 k sched
# events a second (~60 bytes each) about 3 minutes
MAX_TRACE_BYTES = 512 << 20
# sched_process_fork: a thread or process forked by a group member is the member's at once,
# even if it is gone before the resolver could see it (a shell's `sleep 0.001`)
EVENTS = ("sched_wakeup", "sched_wakeup_new", "sched_switch", "sched_process_fork")
HOST_TRACEFS = Path("/sys/kernel/tracing")
INSTANCE_PREFIX = "colosim-"
# a shell in a mount namespace of its own, where mounts do not propagate to the host's
PRIVATE_SHELL = ("unshare", "--mount", "--propagation", "private", "sh", "-c")
MOUNT_TRACEFS = f"mount -t tracefs nodev {HOST_TRACEFS}"
# the holder: mount tracefs, say so, then wait for our pipe to close
HOLDER_SCRIPT = f"{MOUNT_TRACEFS} && echo ready && exec cat >/dev/null"
HOLDER_TIMEOUT_S = 10.0

Resolver = Callable[[int], "str | None"]


@dataclass(frozen=True)
class RunqLatFigures:
    """One group's wake-to-run latencies: `hist` per bucket (see `bucket`), `busy_hist` the
    same for wakeups onto a CPU running another task, the counts, the percentiles (bucket upper
    edges, `sim.runqlat.percentile`) and the events the kernel lost over the whole trace (any group's)."""

    hist: list[int]
    busy_hist: list[int]
    count: int
    busy_count: int
    p50_us: float
    p90_us: float
    p99_us: float
    lost: int
    # Run segments (switch-in to switch-out, same buckets), by how they ended: `preempted_hist`
    # switched out still runnable (sched_switch prev_state R: a slice's end, a wakeup's
    # preemption), `blocked_hist` switched out asleep (any other state). `preempted_wait_hist`:
    # how long a preempted thread then waited to run again — the run-queue latency BCC's runqlat
    # counts by default beside the wakeups', which `hist` leaves out.
    preempted_hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    blocked_hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    preempted_wait_hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    # per CPU, µs the group had k of its threads runnable there, k = 0 … RUNNABLE_BUCKETS − 1
    # (the last: that many or more; `_Queues`), as the simulator's `runnable_time`
    runnable_us: list[list[int]] | None = None
    # every switch-out asleep, whether or not its run's start was seen: on this host (Linux
    # 6.18, a Firecracker guest) most switches from the idle task are not in the trace, so a run
    # that started on an idle CPU has no segment, but its sleep is counted here
    sleeps: int = 0

    def segments(self) -> dict[str, list[int]]:
        """The run segments as the simulator reports them (`CgroupResult.segments`)."""
        return {
            "preempted": list(self.preempted_hist),
            "blocked": list(self.blocked_hist),
            "preempted_wait": list(self.preempted_wait_hist),
        }


@dataclass
class _Others:
    """The CPU bursts of every thread outside the traced groups (the host's other tenants, the
    replay process itself; not the idle task): the CPU a thread used from a wakeup to its next
    sleep, its runs between preemptions summed. A run's start is its switch-in, or, where that
    is not in the trace (on this host most switches from the idle task are not), its wakeup:
    a thread woken onto an idle CPU runs at once. Runs whose start is unknown are left out."""

    woke: dict[int, int] = field(default_factory=dict)  # tid -> µs of a wakeup not yet run
    run: dict[int, int] = field(default_factory=dict)  # tid -> µs of CPU since that wakeup
    bursts: list[int] = field(default_factory=list)  # µs, each ended by a sleep

    def ran(self, tid: int, now: int, started: int | None, runnable: bool) -> None:
        start = started if started is not None else self.woke.pop(tid, None)
        if start is not None and now > start:
            self.run[tid] = self.run.get(tid, 0) + now - start
        if not runnable:
            burst = self.run.pop(tid, 0)
            if burst > 0:
                self.bursts.append(burst)

    def clear(self) -> None:
        """Forget what came before (the warm-up): bursts under way count from here."""
        self.run.clear()
        self.bursts.clear()

    def burst_s(self) -> float | None:
        """The CPU-weighted mean burst in seconds (Σb² / Σb: the length of the burst a
        moment of the other tenants' CPU belongs to), bursts still under way at the trace's
        end counted as far as they got; None when they used no CPU seen whole."""
        every = [*self.bursts, *self.run.values()]
        total = sum(every)
        return sum(b * b for b in every) / total / 1e6 if total > 0 else None


# runnable-count buckets of `_Queues` (the simulator's cfs_rq.rs NR_BUCKETS)
RUNNABLE_BUCKETS = 16


@dataclass
class _Queues:
    """Per group and CPU, how long k of the group's threads were runnable there: a thread
    joins a CPU's count at its wakeup (the target CPU) and leaves at a switch out asleep; one
    seen running or preempted on another CPU than it was counted on moves there (the balancer
    moved it: sched_migrate_task is not traced, so a move shows at its next switch). Only the
    times at k ≥ 1 are summed; the time at 0 is the rest of the window (a CPU the group never
    used was empty throughout). A thread runnable since before the trace counts from its first
    switch; after lost events every count starts again from 0 (what they ended is unknown)."""

    ncpus: int
    on: dict[int, tuple[int, str]] = field(default_factory=dict)  # tid -> (cpu, group) while runnable
    count: dict[tuple[str, int], int] = field(default_factory=dict)  # (group, cpu) -> runnable now
    since: dict[tuple[str, int], int] = field(default_factory=dict)  # ... since when (µs)
    time: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # µs per count (k ≥ 1 kept)
    start: int | None = None  # µs: the window's start (the first event, or the warm-up's end)
    last: int = 0  # µs of the last event seen: the window's end

    def seen(self, now: int) -> None:
        if self.start is None:
            self.start = now
        self.last = max(self.last, now)

    def _credit(self, row: list[int], key: tuple[str, int], until: int) -> None:
        """Add to `row` the time in the window since `key`'s count last changed, at that count."""
        n = self.count.get(key, 0)
        if n > 0 and self.start is not None:
            row[min(n, RUNNABLE_BUCKETS - 1)] += max(0, until - max(self.since[key], self.start))

    def _add(self, key: tuple[str, int], now: int, delta: int) -> None:
        self._credit(self.time.setdefault(key, [0] * RUNNABLE_BUCKETS), key, now)
        self.count[key] = self.count.get(key, 0) + delta
        self.since[key] = now

    def runnable(self, tid: int, cpu: int, group: str, now: int) -> None:
        where = self.on.get(tid)
        if where == (cpu, group):
            return
        if where is not None:
            self._add((where[1], where[0]), now, -1)
        self.on[tid] = (cpu, group)
        self._add((group, cpu), now, +1)

    def asleep(self, tid: int, now: int) -> None:
        where = self.on.pop(tid, None)
        if where is not None:
            self._add((where[1], where[0]), now, -1)

    def forget(self) -> None:
        """Events were lost: every count ends here and starts again from 0."""
        for tid in list(self.on):
            self.asleep(tid, self.last)

    def clear(self, now: int) -> None:
        """Count afresh from `now` (the warm-up's end); the threads runnable then stay."""
        self.time.clear()
        self.start = now
        self.last = max(self.last, now)

    def table(self, group: str) -> list[list[int]]:
        """Per CPU, µs at each count over the window (its end: the last event)."""
        window = max(0, self.last - self.start) if self.start is not None else 0
        rows = []
        for cpu in range(self.ncpus):
            row = list(self.time.get((group, cpu), [0] * RUNNABLE_BUCKETS))
            self._credit(row, (group, cpu), self.last)
            row[0] = max(0, window - sum(row[1:]))
            rows.append(row)
        return rows


def _zeros() -> list[int]:
    return [0] * BUCKETS


@dataclass
class _Group:
    hist: list[int] = field(default_factory=_zeros)
    busy_hist: list[int] = field(default_factory=_zeros)
    preempted_hist: list[int] = field(default_factory=_zeros)
    blocked_hist: list[int] = field(default_factory=_zeros)
    preempted_wait_hist: list[int] = field(default_factory=_zeros)
    sleeps: int = 0


# --- parsing trace_pipe ---------------------------------------------------------------------


def _timestamp_us(text: str) -> int:
    sec, _, frac = text.rstrip(":").partition(".")
    return int(sec) * 1_000_000 + int(frac.ljust(6, "0")[:6])


def _int_after(text: str, key: str, before: str | None = None) -> int:
    """The integer following the last `key` (e.g. " pid=") in text (up to the last `before`):
    the last, since a comm before it may hold anything."""
    i = text.rfind(key, 0, text.rfind(before) if before is not None else len(text))
    if i < 0:
        raise ValueError(f"no {key.strip()!r}")
    i += len(key)
    j = text.find(" ", i)
    return int(text[i:] if j < 0 else text[i:j])


class Accumulator:
    """The pure part: trace_pipe lines in, per-group histograms out. `feed` takes one line."""

    def __init__(self, resolver: Resolver, ncpus: int | None = None) -> None:
        self.resolver = resolver
        self.queues = _Queues(ncpus if ncpus is not None else os.cpu_count() or 1)
        self.pending: dict[int, tuple[int, bool, str]] = {}  # tid -> (wakeup µs, busy, group)
        self.running: dict[int, int] = {}  # cpu -> pid the last sched_switch there ran
        self.since: dict[int, int] = {}  # cpu -> µs of that switch (a segment's start)
        self.preempted: dict[int, tuple[int, str]] = {}  # tid -> (µs switched out runnable, group)
        self.groups: dict[str, _Group] = {}
        self.forked: dict[int, str] = {}  # tid -> its forking parent's group
        self.others = _Others()
        self.lost = 0
        self.unparsed = 0  # lines of our events that did not parse (said by RunqLat)

    def feed(self, line: str) -> None:
        e = line.find(": sched_")
        if e < 0:
            if "[LOST " in line:
                self._lost(line)
            return
        head, body = line[:e], line[e + 2 :]
        try:
            event, _, fields = body.partition(": ")
            # "COMM-PID [CPU] FLAGS SECONDS.MICROS" (irq-info on, as a new instance has it); the
            # comm may hold spaces, so from the right
            toks = head.rsplit(None, 3)
            now = _timestamp_us(toks[-1])
            cpu = int(toks[-3].strip("[]"))
            if event == "sched_switch":
                prev, arrow, nxt = fields.partition(" ==> ")
                if not arrow:
                    raise ValueError("no ' ==> '")
                # R (or R+): switched out runnable, i.e. preempted; a task that blocks is in S, D, …
                state = prev[prev.rfind(" prev_state=") + 12 :].strip() if " prev_state=" in prev else ""
                self.switch(cpu, now, _int_after(prev, " prev_pid="), _int_after(" " + nxt, " next_pid="), state.startswith("R"))
            elif event == "sched_process_fork":
                self.fork(_int_after(fields, " pid=", before=" child_comm="), _int_after(fields, " child_pid="))
            elif event in ("sched_wakeup", "sched_wakeup_new"):
                self.wakeup(now, _int_after(fields, " pid="), _int_after(fields, " target_cpu="))
        except (ValueError, IndexError, StopIteration):
            self.unparsed += 1

    def _lost(self, line: str) -> None:
        # "CPU:%d [LOST %lu EVENTS]" (kernel/trace/trace.c, print_trace_line)
        try:
            n = int(line.split("[LOST ", 1)[1].split()[0])
            cpu = int(line.split("CPU:", 1)[1].split()[0])
        except (IndexError, ValueError):
            self.unparsed += 1
            return
        self.lose(cpu, n)

    def lose(self, cpu: int, n: int) -> None:
        """`n` events of `cpu` were lost: forget what one of them may have ended."""
        self.lost += n
        self.queues.forget()
        self.pending.clear()
        self.preempted.clear()
        self.running.pop(cpu, None)
        self.since.pop(cpu, None)

    def _group(self, tid: int) -> str | None:
        """The resolver's answer; else the group of the member that forked it (a child gone
        before the resolver could see it, or not seen yet). A child that joined another
        group is that group's."""
        group = self.resolver(tid)
        return group if group is not None else self.forked.get(tid)

    def fork(self, parent: int, child: int) -> None:
        group = self._group(parent)
        if group is not None:
            self.forked[child] = group
        else:
            self.forked.pop(child, None)  # a reused tid

    def wakeup(self, now: int, tid: int, target: int) -> None:
        self.queues.seen(now)
        group = self._group(tid)
        if group is None:
            self.pending.pop(tid, None)
            self.others.woke[tid] = now
            return
        self.queues.runnable(tid, target, group, now)
        current = self.running.get(target)
        self.pending[tid] = (now, current is not None and current not in (0, tid), group)

    def switch(self, cpu: int, now: int, prev: int, nxt: int, runnable: bool = False) -> None:
        """sched_switch on `cpu` at `now` µs from `prev` (still `runnable`: preempted) to `nxt`."""
        self.queues.seen(now)
        started = self.since.get(cpu) if self.running.get(cpu) == prev else None
        self.running[cpu] = nxt
        self.since[cpu] = now
        self.pending.pop(prev, None)  # it was on a CPU since that wakeup
        if prev != 0:
            group = self._group(prev)
            if group is None:
                self.others.ran(prev, now, started, runnable)
            if group is not None and (started is not None or not runnable):
                g = self.groups.setdefault(group, _Group())
                if not runnable:
                    g.sleeps += 1
                if started is not None:
                    (g.preempted_hist if runnable else g.blocked_hist)[bucket(now - started)] += 1
            if group is not None and runnable:
                self.preempted[prev] = (now, group)
                self.queues.runnable(prev, cpu, group, now)
            else:
                self.preempted.pop(prev, None)
                self.queues.asleep(prev, now)
        if nxt != 0:
            group = self._group(nxt)
            if group is not None:
                self.queues.runnable(nxt, cpu, group, now)
        self.others.woke.pop(nxt, None)  # on a CPU now: its segment starts at this switch
        out = self.preempted.pop(nxt, None)
        if out is not None:
            self.groups.setdefault(out[1], _Group()).preempted_wait_hist[bucket(now - out[0])] += 1
        woke = self.pending.pop(nxt, None)
        if woke is None:
            return
        t0, busy, name = woke
        k = bucket(now - t0)
        g = self.groups.setdefault(name, _Group())
        g.hist[k] += 1
        if busy:
            g.busy_hist[k] += 1

    def figures(self) -> dict[str, RunqLatFigures]:
        out = {}
        for name in sorted(self.groups):
            g = self.groups[name]
            out[name] = RunqLatFigures(
                hist=list(g.hist),
                busy_hist=list(g.busy_hist),
                count=sum(g.hist),
                busy_count=sum(g.busy_hist),
                p50_us=percentile(g.hist, 0.50),
                p90_us=percentile(g.hist, 0.90),
                p99_us=percentile(g.hist, 0.99),
                lost=self.lost,
                preempted_hist=list(g.preempted_hist),
                blocked_hist=list(g.blocked_hist),
                preempted_wait_hist=list(g.preempted_wait_hist),
                sleeps=g.sleeps,
                runnable_us=self.queues.table(name),
            )
        return out


# --- which group a thread is in -------------------------------------------------------------


def _threads(cgroup: Path) -> list[int]:
    """The threads in one cgroup directory (v1 `tasks`, v2 `cgroup.threads`); [] once gone."""
    for name in ("tasks", "cgroup.threads"):
        try:
            return [int(t) for t in (cgroup / name).read_text().split()]
        except FileNotFoundError:
            continue
        except OSError:
            return []
    return []


class CgroupResolver:
    """tid → the group whose cgroup directory (in the cpu hierarchy, e.g. HostBackend.dir)
    holds it, or a cgroup beneath it; the innermost group wins.

    Membership is read from the cgroups' thread lists, not from /proc/TID/cgroup: a child forks
    in its parent's cgroup (its sched_wakeup_new) and joins its own between fork and exec
    (replay.session.Session.spawn), so an answer per tid would go stale exactly when a workload
    starts; and reading the groups' lists costs the same however many other threads the host
    runs. The snapshot is read again when a tid is not in it and it is older than
    REFRESH_MISS_S (a thread that joined since), and whatever it holds after REFRESH_S. A tid
    keeps the group it was last seen in (events are read up to READ_INTERVAL_S late, when
    the thread may have exited)."""

    REFRESH_MISS_S = 0.005
    REFRESH_S = 0.5

    def __init__(self, groups: dict[str, Path], clock: Callable[[], float] = time.monotonic) -> None:
        # deepest first: a group nested in another one takes its own threads
        self.groups = sorted(((Path(p), name) for name, p in groups.items()), key=lambda x: -len(x[0].parts))
        self.clock = clock
        self.members: dict[int, str] = {}
        self.read_at = -math.inf
        self.reads = 0

    def refresh(self) -> None:
        members: dict[int, str] = {}
        for top, name in self.groups:
            dirs = [top] + sorted(d for d in top.rglob("*") if d.is_dir()) if top.is_dir() else []
            for d in dirs:
                for tid in _threads(d):
                    members.setdefault(tid, name)
        # a thread that left every group since keeps its last one: it has exited, mostly,
        # and its last wakeups are still in the trace when they are read
        self.members = {**self.members, **members}
        self.read_at = self.clock()
        self.reads += 1

    def __call__(self, tid: int) -> str | None:
        age = self.clock() - self.read_at
        name = self.members.get(tid)
        if age >= self.REFRESH_S or (name is None and age >= self.REFRESH_MISS_S):
            self.refresh()
            name = self.members.get(tid)
        return name


# --- tracefs, in a private mount namespace when the host has none ---------------------------


def available() -> str | None:
    """None if this host can trace scheduling delay, else why not (one sentence)."""
    if os.geteuid() != 0:
        return "runqlat needs root (tracefs)"
    if (HOST_TRACEFS / "instances").is_dir():
        return None
    if shutil.which("unshare") is None:
        return "tracefs is not mounted and there is no unshare(1) to mount it in a private namespace"
    try:
        with tracefs() as root:
            if not (root / "instances").is_dir():
                return f"tracefs mounted in a private namespace has no instances/ ({root})"
    except HostError as err:
        return str(err)
    return None


@contextmanager
def tracefs() -> Iterator[Path]:
    """tracefs's root: the host's if mounted, else a holder's private mount (module doc)."""
    if (HOST_TRACEFS / "instances").is_dir():
        yield HOST_TRACEFS
        return
    holder = subprocess.Popen(
        [*PRIVATE_SHELL, HOLDER_SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stderr is not None
        ready, _, _ = select.select([holder.stdout], [], [], HOLDER_TIMEOUT_S)
        line = holder.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            holder.kill()
            why = holder.stderr.read().decode(errors="replace").strip() or f"no answer in {HOLDER_TIMEOUT_S:.0f} s"
            raise HostError(f"tracefs could not be mounted in a private mount namespace (kernel lockdown?): {why}")
        yield Path(f"/proc/{holder.pid}/root/sys/kernel/tracing")
    finally:
        _end_holder(holder)


def _end_holder(holder: subprocess.Popen) -> None:
    """Close its pipe (its cat sees EOF and exits, taking the namespace and the mount); kill
    it if it has not gone in 5 s."""
    if holder.stdin is not None:
        try:
            holder.stdin.close()
        except OSError:
            pass
    try:
        holder.wait(timeout=5)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()
    for f in (holder.stdout, holder.stderr):
        if f is not None:
            f.close()


def _instance_owner(name: str) -> int | None:
    """The pid in an instance name colosim-PID-N (None if it is not one of ours)."""
    parts = name[len(INSTANCE_PREFIX) :].split("-") if name.startswith(INSTANCE_PREFIX) else []
    return int(parts[0]) if len(parts) == 2 and all(p.isdigit() for p in parts) else None


def _quiet(instance: Path) -> None:
    """Stop an instance's tracing and disable its events (so rmdir frees it cleanly)."""
    for f in [instance / "tracing_on"] + [instance / "events" / "sched" / e / "enable" for e in EVENTS]:
        try:
            f.write_text("0")
        except OSError:
            pass


def remove_stale_instances(say: Callable[[str], object] = lambda _: None) -> list[str]:
    """Remove every instances/colosim-PID-N whose PID is not alive; the names removed. Raises
    HostError if tracefs cannot be reached."""
    removed = []
    with tracefs() as root:
        instances = root / "instances"
        for d in sorted(instances.glob(INSTANCE_PREFIX + "*")):
            pid = _instance_owner(d.name)
            if pid is None or liveness.start_time(pid) is not None:
                continue
            _quiet(d)
            try:
                d.rmdir()
            except OSError as err:
                say(f"warning: trace instance {d.name} not removed ({os.strerror(err.errno or errno.EIO)})")
                continue
            removed.append(d.name)
    return removed


# --- the raw pages' sched events --------------------------------------------------------------

# sched_switch's prev_state: a preempted task is recorded as TASK_REPORT_MAX (printed "R+"), a
# task that blocked as one bit of TASK_REPORT; it was runnable iff no bit below TASK_REPORT_MAX
# is set (include/trace/events/sched.h, __trace_sched_switch_state). The format's print fmt
# spells the mask out as "((((TASK_REPORT bits) + 1) << 1) - 1)"; 0xff is 6.x's.
TASK_REPORT_MASK = 0xFF
_MASK = re.compile(r"\(\(\(\(((?:0x[0-9a-fA-F]+\s*\|\s*)*0x[0-9a-fA-F]+)\)\s*\+\s*1\)\s*<<\s*1\)\s*-\s*1\)")


def report_mask(print_fmt: str) -> int:
    """The prev_state bits that mean "not runnable", from sched_switch's print fmt."""
    m = _MASK.search(print_fmt)
    if m is None:
        return TASK_REPORT_MASK
    report = 0
    for h in re.findall(r"0x[0-9a-fA-F]+", m[1]):
        report |= int(h, 16)
    return ((report + 1) << 1) - 1


class SchedEvents:
    """The four sched events of raw pages, decoded by their format files and fed to an
    Accumulator in time order across CPUs."""

    SWITCH, WAKEUP, FORK, LOST = range(4)

    def __init__(self, formats: dict[str, EventFormat], layout: PageLayout = LAYOUT_64) -> None:
        missing = [e for e in EVENTS if e not in formats]
        if missing:
            raise ValueError(f"no format for {', '.join(missing)}")
        self.layout = layout
        sw = formats["sched_switch"]
        self.switch = sw.id
        self.prev_pid, self.prev_state, self.next_pid = (sw.reader(f) for f in ("prev_pid", "prev_state", "next_pid"))
        self.mask = report_mask(sw.print_fmt)
        self.wakeups = {
            formats[e].id: (formats[e].reader("pid"), formats[e].reader("target_cpu")) for e in ("sched_wakeup", "sched_wakeup_new")
        }
        fork = formats["sched_process_fork"]
        self.fork = fork.id
        self.parent, self.child = fork.reader("parent_pid"), fork.reader("child_pid")
        self.unparsed = 0

    def of_cpu(self, cpu: int, pages: list[bytes]) -> Iterator[tuple[int, int, int, int, int, int]]:
        """One CPU's events in its pages' order: (µs, cpu, kind, a, b, c)."""
        for raw in pages:
            try:
                page = decode_page(raw, self.layout)
            except ValueError:
                self.unparsed += 1
                continue
            if page.missed and page.events:
                yield ((page.events[0][0] + 500) // 1000, cpu, self.LOST, max(page.missed, 1), 0, 0)
            data = page.data
            for ns, start, end in page.events:
                if end - start < 2:
                    self.unparsed += 1
                    continue
                kind = int.from_bytes(data[start : start + 2], "little")
                us = (ns + 500) // 1000  # as trace_pipe prints it (trace.c ns2usecs rounds)
                try:
                    if kind == self.switch:
                        state = self.prev_state.unpack_from(data, start)[0]
                        nxt = self.next_pid.unpack_from(data, start)[0]
                        yield (us, cpu, self.SWITCH, self.prev_pid.unpack_from(data, start)[0], nxt, state & self.mask == 0)
                    elif kind in self.wakeups:
                        pid, target = self.wakeups[kind]
                        yield (us, cpu, self.WAKEUP, pid.unpack_from(data, start)[0], target.unpack_from(data, start)[0], 0)
                    elif kind == self.fork:
                        yield (us, cpu, self.FORK, self.parent.unpack_from(data, start)[0], self.child.unpack_from(data, start)[0], 0)
                except struct.error:
                    self.unparsed += 1

    def feed(self, acc: Accumulator, pages: dict[int, list[bytes]], since_us: int | None = None) -> None:
        """Every CPU's pages into `acc`, merged by time; counting afresh from `since_us` (the
        warm-up's end: what came before it is forgotten, wakeups pending then still count)."""
        for us, cpu, kind, a, b, c in heapq.merge(*(self.of_cpu(cpu, p) for cpu, p in sorted(pages.items()))):
            if since_us is not None and us >= since_us:
                acc.groups.clear()
                acc.others.clear()
                acc.queues.clear(us)
                acc.lost = 0
                since_us = None
            if kind == self.SWITCH:
                acc.switch(cpu, us, a, b, bool(c))
            elif kind == self.WAKEUP:
                acc.wakeup(us, a, b)
            elif kind == self.FORK:
                acc.fork(a, b)
            else:
                acc.lose(cpu, a)
        if since_us is not None:
            acc.groups.clear()
            acc.others.clear()
            acc.queues.clear(acc.queues.last)
            acc.lost = 0


# --- the tracer -------------------------------------------------------------------------------

_serial = itertools.count()


class RunqLat:
    """Trace wake-to-run latency per group while the `with` block runs (module doc).

    The instance's per-CPU raw pages (trace_pipe_raw) are read every READ_INTERVAL_S and kept
    as they are; they are decoded when the trace ends (`result`), so that reading costs the run
    next to nothing (replay/ftrace_raw.py says what the text cost)."""

    def __init__(self, resolver: Resolver, buffer_kb: int = BUFFER_KB, max_bytes: int = MAX_TRACE_BYTES) -> None:
        self.acc = Accumulator(resolver)
        self.buffer_kb = buffer_kb
        self.max_bytes = max_bytes  # raw pages kept beyond which the trace stops itself
        self.abandoned: str | None = None  # why the trace stopped itself, if it did
        self.name = f"{INSTANCE_PREFIX}{os.getpid()}-{next(_serial)}"
        self.instance: Path | None = None
        self.root: Path | None = None  # tracefs's root (a holder's /proc/PID/root/... or the host's)
        self._tracefs = ExitStack()  # the holder, if one is needed
        self._fds: dict[int, int] = {}  # cpu -> its trace_pipe_raw
        self._pages: dict[int, list[bytes]] = {}
        self._kept = 0
        self._subbuf = os.sysconf("SC_PAGE_SIZE")
        self._events: SchedEvents | None = None
        self._mark_us: int | None = None
        self._figures: dict[str, RunqLatFigures] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._old_term: object = None

    def __enter__(self) -> RunqLat:
        if os.geteuid() != 0:
            raise HostError("runqlat needs root (tracefs)")
        # SIGTERM unwinds through __exit__ (as in replay.session) when nobody else handles it
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._old_term = signal.signal(signal.SIGTERM, _terminate)
        try:
            self.root = root = self._tracefs.enter_context(tracefs())
            inst = root / "instances" / self.name
            inst.mkdir()
            self.instance = inst
            (inst / "tracing_on").write_text("0")  # a new instance records at once
            (inst / "buffer_size_kb").write_text(str(self.buffer_kb))
            (inst / "trace_clock").write_text("mono")
            header = root / "events" / "header_page"
            layout = page_layout(header.read_text()) if header.exists() else LAYOUT_64
            formats = {e: parse_format((inst / "events" / "sched" / e / "format").read_text()) for e in EVENTS}
            self._events = SchedEvents(formats, layout)
            subbuf = inst / "buffer_subbuf_size_kb"  # 6.8+: a page unless set
            if subbuf.exists():
                self._subbuf = int(subbuf.read_text().split()[0]) * 1024
            for e in EVENTS:
                (inst / "events" / "sched" / e / "enable").write_text("1")
            for d in sorted(inst.glob("per_cpu/cpu*"), key=lambda d: int(d.name[3:])):
                self._fds[int(d.name[3:])] = os.open(d / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
                self._pages[int(d.name[3:])] = []
            self._thread = threading.Thread(target=self._read, name=f"runqlat {self.name}", daemon=True)
            self._thread.start()
            (inst / "tracing_on").write_text("1")
        except BaseException as err:
            self.__exit__(None, None, None)
            if isinstance(err, OSError):
                raise HostError(f"runqlat: tracefs refused {err.filename or 'a write'}: {err.strerror}") from None
            if isinstance(err, ValueError):
                raise HostError(f"runqlat: this kernel's sched event formats are not as expected: {err}") from None
            raise
        return self

    def _drain(self) -> bool:
        """Read every page there is; False once the trace has kept more than max_bytes."""
        for cpu, fd in self._fds.items():
            while True:
                try:
                    page = os.read(fd, self._subbuf)
                except BlockingIOError:
                    break
                if not page:
                    break
                self._pages[cpu].append(page)
                self._kept += len(page)
                if self._kept > self.max_bytes:
                    self.abandoned = f"{self._kept / 2**20:.1f} MiB of raw trace kept, beyond the {self.max_bytes / 2**20:.1f} MiB a trace may keep: stopped"
                    return False
        return True

    def _read(self) -> None:
        """Drain the raw pages every READ_INTERVAL_S. Not woken by poll: each wakeup of this
        thread is itself traced (a wakeup and two switches), and waking on every new event
        fed on itself — 22 k wakeups a second of the reader alone, measured here."""
        # the groups' members are read while the run lasts: a thread that exits before the end
        # is in none of them when the pages are decoded
        refresh = getattr(self.acc.resolver, "refresh", None)
        try:
            while True:
                stopping = self._stop.is_set()  # before the drain: what follows it is read too
                if refresh is not None:
                    refresh()
                if not self._drain():
                    if self.instance is not None:
                        _quiet(self.instance)
                    break  # nothing more is read: an abandoned trace's figures are not used
                if stopping:
                    break  # tracing was off before this drain: the buffer is empty
                self._stop.wait(READ_INTERVAL_S)
        except BaseException as err:  # said by __exit__
            self._error = err

    def _end(self) -> None:
        """Stop tracing and the reader (which drains what is left)."""
        if self.instance is not None:
            _quiet(self.instance)  # tracing_on 0 first: what is in the buffer is drained
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            self._thread = None

    def __exit__(self, exc_type, exc, tb) -> None:
        blocked = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            self._end()
            for fd in self._fds.values():
                os.close(fd)
            self._fds = {}
            if self.instance is not None:
                try:
                    self.instance.rmdir()
                except OSError:
                    pass  # said below: remove_stale_instances takes it once we are gone
                else:
                    self.instance = None
            self._tracefs.close()
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)  # type: ignore[arg-type]
                self._old_term = None
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        if self.instance is not None:
            raise HostError(f"trace instance {self.instance.name} could not be removed; colosim replay --cleanup removes it")
        if self._error is not None and exc_type is None:
            raise HostError(f"runqlat: reading trace_pipe_raw failed: {self._error}")

    def mark(self) -> None:
        """Count afresh from now (the end of a run's warm-up); wakeups already pending still
        count when they run. The trace's `mono` clock is CLOCK_MONOTONIC."""
        self._mark_us = time.monotonic_ns() // 1000

    def result(self) -> dict[str, RunqLatFigures]:
        """Each group's figures. The trace ends here if it has not (its pages are decoded now)."""
        if self._figures is None:
            self._end()
            if self._events is not None:
                self._events.feed(self.acc, self._pages, self._mark_us)
            self._pages = {cpu: [] for cpu in self._pages}
            self._figures = self.acc.figures()
        return self._figures

    @property
    def unparsed(self) -> int:
        return self.acc.unparsed + (self._events.unparsed if self._events is not None else 0)


def _terminate(signum, frame):
    from replay.session import Interrupted

    raise Interrupted(signal.Signals(signum).name)


# --- as a command -----------------------------------------------------------------------------


def format_figures(name: str, f: RunqLatFigures) -> str:
    """One group's histograms as BCC's runqlat prints them ("usecs : count  distribution"), the
    wakeups' beside the run segments' (by how they ended) and the waits after preemption."""
    cols = (f.hist, f.busy_hist, f.preempted_hist, f.blocked_hist, f.preempted_wait_hist)
    last = max((k for col in cols for k, n in enumerate(col) if n), default=0)
    top = max(f.hist) or 1

    def summary(what: str, hist: list[int]) -> str:
        n = sum(hist)
        return f"{n} {what}" + (f" (P50 < {percentile(hist, 0.5):g} µs, P99 < {percentile(hist, 0.99):g} µs)" if n else "")

    lines = [
        f"{name}: {f.count} wakeups, {f.busy_count} onto a busy CPU; P50 < {f.p50_us:g} µs, "
        f"P90 < {f.p90_us:g} µs, P99 < {f.p99_us:g} µs" + (f"; {f.lost} events LOST" if f.lost else ""),
        f"{name}: run segments {summary('preempted', f.preempted_hist)}, {summary('blocked', f.blocked_hist)}; "
        f"{summary('waits after preemption', f.preempted_wait_hist)}",
        f"{'usecs':>24} : {'count':<8} {'busy':<8} {'preempt':<8} {'block':<8} {'p-wait':<8} distribution",
    ]
    for k in range(last + 1):
        lo = int(lower_us(k))
        span = f"{lo} -> {int(upper_us(k)) - 1}" if k < BUCKETS - 1 else f"{lo} -> inf"
        counts = " ".join(f"{col[k]:<8}" for col in cols)
        lines.append(f"{span:>24} : {counts} |{'*' * round(40 * f.hist[k] / top):<40}|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m replay.runqlat SECONDS [NAME=CGROUP_DIR ...]`: trace for SECONDS, print each
    group's histogram (no groups: every thread of the host, as one group "all")."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m replay.runqlat", description=main.__doc__)
    ap.add_argument("seconds", type=float)
    ap.add_argument("groups", nargs="*", metavar="NAME=CGROUP_DIR")
    args = ap.parse_args(argv)
    groups = {}
    for g in args.groups:
        name, eq, path = g.partition("=")
        if not eq or not name or not Path(path).is_dir():
            print(f"runqlat: {g!r}: give NAME=CGROUP_DIR with an existing cgroup directory", file=sys.stderr)
            return 2
        groups[name] = Path(path)
    why = available()
    if why is not None:
        print(f"runqlat: {why}", file=sys.stderr)
        return 1
    resolver: Resolver = CgroupResolver(groups) if groups else (lambda tid: "all")
    try:
        with RunqLat(resolver) as rq:
            time.sleep(args.seconds)
    except HostError as err:
        print(f"runqlat: {err}", file=sys.stderr)
        return 1
    for name, f in rq.result().items():
        print(format_figures(name, f) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
