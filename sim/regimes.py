"""Whether the batch starved or shared: the regime a colocated run settled in.

Beside a chatty service, hogs in a sibling cgroup of equal weight do not get a share that
varies smoothly: on Linux 6.18.44 they either get about what their weight claims, or next to
nothing — the re-placing `reweight_entity` (6d71a9c61604, reverted in 6.18.45) multiplies the
running group entity's lag at every reweight, and once the chatty group's handoffs come often
enough its entity is never charged for its running again (docs/model.md, "Which reweight
6.18.44 has", "The reweight fixed point"). Which side a run lands on is a tipping point: the
model's seeds land on either side (nginx + stress, 2026-12-07: 0.0% in one seed of five, 39–44%
in the others), and so do the host's runs, drifting by the hour (ClickHouse + stress on one
day: 1–2.5% in three runs, 5–33% in three others, 37–47% a week before).

A mean over runs that settled in different regimes describes none of them, so the fidelity
suite classifies every host repetition and every simulator seed, and reports the regimes
beside the means: a model that lands in the host's regime but in a different proportion of
its seeds is wrong in a different way from one whose numbers are off within the regime.

A run is **starved** when the batch got less than `STARVED` (a quarter) of what its weight
claims, **shared** otherwise. The claim is the batch cgroups' share of the top-level weight
among the cgroups that hold the case's workloads (`cpu.shares`; `cpu.idle=1` and openEuler's
`cpu.qos_level=-1` weigh as WEIGHT_IDLEPRIO = 3, kernel/sched/sched.h), bounded by the batch's
own threads. A CFS quota on the service's side leaves the batch a floor whatever the weights
(1.5 of 2 CPUs: a quarter of the node); then starved is below a quarter of the way from the
floor to the claim — the tipped service holding all its quota allows (PostgreSQL under quota:
0.25 in every host run, 0.25 or 0.45–0.50 by seed in the model). A batch with less than
`CLAIM` of the node between floor and claim (cpu.idle, cpu.shares=2; a quota that leaves more
than the weights would) has no regime to tell: what it gets is what its weight or the quota
asks for.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim.results import RunResult
from sim.scenario import Scenario

STARVED = 0.25  # the batch below a quarter of the way from its floor to its claim: starved
CLAIM = 0.10  # less of the node than this between floor and claim: no regime to tell
WEIGHT_IDLEPRIO = 3  # kernel/sched/sched.h: an idle group's (and a SCHED_IDLE task's) weight
STARVED_NAME, SHARED_NAME = "starved", "shared"


def batch_share(run: RunResult, scenario: Scenario) -> float:
    """Share of node capacity the batch (hog) workloads' cgroups got."""
    cgs = {w.cgroup for w in scenario.workloads.values() if w.kind == "hog" and w.enabled}
    return sum(run.cgroups[c].cpu_share for c in cgs if c in run.cgroups) if cgs else math.nan


def _top(path: str) -> str:
    return path.split("/", 1)[0]


def _weight(scenario: Scenario, top: str) -> float:
    cg = scenario.cgroups.get(top)
    if cg is None:  # the root's own tasks, or a cgroup the scenario leaves at its defaults
        return 1024.0
    if cg.cpu_idle == 1 or cg.cpu_qos_level == -1:
        return float(WEIGHT_IDLEPRIO)
    return float(cg.cpu_shares)


def _quota_cpus(scenario: Scenario, top: str) -> float:
    """CPUs a top-level cgroup's CFS quota allows (inf: none)."""
    cg = scenario.cgroups.get(top)
    if cg is None or cg.cpu_cfs_quota_us < 0:
        return math.inf
    return cg.cpu_cfs_quota_us / cg.cpu_cfs_period_us


@dataclass(frozen=True)
class Claim:
    """What a case's batch can get: `share`, the node's share its weight claims against the
    service (at most its threads), and `floor`, what CFS quotas on the service's side leave
    it whatever the weights (0 without a quota). A run between the two settled somewhere
    between the service holding all it may and the weights' split."""

    share: float
    floor: float = 0.0

    @property
    def span(self) -> float:
        return self.share - self.floor

    @property
    def threshold(self) -> float:
        """Below this a run is starved: a quarter of the way from the floor to the share."""
        return self.floor + STARVED * self.span

    def text(self) -> str:
        if self.floor > 0:
            return (
                f"under {self.threshold:.3f} of the node, a quarter of the way from the {self.floor:.3f} the "
                f"service's quota leaves to the {self.share:.3f} its weight claims"
            )
        return f"under {self.threshold:.3f} of the node, a quarter of the {self.share:.3f} its weight claims"


def batch_claim(scenario: Scenario, ncpus: int) -> Claim | None:
    """The batch (hog) workloads' claim against the service workloads': their cgroups' share of
    the top-level weight (as the root's queue weighs them) and what the services' CFS quotas
    leave, each at most the batch's threads; None when the case has no batch or no service, or
    they share a top-level cgroup (no weight tells them apart)."""
    enabled = [w for w in scenario.workloads.values() if w.enabled and w.cgroup is not None]
    batch = {_top(w.cgroup) for w in enabled if w.kind == "hog"}
    service = {_top(w.cgroup) for w in enabled if w.role == "service"}
    if not batch or not service or batch & service or ncpus < 1:
        return None
    wb = sum(_weight(scenario, c) for c in batch)
    ws = sum(_weight(scenario, c) for c in service)
    share = wb / (wb + ws)
    capped = sum(_quota_cpus(scenario, c) for c in service)
    floor = 1.0 - min(capped, ncpus) / ncpus if math.isfinite(capped) else 0.0
    threads = sum(getattr(w, "threads", 0) or 0 for w in enabled if w.kind == "hog")
    if threads:
        share, floor = min(share, threads / ncpus), min(floor, threads / ncpus)
    return Claim(share, floor)


def classify(share: float, claim: Claim) -> str | None:
    """ "starved" or "shared" for one run's batch share; None when the share was not measured."""
    if not math.isfinite(share):
        return None
    return STARVED_NAME if share < claim.threshold else SHARED_NAME


def majority(regimes: Sequence[str | None]) -> str | None:
    """The regime most runs settled in; None on a tie or with none."""
    counts = Counter(r for r in regimes if r is not None).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


@dataclass(frozen=True)
class Regimes:
    """One case's batch regimes: the claim, and each host repetition's and each seed's regime."""

    claim: Claim
    host: tuple[str | None, ...]
    sim: tuple[str | None, ...]

    @property
    def threshold(self) -> float:
        return self.claim.threshold

    def starved(self, side: str) -> tuple[int, int]:
        """(starved, classified) runs of one side ("host" or "sim")."""
        runs = [r for r in getattr(self, side) if r is not None]
        return sum(r == STARVED_NAME for r in runs), len(runs)

    def split(self, side: str) -> bool:
        """Runs of this side settled in both regimes."""
        starved, n = self.starved(side)
        return 0 < starved < n

    @property
    def agree(self) -> bool | None:
        """The model's seeds mostly settle where the host's repetitions mostly did; None when
        either side has no majority."""
        h, s = majority(self.host), majority(self.sim)
        return None if h is None or s is None else h == s

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim.share,
            "floor": self.claim.floor,
            "threshold": self.threshold,
            "host": list(self.host),
            "sim": list(self.sim),
            "host_majority": majority(self.host),
            "sim_majority": majority(self.sim),
            "host_split": self.split("host"),
            "sim_split": self.split("sim"),
            "agree": self.agree,
        }


def regimes(claim: Claim | None, host_shares: Sequence[float], sim_shares: Sequence[float]) -> Regimes | None:
    """The case's regimes, or None when its batch has no regime to tell: no claim, or less
    than `CLAIM` of the node between what a quota leaves it and what its weight claims."""
    if claim is None or claim.span < CLAIM:
        return None
    return Regimes(claim, tuple(classify(x, claim) for x in host_shares), tuple(classify(x, claim) for x in sim_shares))


def in_regime(values: Sequence[float], runs: Sequence[str | None], regime: str) -> list[float]:
    """The values of the runs that settled in `regime` (values and runs paired)."""
    if len(values) != len(runs):
        raise ValueError(f"in_regime: {len(values)} values against {len(runs)} runs")
    return [v for v, r in zip(values, runs, strict=True) if r == regime and math.isfinite(v)]
