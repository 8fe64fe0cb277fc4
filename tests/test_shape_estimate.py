"""`colosim shape`'s estimators on hand-worked counter series, its distribution fit on quantiles
of known distributions (computed here with the standard library, not scipy), and its output as
a scenario would read it. No host needed."""

from __future__ import annotations

import math
import tomllib
from statistics import NormalDist

import numpy as np
import pytest
from pydantic import TypeAdapter
from wrk_reference import wrk_correct

from replay.probe import parse_schedstat, parse_stat, parse_switches
from replay.shape import ShapeRequest, parse_clickhouse_report, parse_pgbench_logs, parse_redis_csv, parse_wrk_script
from replay.shape_estimate import (
    FIT_TOLERANCE,
    Shape,
    ThreadCounters,
    Window,
    between_bursts,
    bursts_from_switches,
    counter_delta,
    crossing,
    estimate,
    fit_service,
    histogram_quantiles,
    mean_from_quantiles,
    parallelism,
    workload_toml,
    wrk_uncorrected,
)
from sim.duration import parse_duration
from sim.errors import ScenarioError
from sim.scenario.distributions import Distribution

PS = [float(p) for p in range(1, 100)]


# --- the kernel's files -----------------------------------------------------------------------


def test_schedstat_status_and_stat_are_read_by_their_documented_fields():
    # Documentation/scheduler/sched-stats.rst: run time, run-queue wait, timeslices
    assert parse_schedstat("123456 7890 42\n") == (123456, 7890, 42)
    status = "Name:\tx\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n"
    assert parse_switches(status) == (17, 3)
    # proc(5): field 39 is processor; the command (field 2) may hold spaces and ")"
    fields = ["S"] + [str(i) for i in range(4, 39)] + ["1"] + ["0"] * 13
    assert parse_stat("4242 (a b) c) " + " ".join(fields)).processor == 1


def test_counter_delta_counts_new_threads_from_zero():
    before = {1: ThreadCounters(10, 1, 1, 5, 0)}
    after = {1: ThreadCounters(30, 4, 3, 9, 1), 2: ThreadCounters(7, 0, 1, 2, 0)}
    assert counter_delta(before, after) == ThreadCounters(27, 3, 3, 6, 1)


# --- the estimators ---------------------------------------------------------------------------


def test_parallelism_is_the_cpu_weighted_inverse_simpson_index():
    # interval 1: one thread ran 2 ms -> 1; interval 2: two threads 1 ms each -> 2;
    # weighted by CPU (2 and 2): 1.5. An interval where nothing ran does not count.
    assert parallelism([[2, 0, 0], [1, 1], [0, 0]]) == pytest.approx(1.5)
    # three threads 3:1:0 -> 16/10
    assert parallelism([[3, 1, 0]]) == pytest.approx(1.6)
    assert math.isnan(parallelism([[0]]))


def test_mean_from_quantiles_integrates_the_quantile_function():
    # uniform on [0, 10]: Q(p) = p/10
    assert mean_from_quantiles({p: p / 10 for p in (0.0, 25.0, 50.0, 75.0, 100.0)}) == pytest.approx(5.0)
    # one quantile: held flat
    assert mean_from_quantiles({50.0: 3.0}) == pytest.approx(3.0)


def _window(**kw) -> Window:
    base = dict(seconds=10.0, threads=ThreadCounters(), cpu_ns=0, requests=100, clients=1, parallelism=1.0)
    base.update(kw)
    return Window(**base)


def test_estimate_recovers_a_hand_worked_service_with_the_idle_rate_taken_out():
    # 100 requests in 10 s of 3 bursts of 4 ms with waits of 5.5 ms, 0.5 ms run-queue wait each:
    # latency 12 + 11 + 0.5 = 23.5 ms. The idle server burns 0.1 CPU/s and blocks 10 times/s.
    idle = Window(seconds=2.0, threads=ThreadCounters(voluntary=20), cpu_ns=200_000_000)
    w = _window(
        threads=ThreadCounters(run_ns=0, wait_ns=50_000_000, voluntary=300 + 100),
        cpu_ns=1_200_000_000 + 1_000_000_000,
        latency_mean_s=0.0235,
        generator_cpu_ns=1_000_000_000,
    )
    s = estimate(w, idle)
    assert s.fanout == 1
    assert s.cpu_per_request_s == pytest.approx(0.012)
    assert s.bursts == 3 and s.switches_per_request == pytest.approx(3.0)
    assert s.runqueue_wait_s == pytest.approx(0.0005)
    assert s.wait_s == pytest.approx(0.0055)
    assert s.generator_cpu_per_request_s == pytest.approx(0.010)
    assert s.qps == pytest.approx(10.0)


def test_estimate_divides_by_the_threads_a_request_runs_on():
    # 2 threads per request (parallelism 1.9 rounds to 2): 8 ms of CPU a request is 4 ms each;
    # 2 switches a request are 1 burst per thread
    w = _window(cpu_ns=800_000_000, threads=ThreadCounters(voluntary=200), parallelism=1.9, latency_mean_s=0.004)
    s = estimate(w, None)
    assert (s.fanout, s.bursts) == (2, 1)
    assert s.cpu_per_request_s == pytest.approx(0.004)
    assert s.wait_s == 0.0


def test_estimate_without_requests_says_so():
    with pytest.raises(ValueError, match="no request"):
        estimate(_window(requests=0), None)


def test_bursts_count_the_blocks_inside_a_request_whatever_share_waits_for_the_next():
    # B = 3: two blocks inside every request, plus one for the next request after a share f
    for f in (0.05, 0.28, 0.78, 0.97, 1.0):
        assert bursts_from_switches(2 + f) == 3
    # one burst: a thread that always (redis 0.97), rarely (nginx 0.04) or never blocks
    for s in (1.0, 0.97, 0.04, 0.0):
        assert bursts_from_switches(s) == 1
    # the assumption's edge: fewer than F_MIN of the requests wait -> one burst short
    assert bursts_from_switches(2.03) == 2


def test_wait_between_bursts_shares_the_blocked_time_among_the_gaps():
    assert between_bursts(0.030, 0.012, 0.002, 5)[0] == pytest.approx(0.004)
    assert between_bursts(0.030, 0.012, 0.002, 1) == (0.0, "one burst per request: no wait between bursts")
    wait, note = between_bursts(0.010, 0.012, 0.0, 3)
    assert wait == 0.0 and "< 0" in note


def test_latency_mean_falls_back_to_the_quantiles():
    s = estimate(_window(cpu_ns=100_000_000, threads=ThreadCounters(voluntary=100), quantiles={50.0: 0.002}), None)
    assert s.latency_mean_s == pytest.approx(0.002)


# --- fitting the families ---------------------------------------------------------------------


def _lognormal_quantiles(mean: float, sigma: float) -> dict[float, float]:
    mu = math.log(mean) - sigma**2 / 2
    return {p: math.exp(mu + sigma * NormalDist().inv_cdf(p / 100)) for p in PS}


def test_lognormal_quantiles_fit_a_lognormal_of_their_sigma_scaled_to_the_cpu_mean():
    fit = fit_service(_lognormal_quantiles(0.020, 0.5), mean_s=0.004)
    assert fit.fits and fit.best.family == "lognormal"
    assert fit.chosen == {"dist": "lognormal", "mean": "4ms", "sigma": 0.5}
    assert fit.best.quantile_error < 0.02 and fit.best.ks < 0.02
    worse = {c.family: c for c in fit.candidates}
    assert worse["constant"].quantile_error > FIT_TOLERANCE and worse["exponential"].quantile_error > FIT_TOLERANCE


def test_exponential_quantiles_fit_an_exponential():
    q = {p: -0.003 * math.log(1 - p / 100) for p in PS}
    fit = fit_service(q, mean_s=0.0015)
    assert fit.best.family == "exponential" and fit.fits
    assert fit.chosen == {"dist": "exponential", "mean": "1.5ms"}


def test_equal_quantiles_fit_a_constant():
    fit = fit_service({p: 0.005 for p in PS}, mean_s=0.0042)
    assert fit.best.family == "constant" and fit.best.quantile_error == pytest.approx(0.0)
    assert fit.chosen == {"dist": "constant", "value": "4.2ms"}


def test_two_modes_fit_no_family_and_fall_back_to_an_empirical_histogram():
    # half the requests take 1 ms, half 10 ms; the quantiles' trapezoid mean is
    # (49 × 1 + 1 × 5.5 + 50 × 10) / 100 = 5.545 ms, so a CPU mean of 5.545 ms keeps the edges
    q = {0.0: 0.001, **{p: (0.001 if p < 50 else 0.010) for p in PS}, 100.0: 0.010}
    fit = fit_service(q, mean_s=0.005545)
    assert not fit.fits and fit.chosen["dist"] == "empirical"
    d = TypeAdapter(Distribution).validate_python(fit.chosen)
    assert d.edges == [1_000_000, 10_000_000]
    assert d.weights == [50.0]  # every request between the two modes' edges, as the quantiles say


# --- what is written ----------------------------------------------------------------------------


def _shape(**kw) -> Shape:
    base = dict(
        requests=100,
        qps=10.0,
        fanout=1,
        parallelism=1.02,
        cpu_per_request_s=0.012,
        bursts=3,
        switches_per_request=3.01,
        runqueue_wait_s=0.0005,
        latency_mean_s=0.0235,
        wait_s=0.0055,
        wait_note="",
        involuntary_per_request=0.1,
        generator_cpu_per_request_s=0.001,
    )
    base.update(kw)
    return Shape(**base)


def test_the_section_is_toml_with_the_schema_fields_and_core_distributions():
    fit = fit_service(_lognormal_quantiles(0.0235, 0.3), mean_s=0.012)
    doc = tomllib.loads(workload_toml("web", 8, _shape(), fit, ["measured here"]))
    web = doc["workloads"]["web"]
    assert (web["kind"], web["clients"], web["fanout"]) == ("closed_loop", 8, 1)
    assert web["shape"]["bursts"] == 3
    service = TypeAdapter(Distribution).validate_python(web["service"])
    assert (service.dist, service.mean, service.sigma) == ("lognormal", 12_000_000, 0.3)
    wait = TypeAdapter(Distribution).validate_python(web["shape"]["wait"])
    assert (wait.dist, wait.mean) == ("exponential", parse_duration("5.5ms"))


def test_one_burst_writes_no_wait():
    fit = fit_service({p: 0.001 for p in PS}, mean_s=0.0001)
    doc = tomllib.loads(workload_toml("w", 1, _shape(bursts=1, wait_s=0.0, wait_note="one burst"), fit, []))
    assert doc["workloads"]["w"]["shape"] == {"bursts": 1, "wait": {"dist": "constant", "value": "0s"}}


def test_crossing_is_the_free_passes_cpu_less_the_one_cpu_passes_medians():
    # the server's CPU per request is per thread x each pass's own fanout: free passes of 2
    # threads at 4, 4.5 (median), 9 µs each = 9 µs a request; one-CPU passes counted 1 thread at
    # 5, 6 (median), 50 µs = 6 µs a request. Written over fanout 2: (9 - 6) / 2 = 1.5 µs a
    # thread. The generator: medians 7 and 4 µs, 3 µs
    free = [_shape(fanout=2, cpu_per_request_s=x * 1e-6, generator_cpu_per_request_s=g * 1e-6) for x, g in ((4, 6), (4.5, 7), (9, 8))]
    one = [_shape(fanout=1, cpu_per_request_s=x * 1e-6, generator_cpu_per_request_s=g * 1e-6) for x, g in ((5, 3), (6, 4), (50, 5))]
    x = crossing(free, one, fanout=2)
    assert (x.server_s, x.client_s) == (pytest.approx(1.5e-6), pytest.approx(3e-6))
    assert (x.free_server_s, x.one_cpu_server_s, x.passes) == (pytest.approx(4.5e-6), pytest.approx(3e-6), (3, 3))
    # cheaper apart is no cost, not a negative one
    assert crossing(one, free, fanout=1).server_s == 0.0
    with pytest.raises(ValueError, match="one CPU"):
        crossing(free, [], fanout=1)


def test_the_section_carries_the_generators_threads_and_cross_cpu():
    fit = fit_service(_lognormal_quantiles(0.0235, 0.3), mean_s=0.012)
    free = [_shape(cpu_per_request_s=4.5e-6, generator_cpu_per_request_s=6.7e-6)]
    one = [_shape(cpu_per_request_s=2.5e-6, generator_cpu_per_request_s=3.6e-6)]
    text = workload_toml("kv", 10, _shape(), fit, [], client_threads=1, cross=crossing(free, one, fanout=1), event_loop="readd")
    web = tomllib.loads(text)["workloads"]["kv"]
    assert web["client_threads"] == 1 and web["event_loop"] == {"read_share": 0.5, "rearm": "readd"}
    assert "event_loop" not in workload_toml("kv", 10, _shape(), fit, [])
    assert {k: parse_duration(v) for k, v in web["cross_cpu"].items()} == {"server": 2000, "client": 3100}


# --- the load generators' reports and the request -------------------------------------------------


def test_wrk_correction_for_coordinated_omission_is_undone_exactly():
    # hand-worked: 10 requests in 200 µs on one connection (e = 20 µs); one took 100 µs,
    # so wrk adds made-up samples at 80, 60 and 40 µs
    measured = {10: 9, 100: 1}
    assert wrk_correct(measured, 200, 10, 1) == {10: 9, 40: 1, 60: 1, 80: 1, 100: 1}
    assert wrk_uncorrected({10: 9, 40: 1, 60: 1, 80: 1, 100: 1}, 200, 10, 1) == measured
    # and any histogram round-trips
    rng = np.random.default_rng(7)
    for _ in range(50):
        values = rng.integers(1, 400, size=20)
        hist = {int(v): int(c) for v, c in zip(values, rng.integers(1, 30, size=20), strict=True)}
        requests, conns = sum(hist.values()), int(rng.integers(1, 4))
        runtime = int(rng.integers(requests, 20 * requests))  # at least 1 µs a request (e >= 1)
        assert wrk_uncorrected(wrk_correct(hist, runtime, requests, conns), runtime, requests, conns) == hist


def test_histogram_quantiles_are_the_smallest_value_reaching_p():
    hist = {1: 50, 2: 30, 10: 20}
    assert histogram_quantiles(hist, 1.0, [0, 50, 51, 80, 81, 100]) == {0.0: 1, 50.0: 1, 51.0: 2, 80.0: 2, 81.0: 10, 100.0: 10}


def test_wrk_script_lines_and_clickhouse_json_are_read():
    # 4 requests in 40 µs on 1 connection: e = 10, the 30 µs one made 20 up; taken out again
    text = "Running 5s test\ncolosim-summary 40 4\ncolosim-bucket 5 3\ncolosim-bucket 20 1\ncolosim-bucket 30 1\n"
    r = parse_wrk_script(text, 1)
    assert (r.requests, r.synthetic) == (4, 1)
    assert r.mean_s == pytest.approx((3 * 5 + 30) / 4 / 1e6)
    assert (r.quantiles[50.0], r.quantiles[100.0]) == (pytest.approx(5e-6), pytest.approx(30e-6))
    ch = parse_clickhouse_report('{"statistics": {"QPS": 9.5, "num_queries": 95}, "query_time_percentiles": {"0": 0.1, "100": 0.3}}')
    assert ch.requests == 95 and ch.mean_s == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"program": "memcached"}, "unknown program 'memcached'"),
        ({"clients": [0]}, "--clients"),
        ({"program": "command"}, "--command"),
        ({"program": "command", "command": ["sh", "-c", "sleep 1"]}, "must contain {port}"),
        ({"command": ["x"]}, "only for the program `command`"),
        ({"repeat": 0}, "--repeat"),
        ({"name": "a.b"}, "--name"),
        ({"query": "SELECT 1"}, "--query: only for the program `clickhouse`"),
    ],
)
def test_bad_requests_are_one_clear_message(kw, message):
    args = {"program": "nginx", "clients": [1], **kw}
    with pytest.raises(ScenarioError, match=message.replace("{", r"\{").replace("}", r"\}")):
        ShapeRequest(**args).check()


def test_redis_benchmark_csv_is_read_in_ms():
    text = (
        '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
        '"GET","116279.06","0.005","0.000","0.007","0.007","0.015","3.751"\n'
    )
    r = parse_redis_csv(text, 20000)
    assert r.requests == 20000 and r.mean_s == pytest.approx(5e-6)
    assert r.quantiles == {
        0.0: 0.0,
        50.0: pytest.approx(7e-6),
        95.0: pytest.approx(7e-6),
        99.0: pytest.approx(15e-6),
        100.0: pytest.approx(3.751e-3),
    }


def test_pgbench_transaction_logs_are_every_request(tmp_path):
    # pgbench -l: "client transaction latency_us script epoch epoch_us", one file per thread
    (tmp_path / "tx.1").write_text("0 0 100 0 1700000000 1\n0 1 300 0 1700000000 2\n")
    (tmp_path / "tx.1.1").write_text("1 0 200 0 1700000000 3\n1 1 200 0 1700000000 4\n")
    r = parse_pgbench_logs(sorted(tmp_path.iterdir()), "")
    assert r.requests == 4 and r.mean_s == pytest.approx(200e-6)
    assert (r.quantiles[0.0], r.quantiles[25.0], r.quantiles[50.0], r.quantiles[75.0], r.quantiles[100.0]) == pytest.approx(
        (100e-6, 100e-6, 200e-6, 200e-6, 300e-6)
    )
