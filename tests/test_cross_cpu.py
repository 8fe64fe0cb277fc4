"""A closed loop's exchanges across CPUs (`cross_cpu`) and its generator's threads
(`client_threads`) from the scenario file to the core and back to the results, hand-worked on an
idle node (the core's arithmetic is tested in core_rs/model/tests/cross_cpu.rs); and the
generator threads replay runs for each real server."""

from __future__ import annotations

import numpy as np
import pytest
from exchange import kv

from replay.calibration import Fit, apply_fit
from replay.workloads import generator_event_loop, generator_threads
from sim.runner import run_variant
from sim.scenario import Variant

pytest.importorskip("sim._core")


CROSS = {"cross_cpu": {"server": "200us", "client": "300us"}, "client_threads": 1}


def test_apart_every_message_crosses_and_its_cost_is_in_the_latency_and_the_cpu():
    run = run_variant(Variant("apart", True, kv(2, **CROSS)), 1)
    svc, cg = run.services["kv"], run.cgroups["kv"]
    # 0.5 + 0.3 (the reply read on the other CPU) + 1 + 0.2 (the request) = 2 ms
    assert svc.crossed_share == 1.0 and svc.exchanges > 0
    # a request and its reply each crossed once (the window's first reply may be its last's)
    assert svc.crossings_per_request == pytest.approx(1.0, abs=1 / svc.completed)
    assert svc.p50_s == pytest.approx(2e-3, rel=1e-6) and svc.p99_s == pytest.approx(2e-3, rel=1e-6)
    assert cg.cpu_s / run.measured_s == pytest.approx(svc.qps * 2e-3, rel=0.01)


def test_rounds_cross_each_round_on_a_generator_thread_serving_in_turn():
    # rounds = 2 on one generator thread (served in turn: core_rs cross_cpu.rs has the
    # arithmetic of a pool with rounds): apart, a request and a reply cross each round:
    # 0.25 + 0.3 + 0.5 + 0.2, twice = 2.5 ms
    run = run_variant(Variant("rounds", True, kv(2, rounds=2, workers=None, **CROSS)), 1)
    svc = run.services["kv"]
    assert svc.crossings_per_request == pytest.approx(2.0, abs=2 / svc.completed)
    assert svc.p50_s == pytest.approx(2.5e-3, rel=1e-6)


def test_on_one_cpu_nothing_crosses_and_nothing_costs_more():
    run = run_variant(Variant("one", True, kv(1, **CROSS)), 1)
    svc = run.services["kv"]
    assert svc.crossed == 0 and svc.exchanges > 0
    assert svc.p50_s == pytest.approx(1.5e-3, rel=1e-6)
    # without cross_cpu nothing is counted at all
    plain = run_variant(Variant("plain", True, kv(2)), 1).services["kv"]
    assert plain.exchanges == 0 and plain.p50_s == pytest.approx(1.5e-3, rel=1e-6)


def test_generator_threads_are_as_replay_runs_each_generator(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    # wrk -t and pgbench -j: at most a thread per CPU; redis-benchmark: one event loop;
    # clickhouse-benchmark: a thread per connection (None); colosim-load: the model's own
    assert [generator_threads(p, 10) for p in ("nginx", "command", "postgres", "redis", "clickhouse", "builtin")] == [
        2,
        2,
        2,
        1,
        None,
        None,
    ]
    assert generator_threads("nginx", 1) == 1
    # the CPUs of the run measured, where it is not this machine
    assert generator_threads("postgres", 10, ncpus=8) == 8 and generator_threads("redis", 10, ncpus=8) == 1


def test_an_event_loop_times_from_the_write_to_the_reply_read():
    # 4 clients on one generator thread (0.2 ms reading a reply, 0.2 ms writing a request),
    # 4 workers of 0.5 ms, 8 CPUs: the generator is the bottleneck, X = 2500/s, a 1.6 ms loop.
    # Timed round the loop every latency is 1.6 ms. An event loop re-adding its writes at the
    # ready list's tail settles into passes [read k+1, write k]: between a client's read and
    # its write lie the rest of its pass and the next pass's read (0.4 ms), in no latency:
    # 1.2 ms. Re-armed with EPOLL_CTL_MOD the write leads the next pass: half the clients
    # settle at 1.4 ms, half at 1.6 (core_rs tests/cross_cpu.rs works a two-client case)
    four = {"clients": 4, "workers": 4, "client_threads": 1, "client_cpu": {"dist": "constant", "value": "400us"}}
    four["service"] = {"dist": "constant", "value": "500us"}
    pool = run_variant(Variant("pool", True, kv(8, **four)), 1).services["kv"]
    ev = run_variant(Variant("ev", True, kv(8, **four, event_loop={"read_share": 0.5})), 1).services["kv"]
    mod = run_variant(Variant("mod", True, kv(8, **four, event_loop={"rearm": "modify"})), 1).services["kv"]
    assert (
        pool.qps == pytest.approx(2500, rel=1e-3) and ev.qps == pytest.approx(2500, rel=1e-3) and mod.qps == pytest.approx(2500, rel=1e-3)
    )
    assert pool.p50_s == pytest.approx(1.6e-3, rel=1e-6)
    assert ev.p50_s == pytest.approx(1.2e-3, rel=1e-6) and ev.p99_s == pytest.approx(1.2e-3, rel=1e-6)
    # modify: two clients at 1.4 ms and two at 1.6 ms, every pass
    assert {round(x * 1e7) for x in mod.latencies_s} == {14_000, 16_000}
    assert float(np.mean(mod.latencies_s)) == pytest.approx(1.5e-3, rel=1e-3)


def test_an_event_loop_with_a_think_time_is_one_clear_error():
    from sim.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"workloads\.kv\.event_loop: .*no think time"):
        kv(1, client_threads=1, event_loop={}, think="1ms")
    with pytest.raises(ScenarioError, match=r"workloads\.kv\.event_loop\.rearm"):
        kv(1, client_threads=1, event_loop={"rearm": "tail"})


def test_calibration_times_event_loop_generators_as_they_measure():
    # wrk adds and removes its write with EPOLL_CTL_MOD; redis-benchmark deletes and re-adds
    assert [generator_event_loop(p) for p in ("nginx", "command", "redis", "postgres", "clickhouse", "builtin")] == [
        "modify",
        "modify",
        "readd",
        None,
        None,
        None,
    ]
    fit = Fit("kv", "constant", {"dist": "constant", "value": "1ms"}, 300e-6, 0.0, {}, {}, client_threads=1, event_loop="modify")
    w = apply_fit(kv(1, workers=None), fit).workloads["kv"]
    assert w.event_loop is not None and w.event_loop.read_share == 0.5 and w.event_loop.rearm == "modify"  # type: ignore[union-attr]
    assert w.client_threads == 1  # type: ignore[union-attr]
