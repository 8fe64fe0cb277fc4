"""NodeEnvironment keeps the core at SimPy's clock (on the fake core: no Rust needed)."""

from __future__ import annotations

import pytest

from sim import NodeEnvironment
from sim.environment import warm_up
from sim.scenario import Scenario

TEXT = """
[scenario]
name = "t"
duration = "3s"
[cgroups.online]
[workloads.web]
kind = "open_loop"
cgroup = "online"
rate = 100
workers = 2
service = "1ms"
"""


@pytest.fixture
def env(fake_core) -> NodeEnvironment:
    return NodeEnvironment(Scenario.from_toml(TEXT).core_spec())


def test_builds_the_node_from_the_spec(env, fake_core):
    assert env.node is fake_core[0]
    assert fake_core[0].spec["workloads"][0]["name"] == "web"


def test_run_until_leaves_the_core_exactly_there(env):
    env.run(until=1.5)
    assert env.now == 1.5
    assert env.node.now() == 1_500_000_000
    env.run(until=2.1)  # 2.1 is not exact in binary; the core still lands on the ns
    assert env.node.now() == 2_100_000_000


def test_processes_see_the_core_at_their_own_time(env):
    seen = []

    def agent(env):
        for _ in range(3):
            yield env.timeout(0.25)
            seen.append((env.now, env.node.now()))
            env.node.write("online", "cpu.shares", 2)

    env.process(agent(env))
    env.run(until=1.0)
    assert seen == [(0.25, 250_000_000), (0.5, 500_000_000), (0.75, 750_000_000)]
    assert env.node.read("online", "cpu.shares") == 2
    # one advance per distinct event time, then the stop at `until`
    assert env.node.calls == [250_000_000, 500_000_000, 750_000_000, 1_000_000_000]


def test_events_at_the_same_time_advance_the_core_once(env):
    def tick(env):
        yield env.timeout(0.5)

    env.process(tick(env))
    env.process(tick(env))
    env.run(until=0.5)
    assert env.node.calls == [500_000_000]


def test_warm_up_resets_stats_at_its_time(env):
    env.process(warm_up(env, at=1.0))
    env.run(until=0.9)
    assert env.stats_since == 0.0
    env.run(until=3.0)
    assert env.stats_since == 1.0
    assert env.node._reset_at == 1_000_000_000


def test_run_without_until_stops_when_no_events_are_left(env):
    def once(env):
        yield env.timeout(0.3)

    env.process(once(env))
    env.run()
    assert env.node.now() == 300_000_000


def test_needs_a_spec_or_a_node():
    with pytest.raises(TypeError):
        NodeEnvironment()
