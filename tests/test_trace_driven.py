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
    for i, (want, g) in enumerate(zip(CORES, got, strict=True)):
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


def test_run_and_tune_take_traces(tmp_path, capsys):
    """`colosim run --trace` plays a trace the scenario leaves open; `colosim tune --trace A
    --trace B` runs every trial on each, and the SLO holds on the worse."""
    import json

    import optuna

    from sim.cli import main

    light, heavy = Trace(), Trace()
    t = np.arange(6.0)
    light.add(Entity("batch-1", "offline", t, np.full(6, 1.0)))
    heavy.add(Entity("batch-1", "offline", t, np.full(6, 3.0)))
    a, b = light.write(tmp_path / "light.csv"), heavy.write(tmp_path / "heavy.csv")
    text = """
[scenario]
name = "tt"
duration = "6s"
sample_interval = "1s"

[node]
cores_per_socket = 8

[cgroups.batch]
[cgroups.web]

[workloads.batch]
kind = "duty"
cgroup = "batch"
max_threads = 4
trace = { entity = "batch-1" }

[workloads.web]
kind = "closed_loop"
cgroup = "web"
clients = 2
service = "2ms"

[policy]
name = "koordinator"
besteffort = "batch"
ls = ["web"]

[tune]
params = { cpu_suppress_threshold_percent = [30, 100] }
slo = ["web.p99 <= 1.5 * solo"]
trials = 4
"""
    path = tmp_path / "tt.toml"
    path.write_text(text)
    assert main(["run", str(path), "--no-progress", "--out", str(tmp_path / "r")]) == 2
    assert "workloads.batch.trace.file: which trace? give trace.file, or --trace FILE" in capsys.readouterr().err
    assert main(["run", str(path), "--trace", str(b), "--no-progress", "--out", str(tmp_path / "r")]) == 0
    run = json.loads((tmp_path / "r" / "results.json").read_text())["runs"]["tt"]
    assert run["cgroups"]["batch"]["cpu_s"] == pytest.approx(6 * 3.0, rel=0.05)
    assert main(["tune", str(path), "--trace", str(a), "--trace", str(b), "--out", str(tmp_path / "t"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "(on the worst of 1 seed(s) × 2 case(s) over 2 traces)" in out
    study = optuna.load_study(study_name="tt:koordinator", storage=f"sqlite:///{tmp_path / 't' / 'tune.db'}")
    solo = study.user_attrs["solo"]["1"]
    assert set(solo) == {f"tt @ {a}", f"tt @ {b}"}  # each run of the scenario with each trace
    # batch CPU adds over the two traces: at most 1 + 3 cores for 6 s
    assert study.trials[0].user_attrs["summary"]["batch_cpu"]["mean"] <= 6 * 4.0 * 1.05


def test_the_report_sets_the_trace_beside_the_simulation(tmp_path):
    from sim.report import write_report

    result = run_scenario(Scenario.from_toml(scenario(trace_file(tmp_path))), progress=False)
    key, cgroup, t, v = result.runs["td"].trace_demand["batch"]
    assert (key, cgroup) == ("cores", "batch") and list(v) == CORES and list(t) == list(range(10))
    html = write_report(result, tmp_path / "r.html").read_text()
    assert "Trace demand and what the simulation gave" in html


def test_a_duty_workloads_memory_follows_its_trace(tmp_path):
    MI = 2**20
    tr = Trace()
    t = np.arange(4.0)
    tr.add(Entity("job", "offline", t, np.full(4, 0.5), np.array([100.0, 300.0, np.nan, 50.0]) * MI))
    path = tr.write(tmp_path / "m.parquet")
    text = f"""
[scenario]
name = "tm"
duration = "4s"
sample_interval = "500ms"

[node]
cores_per_socket = 2
memory = "2Gi"

[cgroups.batch]

[workloads.job]
kind = "duty"
cgroup = "batch"
max_threads = 1
trace = {{ file = "{path}", entity = "job" }}
"""
    r = run_scenario(Scenario.from_toml(text), progress=False).runs["tm"]
    mem = r.timeseries.memory["batch"] / MI  # at 0.5, 1.0, ... 4.0 s
    # 100 MiB from 0 s, 300 from 1 s, held through the missing sample at 2 s, 50 from 3 s
    # (a sample taken at the very instant of a change sees the value before it)
    assert mem.tolist() == [100, 100, 300, 300, 300, 300, 50, 50]


from test_traces import SAMPLE  # noqa: E402 - the real v2018 sample, when beside the project


@pytest.mark.skipif(not (SAMPLE / "machine_usage_head100k.csv").exists(), reason="the real v2018 sample is not beside the project")
def test_the_alibaba_machine_experiment(root, tmp_path, capsys):
    """experiments/alibaba_machine.toml on two hours of the day: the offline duty gives the
    machine's recorded load (the node has room), and Koordinator's suppress keeps the online
    tail lower than no isolation."""
    from sim.cli import main

    m, syn = tmp_path / "m.parquet", tmp_path / "s.parquet"
    assert main(["trace", "alibaba2018", str(SAMPLE), "--machine", "m_1940", "--start", "86400s", "--end", "172800s", "-o", str(m)]) == 0
    assert main(["trace", "synthetic", "--seed", "1", "-o", str(syn)]) == 0
    out = tmp_path / "o"
    assert (
        main(
            [
                "run",
                str(root / "experiments" / "alibaba_machine.toml"),
                "--no-progress",
                "--out",
                str(out),
                "--set",
                "scenario.duration=120s",
                "--set",
                f"workloads.web.trace.file={syn}",
                "--set",
                f"workloads.batch.trace.file={m}",
            ]
        )
        == 0
    )
    import json

    from traces.format import read

    runs = json.loads((out / "results.json").read_text())["runs"]
    node = read(m).entities["m_1940"]
    played = node.t_s < 120 * 60  # two trace hours, at speed 60
    # the duty holds the last value: time-weighted mean of what was played over the window
    t = np.append(node.t_s[played], 120 * 60)
    got = runs["no isolation"]["cgroups"]["offline"]["cpu_s"] / 120
    mean_played = float(np.average(node.cpu_cores[played], weights=np.diff(t)))
    assert got == pytest.approx(mean_played, rel=0.05)
    assert runs["Koordinator"]["services"]["web"]["p99_s"] < runs["no isolation"]["services"]["web"]["p99_s"]
