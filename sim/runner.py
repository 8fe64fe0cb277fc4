"""Run every variant of a scenario on a fresh node and collect the results."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from tqdm import tqdm

from sim.environment import NS_PER_S, NodeEnvironment, warm_up
from sim.errors import ScenarioError, SpecRefused
from sim.results import ExperimentResult, RunResult
from sim.scenario import ClosedLoop, Scenario, Variant

if TYPE_CHECKING:
    from policies.cgroup import Knob

# Chunks per run: the progress bar moves this often; each is one `run(until=...)`.
CHUNKS = 100

Attach = Callable[[NodeEnvironment, Variant], None]


def run_scenario(
    scenario: Scenario,
    seed: int | None = None,
    progress: bool = True,
    attach: Attach | None = None,
) -> ExperimentResult:
    """Run each variant for the scenario's duration; every run gets the same seed, so runs
    differ only by their overrides (common random numbers).

    `attach(env, variant)` is called on each fresh environment before it runs, to add SimPy
    processes (policy agents, trace players).  The progress bar counts simulated seconds on
    stderr and appears only when the whole thing takes more than about 2 s.
    """
    seed = scenario.seed if seed is None else seed
    variants = scenario.variants()
    duration_ns = scenario.scenario.duration
    result = ExperimentResult(
        scenario=scenario.name,
        seed=seed,
        duration_s=duration_ns / NS_PER_S,
        warmup_s=scenario.scenario.warmup / NS_PER_S,
        baseline=scenario.baseline,
    )
    with tqdm(
        total=len(variants) * duration_ns,  # counted in ns, so the sum is exact
        unit_scale=1 / NS_PER_S,  # and shown in seconds
        desc=scenario.name,
        file=sys.stderr,
        delay=2,
        disable=not progress,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} sim s [{elapsed}<{remaining}]",
    ) as bar:
        for variant in variants:
            # refresh=False: a refresh would show the bar before `delay` has passed
            bar.set_description_str(progress_label(scenario.name, variant.name), refresh=False)
            result.runs[variant.name] = run_variant(variant, seed, bar.update, attach)
            if variant.grid is not None:
                result.grid[variant.name] = variant.grid
    return result


def progress_label(scenario: str, run: str) -> str:
    """What the progress bar says it runs: "scenario: run", or the scenario's name alone when
    it has no [[runs]] (its one run has its name: "x", not "x: x")."""
    return scenario if run == scenario else f"{scenario}: {run}"


def run_variant(
    variant: Variant,
    seed: int,
    on_progress: Callable[[int], object] = lambda ns: None,
    attach: Attach | None = None,
    substitute: frozenset[Knob] = frozenset(),
) -> RunResult:
    """One run: build the node, schedule the warm-up, run to the end in chunks."""
    meta = variant.scenario.scenario
    _check_series(variant)
    spec = variant.scenario.core_spec(seed)
    try:
        env = NodeEnvironment(spec)
    except SpecRefused as err:
        # The core names the bad field (or where in the spec it could not read one); say
        # which run it was.
        from sim.limits import name_core_field

        raise SpecRefused(f'run "{variant.name}": {name_core_field(_message(err), spec)}') from None
    if meta.warmup > 0:
        env.process(warm_up(env, at=meta.warmup / NS_PER_S))
    runner = None
    if variant.scenario.policy is not None:
        from policies import PolicyRunner, SimBackend
        from policies.cgroup import Substituting

        backend = SimBackend(env)
        # Replay's prediction simulates what the host got: knobs it lacks go to stand-ins.
        runner = PolicyRunner(variant.scenario.build_policy(), Substituting(backend, substitute) if substitute else backend)
        env.process(runner.process(env))
    demand = {}
    for name, w in variant.scenario.workloads.items():
        ref = getattr(w, "trace", None)
        if ref is not None and w.enabled:
            from sim.scenario import trace_series
            from traces.player import play

            t, v, key = trace_series(w, ref, f"workloads.{name}.trace")
            env.process(play(env, name, key, t, v, ref.speed, ref.scale))
            if w.kind == "duty" and variant.scenario.node.memory is not None:
                from sim.scenario import trace_memory_series

                mem = trace_memory_series(w, ref)
                if mem is not None:  # its memory follows the trace too
                    mem_t, mem_v = mem
                    env.process(play(env, name, "memory_bytes", mem_t, mem_v, ref.speed, ref.scale))
            # what the trace asks, on the simulated clock, for the report
            demand[name] = (key, w.cgroup, (t - (t[0] if len(t) else 0)) / ref.speed, v * ref.scale)
    if attach is not None:
        attach(env, variant)
    done = 0
    for i in range(1, CHUNKS + 1):
        # Chunk ends in integer ns, so the last one is the duration exactly.
        end = meta.duration * i // CHUNKS
        if end == done:
            continue
        try:
            env.run(until=end / NS_PER_S)
        except ValueError as err:
            # The core refused to go on (a run past its memory budget): say which run.
            raise ScenarioError(f'run "{variant.name}": {_message(err)}') from None
        on_progress(end - done)
        done = end
    result = RunResult.from_environment(env, variant.name)
    for name, svc in result.services.items():
        wl = variant.scenario.workloads.get(name)
        if isinstance(wl, ClosedLoop) and wl.report is not None:  # as its load generator prints them
            svc.report, svc.connections = wl.report, wl.clients
    result.trace_demand = demand
    if runner is not None:
        result.decisions = [d.to_dict() for d in runner.decisions]
    return result


def _check_series(variant: Variant) -> None:
    """Refuse a time series the core would refuse, before the run and for its whole length."""
    from sim.limits import series_error

    sc = variant.scenario
    node = sc.node
    per_cgroup = 3 + sum(x is not None for x in (node.memory, node.disk, node.network))
    services = sum(w.enabled and w.kind not in ("hog", "memory_hog", "cache_writer", "duty", "iperf") for w in sc.workloads.values())
    why = series_error(sc.scenario.duration, sc.scenario.sample_interval, len(sc.cgroups), services, per_cgroup)
    if why is not None:
        raise ScenarioError(f'run "{variant.name}": scenario.sample_interval: {why}')


def _message(err: Exception) -> str:
    # str(KeyError("x")) is "'x'"; its argument is the message.
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
