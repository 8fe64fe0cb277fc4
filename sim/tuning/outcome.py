"""From what a trial measured (seeds × cases) to what the study is told: objective values
(mean over seeds), one constraint per SLO (its worst violation), and a summary of every
metric, mean and worst, for the tables and the report."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from sim.tuning.evaluate import Measurement
from sim.tuning.goals import Metric, Sense, Slo

# A violation that cannot be measured (a service that completed nothing) as a finite number
# the samplers can rank: far past any real one.
UNMEASURABLE = 1e9


def per_seed(metric: Metric, cases: dict[str, dict[str, float]]) -> float:
    """One seed's value over all cases: batch CPU adds up, utilization averages, a service
    metric takes its worst case."""
    values = [c[metric.text] for c in cases.values()]
    if metric.text == "batch_cpu":
        return math.fsum(values)
    if metric.text == "utilization":
        return statistics.fmean(values)
    return metric.worst(values)


@dataclass(frozen=True)
class Outcome:
    values: list[float]  # one per objective
    constraints: dict[str, float]  # SLO text -> worst violation (≤ 0: it holds)
    summary: dict[str, dict[str, float]]  # metric -> {"mean", "worst"}

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values())


def summarize(m: Measurement, solo: Measurement, objectives: list[Metric], slos: list[Slo], metrics: list[Metric]) -> Outcome:
    summary = {}
    everything = {m.text: m for m in [*metrics, *objectives, *(s.metric for s in slos)]}
    for metric in everything.values():
        seeds = [per_seed(metric, cases) for cases in m]
        finite = [v for v in seeds if not math.isnan(v)]
        summary[metric.text] = {
            "mean": statistics.fmean(seeds) if len(finite) == len(seeds) else math.nan,
            "worst": metric.worst(seeds) if metric.service else (min(seeds) if metric.sense is Sense.MAXIMIZE else max(seeds)),
        }
    constraints = {}
    for slo in slos:
        if slo.metric.service is None:
            worst = max(slo.violation(per_seed(slo.metric, cases)) for cases in m)
        else:
            worst = max(
                slo.violation(cases[case][slo.metric.text], solo[i][case][slo.metric.text]) for i, cases in enumerate(m) for case in cases
            )
        constraints[slo.text] = min(worst, UNMEASURABLE)
    values = [summary[o.text]["mean"] for o in objectives]
    return Outcome(values, constraints, summary)
