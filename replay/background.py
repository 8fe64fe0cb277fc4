"""The host's other tenants, measured during every host run and run in its prediction.

On a shared node (CI beside `stress --cpu 1`, other jobs compiling) our run competes with work
that is not ours. Replay measures it over every run's measured window (host_run.others_share):
the node's busy CPU time from /proc/stat (user + nice + system + irq + softirq + steal; idle,
iowait and guest excluded, guest being counted in user already) less what the run folder's
top-level cgroups used (their cpuacct.usage, which holds their children's). That is a
measured input of the environment, like the node's CPU count: the mean number of CPUs the
other tenants kept busy, b.

The prediction runs it as the other tenants run on this host: processes in the root cpu cgroup,
each in its own session, so each in its own autogroup (sched_autogroup_enabled = 1: a task group
of weight 1024 at the root; measured here while the suite ran: the busiest other processes,
rustc and python of other jobs, were all in cpu:/ in autogroups of their own). n = floor(b) + 1
`duty` workloads in the root cgroup ("/"), each a session of its own, each one thread running
b / n (< 1) of every BACKGROUND_PERIOD and sleeping the rest, so that alone on an idle node they
use b CPUs on average. Why every thread sleeps in every period (rather than floor(b) hogs and a
remainder, or ceil(b) hogs capped by a quota): the other tenants are jobs that come and go (a
compile unit runs, waits for its files, exits), and on 6.18.44 the model starves a hog in a
group beside a service that hands the CPU back and forth in short parts (the `rounds` of
docs/replay.md) while a thread that sleeps every period keeps its share — and the host's other
tenants kept theirs beside ClickHouse alone (0.8–1.2 CPUs): a hog background would vanish in
the model. A quota is the online cgroup's own mechanism in the suite's `quota` case, and
throttling runs the whole budget at the start of each period and then nothing, which no
compiler does. A period of 100 ms: longer than a scheduling slice (the background's runs
compete as a CPU-bound task's do, not as a sleeper's wakeups), short enough that a 10 s window
averages 100 of them. Where the node's [kernel] autogroup is off, the threads are tasks of the
root cgroup itself, as the host's would be.

Where the alone run was traced (replay/runqlat.py), the period is set from what the other
tenants' threads did then instead: the CPU-weighted mean of their bursts (the CPU a thread used
from a wakeup to its next sleep), L, so that each duty thread runs L at a time:
period = L · n / b, kept within [MIN_PERIOD, MAX_PERIOD] and under a tenth of the measured
window (a hog's burst is the whole run: any window still averages ten periods). On this host the
fidelity suite's alone runs measured 1.25–1.77 ms (most of it replay's own trace reader), an
idle host 1.4–1.6 ms, and a moment when the sandbox's agent was busy ~30 ms (docs/replay.md,
"The other tenants' bursts"). On 6.14–6.18.44 the model starves these threads beside a
service that hands off with its load generator in one cgroup. The host starves such a
sleeper too, in a sibling cgroup and at the root alike, but not to nothing: it runs when the
service's queue on its CPU runs dry, which the model's queue does not (docs/replay.md, "Where
a group's queue runs dry").

What the background got on the host is what it got beside our run, not what it asked for: the
prediction gives the duty threads that demand and lets the model share the node, so a case
where our run takes more CPU from the other tenants than alone is not fully represented.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from sim.scenario import Scenario
from sim.scenario.workloads import ROOT_CGROUP, Duty

BACKGROUND = "background"  # the workloads' (and their sessions') name stem
BACKGROUND_PERIOD = "100ms"
# the period where the other tenants' bursts were measured: within these bounds
MIN_PERIOD_NS = 1_000_000
MAX_PERIOD_NS = 1_000_000_000
# below this many CPUs the other tenants are noise (the replay driver's own sampling is ~0.01)
NEGLIGIBLE_CPUS = 0.005


def background_cpus(others_share: float | None, ncpus: int) -> float:
    """The other tenants' mean busy CPUs over a window: their share of the node's capacity
    (host_run.others_share) times its CPUs; 0 where it was not measured."""
    if others_share is None or not math.isfinite(others_share) or others_share <= 0:
        return 0.0
    return others_share * ncpus


def mean_background(values: Iterable[float | None]) -> float:
    """The mean background over repetitions (the measured ones; 0 if none was)."""
    got = [v for v in values if v is not None and math.isfinite(v)]
    return sum(got) / len(got) if got else 0.0


def background_threads(cpus: float) -> int:
    """floor(b) + 1: the fewest threads that each run less than a whole period."""
    return math.floor(cpus) + 1


def background_period_ns(cpus: float, burst_s: float | None, window_ns: int | None = None) -> int | None:
    """The duty threads' period for `cpus` of background whose bursts were `burst_s` (the
    CPU-weighted mean; None: not measured, the default period): each thread runs one burst a
    period; at most MAX_PERIOD_NS and a tenth of the measured `window_ns`, so that any window
    averages ten periods or more (a hog's burst is the whole run)."""
    if burst_s is None or not (math.isfinite(burst_s) and burst_s > 0) or not cpus > 0:
        return None
    n = background_threads(cpus)
    longest = MAX_PERIOD_NS if window_ns is None else min(MAX_PERIOD_NS, max(MIN_PERIOD_NS, window_ns // 10))
    return round(min(longest, max(MIN_PERIOD_NS, burst_s * 1e9 * n / cpus)))


def with_background(scenario: Scenario, cpus: float, burst_s: float | None = None) -> Scenario:
    """The scenario with the other tenants' `cpus` running beside it, in bursts of `burst_s`
    where that was measured (see the module's docstring); unchanged when they are
    negligible. Capped at the node's CPUs."""
    if not cpus > NEGLIGIBLE_CPUS:
        return scenario
    cores = min(float(cpus), float(scenario.node.ncpus))
    n = background_threads(cores)
    period = background_period_ns(cores, burst_s, scenario.scenario.duration - scenario.scenario.warmup)
    out = scenario.model_copy(deep=True)
    stem = BACKGROUND
    while any(f"{stem}{i}" in out.workloads for i in range(n)):
        stem = f"_{stem}"
    for i in range(n):
        name = f"{stem}{i}"
        out.workloads[name] = Duty.model_validate(
            {
                "kind": "duty",
                "cgroup": ROOT_CGROUP,
                "session": name,
                "max_threads": 1,
                "cores": cores / n,
                "period": BACKGROUND_PERIOD if period is None else f"{period}ns",
            }
        )
    return out


def background_of(scenario: Scenario) -> float:
    """The background CPUs a prediction's scenario carries (0: none)."""
    return sum(
        w.cores
        for name, w in scenario.workloads.items()
        if isinstance(w, Duty) and w.cgroup == ROOT_CGROUP and w.session == name and name.lstrip("_").startswith(BACKGROUND)
    )
