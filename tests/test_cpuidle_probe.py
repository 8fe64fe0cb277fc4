"""replay/cpuidle.py: the idle exit from two round trips' quantiles (arithmetic), and the probe
on this host (what it promises: a distribution of non-negative latencies, its processes gone,
this process's CPUs as they were)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from host_replay import children

from replay.cpuidle import CUTS, EXITS, exit_latency_histogram, measure


def test_a_constant_exit_is_one_narrow_bin():
    busy = np.linspace(30_000, 40_000, 4001)
    edges, weights = exit_latency_histogram(busy + EXITS * 10_000, busy)
    assert edges == [10_000, 10_001] and weights == [1.0]


def test_the_histogram_has_the_exits_quantiles_and_mean():
    # exits uniform on 0..20 µs, two a round trip with the same rank (the quantile
    # difference's assumption): the histogram cuts at their deciles, and its mean is 10 µs
    rng = np.random.default_rng(1)
    busy = rng.uniform(30_000, 40_000, 20_000)
    exits = np.linspace(0, 20_000, 20_000)
    idle = np.sort(busy) + EXITS * exits
    edges, weights = exit_latency_histogram(idle, busy)
    assert len(edges) == len(CUTS) and sum(weights) == pytest.approx(1.0)
    for cut, edge in zip(CUTS[1:-1], edges[1:-1], strict=True):
        assert edge == pytest.approx(20_000 * cut, abs=300)
    mids = [(a + b) / 2 for a, b in zip(edges, edges[1:], strict=False)]
    assert float(np.dot(mids, weights)) == pytest.approx(10_000, rel=0.03)


def test_a_faster_idle_round_trip_is_noise_not_a_negative_latency():
    busy = np.linspace(30_000, 40_000, 1001)
    edges, weights = exit_latency_histogram(busy - 1_000, busy)
    assert edges[0] == 0 and all(e >= 0 for e in edges) and sum(weights) == pytest.approx(1.0)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_the_probe_measures_a_distribution_and_leaves_nothing_behind():
    before = os.sched_getaffinity(0)
    kids = children(os.getpid())  # other tests' servers may still run
    m = measure(round_trips=400, blocks=2, residencies_us=(200, 2000), wakes=40)
    assert os.sched_getaffinity(0) == before
    assert children(os.getpid()) == kids  # every child of the probe killed and reaped (zombies included)
    assert m.round_trips == 400 and m.edges_ns[0] >= 0 and sorted(m.edges_ns) == m.edges_ns
    assert sum(m.weights) == pytest.approx(1.0) and m.p50_us >= 0 and m.p99_us >= m.p50_us
    # one deeper state per halt measured, each from 40 one-way wakes in each mode
    assert [d.residency_us for d in m.deeper] == [200, 2000] and all(d.wakes == 40 for d in m.deeper)
    assert all(sum(d.weights) == pytest.approx(1.0) and d.p50_us >= 0 for d in m.deeper)
    # the scenario takes it as it is, and as the TOML and the --set say
    import tomllib

    from sim.overrides import parse_assignment
    from sim.scenario.node import Cpuidle

    table = Cpuidle.model_validate(m.table())
    assert [d.target_residency for d in table.deeper] == [d.target_residency_ns for d in m.deeper]
    assert Cpuidle.model_validate(tomllib.loads(m.toml())["node"]["cpuidle"]) == table
    path, value = parse_assignment(m.override())
    assert path == ("node", "cpuidle") and Cpuidle.model_validate(value) == table


def test_a_one_way_wake_holds_one_exit():
    # a wake after the halt 10 µs slower than beside the spinner: an exit of 10 µs (not half)
    rng = np.random.default_rng(2)
    busy = rng.normal(7_000, 300, 2_000)
    edges, weights = exit_latency_histogram(busy + 10_000, busy, exits=1)
    assert edges[0] == pytest.approx(10_000, abs=1) and edges[-1] == pytest.approx(10_000, abs=2)
    assert sum(weights) == pytest.approx(1.0)


def test_a_deeper_state_starts_halfway_on_a_log_scale_between_the_halts_measured():
    from replay.cpuidle import target_residencies_ns

    # the exchange halts 10 µs; then 1 ms, 4 ms, 16 ms: √(10·1000) = 100 µs, √(1·4) = 2 ms, √(4·16) = 8 ms
    assert target_residencies_ns(10_000.0, (1000, 4000, 16000)) == [100_000, 2_000_000, 8_000_000]
    # an exchange that measured no halt at all still gives increasing, positive starts
    starts = target_residencies_ns(0.0, (1, 2))
    assert starts[0] >= 1 and starts[1] > starts[0]


def test_the_idle_driver_is_read_as_sysfs_shows_it(tmp_path):
    from replay.cpuidle import read_idle_driver

    cpu = tmp_path / "sys/devices/system/cpu"
    for k, (name, lat) in enumerate([("POLL", "0"), ("haltpoll idle", "1")]):
        (cpu / f"cpu0/cpuidle/state{k}").mkdir(parents=True)
        (cpu / f"cpu0/cpuidle/state{k}/name").write_text(name + "\n")
        (cpu / f"cpu0/cpuidle/state{k}/latency").write_text(lat + "\n")
    (cpu / "cpuidle").mkdir()
    (cpu / "cpuidle/current_driver").write_text("haltpoll\n")
    (cpu / "cpuidle/current_governor_ro").write_text("haltpoll\n")
    (tmp_path / "sys/module/haltpoll/parameters").mkdir(parents=True)
    (tmp_path / "sys/module/haltpoll/parameters/guest_halt_poll_ns").write_text("0\n")
    d = read_idle_driver(tmp_path)
    assert d.driver == "haltpoll" and d.governor == "haltpoll" and d.guest_halt_poll_ns == 0
    assert d.states == [("POLL", 0), ("haltpoll idle", 1)]
    assert "haltpoll idle 1 µs" in d.summary() and "polls 0 ns" in d.summary()
    # a host without cpuidle says so
    assert read_idle_driver(tmp_path / "none").summary() == "no cpuidle driver (the idle loop halts)"


def test_a_busy_host_is_said_beside_the_figure():
    from dataclasses import replace

    from replay.cpuidle import BUSY_HOST, ExitLatency

    m = ExitLatency((0, 1), 100, 50.0, 80.0, 30.0, 60.0, 10.0, 10.0, 10.0, [9_999, 10_001], [1.0])
    assert "WARNING" not in m.summary()
    assert "WARNING: the host was busy (1.00 CPUs" in replace(m, others_busy_cpus=1.0).summary()
    assert "WARNING" not in replace(m, others_busy_cpus=BUSY_HOST).summary()
    # the scenario's TOML of it reads back as the table
    import tomllib

    assert tomllib.loads(m.toml())["node"]["cpuidle"]["exit_latency"]["edges"] == ["9999ns", "10001ns"]
