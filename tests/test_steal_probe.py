"""replay/steal.py: the arithmetic that turns spinners' gaps into `[node.steal]`, worked by
hand, and the probe itself on this host (what it leaves behind, not what the host takes)."""

from __future__ import annotations

import os
import tomllib

import numpy as np
import pytest
from host_replay import children

from replay.steal import THRESHOLD_US, after_from_ages, measure, stalls_from
from sim.overrides import parse_assignment
from sim.scenario.node import Steal


def test_after_is_where_uniform_ages_begin():
    # strikes uniform on [1 ms, 4 ms] of 4 ms spells: Q1 = 1.75 ms, (1.75 − 1) / 0.75 = 1 ms
    ages = np.linspace(1e6, 4e6, 10_001)
    assert after_from_ages(ages, 4e6) == pytest.approx(1_000_000, abs=2)
    # strikes from a spell's start: 0; none seen: 0
    assert after_from_ages(np.linspace(0, 4e6, 10_001), 4e6) == pytest.approx(0, abs=2)
    assert after_from_ages(np.array([]), 4e6) == 0
    # never below 0 nor past the spell
    assert after_from_ages(np.zeros(10), 4e6) == 0
    assert after_from_ages(np.full(10, 4e6), 4e6) == 4_000_000


def test_the_rate_is_per_second_spun_and_the_lengths_are_the_gaps():
    # two CPUs spun 2 s each; 3 gaps of 100, 200 and 300 µs on one, one of 1 ms on the other
    a = np.array([2_000_000_000, 100_000, 5, 200_000, 6, 300_000, 7], dtype=np.int64)
    b = np.array([2_000_000_000, 1_000_000, 8], dtype=np.int64)
    duty = [np.array([1_000_000_000, 60_000, 2_000_000], dtype=np.int64)]
    s = stalls_from([a, b], duty, 4e6, [0, 1], 0.0)
    assert s.stalls == 4 and s.rate_per_s == pytest.approx(1.0)
    assert s.p50_us == pytest.approx(250.0) and s.max_us == pytest.approx(1000.0)
    assert s.lost_share == pytest.approx(1.6e6 / 4e9)
    assert s.edges_ns[0] == 100_000 and s.edges_ns[-1] == 1_000_000 and sum(s.weights) == pytest.approx(1.0)
    # one duty gap at 2 ms of a 4 ms spell: (2 − 1) / 0.75 ms
    assert s.after_ns == pytest.approx(1_333_333, abs=1) and s.duty_stalls == 1
    # the scenario reads it back the same from its table, its TOML and its --set
    table = Steal.model_validate(s.table())
    assert table.rate == pytest.approx(1.0) and table.after == s.after_ns
    assert Steal.model_validate(tomllib.loads(s.toml())["node"]["steal"]) == table
    path, value = parse_assignment(s.override())
    assert path == ("node", "steal") and Steal.model_validate(value) == table


def test_no_gap_seen_gives_a_rate_that_strikes_almost_never():
    s = stalls_from([np.array([5_000_000_000], dtype=np.int64)], [], 4e6, [0], 0.0)
    assert s.stalls == 0 and s.rate_per_s == pytest.approx(0.1) and s.after_ns == 0
    assert s.edges_ns == [THRESHOLD_US * 1000, THRESHOLD_US * 1000 + 1]
    Steal.model_validate(s.table())


def test_a_busy_host_is_said_beside_the_figure():
    from dataclasses import replace

    s = stalls_from([np.array([1_000_000_000, 80_000, 3], dtype=np.int64)], [], 4e6, [0], 0.0)
    assert "WARNING" not in s.summary()
    assert "WARNING: the host was busy (1.00 CPUs" in replace(s, others_busy_cpus=1.0).summary()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_the_probe_measures_every_cpu_and_leaves_nothing_behind():
    before = os.sched_getaffinity(0)
    kids = children(os.getpid())
    s = measure(spin_s=0.3, duty_s=0.3)
    assert os.sched_getaffinity(0) == before
    assert children(os.getpid()) == kids  # every spinner killed and reaped
    assert s.cpus == sorted(before)
    # each CPU spun about the time asked (a busy host may take some of it)
    assert 0.3 * len(before) * 0.5 <= s.spun_s <= 0.3 * len(before) * 1.05
    assert s.rate_per_s > 0 and 0 <= s.after_ns <= 4_000_000
    Steal.model_validate(s.table())
