"""The percentiles a load generator prints (sim/reported.py): wrk's coordinated-omission
correction hand-worked and against a plain transcription of stats.c's loop, its rank rule,
redis-benchmark's per-batch means; a simulated service reports so when its scenario says, and
replay's prediction says so for the generators it runs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from exchange import kv
from wrk_reference import wrk_correct

from replay.host_run import host_equivalent
from replay.workloads import generator_report
from sim.reported import batch_mean_percentile, wrk_histogram, wrk_interval_us, wrk_percentile
from sim.results import ServiceResult
from sim.runner import run_variant
from sim.scenario import Variant

US = 1e-6


def as_dict(hist: np.ndarray) -> dict[int, int]:
    return {int(i): int(c) for i, c in enumerate(hist) if c}


def test_wrk_adds_a_phantom_each_expected_interval_below_a_long_latency():
    # e = 100 µs: 250 adds 150; 420 adds 320, 220, 120; 50 and 150 (< 2e) add nothing
    hist = wrk_histogram(np.array([50, 150, 250, 420]) * US, 100)
    assert as_dict(hist) == {50: 1, 120: 1, 150: 2, 220: 1, 250: 1, 320: 1, 420: 1}
    # exactly 2e: its only step lands on e, which is not above e
    assert as_dict(wrk_histogram(np.array([200]) * US, 100)) == {200: 1}
    # no correction without an interval (fewer requests than connections)
    assert as_dict(wrk_histogram(np.array([50, 5000]) * US, 0)) == {50: 1, 5000: 1}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_wrk_correction_matches_the_loop_of_stats_c(seed):
    rng = np.random.default_rng(seed)
    lat = np.concatenate([rng.integers(20, 400, 3000), rng.integers(400, 30_000, 40)])
    e = int(rng.integers(50, 300))
    hist = {int(v): int(c) for v, c in zip(*np.unique(lat, return_counts=True), strict=True)}
    # one connection over e µs a request: wrk's interval is e
    assert as_dict(wrk_histogram(lat * US, e)) == {k: c for k, c in wrk_correct(hist, e * len(lat), len(lat), 1).items() if c}


def test_wrk_rank_is_round_of_p_times_count_plus_a_half():
    hist = wrk_histogram(np.array([50, 150, 250, 420]) * US, 100)  # 8 values, sorted:
    # 50 120 150 150 220 250 320 420; rank round(p/100 * 8 + 0.5)
    assert wrk_percentile(hist, 50) == pytest.approx(220 * US)  # round(4.5) = 5th
    assert wrk_percentile(hist, 75) == pytest.approx(320 * US)  # round(6.5) = 7th
    assert wrk_percentile(hist, 99) == pytest.approx(420 * US)  # round(8.42) = 8th
    assert wrk_percentile(hist, 10) == pytest.approx(50 * US)  # round(1.3) = 1st


def test_wrk_interval_is_a_connections_mean_cycle_in_whole_microseconds():
    assert wrk_interval_us(1_000_000, 10_000, 10) == 1000
    assert wrk_interval_us(2_000_000, 30_001, 10) == 666  # 2e6 // 3000
    assert wrk_interval_us(1_000_000, 5, 10) == 0


def test_a_stall_of_many_cycles_lifts_wrks_tail_past_littles_law():
    # 10 connections, 1 s: 39,990 requests of 200 µs and 10 stalls of 20 ms: the mean is
    # 205 µs (what 10 connections at 40,000/s allow, 250 µs, bounds it), the real P99 200 µs;
    # wrk's interval is 1e6 // 4000 = 250 µs and each stall adds 78 phantoms from 19.75 ms
    # down to 500 µs: 780 in all (10 at each of 500, 750, ..., 19,750 µs); of 40,780 the P99
    # is the round(40,372.7)th, the 383rd above 200 µs: the 39th level, 10 ms
    lat = np.concatenate([np.full(39_990, 200), np.full(10, 20_000)]) * US
    svc = ServiceResult("web", lat, np.linspace(0, 1, len(lat)), len(lat), len(lat), 1.0)
    assert svc.percentile(99) == pytest.approx(200 * US)
    svc.report, svc.connections = "wrk", 10
    hist = svc.wrk_histogram
    assert int(hist.sum()) == 40_000 + 10 * 78
    assert svc.percentile(99) == pytest.approx(10e-3)
    assert svc.percentile(50) == pytest.approx(200 * US)


def test_redis_benchmark_prints_the_mean_of_each_whole_batchs_percentile():
    lat = np.array([1, 2, 3, 4, 10, 20, 30, 40, 100], dtype=float)
    assert batch_mean_percentile(lat, 50, batch=4) == pytest.approx((2 + 20) / 2)  # 100: no whole batch
    assert batch_mean_percentile(lat, 100, batch=4) == pytest.approx((4 + 40) / 2)
    assert batch_mean_percentile(lat[:3], 50, batch=4) == pytest.approx(2)  # none whole: all as one
    # one slow batch weighs its whole tail: 9 batches at 1, one at 100 → P99 mean 10.9,
    # where the P99 of all of them is 100 only from the top 1%
    many = np.concatenate([np.ones(900), np.r_[np.ones(98), 100.0, 100.0]])
    assert batch_mean_percentile(many, 99, batch=100) == pytest.approx((9 * 1 + 100) / 10)


def test_a_simulated_service_reports_as_its_scenario_says():
    pytest.importorskip("sim._core")
    sc = kv(2, clients=4, client_threads=1, report="wrk")
    run = run_variant(Variant("wrk", True, sc), 1)
    svc = run.services["kv"]
    assert (svc.report, svc.connections) == ("wrk", 4)
    e = wrk_interval_us(round(svc.measured_s * 1e6), svc.completed, 4)
    assert svc.p99_s == wrk_percentile(wrk_histogram(svc.latencies_s, e), 99)
    plain = run_variant(Variant("plain", True, kv(2, clients=4, client_threads=1)), 1).services["kv"]
    assert plain.report == "exact"


def test_replays_prediction_reports_as_the_host_generator_prints():
    assert [generator_report(p) for p in ("nginx", "command", "redis", "postgres", "clickhouse", "builtin")] == [
        "wrk",
        "wrk",
        "redis-benchmark",
        None,
        None,
        None,
    ]
    web = host_equivalent(kv(2, host="nginx"), set())
    assert web.workloads["kv"].report == "wrk"
    assert host_equivalent(kv(2, host="redis"), set()).workloads["kv"].report == "redis-benchmark"
    assert host_equivalent(kv(2, host="postgres"), set()).workloads["kv"].report is None
    # the scenario's own word stands
    assert host_equivalent(kv(2, host="nginx", report="exact"), set()).workloads["kv"].report == "exact"


def test_the_calibration_says_how_the_percentiles_were_compared():
    from replay.calibration import Fit

    fit = Fit("web", "lognormal", {"dist": "lognormal", "mean": "50us", "sigma": 0.5}, 0.0, 0.0, {}, {})
    assert "prints them" not in fit.describe()
    assert "as wrk prints them: corrected for coordinated omission" in replace(fit, report="wrk").describe()
    assert "the mean over batches of 50,000 requests" in replace(fit, report="redis-benchmark").describe()
