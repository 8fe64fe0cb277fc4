"""The objective as a pure function, knowing nothing of Optuna: (scenario document,
overrides, seeds, cases) → what each case measured with each seed.

Every value is over the measured window (after the warm-up).  `batch_cpu` is the CPU-seconds
the batch workloads' cgroups got (cpuacct.usage over the window); `utilization` the share of
node capacity that ran any task; for each request-serving workload its latency percentiles
(nearest rank), mean and completed requests per second.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.results import RunResult
from sim.scenario import Scenario

# seed index -> case name -> metric text -> value
Measurement = list[dict[str, dict[str, float]]]


def services_of(scenario: Scenario) -> list[str]:
    """The online services (their kind's role): what SLOs and latency objectives name."""
    return [n for n, w in scenario.workloads.items() if w.role == "service"]


def default_batch(scenario: Scenario) -> list[str]:
    """The batch workloads (their kind's role), whose cgroups' CPU is `batch_cpu`."""
    return [n for n, w in scenario.workloads.items() if w.role == "batch"]


def run_metrics(run: RunResult, scenario: Scenario, batch: list[str]) -> dict[str, float]:
    """One run's metrics, by the names SLOs and objectives use."""
    cgroups = {scenario.workloads[b].cgroup for b in batch if scenario.workloads[b].enabled}
    out = {
        "batch_cpu": sum(run.cgroups[c].cpu_s for c in cgroups if c in run.cgroups),
        "utilization": run.busy_share,
    }
    for name, svc in run.services.items():
        out[f"{name}.p50"] = svc.p50_s
        out[f"{name}.p90"] = svc.p90_s
        out[f"{name}.p99"] = svc.p99_s
        out[f"{name}.p999"] = svc.p999_s
        out[f"{name}.mean"] = svc.mean_s
        out[f"{name}.qps"] = svc.qps
    return out


def case_name(run: str, trace: str | None) -> str:
    """A case: a run of the scenario, with one trace of the set when there is one."""
    return run if trace is None else f"{run} @ {trace}"


def measure(
    document: Mapping[str, Any],
    overrides: Mapping[str, Any],
    seeds: list[int],
    runs: list[str],
    batch: list[str],
    traces: list[str] | None = None,
) -> Measurement:
    """Run every run (× every trace of the set) with every seed; a bad configuration raises
    ScenarioError (or the core's ValueError) naming it."""
    from sim.runner import run_variant
    from sim.scenario import trace_overrides

    # no trace set: each run once, with the scenario's own workloads
    cases: list[str | None] = list(traces) if traces else [None]
    variants = {}
    for trace in cases:
        more = trace_overrides(document, trace) if trace else {}
        scenario = Scenario.from_document(document, {**overrides, **more})
        for v in scenario.variants():
            variants[case_name(v.name, trace)] = v
    out: Measurement = []
    for seed in seeds:
        per_case = {}
        for trace in cases:
            for run in runs:
                case = case_name(run, trace)
                v = variants[case]
                per_case[case] = run_metrics(run_variant(v, seed), v.scenario, batch)
        out.append(per_case)
    return out
