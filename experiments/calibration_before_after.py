"""Issue 17's before/after: the old service calibration and the new one on the *same* host runs.

    python experiments/calibration_before_after.py SCENARIO.toml [--set K=V ...] OUT_DIR...

Each OUT_DIR is a `colosim replay SCENARIO --compare --out OUT_DIR` of the current code: its
comparison.json holds the measured metrics and the new calibration's prediction. The old
calibration (before issue 17: the service's mean scaled until the simulated alone P50 matched
the host's, a lognormal's sigma fitted to P90/P50, capped at 3; no load generator, no gaps) is
redone here from the alone run's measured P50 and P90, and the variants simulated with it.
Pairing both on the same windows takes the shared host's noise out of the comparison. Prints,
per variant and metric, the median error (sim / host - 1) of each over the runs and its range.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from policies.cgroup import Knob
from replay.compare import error, load_for_host, metrics
from replay.host_run import host_equivalent
from sim.results import markdown
from sim.runner import run_variant
from sim.scenario import ClosedLoop, Constant, Exponential, Lognormal, OpenLoop, Scenario, Variant

OLD_ROUNDS = 4
METRICS = ("QPS", "P50 (s)", "P90 (s)", "P99 (s)", "batch CPU (share)")


def old_scaled(sc: Scenario, name: str, k: float, sigma: float | None) -> Scenario:
    out = sc.model_copy(deep=True)
    w = out.workloads[name]
    assert isinstance(w, ClosedLoop | OpenLoop)
    svc = w.service
    if sigma is not None and isinstance(svc, Lognormal):
        svc.sigma = sigma
    if isinstance(svc, Constant):
        svc.value = max(1, round(svc.value * k))
    elif isinstance(svc, Exponential | Lognormal):
        svc.mean = max(1, round(svc.mean * k))
    else:
        svc.edges = [max(1, round(e * k)) for e in svc.edges]
    return out


def old_predict(scenario: Scenario, measured_base: dict[str, float], seed: int, substituted: set[Knob]) -> dict[str, dict[str, float]]:
    """The pre-issue-17 calibration (replay/compare.py before it), then every variant."""
    base = next(v for v in scenario.variants() if v.baseline)
    calibrated = {v.name: host_equivalent(v.scenario, substituted) for v in scenario.variants()}
    for name, w in scenario.workloads.items():
        if w.kind not in ("closed_loop", "open_loop"):
            continue
        target, spread = measured_base["P50 (s)"], measured_base["P90 (s)"] / measured_base["P50 (s)"] - 1
        k, sigma = 1.0, getattr(w.service, "sigma", None)
        for _ in range(OLD_ROUNDS):
            sc = old_scaled(calibrated[base.name], name, k, sigma)
            got = run_variant(Variant(base.name, True, sc), seed, substitute=frozenset(substituted)).services[name]
            if not (math.isfinite(got.p50_s) and got.p50_s > 0):
                break
            k *= target / got.p50_s
            got_spread = got.p90_s / got.p50_s - 1
            if sigma is not None and got_spread > 0:
                sigma = min(3.0, max(0.01, sigma * spread / got_spread))
        calibrated = {n: old_scaled(sc, name, k, sigma) for n, sc in calibrated.items()}
    out = {}
    for v in scenario.variants():
        run = run_variant(Variant(v.name, v.baseline, calibrated[v.name]), seed, substitute=frozenset(substituted))
        out[v.name] = metrics(run, v.scenario)
    return out


def _num(v: float | None) -> float:
    """comparison.json writes NaN as null."""
    return math.nan if v is None else float(v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("outs", nargs="+", type=Path)
    args = ap.parse_args()
    scenario = load_for_host(args.scenario, args.set)
    # this host's kernel has no cpu.qos_level (openEuler only): replay substitutes cpu.idle
    substituted = set() if Path("/sys/fs/cgroup/cpu/cpu.qos_level").exists() else {Knob.CPU_QOS_LEVEL}
    base = next(v for v in scenario.variants() if v.baseline)
    errors: dict[tuple[str, str, str], list[float]] = {}
    others: list[float] = []
    for out in args.outs:
        doc = json.loads((out / "comparison.json").read_text())
        measured_base = doc["variants"][base.name]["measured"]
        others.append(_num(measured_base.get("others CPU (share)")))
        old = old_predict(scenario, measured_base, scenario.seed, substituted)
        for v, d in doc["variants"].items():
            for m in METRICS:
                if m not in d["measured"]:
                    continue
                host = _num(d["measured"][m])
                errors.setdefault((v, m, "old"), []).append(error(host, old[v].get(m, math.nan)))
                errors.setdefault((v, m, "new"), []).append(error(host, _num(d["predicted"].get(m))))
    print(f"{args.scenario.name}: {len(args.outs)} runs; others' CPU share in the alone runs: " + ", ".join(f"{o:.1%}" for o in others))
    rows = []
    for v in doc["variants"]:
        for m in METRICS:
            if (v, m, "old") not in errors:
                continue
            cells = []
            for which in ("old", "new"):
                es = [e for e in errors[(v, m, which)] if math.isfinite(e)]
                cells.append(f"{statistics.median(es) * 100:+.1f}% [{min(es) * 100:+.0f}, {max(es) * 100:+.0f}]" if es else "-")
            rows.append([v, m, *cells])
    print(markdown(["variant", "metric", "old calibration: median error [range]", "new calibration"], rows))


if __name__ == "__main__":
    main()
