"""How close a prediction is to the host: the statistics of `colosim fidelity`.

Each (service, case, metric) has a few host repetitions and a few simulator seeds. Both sides
are summarised the same way — the mean and a percentile-bootstrap confidence interval of the
mean, resampled with a fixed seed so that the same numbers always give the same interval —
and the prediction is scored by its error (predicted mean / host mean - 1, as
replay.compare.error), whether it lies inside the host's interval, and whether it is within
10% of the host. Over a service's cases, the simulator should order the isolation setups as
the host does: Kendall's tau-b between the two sides' means (equal to 3 significant digits:
a tie), and whether the order is exactly the same (tau-b = 1). Three repetitions rarely tell
every pair of setups apart, and an exact order then asks the model to reproduce the host's
noise; so each ranking also counts the pairs the host does tell apart (their bootstrap
intervals do not overlap) and how many of those the simulator orders the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replay.compare import error

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
BOOTSTRAP_SEED = 20_240_917
WITHIN = 0.10  # "within 10%" of the host
# The fidelity issue's goal for a colocated case: QPS and P50 within 10% of the host (or inside
# its interval: its run-to-run spread) and P99 within 15%.
GOAL = {"QPS": (WITHIN, True), "P50 (s)": (WITHIN, True), "P99 (s)": (0.15, False)}  # metric -> (bound, or inside)
# larger is better for these metrics (the rest: smaller is better), for the ranking
HIGHER_IS_BETTER = ("QPS",)


@dataclass(frozen=True)
class Interval:
    """A sample's mean and its bootstrap confidence interval [lo, hi]; n values."""

    mean: float
    lo: float
    hi: float
    n: int

    def contains(self, x: float) -> bool:
        return math.isfinite(x) and self.lo <= x <= self.hi


def bootstrap_ci(
    values: Sequence[float], confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Interval:
    """The mean of the finite `values` and the percentile-bootstrap interval of the mean:
    `resamples` samples of the same size drawn with replacement (a seeded generator: the same
    values give the same interval), their means' (1-c)/2 and (1+c)/2 quantiles. One value: a
    zero-width interval at it; none: NaN."""
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    if len(x) == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if len(x) == 1:
        return Interval(mean, mean, mean, 1)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return Interval(mean, float(lo), float(hi), len(x))


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b of two paired samples: (concordant - discordant) pairs over the
    geometric mean of the pairs untied in each; ties count for neither. NaN when fewer than
    two pairs or one side is all ties."""
    n = len(a)
    if n != len(b):
        raise ValueError(f"kendall_tau: {n} values against {len(b)}")
    concordant = discordant = untied_a = untied_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
            untied_a += da != 0
            untied_b += db != 0
            concordant += da * db > 0
            discordant += da * db < 0
    if untied_a == 0 or untied_b == 0:
        return math.nan
    return float((concordant - discordant) / math.sqrt(untied_a * untied_b))


def order(names: Sequence[str], values: Sequence[float], higher_is_better: bool) -> list[str]:
    """`names` best first by their values (ties keep the given order)."""
    ranked = sorted(zip(names, values, strict=True), key=lambda nv: -nv[1] if higher_is_better else nv[1])
    return [n for n, _ in ranked]


@dataclass(frozen=True)
class Score:
    """One (service, case, metric): the host's repetitions and the simulator's seeds, each as
    an interval, and how the prediction compares."""

    host: Interval
    sim: Interval
    error: float  # sim mean / host mean - 1
    inside: bool  # the sim mean lies in the host's interval
    overlap: bool  # the two intervals overlap
    within: bool  # |error| <= WITHIN

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "host": asdict(self.host), "sim": asdict(self.sim)}


def score(host: Sequence[float], sim: Sequence[float]) -> Score:
    h, s = bootstrap_ci(host), bootstrap_ci(sim)
    e = error(h.mean, s.mean)
    overlap = h.n > 0 and s.n > 0 and s.lo <= h.hi and h.lo <= s.hi
    return Score(h, s, e, h.contains(s.mean), bool(overlap), math.isfinite(e) and abs(e) <= WITHIN)


def goal_text() -> str:
    """`GOAL` in words: "QPS and P50 within 10% or inside the host's interval, P99 within
    15%" (metrics under one rule joined, units dropped)."""
    rules: dict[tuple[float, bool], list[str]] = {}
    for m, rule in GOAL.items():
        rules.setdefault(rule, []).append(m.split(" (")[0])
    return ", ".join(
        f"{' and '.join(names)} within {bound:.0%}" + (" or inside the host's interval" if inside else "")
        for (bound, inside), names in rules.items()
    )


def meets_goal(row: dict[str, Score]) -> bool | None:
    """Whether one case's scores meet `GOAL`; None when one of its metrics was not scored
    (no host run or no prediction): such a case is counted neither way."""
    verdict = True
    for m, (bound, or_inside) in GOAL.items():
        s = row.get(m)
        if s is None or not s.host.n or not s.sim.n:
            return None
        close = math.isfinite(s.error) and abs(s.error) <= bound
        verdict = verdict and (close or (or_inside and s.inside))
    return verdict


@dataclass(frozen=True)
class Ranking:
    """A service's cases, best first by one metric, on the host and in the simulator."""

    metric: str
    host: list[str]
    sim: list[str]
    tau: float
    host_text: str = ""  # the order with its ties: "alone > idle = shares > stress"
    sim_text: str = ""
    # pairs of cases whose host intervals do not overlap, and those the simulator orders the
    # same way (a tie to 3 significant digits orders nothing); the rest: "a vs b" as the host has them
    separated: int = 0
    agreed: int = 0
    disagreed: tuple[str, ...] = ()

    @property
    def agrees_where_separated(self) -> bool | None:
        """The simulator orders every pair the host tells apart as the host does; None when
        the host tells no pair apart."""
        return None if self.separated == 0 else self.agreed == self.separated

    @property
    def same_order(self) -> bool:
        """Exactly the host's order: tau-b is 1 (no pair swapped, and the same ties on both
        sides: a prediction that cannot tell two cases apart does not order them)."""
        return math.isclose(self.tau, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "host": self.host,
            "sim": self.sim,
            "host_order": self.host_text,
            "sim_order": self.sim_text,
            "tau": self.tau,
            "same_order": self.same_order,
            "separated": self.separated,
            "agreed": self.agreed,
            "disagreed": list(self.disagreed),
            "agrees_where_separated": self.agrees_where_separated,
        }


def ranking(metric: str, scores: dict[str, Score]) -> Ranking | None:
    """How the host and the simulator rank the cases (`scores`: case -> its score of
    `metric`); None with fewer than two cases measured on both sides."""
    cases = [c for c, s in scores.items() if math.isfinite(s.host.mean) and math.isfinite(s.sim.mean)]
    if len(cases) < 2:
        return None
    # means equal to 3 significant digits (as the tables print them) are ties: a model that
    # predicts the same for two cases ranks neither above the other
    host = [_sig3(scores[c].host.mean) for c in cases]
    sim = [_sig3(scores[c].sim.mean) for c in cases]
    better = metric in HIGHER_IS_BETTER
    h, p = order(cases, host, better), order(cases, sim, better)
    tied_host, tied_sim = dict(zip(cases, host, strict=True)), dict(zip(cases, sim, strict=True))
    separated, agreed, disagreed = _separated_pairs(cases, scores, tied_sim, better)
    return Ranking(
        metric,
        h,
        p,
        kendall_tau(host, sim),
        _with_ties(h, tied_host),
        _with_ties(p, tied_sim),
        separated,
        agreed,
        tuple(disagreed),
    )


def _separated_pairs(
    cases: list[str], scores: dict[str, Score], sim: dict[str, float], higher_is_better: bool
) -> tuple[int, int, list[str]]:
    """The pairs whose host intervals are disjoint; how many the simulator's means (to 3
    significant digits) order the same way; the others, better case first as the host has it."""
    separated, agreed, disagreed = 0, 0, []
    for i, a in enumerate(cases):
        for b in cases[i + 1 :]:
            ha, hb = scores[a].host, scores[b].host
            if not (ha.hi < hb.lo or hb.hi < ha.lo):
                continue
            separated += 1
            # better first: the larger host mean when higher is better
            best, worst = (a, b) if (ha.mean > hb.mean) == higher_is_better else (b, a)
            if (sim[best] > sim[worst]) == higher_is_better and sim[best] != sim[worst]:
                agreed += 1
            else:
                disagreed.append(f"{best} vs {worst}")
    return separated, agreed, disagreed


def _with_ties(ranked: list[str], value: dict[str, float]) -> str:
    out = ranked[0]
    for a, b in zip(ranked, ranked[1:], strict=False):
        out += (" = " if value[a] == value[b] else " > ") + b
    return out


def _sig3(x: float) -> float:
    return float(f"{x:.3g}")


def median_abs_error(scores: Sequence[Score]) -> float:
    """The median |error| of the scores that have one (NaN if none)."""
    errors = [abs(s.error) for s in scores if math.isfinite(s.error)]
    return float(np.median(errors)) if errors else math.nan
