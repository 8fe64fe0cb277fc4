"""Trace-driven workloads: a duty workload reproduces its trace's CPU series within 2% per
sample on a node with room, time can be compressed, an open loop's rate follows a trace, and
a trace that does not fit is named."""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import ScenarioError
from sim.runner import run_scenario
from sim.scenario import Scenario
from traces.format import Entity, Trace

CORES = [0.5, 1.7, 3.2, 2.0, 0.0, 5.5, 7.25, 4.0, 1.0, 2.5]


def trace_file(tmp_path, step=1.0):
    tr = Trace()
    t = np.arange(len(CORES)) * step
    tr.add(Entity("batch-1", "offline", t, np.array(CORES)))
    tr.add(Entity("web", "online", t, np.array(CORES) * 0.01, rate_per_s=np.array([100.0, 300, 200, 50, 400, 100, 250, 300, 100, 200])))
    return tr.write(tmp_path / "t.parquet")


def scenario(path, speed=1.0, duration="10s"):
    return f"""
[scenario]
name = "td"
duration = "{duration}"
sample_interval = "1s"

[node]
cores_per_socket = 16

[cgroups.batch]
[cgroups.web]

[workloads.batch]
kind = "duty"
cgroup = "batch"
max_threads = 8
trace = {{ file = "{path}", entity = "batch-1", speed = {speed} }}

[workloads.web]
kind = "open_loop"
cgroup = "web"
rate = 1
workers = 8
service = "1ms"
trace = {{ file = "{path}", entity = "web", speed = {speed} }}
"""


def test_duty_reproduces_the_trace_within_two_percent_per_sample(tmp_path):
    r = run_scenario(Scenario.from_toml(scenario(trace_file(tmp_path))), progress=False).runs["td"]
    got = r.timeseries.cpu_share["batch"] * 16  # cores per 1 s sample
    prev = np.concatenate([[0.0], CORES[:-1]])
    for i, (want, g) in enumerate(zip(CORES, got)):
        # a new value applies from the next 10 ms period: 2% of the series' level
        assert abs(g - want) <= 0.02 * max(want, prev[i], 0.05), f"sample {i}: trace {want}, simulated {g:.4f}"


def test_time_compression(tmp_path):
    """Ten-second trace steps at speed 10: one simulated second each."""
    r = run_scenario(Scenario.from_toml(scenario(trace_file(tmp_path, step=10.0), speed=10.0, duration="10s")), progress=False).runs["td"]
    got = r.timeseries.cpu_share["batch"] * 16
    assert len(got) == 10
    assert np.allclose(got[1:], CORES[1:], rtol=0.03, atol=0.1)


def test_the_open_loop_rate_follows_the_trace(tmp_path):
    r = run_scenario(Scenario.from_toml(scenario(trace_file(tmp_path))), progress=False).runs["td"]
    per_second = r.timeseries.completions["web"].reshape(-1)
    want = np.array([100.0, 300, 200, 50, 400, 100, 250, 300, 100, 200])
    # Poisson arrivals: within 4 standard deviations of each second's rate
    assert (np.abs(per_second - want) <= 4 * np.sqrt(want) + 2).all(), per_second


def test_a_trace_that_does_not_fit_is_named(tmp_path):
    path = trace_file(tmp_path)
    with pytest.raises(ScenarioError, match=r"workloads.batch.max_threads: the trace asks for up to 7.25 cores"):
        Scenario.from_toml(scenario(path).replace("max_threads = 8", "max_threads = 4"))
    with pytest.raises(ScenarioError, match=r"workloads.batch.trace: .*no entity 'nope'"):
        Scenario.from_toml(scenario(path).replace('entity = "batch-1"', 'entity = "nope"'))
    with pytest.raises(ScenarioError, match=r"workloads.batch.trace: .*missing.parquet: no such file"):
        Scenario.from_toml(scenario(tmp_path / "missing.parquet"))
