"""The batch's regime (sim/regimes.py): the claim its weight makes, worked by hand from the
kernel's weights, and the classification of runs into starved and shared."""

from __future__ import annotations

import math

import pytest

from replay.fidelity import load_service
from sim.regimes import CLAIM, STARVED, WEIGHT_IDLEPRIO, Claim, Regimes, batch_claim, classify, in_regime, majority, regimes

SHORT = ["scenario.duration=2s", "scenario.warmup=0.5s"]


def _claims(overrides: list[str], ncpus: int = 2) -> dict[str, Claim | None]:
    svc = load_service("builtin", None, [*SHORT, *overrides])
    return {c: batch_claim(svc.variants[c].scenario, ncpus) for c in svc.cases}


def test_the_claim_of_each_standard_case_from_the_kernels_weights():
    got = _claims([])
    assert got["alone"] is None  # no batch
    assert got["stress"] == Claim(pytest.approx(1024 / (1024 + 1024)), 0.0)
    # cpu.idle=1: the group entity weighs WEIGHT_IDLEPRIO = 3
    assert got["idle"] == Claim(pytest.approx(WEIGHT_IDLEPRIO / (WEIGHT_IDLEPRIO + 1024)), 0.0)
    assert got["shares"] == Claim(pytest.approx(2 / (2 + 1024)), 0.0)
    # a quota of 1.5 of 2 CPUs leaves the batch a quarter of the node whatever the weights:
    # starved is below a quarter of the way from there to the weight's half
    assert got["quota"] == Claim(pytest.approx(0.5), pytest.approx(0.25))
    assert got["quota"].threshold == pytest.approx(0.25 + 0.25 * (0.5 - 0.25))
    # no regime to tell where the weight claims next to nothing
    assert regimes(got["idle"], [0.0], [0.0]) is None and regimes(got["shares"], [0.0], [0.0]) is None


def test_a_quota_that_leaves_more_than_the_weights_and_threads_that_bound_the_claim():
    # online capped at 0.5 CPU of 2: 0.75 of the node is left, more than the weight's half —
    # the quota, not a regime, decides
    quota = _claims(['cgroups.online."cpu.cfs_quota_us"=50000'])["quota"]
    assert quota == Claim(pytest.approx(0.5), pytest.approx(1 - 0.5 / 2))
    assert regimes(quota, [0.75], [0.75]) is None
    # one hog thread on 4 CPUs can use a quarter of the node, whatever its weight
    assert _claims(["workloads.stress.threads=1"], ncpus=4)["stress"] == Claim(pytest.approx(1 / 4), 0.0)
    # the batch in the service's own cgroup: no weight tells them apart
    assert _claims(["workloads.stress.cgroup=online"])["stress"] is None


def test_classify_at_a_quarter_of_the_way_from_floor_to_claim():
    assert STARVED == 0.25 and CLAIM == 0.10
    half = Claim(0.5)
    assert classify(0.125, half) == "shared"  # exactly a quarter: not below it
    assert classify(0.1249, half) == "starved"
    assert classify(0.0, half) == "starved"
    assert classify(math.nan, half) is None
    # under a quota leaving 0.25: the tipped service holds all its quota (0.25 left), the
    # untipped one its weight's half
    quota = Claim(0.5, 0.25)
    assert classify(0.26, quota) == "starved" and classify(0.32, quota) == "shared"


def test_majority_agreement_and_splits():
    assert majority(["starved", "shared", "starved"]) == "starved"
    assert majority(["starved", "shared"]) is None  # a tie: no majority
    assert majority([None, None]) is None
    r = Regimes(Claim(0.5), ("starved", "starved", "shared"), ("shared", "starved", "shared", "shared"))
    assert r.threshold == pytest.approx(0.125)
    assert r.starved("host") == (2, 3) and r.starved("sim") == (1, 4)
    assert r.split("host") and r.split("sim")
    assert r.agree is False
    assert Regimes(Claim(0.5), ("shared",) * 3, ("shared",) * 5).agree is True
    assert Regimes(Claim(0.5), ("shared", "starved"), ("shared",)).agree is None
    # the span bounds: under CLAIM between floor and claim no regimes, at it some
    assert regimes(Claim(CLAIM * 0.99), [0.0], [0.0]) is None
    assert regimes(Claim(0.3, 0.3 - CLAIM * 0.99), [0.0], [0.0]) is None
    assert regimes(Claim(CLAIM), [0.0], [0.5]) == Regimes(Claim(CLAIM), ("starved",), ("shared",))


def test_in_regime_keeps_the_runs_of_one_regime():
    assert in_regime([1.0, 2.0, 3.0], ["starved", "shared", "starved"], "starved") == [1.0, 3.0]
    assert in_regime([1.0, math.nan], ["shared", "shared"], "shared") == [1.0]
    with pytest.raises(ValueError, match="2 values against 1 runs"):
        in_regime([1.0, 2.0], ["shared"], "shared")
