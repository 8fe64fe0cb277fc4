"""A trace set's trial, machine by machine: each trace (a machine of the fleet, named by its
file) summarized on its own cases — the objective, each SLO's metric (worst over seeds and
runs) and violation — so the report shows which machine holds the SLO back. The study's
verdict stays the one over all cases (the worst machine)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.tuning.evaluate import Measurement, case_name
from sim.tuning.outcome import summarize
from traces.fleet import machine_name

if TYPE_CHECKING:
    from sim.tuning.spec import TuneSpec


def only(m: Measurement, cases: set[str]) -> Measurement:
    return [{c: v for c, v in per_case.items() if c in cases} for per_case in m]


def per_machine(spec: TuneSpec, measured: Measurement, solo: Measurement) -> dict[str, dict[str, Any]]:
    """machine -> {"objective": {text: mean}, "metrics": {slo metric: worst}, "slo": {text:
    violation}, "feasible": bool}, in the trace set's order."""
    out: dict[str, dict[str, Any]] = {}
    for trace in spec.traces:
        cases = {case_name(run, trace) for run in spec.cases}
        o = summarize(only(measured, cases), only(solo, cases), spec.objectives, spec.slos, spec.metrics)
        out[machine_name(trace)] = {
            "objective": {obj.text: v for obj, v in zip(spec.objectives, o.values, strict=True)},
            "metrics": {s.metric.text: o.summary[s.metric.text]["worst"] for s in spec.slos},
            "slo": o.constraints,
            "feasible": o.feasible,
        }
    return out
