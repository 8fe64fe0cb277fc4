"""How late a timed sleep ends on this host, and the model of colosim-load's waits that follows.

colosim-load renders a closed loop's waits between bursts (`shape.wait`) and its think times
with `thread::sleep` — nanosleep on a relative hrtimer. The kernel arms that timer with the
thread's slack (`current->timer_slack_ns`, 50 µs for a normal task unless prctl
PR_SET_TIMERSLACK changes it, /proc/PID/timerslack_ns): the timer may fire anywhere in [t, t +
slack] and, unless another interrupt of that CPU comes first in the window, fires at its end
(`hrtimer_start_range_ns`; `__hrtimer_run_queues` expires every timer whose soft expiry has
passed). The interrupt and the wakeup then add their own latency (in a guest, the host's timer
emulation too). So a wait of d ends at d + slack + latency: on this host (Firecracker guest,
Linux 6.18.44) 1.07–1.09 ms for 1 ms, with a CPU busy beside the sleeper.

The core's waits are exact, and exact times make coincidences no host has: four threads
running 1 ms and sleeping exactly 1 ms beside four hogs keep a group's queue busy without a
gap, so the 6.18.44 reweight holds the group's lag (docs/model.md, "The reweight fixed point")
and the core gives the sleepers 0.98 of the node; the host, whose sleeps end 50–100 µs late,
gives them 0.50–0.55 in the same arrangement — as the core does with the host's late ends
(docs/replay.md, "Timed sleeps end late").

`measure` times sleeps on one CPU kept busy by a SCHED_IDLE spinner (the sleeper preempts it
at once on waking, as it would a batch job; an idle CPU's exit is [node.cpuidle]'s, measured
apart: replay/cpuidle.py). `timer_equivalent` adds the measured overshoot to the waits
colosim-load will sleep, for the prediction only — the host runs the scenario as written.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.cpuidle import BUSY_HOST, CUTS, busy_cpus, child_process, cut_histogram, histogram_mean, pin, spin_idle
from replay.host_kernel import read_optional
from sim.scenario import ClosedLoop, Scenario
from sim.scenario.distributions import Constant, Distribution, Empirical, Exponential, Lognormal, mean_s

SLEEP_NS = 1_000_000  # the sleep timed: colosim-load's waits are of this order
SLEEPS = 400  # about half a second


@dataclass(frozen=True)
class TimerOvershoot:
    """What a sleep of `sleep_ns` overran by on this host (ns): its quantiles at CUTS (the
    histogram the prediction adds to each wait), mean and median, and the thread's slack."""

    sleep_ns: int
    sleeps: int
    cpu: int
    slack_ns: int | None  # /proc/self/timerslack_ns (None: unreadable)
    mean_ns: float
    p50_ns: float
    p99_ns: float
    edges_ns: list[int]
    weights: list[float]
    others_busy_cpus: float = 0.0

    def summary(self) -> str:
        slack = "?" if self.slack_ns is None else f"{self.slack_ns / 1e3:g}"
        return (
            f"timers: a {self.sleep_ns / 1e6:g} ms sleep ends {self.p50_ns / 1e3:.1f} µs late (median; mean "
            f"{self.mean_ns / 1e3:.1f}, P99 {self.p99_ns / 1e3:.1f}) on CPU {self.cpu} kept busy, timer slack {slack} µs; "
            "the prediction adds it to colosim-load's waits and think times"
            + (
                f"; WARNING: the host was busy ({self.others_busy_cpus:.2f} CPUs of other work)"
                if self.others_busy_cpus > BUSY_HOST
                else ""
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def overshoot_histogram(over_ns: np.ndarray) -> tuple[list[int], list[float]]:
    """The overshoots' histogram cut at CUTS' quantiles (negative ones, noise of the clock
    reads, count as 0)."""
    return cut_histogram(np.quantile(np.maximum(over_ns, 0.0), CUTS))


def _slack(path: Path = Path("/proc/self/timerslack_ns")) -> int | None:
    text = read_optional(path)
    return int(text) if text is not None and text.strip().isdigit() else None


def measure(sleep_ns: int = SLEEP_NS, sleeps: int = SLEEPS, cpu: int | None = None) -> TimerOvershoot:
    """Time `sleeps` sleeps of `sleep_ns` on `cpu` (the first this process may run on), a
    SCHED_IDLE spinner keeping it busy; this process's affinity is restored after."""
    cpu = min(os.sched_getaffinity(0)) if cpu is None else cpu
    others = busy_cpus()
    old = os.sched_getaffinity(0)
    over = np.empty(sleeps, dtype=np.float64)
    clock = time.perf_counter_ns
    try:
        with child_process(lambda: spin_idle(cpu)):
            pin(cpu)
            time.sleep(0.02)  # the spinner is on its CPU
            for i in range(sleeps):
                t0 = clock()
                time.sleep(sleep_ns / 1e9)
                over[i] = clock() - t0 - sleep_ns
    finally:
        os.sched_setaffinity(0, old)
    edges, weights = overshoot_histogram(over)
    late = np.maximum(over, 0.0)
    return TimerOvershoot(
        sleep_ns=sleep_ns,
        sleeps=sleeps,
        cpu=cpu,
        slack_ns=_slack(),
        mean_ns=histogram_mean(edges, weights),
        p50_ns=float(np.median(late)),
        p99_ns=float(np.quantile(late, 0.99)),
        edges_ns=edges,
        weights=weights,
        others_busy_cpus=others,
    )


def late(d: Distribution, over: TimerOvershoot) -> Distribution:
    """A sleep drawn from `d` as it ends on the host: a constant wait plus the overshoot's
    histogram (its edges shifted by the wait); the other families keep their shape with the
    overshoot's mean added to their mean (their own spread is far wider than the overshoot's);
    a zero wait is no sleep (colosim-load does not call sleep for it)."""
    if mean_s(d) <= 0:
        return d
    if isinstance(d, Constant):
        c = round(mean_s(d) * 1e9)
        return Empirical.model_validate(
            {"dist": "empirical", "edges": [f"{c + e}ns" for e in over.edges_ns], "weights": list(over.weights)}
        )
    shift = over.mean_ns / 1e9
    if isinstance(d, Exponential):
        return Exponential.model_validate({"dist": "exponential", "mean": f"{round((mean_s(d) + shift) * 1e9)}ns"})
    if isinstance(d, Lognormal):
        return Lognormal.model_validate({"dist": "lognormal", "mean": f"{round((mean_s(d) + shift) * 1e9)}ns", "sigma": d.sigma})
    if isinstance(d, Empirical):
        edges = [round(e + over.mean_ns) for e in d.edges]  # the scenario holds durations in ns
        return Empirical.model_validate({"dist": "empirical", "edges": [f"{e}ns" for e in edges], "weights": list(d.weights)})
    return d


def timer_equivalent(scenario: Scenario, over: TimerOvershoot | None) -> Scenario:
    """The scenario as colosim-load's sleeps run on this host: every closed loop it renders
    (host program "builtin") with its waits between bursts and its think times late by the
    overshoot. Other workloads — real servers, whose waits are theirs, and hogs — are kept."""
    if over is None or not math.isfinite(over.mean_ns):
        return scenario
    targets = [n for n, w in scenario.workloads.items() if isinstance(w, ClosedLoop) and w.host.program == "builtin" and timed(w)]
    if not targets:
        return scenario
    out = scenario.model_copy(deep=True)
    for name in targets:
        w = out.workloads[name]
        assert isinstance(w, ClosedLoop)
        if w.shape is not None and w.shape.bursts > 1 and w.shape.wait is not None:
            w.shape.wait = late(w.shape.wait, over)
        w.think = late(w.think, over)
    return out


def timed(w: ClosedLoop) -> bool:
    """Whether colosim-load sleeps on a timer for this closed loop: waits between bursts, or
    a think time."""
    waits = w.shape is not None and w.shape.bursts > 1 and w.shape.wait is not None and mean_s(w.shape.wait) > 0
    return waits or mean_s(w.think) > 0


def any_timed(scenario: Scenario) -> bool:
    """Whether any variant's workloads sleep on colosim-load's timers (worth measuring)."""
    return any(
        isinstance(w, ClosedLoop) and w.host.program == "builtin" and timed(w)
        for v in scenario.variants()
        for w in v.scenario.workloads.values()
        if w.enabled
    )
