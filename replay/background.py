"""The host's other tenants, measured during every host run and run in its prediction.

On a shared node (CI beside `stress --cpu 1`, other jobs compiling) our run competes with work
that is not ours. Replay measures it over every run's measured window (host_run.others_share):
the node's busy CPU time from /proc/stat (user + nice + system + irq + softirq + steal; idle,
iowait and guest excluded, guest being counted in user already) less what the run folder's
top-level cgroups used (their cpuacct.usage, which holds their children's). That is a
measured input of the environment, like the node's CPU count: the mean number of CPUs the
other tenants kept busy, b.

The prediction runs it as a `duty` workload in a root-level sibling cgroup at cpu.shares 1024
(the weight of the cgroups and autogroups the other tenants' jobs run in by default):
ceil(b) threads, each running b / ceil(b) of every BACKGROUND_PERIOD and sleeping the rest, so
that alone on the node it uses b CPUs on average. Why a duty cycle rather than ceil(b) hogs
capped by cpu.cfs_quota_us at b CPUs: a quota is the online cgroup's own mechanism in the
suite's `quota` case and would be scored as one, and throttling runs the whole budget at the
start of each period and then nothing, which no compiler does; the other tenants' jobs are
CPU-bound processes that come and go (a compile unit runs for a while, waits for IO or exits),
which a thread that runs and sleeps in every period stands for. A period of 100 ms: longer than
a scheduling slice (3 ms base slice, so the background's runs compete as a CPU-bound task's
do, not as a sleeper's wakeups), short enough that a 10 s window averages 100 of them.

What the background got on the host is what it got beside our run, not what it asked for: the
prediction gives the duty threads that demand and lets the model share the node, so a case
where our run takes more CPU from the other tenants than alone is not fully represented.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from sim.scenario import Scenario
from sim.scenario.cgroups import Cgroup
from sim.scenario.workloads import Duty

BACKGROUND = "background"  # the cgroup and workload's name (made unique if the scenario has one)
BACKGROUND_PERIOD = "100ms"
BACKGROUND_SHARES = 1024
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


def _free_name(scenario: Scenario) -> str:
    name = BACKGROUND
    while name in scenario.cgroups or name in scenario.workloads:
        name = f"_{name}"
    return name


def with_background(scenario: Scenario, cpus: float) -> Scenario:
    """The scenario with the other tenants' `cpus` running beside it (see the module's
    docstring); unchanged when they are negligible. Capped at the node's CPUs."""
    if not cpus > NEGLIGIBLE_CPUS:
        return scenario
    ncpus = scenario.node.ncpus
    cores = min(float(cpus), float(ncpus))
    out = scenario.model_copy(deep=True)
    name = _free_name(out)
    out.cgroups[name] = Cgroup.model_validate({"cpu.shares": BACKGROUND_SHARES})
    out.workloads[name] = Duty.model_validate(
        {"kind": "duty", "cgroup": name, "max_threads": math.ceil(cores), "cores": cores, "period": BACKGROUND_PERIOD}
    )
    return out


def background_of(scenario: Scenario) -> float:
    """The background CPUs a prediction's scenario carries (0: none)."""
    return sum(w.cores for w in scenario.workloads.values() if isinstance(w, Duty) and w.cgroup.lstrip("_") == BACKGROUND)
