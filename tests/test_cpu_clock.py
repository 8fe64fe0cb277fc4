"""`[workloads.x] reads_cpu_clock`: a task that reads its own CPU clock while it computes has its
queue's update_curr run at every read (task_sched_runtime), so its slice ends exactly, not at
the next tick (core_rs/model/src/slice.rs has the hand-worked segment lengths).

What it does to a ping-pong group beside stress on 6.18.44 (docs/model.md, "Slices that end
exactly"): this host starved `stress` in 5 of 6 runs at 2 ms per side (3 runs free, 3 pinned:
0, 0, 0.322 and 0, 0, 0.006 of the node) and gave it a third or so at 5 ms; with the sides
reading their clock, as experiments/pingpong.py's burn loop does, the core does the same, and
without it it leaves stress a third of the node or more at 2 ms.
"""

from __future__ import annotations

import json

import pytest

from sim._core import Node
from sim.scenario import Scenario

S = 1_000_000_000

PAIRS = """
[scenario]
name = "pairs"
duration = "4s"
seed = {seed}
sample_interval = "0s"

[node]
cores_per_socket = 2

[kernel]
scheduler = "eevdf"
version = "6.18.44"

[cgroups.online]
[cgroups.offline]

[workloads.pingpong]
kind = "closed_loop"
cgroup = "online"
clients = 10
service = {{ dist = "lognormal", mean = "{ms}ms", sigma = 0.1 }}
client_cpu = {{ dist = "lognormal", mean = "{ms}ms", sigma = 0.1 }}
reads_cpu_clock = {reads}

[workloads.stress]
kind = "hog"
cgroup = "offline"
threads = 10
"""


def stress_share(ms: float, reads: bool, seed: int = 1) -> float:
    spec = Scenario.from_toml(PAIRS.format(ms=ms, reads=str(reads).lower(), seed=seed)).core_spec()
    node = Node(json.dumps(spec))
    node.run_until(1 * S)
    before = node.cgroup_stats("offline")["usage_ns"]
    node.run_until(4 * S)
    return float(node.cgroup_stats("offline")["usage_ns"] - before) / (3 * S * node.ncpus)


def test_the_flag_reaches_the_core() -> None:
    spec = Scenario.from_toml(PAIRS.format(ms=2, reads="true", seed=1)).core_spec()
    assert spec["kernel"]["cpu_clock_readers"] == ["pingpong"]
    spec = Scenario.from_toml(PAIRS.format(ms=2, reads="false", seed=1)).core_spec()
    assert spec["kernel"]["cpu_clock_readers"] == []


def test_clock_reading_pairs_starve_stress_at_2ms_as_the_host_did() -> None:
    # the host starved stress in 5 of 6 runs (0, 0, 0.322, 0, 0, 0.006); over six seeds the
    # core must starve it in most, and never give it more than the host's one escape did
    # (seeds 1 - 6: 0 but seed 2, 0.084)
    shares = [stress_share(2, True, seed) for seed in range(1, 7)]
    assert sum(s < 0.05 for s in shares) >= 4, shares
    assert max(shares) < 0.35, shares


@pytest.mark.parametrize("seed", [1, 2])
def test_tick_bound_pairs_leave_stress_a_third_at_2ms(seed: int) -> None:
    # the tick-bound core leaves stress a third of the node or more (0.35 – 0.47 over seeds
    # 1 – 6: its balancer moves threads between CPUs, and some arrangements let the pairs
    # take a CPU)
    assert stress_share(2, False, seed) > 0.3


def test_at_5ms_stress_gets_a_share_again() -> None:
    # host: 0.339 – 0.359 (pairs free), 0.179 – 0.248 (pinned); the core: 0.45
    assert 0.15 < stress_share(5, True) < 0.5
