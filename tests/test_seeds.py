"""`colosim run --seeds N` (sim/seeds.py): each figure over the seeds, worked by hand; every
seed's figures those of that seed run alone; a run whose batch starves in some seeds and not
in others said so, with its figures in each regime."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sim.cli import main
from sim.regimes import Claim
from sim.seeds import BATCH, Spread, summarize

BISTABLE = Path(__file__).resolve().parents[1] / "experiments" / "bistable_nginx.toml"


def test_spread_of_the_finite_values():
    s = Spread((3.0, 1.0, math.nan, 2.0, 10.0))
    assert (s.median, s.lo, s.hi) == (2.5, 1.0, 10.0)
    assert s.text() == "2.50 [1.00-10.0]"
    assert Spread((4.0, 4.0)).text() == "4.00"
    assert Spread((math.nan,)).text() == "-" and math.isnan(Spread(()).median)


def test_summary_worked_by_hand_with_a_split_run():
    per_seed = [
        {"alone": {"web QPS": 100.0}, "stress": {"web QPS": 50.0, BATCH: 0.45}},
        {"alone": {"web QPS": 102.0}, "stress": {"web QPS": 99.0, BATCH: 0.0}},
        {"alone": {"web QPS": 98.0}, "stress": {"web QPS": 52.0, BATCH: 0.40}},
        {"alone": {"web QPS": 101.0}, "stress": {"web QPS": 97.0, BATCH: 0.01}},
    ]
    s = summarize([7, 8, 9, 10], per_seed, {"alone": None, "stress": Claim(0.5)})
    assert s.figures["alone"]["web QPS"].median == pytest.approx(100.5)
    assert s.figures["stress"]["web QPS"].values == (50.0, 99.0, 52.0, 97.0)
    assert list(s.regimes) == ["stress"] and s.split() == ["stress"]
    assert s.regimes["stress"].sim == ("shared", "starved", "shared", "starved")
    [line] = s.regime_lines()
    assert "starved (under 0.125 of the node, a quarter of the 0.500 its weight claims) in 2 of 4 seeds (8, 10) — SPLIT" in line
    # the medians within each regime: (99 + 97) / 2 starved, (50 + 52) / 2 shared
    assert "web QPS 98.0 starved / 51.0 shared" in line
    d = s.to_dict()
    assert d["seeds"] == [7, 8, 9, 10] and d["regimes"]["stress"]["split"] is True
    assert d["runs"]["stress"]["web QPS"] == {"median": 74.5, "min": 50.0, "max": 99.0, "values": [50.0, 99.0, 52.0, 97.0]}
    # a batch whose weight claims next to nothing (cpu.idle) has no regime line
    assert not summarize([1], [{"idle": {BATCH: 0.0}}], {"idle": Claim(3 / 1027)}).regimes
    with pytest.raises(ValueError, match="2 seeds against 1 results"):
        summarize([1, 2], per_seed[:1], {})


def test_every_seeds_figures_are_that_seed_run_alone(tmp_path, capsys):
    short = ["--set", "scenario.duration=1.5s", "--set", "scenario.warmup=0.5s", "--no-progress"]
    assert main(["run", str(BISTABLE), "--seeds", "3", "--seed", "4", "--out", str(tmp_path / "many"), *short]) == 0
    summary = json.loads((tmp_path / "many/seeds.json").read_text())
    assert summary["seeds"] == [4, 5, 6]
    for k, seed in enumerate(summary["seeds"]):
        assert main(["run", str(BISTABLE), "--seed", str(seed), "--out", str(tmp_path / f"one{seed}"), *short]) == 0
        one = json.loads((tmp_path / f"one{seed}/results.json").read_text())
        kept = tmp_path / "many" / ("results.json" if k == 0 else f"seed-{seed}/results.json")
        assert json.loads(kept.read_text()) == one
        for run, figs in summary["runs"].items():
            assert figs["nginx QPS"]["values"][k] == pytest.approx(one["runs"][run]["services"]["nginx"]["qps"])
    out = capsys.readouterr().out
    assert "over seeds 4, 5, 6: median [min-max]" in out and "seeds.json" in out


def test_bad_seeds_is_one_clear_message(capsys):
    assert main(["run", str(BISTABLE), "--seeds", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--seeds: must be at least 1 (got 0)" in err and "Traceback" not in err


def test_the_bistable_example_splits_and_its_starved_seeds_run_as_alone():
    # 6.18.44's re-placing reweight: in some seeds the hogs' group never becomes eligible.
    # Where the batch got nothing, nginx had the node to itself: its QPS is its alone QPS.
    from sim.runner import run_scenario
    from sim.scenario import load_scenario
    from sim.seeds import claims, run_figures

    scenario = load_scenario(BISTABLE, [])
    seeds = list(range(1, 11))
    results = [run_scenario(scenario, seed=s, progress=False) for s in seeds]
    s = summarize(seeds, [run_figures(r, scenario) for r in results], claims(results[0], scenario))
    r = s.regimes["stress"]
    starved, told = r.starved("sim")
    assert told == 10 and 0 < starved < 10, r.sim
    alone = s.figures["alone"]["nginx QPS"].median
    for qps, regime, share in zip(s.figures["stress"]["nginx QPS"].values, r.sim, s.figures["stress"][BATCH].values, strict=True):
        if regime == "starved":
            assert share < 0.01 and qps == pytest.approx(alone, rel=0.05)
        else:  # the hogs' share costs nginx a third or more
            assert share > 0.3 and qps < 0.75 * alone
