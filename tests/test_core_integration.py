"""The Python front on the real Rust core; skipped until `sim._core` is built (maturin)."""

from __future__ import annotations

import pytest

pytest.importorskip("sim._core")

from sim import NodeEnvironment, load_scenario, run_scenario  # noqa: E402


@pytest.fixture(scope="module")
def scenario(root):
    # shorter than the experiment's 30 s: enough for the ordering, quick for a test
    return load_scenario(
        root / "experiments" / "clickhouse_stress.toml",
        ["scenario.duration=6s", "scenario.warmup=1s"],
    )


def test_environment_keeps_the_core_at_simpy_time(scenario):
    env = NodeEnvironment(scenario.variants()[1].scenario.core_spec())
    seen = []

    def agent(env):
        yield env.timeout(0.5)
        env.node.write("offline", "cpu.qos_level", -1)
        seen.append(env.node.now())

    env.process(agent(env))
    env.run(until=1.25)
    assert seen == [500_000_000]
    assert env.node.now() == 1_250_000_000
    assert env.node.read("offline", "cpu.qos_level") == -1


def test_clickhouse_stress_ordering(scenario):
    result = run_scenario(scenario, progress=False)
    qps = {name: run.services["clickhouse"].qps for name, run in result.runs.items()}
    baseline, colocated, qos, idle = qps.values()
    assert colocated < 0.8 * baseline  # no isolation costs the online service
    assert qos > 0.9 * baseline  # absolute preemption keeps it
    assert idle > 0.9 * baseline
    run = result.runs["ClickHouse + stress (no isolation)"]
    assert run.measured_s == pytest.approx(5.0)
    assert run.cpu_busy_s.shape == (8, len(run.cgroup_names))
    assert sum(c.cpu_share for c in run.cgroups.values()) == pytest.approx(1.0, abs=0.01)
