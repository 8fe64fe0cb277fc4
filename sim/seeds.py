"""Several seeds of one scenario (`colosim run --seeds N`): each run's figures as the median and
range over the seeds, and whether the batch's regime depends on the seed.

One seed gives one answer. Beside a chatty service, an unisolated batch either gets about
what its weight claims or next to nothing, and which one a run settles in can turn on its
seed (sim/regimes.py; nginx beside `stress --cpu 4`: 2 of 10 seeds starve the batch, and
those report the service's alone QPS). A user who asks "what will colocation cost" from one
seed gets one of the two answers without knowing there is another; with `--seeds` the table
gives both sides' spread, and a run whose seeds split between the regimes is said so, with
its figures in each.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim.regimes import STARVED_NAME, Claim, Regimes, batch_claim, batch_share, in_regime, regimes
from sim.results import ExperimentResult, markdown, sig3
from sim.scenario import Scenario

BATCH = "batch CPU (share)"


def run_figures(result: ExperimentResult, scenario: Scenario) -> dict[str, dict[str, float]]:
    """Per run: each service's QPS, P50 and P99, and the batch's share of the node."""
    variants = {v.name: v.scenario for v in scenario.variants()}
    out: dict[str, dict[str, float]] = {}
    for name, run in result.runs.items():
        figures: dict[str, float] = {}
        for svc_name, svc in run.services.items():
            figures[f"{svc_name} QPS"] = svc.qps
            figures[f"{svc_name} P50 (s)"] = svc.p50_s
            figures[f"{svc_name} P99 (s)"] = svc.p99_s
        figures[BATCH] = batch_share(run, variants[name])
        out[name] = figures
    return out


def claims(result: ExperimentResult, scenario: Scenario) -> dict[str, Claim | None]:
    """Per run: what its batch can get (sim/regimes.py; None: no batch or no service)."""
    return {v.name: batch_claim(v.scenario, result.runs[v.name].ncpus) for v in scenario.variants() if v.name in result.runs}


@dataclass(frozen=True)
class Spread:
    """One figure over the seeds (the finite values only)."""

    values: tuple[float, ...]

    @property
    def finite(self) -> list[float]:
        return [v for v in self.values if math.isfinite(v)]

    @property
    def median(self) -> float:
        return statistics.median(self.finite) if self.finite else math.nan

    @property
    def lo(self) -> float:
        return min(self.finite) if self.finite else math.nan

    @property
    def hi(self) -> float:
        return max(self.finite) if self.finite else math.nan

    def text(self) -> str:
        if not self.finite:
            return "-"
        if self.lo == self.hi:
            return sig3(self.median)
        return f"{sig3(self.median)} [{sig3(self.lo)}-{sig3(self.hi)}]"


@dataclass(frozen=True)
class SeedRuns:
    """Every run of a scenario over several seeds."""

    seeds: tuple[int, ...]
    figures: dict[str, dict[str, Spread]]  # run -> figure -> over the seeds
    regimes: dict[str, Regimes]  # run -> the batch's regime per seed, where it has one to tell

    def split(self) -> list[str]:
        """The runs whose seeds settled in both regimes."""
        return [name for name, r in self.regimes.items() if r.split("sim")]

    def table(self) -> str:
        names = list(dict.fromkeys(f for figs in self.figures.values() for f in figs))
        rows = [[run, *(figs[f].text() if f in figs else "-" for f in names)] for run, figs in self.figures.items()]
        return markdown(["run", *names], rows)

    def regime_lines(self) -> list[str]:
        """A line per run whose batch has a regime to tell; for a split one, its figures in
        each regime."""
        out = []
        for name, r in self.regimes.items():
            starved, told = r.starved("sim")
            line = f"{name}: the batch starved ({r.claim.text()}) in {starved} of {told} seeds"
            if r.split("sim"):
                which = [s for s, g in zip(self.seeds, r.sim, strict=True) if g == STARVED_NAME]
                line += f" ({', '.join(map(str, which))}) — SPLIT: one seed's answer is one of two; the figures in each:"
                for f, spread in self.figures[name].items():
                    if f == BATCH:
                        continue
                    a = in_regime(spread.values, r.sim, STARVED_NAME)
                    b = in_regime(spread.values, r.sim, "shared")
                    line += f" {f} {_median(a)} starved / {_median(b)} shared;"
                line = line.rstrip(";")
            out.append(line)
        return out

    def __str__(self) -> str:
        parts = [f"over seeds {', '.join(map(str, self.seeds))}: median [min-max]", self.table()]
        lines = self.regime_lines()
        if lines:
            parts.append("\n".join(lines))
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "runs": {
                run: {f: {"median": s.median, "min": s.lo, "max": s.hi, "values": list(s.values)} for f, s in figs.items()}
                for run, figs in self.figures.items()
            },
            "regimes": {
                run: {
                    "claim": r.claim.share,
                    "floor": r.claim.floor,
                    "threshold": r.threshold,
                    "seeds": list(r.sim),
                    "split": r.split("sim"),
                }
                for run, r in self.regimes.items()
            },
        }


def _median(values: Sequence[float]) -> str:
    return sig3(statistics.median(values)) if values else "-"


def summarize(seeds: Sequence[int], per_seed: Sequence[dict[str, dict[str, float]]], claim: dict[str, Claim | None]) -> SeedRuns:
    """The runs' figures over the seeds (`per_seed[i]`: run -> figure -> value of seeds[i]),
    and each run's regimes from its batch share and `claim`."""
    if len(seeds) != len(per_seed):
        raise ValueError(f"summarize: {len(seeds)} seeds against {len(per_seed)} results")
    runs = list(dict.fromkeys(r for figs in per_seed for r in figs))
    figures: dict[str, dict[str, Spread]] = {}
    for run in runs:
        names = list(dict.fromkeys(f for figs in per_seed for f in figs.get(run, {})))
        figures[run] = {f: Spread(tuple(figs.get(run, {}).get(f, math.nan) for figs in per_seed)) for f in names}
    told: dict[str, Regimes] = {}
    for run in runs:
        shares = figures[run].get(BATCH)
        r = regimes(claim.get(run), [], shares.values) if shares is not None else None
        if r is not None:
            told[run] = r
    return SeedRuns(tuple(seeds), figures, told)
