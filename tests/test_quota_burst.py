"""Seed 001, case 2 in simulation: a bursty service under a 2-CPU quota, with and without
CFS burst (experiments/quota_burst.toml), checked against the period arithmetic."""

from __future__ import annotations

import pytest

from sim import load_scenario, run_scenario

pytest.importorskip("sim._core")


@pytest.fixture(scope="module")
def result(root):
    return run_scenario(load_scenario(root / "experiments" / "quota_burst.toml"), progress=False)


def test_unlimited_spells_take_their_length(result):
    spells = result.runs["no limit"].services["spiky"]
    assert spells.completed == 4  # at 30, 60, 90 and 120 s
    assert spells.p50_s == pytest.approx(0.2, abs=1e-6)


def test_without_burst_each_spell_is_throttled_for_three_periods(result):
    run = result.runs["quota 2 CPUs, no burst"]
    # 3 threads share 200 ms per 100 ms period: 66.7 ms each, so the 200 ms of work per
    # burst thread needs three periods; the third ends with the pool empty as the spell ends
    # and the steady thread is throttled until the refill.
    assert run.cgroups["online"].nr_throttled == 4 * 3
    assert run.cgroups["online"].nr_bursts == 0
    assert 0.255 < run.services["spiky"].p50_s < 0.270
    # The throttled periods show up in the time series at the spells and nowhere else.
    ts = run.timeseries
    hot = ts.t_s[ts.nr_throttled["online"] > 0]
    assert len(hot) > 0 and all(any(0 < t - s <= 0.5 for s in (30, 60, 90, 120)) for t in hot)


def test_burst_absorbs_the_spell(result):
    run = result.runs["quota 2 CPUs, burst 200 ms"]
    online = run.cgroups["online"]
    assert online.nr_throttled == 0
    # Two periods per spell draw on the buffer: 600 ms used against 400 ms of quota, less what
    # the CPUs' silos kept from before (an idle silo keeps up to 1 ms, min_cfs_rq_runtime, and
    # the burst spends that without touching the pool).
    assert online.nr_bursts == 4 * 2
    assert 0.17 <= online.burst_s / 4 <= 0.205
    assert run.services["spiky"].p50_s == pytest.approx(0.2, abs=1e-6)


def test_table_reports_cpu_stat(result):
    text = str(result)
    assert "CFS bandwidth (cpu.stat" in text and "nr_throttled" in text
