"""The batch's regime (sim/regimes.py): the claim its weight makes, worked by hand from the
kernel's weights, and the classification of runs into starved and shared."""

from __future__ import annotations

import math

import pytest

from replay.fidelity import load_service
from sim.regimes import CLAIM, STARVED, WEIGHT_IDLEPRIO, Regimes, batch_claim, classify, in_regime, majority, regimes

SHORT = ["scenario.duration=2s", "scenario.warmup=0.5s"]


def _claims(overrides: list[str], ncpus: int = 2) -> dict[str, float | None]:
    svc = load_service("builtin", None, [*SHORT, *overrides])
    return {c: batch_claim(svc.variants[c].scenario, ncpus) for c in svc.cases}


def test_the_claim_of_each_standard_case_from_the_kernels_weights():
    got = _claims([])
    assert got["alone"] is None  # no batch
    assert got["stress"] == pytest.approx(1024 / (1024 + 1024))
    # cpu.idle=1: the group entity weighs WEIGHT_IDLEPRIO = 3
    assert got["idle"] == pytest.approx(WEIGHT_IDLEPRIO / (WEIGHT_IDLEPRIO + 1024))
    assert got["shares"] == pytest.approx(2 / (2 + 1024))
    # a quota of 1.5 of 2 CPUs leaves 0.25 of the node: less than the weight's half
    assert got["quota"] == pytest.approx(0.5)
    # no regime to tell where the weight claims next to nothing
    assert regimes(got["idle"], [0.0], [0.0]) is None and regimes(got["shares"], [0.0], [0.0]) is None


def test_a_quota_raises_the_claim_to_what_it_leaves_and_threads_bound_it():
    # online capped at 0.5 CPU of 2: 0.75 of the node is left, more than the weight's half
    quota = _claims(['cgroups.online."cpu.cfs_quota_us"=50000'])["quota"]
    assert quota == pytest.approx(1 - 0.5 / 2)
    # one hog thread on 4 CPUs can use a quarter of the node, whatever its weight
    assert _claims(["workloads.stress.threads=1"], ncpus=4)["stress"] == pytest.approx(1 / 4)
    # the batch in the service's own cgroup: no weight tells them apart
    assert _claims(["workloads.stress.cgroup=online"])["stress"] is None


def test_classify_at_a_quarter_of_the_claim():
    assert STARVED == 0.25 and CLAIM == 0.10
    assert classify(0.125, 0.5) == "shared"  # exactly a quarter: not below it
    assert classify(0.1249, 0.5) == "starved"
    assert classify(0.0, 0.5) == "starved"
    assert classify(math.nan, 0.5) is None


def test_majority_agreement_and_splits():
    assert majority(["starved", "shared", "starved"]) == "starved"
    assert majority(["starved", "shared"]) is None  # a tie: no majority
    assert majority([None, None]) is None
    r = Regimes(0.5, ("starved", "starved", "shared"), ("shared", "starved", "shared", "shared"))
    assert r.threshold == pytest.approx(0.125)
    assert r.starved("host") == (2, 3) and r.starved("sim") == (1, 4)
    assert r.split("host") and r.split("sim")
    assert r.agree is False
    assert Regimes(0.5, ("shared",) * 3, ("shared",) * 5).agree is True
    assert Regimes(0.5, ("shared", "starved"), ("shared",)).agree is None
    # the claim bounds: a claim under CLAIM has no regimes, one at it has
    assert regimes(CLAIM * 0.99, [0.0], [0.0]) is None
    assert regimes(CLAIM, [0.0], [0.5]) == Regimes(CLAIM, ("starved",), ("shared",))


def test_in_regime_keeps_the_runs_of_one_regime():
    assert in_regime([1.0, 2.0, 3.0], ["starved", "shared", "starved"], "starved") == [1.0, 3.0]
    assert in_regime([1.0, math.nan], ["shared", "shared"], "shared") == [1.0]
    with pytest.raises(ValueError, match="2 values against 1 runs"):
        in_regime([1.0, 2.0], ["shared"], "shared")
