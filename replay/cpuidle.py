"""How long a wakeup of an idle CPU waits on this host: the exit latency of its idle state
(`[node.cpuidle] exit_latency`, core_rs/model/src/cpuidle.rs), measured.

Two processes exchange a byte over pipes, each pinned to its own CPU and blocked in read()
between messages, as a server and its client are: each message wakes a CPU that had nothing
to run, two exits a round trip. The same exchange is timed again with a SCHED_IDLE spinner on
each CPU: the CPUs are then busy, each wakeup preempts the spinner at once (an idle-policy
task loses to any other at wakeup), and the round trip is the same but for the exits. An
exit's distribution is half the difference of the two round trips' quantiles (both are sums of
the same exchange's costs, the first with two exits more); the two are taken in alternating
blocks so that a drift of the host falls on both.

Measured here (a Firecracker guest, cpuidle-haltpoll with guest_halt_poll_ns = 0): round
trips of ~58 µs idle against ~33 µs kept busy. The exit is cheaper when the other CPU is busy
(a spinning echo: ~2-3 µs a wakeup): what costs is waking a vCPU while the guest has none
running, which is what an exchange between two sleepers does. The model has one latency for
every exit (its weak point: a wakeup beside a busy CPU pays the same).

An exit also grows with the halt it ends (2026-12-07, this host, medians: 5–9 µs after a halt
of 10–30 µs, 7–13 after 300 µs, 10–16 after 1 ms, 15–20 after 3 ms, 31–34 after 10 ms, 56–58
after 30 ms; that evening the exchange's own ~7 µs halts cost nothing): the longer a vCPU has halted, the deeper the host has put it. The probe measures that
too: a waker that spins on its CPU (so only the sleeper's CPU can halt) wakes a sleeper that has
been blocked for RESIDENCIES, one way; the sleeper reads the clock when it runs and sends it
back. Again once as it is and once beside a SCHED_IDLE spinner on the sleeper's CPU: an exit
after a halt of that length is the difference of the two wakes' quantiles. Each becomes one of
`[node.cpuidle] deeper`, reached by halts from the geometric mean of its residency and the one
below it (the exchange's halt for the first): a halt is given the exit of the length nearest it
on a log scale.

The probe creates no cgroup and writes nothing: its processes run where colosim runs, pinned
with sched_setaffinity, and are killed on every exit path.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replay.host_kernel import read_optional
from sim.errors import HostError

# the quantiles the exit latency's histogram is cut at (its bins' probabilities are their gaps)
CUTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
# the differences' quantiles are taken on this grid, then cut at CUTS
GRID = np.linspace(0.005, 0.995, 199)
EXITS = 2  # wakeups of an idle CPU in a round trip
BUSY_HOST = 0.2  # CPUs of other work above which the summary warns
ROUND_TRIPS = 4000  # per mode, in BLOCKS alternating blocks
BLOCKS = 4
# how long the sleeper has halted before the one-way wakes (µs), and how many per length and
# mode (in BLOCKS alternating blocks): ~7 s in all
RESIDENCIES_US = (300, 1000, 3000, 10000)
WAKES = 200


@dataclass(frozen=True)
class IdleDriver:
    """What the kernel says of CPU 0's idle states (/sys/devices/system/cpu/cpuidle and
    cpu0/cpuidle/stateN): the driver and governor, each state's name and declared exit latency
    (µs; `struct cpuidle_state.exit_latency`), and cpuidle-haltpoll's polling limit before a
    halt (`guest_halt_poll_ns`, None without the module). What the kernel declares is not what a
    wakeup costs in a guest: the hypervisor's part is in no table, hence the measurement."""

    driver: str | None = None
    governor: str | None = None
    states: list[tuple[str, int]] = field(default_factory=list)
    guest_halt_poll_ns: int | None = None

    def summary(self) -> str:
        if self.driver is None:
            return "no cpuidle driver (the idle loop halts)"
        states = ", ".join(f"{n} {lat} µs" for n, lat in self.states) or "none"
        poll = "" if self.guest_halt_poll_ns is None else f"; polls {self.guest_halt_poll_ns} ns before it halts"
        return f"cpuidle driver {self.driver}, governor {self.governor or '-'}, states (declared exit latency) {states}{poll}"


def _text(path: Path) -> str | None:
    text = read_optional(path)
    return None if text is None else text.strip()


def read_idle_driver(root: Path = Path("/")) -> IdleDriver:
    """The idle driver as sysfs shows it under `root` (a test gives its own tree)."""
    base = root / "sys/devices/system/cpu"
    states = []
    for d in sorted((base / "cpu0/cpuidle").glob("state*"), key=lambda p: int(p.name[5:]) if p.name[5:].isdigit() else 0):
        name, latency = _text(d / "name"), _text(d / "latency")
        if name is not None and latency is not None and latency.isdigit():
            states.append((name, int(latency)))
    poll = _text(root / "sys/module/haltpoll/parameters/guest_halt_poll_ns")
    return IdleDriver(
        driver=_text(base / "cpuidle/current_driver"),
        governor=_text(base / "cpuidle/current_governor_ro") or _text(base / "cpuidle/current_governor"),
        states=states,
        guest_halt_poll_ns=int(poll) if poll is not None and poll.isdigit() else None,
    )


@dataclass(frozen=True)
class DeeperExit:
    """The exit after a halt of `residency_us`, measured one way: the wakes' medians as they
    are and beside a SCHED_IDLE spinner (µs), the exit's median, mean and histogram, and the
    halt from which the model takes it (`target_residency_ns`)."""

    residency_us: int
    target_residency_ns: int
    wakes: int
    idle_p50_us: float
    busy_p50_us: float
    p50_us: float
    mean_us: float
    edges_ns: list[int]
    weights: list[float]

    def toml_entry(self) -> str:
        return f'{{target_residency = "{self.target_residency_ns}ns", exit_latency = {histogram_toml(self.edges_ns, self.weights)}}}'


def histogram_toml(edges_ns: list[int], weights: list[float]) -> str:
    """A histogram as a TOML inline table (the core's empirical distribution)."""
    edges = ", ".join(f'"{e}ns"' for e in edges_ns)
    ws = ", ".join(f"{w:.6g}" for w in weights)
    return f'{{dist = "empirical", edges = [{edges}], weights = [{ws}]}}'


def histogram_table(edges_ns: list[int], weights: list[float]) -> dict[str, Any]:
    return {"dist": "empirical", "edges": [f"{e}ns" for e in edges_ns], "weights": weights}


@dataclass(frozen=True)
class ExitLatency:
    """The measured exit latency: the round trips' medians and 99th percentiles (µs) in both
    modes, the exit's mean and quantiles, and its histogram as the scenario takes it."""

    cpus: tuple[int, int]
    round_trips: int
    idle_p50_us: float
    idle_p99_us: float
    busy_p50_us: float
    busy_p99_us: float
    mean_us: float
    p50_us: float
    p99_us: float
    edges_ns: list[int]
    weights: list[float]
    driver: IdleDriver = field(default_factory=IdleDriver)
    # CPUs busy with other work in a quiet window before the probe: the exits it measures are
    # those of CPUs the others leave idle, and fewer
    others_busy_cpus: float = 0.0
    # the exits after longer halts (none when the probe was asked for the exchange only)
    deeper: list[DeeperExit] = field(default_factory=list)

    def table(self) -> dict[str, Any]:
        """`[node.cpuidle]` as a scenario table."""
        table: dict[str, Any] = {"exit_latency": histogram_table(self.edges_ns, self.weights)}
        if self.deeper:
            table["deeper"] = [
                {"target_residency": f"{d.target_residency_ns}ns", "exit_latency": histogram_table(d.edges_ns, d.weights)}
                for d in self.deeper
            ]
        return table

    def _fields(self) -> str:
        deeper = f", deeper = [{', '.join(d.toml_entry() for d in self.deeper)}]" if self.deeper else ""
        return f"exit_latency = {histogram_toml(self.edges_ns, self.weights)}{deeper}"

    def override(self) -> str:
        """The table as one `--set`."""
        return f"node.cpuidle={{{self._fields()}}}"

    def toml(self) -> str:
        """`[node.cpuidle]` as a scenario's TOML."""
        return "[node.cpuidle]\n" + self._fields().replace(", deeper = ", "\ndeeper = ") + "\n"

    def summary(self) -> str:
        return (
            f"cpuidle: a wakeup of an idle CPU waits {self.p50_us:.1f} µs (median; mean {self.mean_us:.1f}, "
            f"P99 {self.p99_us:.1f}): round trip CPU {self.cpus[0]} ↔ {self.cpus[1]} idle {self.idle_p50_us:.1f} µs "
            f"(P99 {self.idle_p99_us:.1f}), kept busy by SCHED_IDLE spinners {self.busy_p50_us:.1f} µs "
            f"(P99 {self.busy_p99_us:.1f}); {self.round_trips} round trips each"
            + "".join(
                f"; after a halt of {d.residency_us / 1000:g} ms {d.p50_us:.1f} µs (median; mean {d.mean_us:.1f})" for d in self.deeper
            )
            + f"; {self.driver.summary()}"
            + (
                f"; WARNING: the host was busy ({self.others_busy_cpus:.2f} CPUs of other work): its CPUs idle less "
                "than they would, and the exit measured is too short"
                if self.others_busy_cpus > BUSY_HOST
                else ""
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def exit_quantiles(idle_ns: np.ndarray, busy_ns: np.ndarray, exits: int = EXITS) -> np.ndarray:
    """An exit's quantiles on GRID: the quantile differences of the timings with and without
    the exits, over the number of exits in each (`exits`: two in a round trip, one in a
    one-way wake); negative ones are noise (0), made non-decreasing, as a quantile function is."""
    diff = np.maximum(np.quantile(idle_ns, GRID) - np.quantile(busy_ns, GRID), 0.0) / exits
    return np.maximum.accumulate(diff)


def exit_latency_histogram(idle_ns: np.ndarray, busy_ns: np.ndarray, exits: int = EXITS) -> tuple[list[int], list[float]]:
    """The exit latency's histogram from timings with (`idle_ns`) and without (`busy_ns`)
    `exits` exits: the quantile differences on GRID (negative ones are noise: 0), cut at CUTS;
    bins that would be empty (equal edges) merge into their neighbour."""
    return cut_histogram(np.interp(CUTS, GRID, exit_quantiles(idle_ns, busy_ns, exits)))


def target_residencies_ns(shallow_ns: float, residencies_us: tuple[int, ...]) -> list[int]:
    """Where each deeper state starts: the geometric mean of its measured halt and the one
    below it (the exchange's halt, `shallow_ns`, below the first), so that a halt takes the
    exit measured at the length nearest it on a log scale. Increasing, as the scenario asks."""
    below = [max(shallow_ns, 1.0)] + [r * 1e3 for r in residencies_us[:-1]]
    out: list[int] = []
    for lo, r in zip(below, residencies_us, strict=True):
        t = int(round(math.sqrt(lo * r * 1e3)))
        out.append(max(t, (out[-1] + 1) if out else 1))
    return out


def cut_histogram(at: np.ndarray) -> tuple[list[int], list[float]]:
    """The histogram whose edges are the quantiles `at` (ns) at CUTS: bin k holds CUTS[k+1] −
    CUTS[k] of the mass; bins that would be empty (equal edges) merge into their neighbour."""
    edges: list[int] = [int(round(at[0]))]
    weights: list[float] = []
    for k in range(1, len(CUTS)):
        mass = CUTS[k] - CUTS[k - 1]
        e = int(round(at[k]))
        if e <= edges[-1]:
            # no width: its mass goes to the bin before it, or into the first bin
            if weights:
                weights[-1] += mass
            else:
                edges.append(edges[-1] + 1)
                weights.append(mass)
            continue
        edges.append(e)
        weights.append(mass)
    if not weights:
        edges, weights = [edges[0], edges[0] + 1], [1.0]
    return edges, [round(w, 6) for w in weights]


def histogram_mean(edges: list[int], weights: list[float]) -> float:
    """The mean of a histogram uniform inside each bin (the core's empirical distribution)."""
    mids = [(lo + hi) / 2 for lo, hi in zip(edges, edges[1:], strict=False)]
    return float(np.dot(mids, weights) / sum(weights))


def two_cpus(what: str) -> tuple[int, int]:
    """The first two CPUs this process may run on; HostError naming `what` without two."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        raise HostError(f"{what} needs two CPUs to exchange between (this process may run on {allowed})")
    return allowed[0], allowed[1]


def busy_cpus(seconds: float = 0.3, stat: Path = Path("/proc/stat")) -> float:
    """CPUs busy over `seconds` by /proc/stat's first line (everything but idle and iowait),
    while this process sleeps."""

    def read() -> tuple[int, int]:
        fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields[:8]) - idle, sum(fields[:8])

    b0, t0 = read()
    time.sleep(seconds)
    b1, t1 = read()
    return 0.0 if t1 == t0 else (b1 - b0) / (t1 - t0) * (os.cpu_count() or 1)


def pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def child_process(target) -> Iterator[int]:
    """A forked child running `target()` (it never returns), killed when the block ends."""
    pid = os.fork()
    if pid == 0:
        try:
            target()
        finally:
            os._exit(0)
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def spin_idle(cpu: int) -> None:
    pin(cpu)
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    while True:
        pass


def _echo(cpu: int, rd: int, wr: int) -> None:
    pin(cpu)
    while True:
        b = os.read(rd, 1)
        if not b:
            return
        os.write(wr, b)


def _stamp_on_wake(cpu: int, rd: int, wr: int) -> None:
    """The sleeper: blocked in read() until woken; then sends back when it ran (CLOCK_MONOTONIC,
    the clock both processes read)."""
    pin(cpu)
    clock = time.monotonic_ns
    while True:
        b = os.read(rd, 1)
        if not b:
            return
        os.write(wr, clock().to_bytes(8, "little"))


def _wakes(to_sleeper: int, from_sleeper: int, residency_ns: int, n: int) -> np.ndarray:
    """`n` one-way wakes of a sleeper that has been blocked `residency_ns`: the waker spins
    (its own CPU never halts), reading the sleeper's stamp without blocking."""
    out = np.empty(n, dtype=np.float64)
    clock = time.monotonic_ns
    last = clock()
    for i in range(n):
        while clock() - last < residency_ns:
            pass
        t0 = clock()
        os.write(to_sleeper, b"x")
        got = b""
        while len(got) < 8:
            with contextlib.suppress(BlockingIOError):
                got += os.read(from_sleeper, 8 - len(got))
        last = clock()
        out[i] = int.from_bytes(got, "little") - t0
    return out


def measure_deeper(
    cpus: tuple[int, int], shallow_ns: float, residencies_us: tuple[int, ...] = RESIDENCIES_US, wakes: int = WAKES, blocks: int = BLOCKS
) -> list[DeeperExit]:
    """The exits after halts of `residencies_us` between CPUs `cpus` (waker, sleeper)."""
    a, b = cpus
    old = os.sched_getaffinity(0)
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    os.set_blocking(r2, False)
    per_block = max(1, wakes // blocks)
    idle: dict[int, list[np.ndarray]] = {r: [] for r in residencies_us}
    busy: dict[int, list[np.ndarray]] = {r: [] for r in residencies_us}
    try:
        with child_process(lambda: _stamp_on_wake(b, r1, w2)):
            pin(a)
            _wakes(w1, r2, 0, 50)  # warm both ends up
            for _ in range(blocks):
                for r in residencies_us:
                    idle[r].append(_wakes(w1, r2, r * 1000, per_block))
                with child_process(lambda: spin_idle(b)):
                    time.sleep(0.02)  # the spinner is on its CPU
                    for r in residencies_us:
                        busy[r].append(_wakes(w1, r2, r * 1000, per_block))
    finally:
        os.sched_setaffinity(0, old)
        for fd in (r1, w1, r2, w2):
            os.close(fd)
    out = []
    for r, target in zip(residencies_us, target_residencies_ns(shallow_ns, residencies_us), strict=True):
        i_ns, b_ns = np.concatenate(idle[r]), np.concatenate(busy[r])
        edges, weights = exit_latency_histogram(i_ns, b_ns, exits=1)
        out.append(
            DeeperExit(
                residency_us=r,
                target_residency_ns=target,
                wakes=len(i_ns),
                idle_p50_us=float(np.median(i_ns)) / 1e3,
                busy_p50_us=float(np.median(b_ns)) / 1e3,
                p50_us=float(np.interp(0.5, GRID, exit_quantiles(i_ns, b_ns, 1))) / 1e3,
                mean_us=histogram_mean(edges, weights) / 1e3,
                edges_ns=edges,
                weights=weights,
            )
        )
    return out


def _round_trips(to_echo: int, from_echo: int, n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.float64)
    clock = time.perf_counter_ns
    for i in range(n):
        t0 = clock()
        os.write(to_echo, b"x")
        os.read(from_echo, 1)
        out[i] = clock() - t0
    return out


def measure(
    cpus: tuple[int, int] | None = None,
    round_trips: int = ROUND_TRIPS,
    blocks: int = BLOCKS,
    residencies_us: tuple[int, ...] = RESIDENCIES_US,
    wakes: int = WAKES,
) -> ExitLatency:
    """Measure the exit latency between two CPUs this process may run on (the first two by
    default): after the exchange's short halts, and after halts of `residencies_us` (none:
    the exchange's only). HostError when there are fewer than two."""
    a, b = cpus or two_cpus("cpuidle: the exit latency")
    others = busy_cpus()
    old = os.sched_getaffinity(0)
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    per_block = max(1, round_trips // blocks)
    idle, busy = [], []
    try:
        with child_process(lambda: _echo(b, r1, w2)):
            pin(a)
            _round_trips(w1, r2, 200)  # warm both ends up
            for _ in range(blocks):
                idle.append(_round_trips(w1, r2, per_block))
                with child_process(lambda: spin_idle(a)), child_process(lambda: spin_idle(b)):
                    time.sleep(0.02)  # the spinners are on their CPUs
                    busy.append(_round_trips(w1, r2, per_block))
    finally:
        os.sched_setaffinity(0, old)
        for fd in (r1, w1, r2, w2):
            os.close(fd)
    i_ns, b_ns = np.concatenate(idle), np.concatenate(busy)
    edges, weights = exit_latency_histogram(i_ns, b_ns)
    mean = histogram_mean(edges, weights)
    q = np.interp([0.5, 0.99], GRID, exit_quantiles(i_ns, b_ns))
    # the exchange's halts: each CPU waits for the other's half of a busy round trip
    shallow_ns = float(np.median(b_ns)) / 2
    deeper = measure_deeper((a, b), shallow_ns, residencies_us, wakes, blocks) if residencies_us else []
    return ExitLatency(
        cpus=(a, b),
        round_trips=len(i_ns),
        idle_p50_us=float(np.median(i_ns)) / 1e3,
        idle_p99_us=float(np.quantile(i_ns, 0.99)) / 1e3,
        busy_p50_us=float(np.median(b_ns)) / 1e3,
        busy_p99_us=float(np.quantile(b_ns, 0.99)) / 1e3,
        mean_us=mean / 1e3,
        p50_us=float(q[0]) / 1e3,
        p99_us=float(q[1]) / 1e3,
        edges_ns=edges,
        weights=weights,
        driver=read_idle_driver(),
        others_busy_cpus=others,
        deeper=deeper,
    )
