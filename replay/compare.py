"""`colosim replay`: a scenario on this host, and (with --compare) beside the simulator.

The prediction is made for *this* host: the node's topology is read from /sys, knobs the
kernel lacks are replaced by their stand-ins in both runs, and each service's model is
calibrated on the host first — the online workload runs alone, and the simulator's service
time is scaled until its alone-P50 matches the measured one (for colosim-load, which burns
the scenario's own distribution, the factor measures the host's own overhead and should be
close to 1). Then every variant runs on the host and in the simulator, same seed, same
duration, and the table sets measured beside predicted with the error of each.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies.cgroup import Knob
from replay.cgroupfs import HostError, host_cpus
from replay.host_run import HostRun, check_knobs, host_equivalent, host_topology, missing_knobs, run_on_host
from replay.session import Session
from sim.results import ExperimentResult, RunResult, _finite, _markdown, sig3
from sim.scenario import Scenario, Variant, load_scenario

CALIBRATION_ROUNDS = 4


def load_for_host(path: Path, overrides: list[str] | dict[str, Any]) -> Scenario:
    """The scenario with this host's topology (user overrides still win)."""
    from sim.overrides import combine

    topo = host_topology(host_cpus())
    return load_scenario(path, combine(topo, overrides))


def scale_service(scenario: Scenario, name: str, k: float, sigma: float | None = None) -> Scenario:
    """The scenario with workload `name`'s service times multiplied by k (and a lognormal's
    sigma set, if given)."""
    out = scenario.model_copy(deep=True)
    svc = out.workloads[name].service
    if sigma is not None and svc.dist == "lognormal":
        svc.sigma = sigma
    if svc.dist == "constant":
        svc.value = max(1, round(svc.value * k))
    elif svc.dist in ("exponential", "lognormal"):
        svc.mean = max(1, round(svc.mean * k))
    else:
        svc.edges = [max(1, round(e * k)) for e in svc.edges]
    return out


def batch_share(run: RunResult, scenario: Scenario) -> float:
    """Share of node capacity the batch (hog) workloads' cgroups got."""
    cgs = {w.cgroup for w in scenario.workloads.values() if w.kind == "hog" and w.enabled}
    return sum(run.cgroups[c].cpu_share for c in cgs if c in run.cgroups) if cgs else math.nan


def metrics(run: RunResult, scenario: Scenario) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, svc in run.services.items():
        prefix = f"{name} " if len(run.services) > 1 else ""
        out[f"{prefix}QPS"] = svc.qps
        out[f"{prefix}P50 (s)"] = svc.p50_s
        out[f"{prefix}P90 (s)"] = svc.p90_s
        out[f"{prefix}P99 (s)"] = svc.p99_s
    out["batch CPU (share)"] = batch_share(run, scenario)
    for c in dict.fromkeys(w.cgroup for w in scenario.workloads.values() if w.enabled):
        if c in run.cgroups:
            out[f"{c} CPU (share)"] = run.cgroups[c].cpu_share
    for c, cg in run.cgroups.items():
        if cg.nr_periods:
            out[f"{c} nr_throttled"] = float(cg.nr_throttled)
    return out


def error(measured: float, predicted: float) -> float:
    """predicted / measured - 1 (NaN where either is missing or measured is 0)."""
    if not (math.isfinite(measured) and math.isfinite(predicted)) or measured == 0:
        return math.nan
    return predicted / measured - 1


@dataclass
class VariantComparison:
    name: str
    measured: dict[str, float]
    predicted: dict[str, float] = field(default_factory=dict)

    def table(self) -> str:
        rows = []
        for m, value in self.measured.items():
            p = self.predicted.get(m, math.nan)
            e = error(value, p)
            rows.append([m, sig3(value), sig3(p), f"{e * 100:+.1f}%" if math.isfinite(e) else "-"])
        return f"{self.name}\n" + _markdown(["metric", "measured", "predicted", "error"], rows)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def replay(
    path: Path,
    overrides: list[str] | dict[str, Any],
    seed: int | None,
    out: Path | None,
    compare: bool,
    dry_run: bool,
    say: Callable[[str], Any] = _say,
) -> int:
    scenario = load_for_host(path, overrides)
    seed = scenario.seed if seed is None else seed
    variants = scenario.variants()
    host = ExperimentResult(scenario.name, seed, scenario.duration_s, scenario.warmup_s, scenario.baseline)
    runs: dict[str, HostRun] = {}
    precheck(variants)
    with Session(dry_run=dry_run, log=say) as session:
        substituted = check_knobs([v.scenario for v in variants], missing_knobs(session), say)
        for v in variants:
            say(f"host: {v.name} ({scenario.duration_s:g} s) ...")
            hv = Variant(v.name, v.baseline, host_equivalent(v.scenario, substituted))
            runs[v.name] = run_on_host(hv, seed, session, substituted)
            host.runs[v.name] = runs[v.name].result
    if dry_run:
        for v in variants:
            print(f"# {v.name}")
            for w in runs[v.name].writes:
                print(w)
        return 0
    print("measured on this host\n" + str(host))
    comparisons = [VariantComparison(v.name, metrics(host.runs[v.name], v.scenario)) for v in variants]
    predicted = None
    factors: dict[str, float] = {}
    if compare:
        predicted, factors = predict(scenario, host, seed, substituted)
        for c in comparisons:
            c.predicted = metrics(predicted.runs[c.name], next(v.scenario for v in variants if v.name == c.name))
        print()
        for name, k in factors.items():
            if name.endswith(" sigma"):
                print(f"service model of {name[:-6]}: lognormal sigma fitted to the alone run's P90/P50: {k:.3f}")
            else:
                print(f"service model of {name}: calibrated on the host's alone run, service time x {k:.3f}")
        print()
        print("\n\n".join(c.table() for c in comparisons))
    if out is not None:
        write_outputs(out, scenario, host, predicted, comparisons, runs, factors)
        print(f"\nwrote {out / 'comparison.json'} and {out / 'report.html'}")
    return 0


def precheck(variants: list[Variant]) -> None:
    """Every program every run needs is on this host, before anything is created."""
    from replay.workloads import HostWorkload

    memory_knobs = ("memory_limit", "memory_high", "memory_low", "memory_min", "memory_oom_group")
    for v in variants:
        for path, cg in v.scenario.cgroups.items():
            for attr in memory_knobs:
                if getattr(cg, attr) != type(cg).model_fields[attr].default:
                    alias = type(cg).model_fields[attr].alias
                    raise HostError(f'cgroups."{path}"."{alias}": memory knobs do not replay on the host yet (the simulator models them)')
        for name, w in v.scenario.workloads.items():
            if w.enabled:
                HostWorkload(name, w, {}, f"workloads.{name}").check()


def predict(scenario: Scenario, host: ExperimentResult, seed: int, substituted: set[Knob]) -> tuple[ExperimentResult, dict[str, float]]:
    """Calibrate each service on the measured baseline, then simulate every variant."""
    from sim.runner import run_variant

    base = next(v for v in scenario.variants() if v.baseline)
    measured_base = host.runs[base.name]
    factors: dict[str, float] = {}
    calibrated = {v.name: host_equivalent(v.scenario, substituted) for v in scenario.variants()}
    for name, w in scenario.workloads.items():
        if w.kind not in ("closed_loop", "open_loop") or name not in measured_base.services:
            continue
        # Fit the median by the mean, and (lognormal) the spread P90/P50 by sigma: a fixed
        # point, a few simulated alone-runs.
        alone = measured_base.services[name]
        target, spread = alone.p50_s, alone.p90_s / alone.p50_s - 1
        k, sigma = 1.0, getattr(w.service, "sigma", None)
        for _ in range(CALIBRATION_ROUNDS):
            sc = scale_service(calibrated[base.name], name, k, sigma)
            got = run_variant(Variant(base.name, True, sc), seed, substitute=frozenset(substituted)).services[name]
            if not (math.isfinite(got.p50_s) and got.p50_s > 0 and math.isfinite(target)):
                break
            k *= target / got.p50_s
            got_spread = got.p90_s / got.p50_s - 1
            if sigma is not None and got_spread > 0 and math.isfinite(spread):
                sigma = min(3.0, max(0.01, sigma * spread / got_spread))
        factors[name] = k
        if sigma is not None:
            factors[f"{name} sigma"] = sigma
        calibrated = {n: scale_service(sc, name, k, sigma) for n, sc in calibrated.items()}
    result = ExperimentResult(scenario.name, seed, scenario.duration_s, scenario.warmup_s, scenario.baseline)
    for v in scenario.variants():
        result.runs[v.name] = run_variant(Variant(v.name, v.baseline, calibrated[v.name]), seed, substitute=frozenset(substituted))
    return result, factors


def write_outputs(out, scenario, host, predicted, comparisons, runs, factors) -> None:
    from sim.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "scenario": scenario.name,
        "calibration": factors,
        "variants": {
            c.name: {
                "measured": c.measured,
                "predicted": c.predicted,
                "error": {m: error(c.measured[m], c.predicted.get(m, math.nan)) for m in c.measured} if predicted else {},
                "knob_writes": [{"t_s": w.t, "file": w.path, "value": w.value, "was": w.old.strip()} for w in runs[c.name].writes],
                "decisions": host.runs[c.name].decisions,
            }
            for c in comparisons
        },
    }
    (out / "comparison.json").write_text(json.dumps(_finite(doc), indent=2) + "\n")
    both = ExperimentResult(scenario.name, host.seed, host.duration_s, host.warmup_s, f"{scenario.baseline} · host")
    for name, run in host.runs.items():
        both.runs[f"{name} · host"] = run
        if predicted is not None:
            both.runs[f"{name} · sim"] = predicted.runs[name]
    write_report(both, out / "report.html")


def cleanup(say: Callable[[str], Any] = _say) -> int:
    """`colosim replay --cleanup`: remove the run folders a crashed replay left."""
    import os
    import signal

    from replay.cgroupfs import detect_layout, leftover_folders, remove_tree

    if os.geteuid() != 0:
        raise HostError("replay --cleanup needs root")

    def kill(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    folders = leftover_folders(detect_layout())
    for f in folders:
        n = remove_tree(f, kill=kill)
        say(f"removed {f} ({n} cgroup{'s' if n != 1 else ''})")
    if not folders:
        say("nothing to clean up")
    return 0
