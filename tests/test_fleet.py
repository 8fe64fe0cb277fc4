"""A fleet as a trace set and multi-fidelity trials: the busiest window by hand-worked
integrals, the cut of a trace, the v2018 per-machine split against the table's own rows,
per-machine results with the SLO on the worst machine, pruned trials (PRUNED, never the
answer), and determinism."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import optuna
import pytest
from test_tune import TINY

from sim.cli import main
from sim.errors import ScenarioError
from sim.tuning.fidelity import busiest, cut, windows
from sim.tuning.spec import build_spec
from traces import fleet
from traces.format import Entity, Trace, TraceError, read

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-v2018"


def one(name: str, role: str, t: list[float], cpu: list[float]) -> Entity:
    return Entity(name, role, np.array(t, dtype=float), np.array(cpu, dtype=float))


# --- the busiest window -------------------------------------------------------------------


def test_the_busiest_hour_of_a_day():
    # 1 core all day, 5 cores from 2 h to 3 h: the hour [2 h, 3 h), 5 × 3600 CPU·s
    t = np.arange(0, 86_400, 60.0)
    cpu = np.where((t >= 7200) & (t < 10_800), 5.0, 1.0)
    tr = Trace()
    tr.add(Entity("m", "node", t, cpu))
    assert busiest(tr, 3600, 0, 86_340 - 3600) == (7200.0, pytest.approx(5 * 3600))


def test_the_busiest_window_by_hand_and_the_earliest_of_equals():
    # held values: 1.5 on [0, 1000), 0 on [1000, 1500), 4 on [1500, 2000), 0 after. A 1000 s
    # window starting at s holds 1500 - 1.5s for s in [0, 500], 1.5(1000 - s) + 4(s - 500)
    # = 2.5s - 500 for s in [500, 1000], then 2000 for every s in [1000, 1500] (all of
    # [1500, 2000)), 4(2000 - s) after: the earliest start of the maximum is 1000.
    tr = Trace()
    tr.add(one("a", "offline", [0, 1000, 1500, 2000], [1.5, 0, 4, 0]))
    assert busiest(tr, 1000, 0, 3000) == (1000.0, pytest.approx(2000))
    # the range of starts bounds it: from 1600 on, the best is the earliest (1600: 400 s of 4)
    assert busiest(tr, 1000, 1600, 3000) == (1600.0, pytest.approx(1600))


def test_demand_is_the_entities_not_the_node_that_holds_them_and_a_gap_holds():
    tr = Trace()
    # the node row peaks early (it would win), but it is the sum of the others: left out
    tr.add(one("node", "node", [0, 100, 200, 300], [50, 1, 1, 1]))
    # a NaN (not recorded) holds the previous value, as the player holds it: 3 on [100, 300)
    tr.add(one("web", "online", [0, 100, 200, 300], [1, 3, math.nan, 1]))
    assert busiest(tr, 200, 0, 300) == (100.0, pytest.approx(600))
    # only node entities: they are the demand
    alone = Trace()
    alone.add(tr.entities["node"])
    assert busiest(alone, 200, 0, 300)[0] == 0.0


def test_played_time_starts_at_each_entitys_first_sample():
    # the player starts an entity at its first sample: a trace that begins at 1000 s is
    # played from 0, so its busy stretch [1300, 1400) is at played time 300
    tr = Trace()
    tr.add(one("b", "offline", [1000, 1300, 1400, 2000], [1, 9, 1, 1]))
    assert busiest(tr, 100, 0, 900)[0] == 300.0


def test_cut_starts_with_the_value_in_effect():
    e = one("b", "offline", [0, 10, 20, 30, 40], [1, 2, 3, 4, 5])
    e.memory_bytes = np.array([10.0, 20, 30, 40, 50])
    tr = Trace()
    tr.add(e)
    c = cut(tr, 15, 35).entities["b"]
    # at 15 the value of 10 holds (2); then 20 and 30, shifted by 15
    assert c.t_s.tolist() == [0, 5, 15] and c.cpu_cores.tolist() == [2, 3, 4]
    assert c.memory_bytes is not None and c.memory_bytes.tolist() == [20, 30, 40]
    # a cut that starts on a sample takes it once
    assert cut(tr, 20, 35).entities["b"].t_s.tolist() == [0, 10]


# --- a small fleet: two machines' traces on a 4-CPU node ------------------------------------

# test_tune's tiny node (an LSR service bound to one CPU, a BE pod beside it under
# Koordinator's CPU suppress) with the BE pod's demand following each machine's trace
SCENARIO = (
    TINY.replace('name = "tiny"', 'name = "fleet"')
    .replace('duration = "3s"', 'duration = "20s"')
    .replace('warmup = "500ms"', 'warmup = "1s"')
    .replace(
        'kind = "hog"\npod = "offline"\nthreads = 4', 'kind = "duty"\npod = "offline"\nmax_threads = 4\ntrace = { entity = "machine" }'
    )
    .replace("trials = 30", 'trials = 9\nfidelity = "window"\nwindow = "4s"')
)

# the SLO test's node: the service and the batch share 2 CPUs (CFS, no cpuset), a constant
# 2 ms service with 2 clients: alone it never queues, so solo P99 = 2 ms
SHARED = """
[scenario]
name = "shared"
duration = "20s"
warmup = "1s"
seed = 1

[node]
cores_per_socket = 2

[cgroups.batch]
[cgroups.web]

[workloads.batch]
kind = "duty"
cgroup = "batch"
max_threads = 4
trace = { entity = "machine" }

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
slo = ["web.p99 <= 3 * solo"]
trials = 1
"""


def machines(d: Path, levels: dict[str, float]) -> Path:
    """A trace set: per machine 20 s of its level, a little more in [8, 12) s."""
    d.mkdir(parents=True, exist_ok=True)
    t = np.arange(20.0)
    for name, level in levels.items():
        cpu = np.full(20, level)
        cpu[8:12] = min(4.0, level * 1.2)
        tr = Trace()
        tr.add(Entity("machine", "node", t, cpu))
        tr.write(d / f"{name}.csv")
    return d


def study_of(out: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'tune.db'}")


def test_the_slo_holds_on_the_worst_machine_and_each_is_reported(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(SHARED)
    fleet_dir = machines(tmp_path / "set", {"light": 0.2, "heavy": 3.5})
    assert main(["tune", str(path), "--trace-set", str(fleet_dir), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "per machine (trace of the set)" in out and "| heavy" in out and "| light" in out
    t = study_of(tmp_path / "o", "shared:koordinator").trials[0]
    m = t.user_attrs["machines"]
    assert list(m) == ["heavy", "light"]  # the set, sorted by file name
    # alone, 2 clients on 2 CPUs never queue: P99 = the 2 ms service; 3 × solo = 6 ms
    solo = study_of(tmp_path / "o", "shared:koordinator").user_attrs["solo"]["1"]
    assert solo[f"shared @ {fleet_dir / 'light.csv'}"]["web.p99"] == pytest.approx(0.002, rel=0.01)
    # 0.2 cores of batch beside it barely matter; 3.5 of the 2 CPUs do
    assert m["light"]["feasible"] and m["light"]["metrics"]["web.p99"] <= 0.006
    assert not m["heavy"]["feasible"] and m["heavy"]["metrics"]["web.p99"] > 0.006
    # the study's verdict is the worst machine's
    slo = "web.p99 <= 3 * solo"
    assert t.constraints == {slo: pytest.approx(m["heavy"]["slo"][slo])}
    assert m["heavy"]["slo"][slo] == pytest.approx(m["heavy"]["metrics"]["web.p99"] - 3 * 0.002, rel=0.02)
    # and the per-machine results are in the JSON too
    doc = json.loads((tmp_path / "o" / "tune_trials.json").read_text())
    assert doc["trials"][0]["machines"]["heavy"]["feasible"] is False


def test_windows_of_a_trace_set(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    d = machines(tmp_path / "set", {"a": 1.0, "b": 2.0})
    spec = build_spec(path, {}, traces=fleet.trace_set(d))
    ws = windows(spec, tmp_path)
    # 4 s windows within the measured part [1 s, 20 s): the busier [8, 12) s
    assert [(w.start_s, w.end_s, w.duration_s) for w in ws] == [(8.0, 12.0, 5.0), (8.0, 12.0, 5.0)]
    # the cut plays from one warm-up before the window
    assert ws[0].file is not None
    c = read(ws[0].file).entities["machine"]
    assert c.t_s.tolist() == [0, 1, 2, 3, 4] and c.cpu_cores.tolist() == [1.0, 1.2, 1.2, 1.2, 1.2]
    # a window as long as the run: the trace runs whole, once
    long = build_spec(path, {}, traces=fleet.trace_set(d), window="19s")
    assert all(w.file is None and w.duration_s == 20.0 for w in windows(long, tmp_path))


def run_pruned(tmp_path: Path, out: str) -> optuna.Study:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    d = machines(tmp_path / "set", {"a": 1.0, "b": 2.0})
    assert main(["tune", str(path), "--trace-set", str(d), "--out", str(tmp_path / out), "--no-progress"]) == 0
    return study_of(tmp_path / out, "fleet:koordinator")


def test_pruned_trials_are_pruned_never_the_answer_and_the_study_is_deterministic(tmp_path, capsys):
    from sim.tuning.output import best_trial

    study = run_pruned(tmp_path, "o1")
    S = optuna.trial.TrialState
    states = [t.state for t in study.trials]
    pruned = [t for t in study.trials if t.state is S.PRUNED]
    assert pruned and S.FAIL not in states and len(study.trials) == 9
    out = capsys.readouterr().out
    assert f"{len(pruned)} pruned" in out
    assert "Per machine of the trace set" in (tmp_path / "o1" / "tune_report.html").read_text()
    for t in study.trials:
        # one intermediate value per window, steps 1..2
        assert sorted(t.intermediate_values) == [1, 2]
    # a pruned trial ran its windows only (2 × 5 s), a whole one also both traces (2 × 20 s)
    assert {t.user_attrs["simulated_s"] for t in pruned} == {10.0}
    assert {t.user_attrs["simulated_s"] for t in study.trials if t.state is S.COMPLETE} == {50.0}
    assert all("machines" not in t.user_attrs for t in pruned)
    assert study.trials[0].state is S.COMPLETE  # the defaults are the baseline: never pruned
    spec = build_spec(tmp_path / "s.toml", {}, traces=fleet.trace_set(tmp_path / "set"))
    best = best_trial(spec, study)
    assert best is not None and best.state is S.COMPLETE
    # successive halving keeps a trial whose window score is in the best third of those so
    # far: every pruned one scored below the third best before it
    scored: list[float] = []
    for t in study.trials:
        v = t.intermediate_values[2]
        if t.state is S.PRUNED:
            assert sum(s > v for s in scored) >= max(1, len(scored + [v]) // 3)
        scored.append(v)
    # determinism: the same command again, a new study: the same trials
    again = run_pruned(tmp_path, "o2")
    assert [(t.state, t.params, t.values, t.intermediate_values) for t in again.trials] == [
        (t.state, t.params, t.values, t.intermediate_values) for t in study.trials
    ]


def test_fidelity_and_trace_set_mistakes_are_named(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    d = machines(tmp_path / "set", {"a": 1.0})
    with pytest.raises(ScenarioError, match="tune.fidelity: window runs each trace's busiest window first; give a trace set"):
        build_spec(path, {"workloads.batch.trace.file": str(d / "a.csv")})
    with pytest.raises(ScenarioError, match="Optuna does for one objective only"):
        build_spec(path, {}, traces=fleet.trace_set(d), objective=["batch_cpu", "web.p99"])
    with pytest.raises(ScenarioError, match=r"--window: a duration such as \"1h\""):
        build_spec(path, {}, traces=fleet.trace_set(d), window="xh")
    (tmp_path / "empty").mkdir()
    for argv, message in (
        (["--trace-set", str(tmp_path / "empty")], "no trace files (.parquet or .csv) in it"),
        (["--trace-set", str(d), "--trace", str(d / "a.csv")], "not both"),
        (["--trace-set", str(d), "--fidelity", "full", "--window", "1h"], '--window: only with fidelity "window"'),
    ):
        assert main(["tune", str(path), *argv, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
        assert message in capsys.readouterr().err


# --- the v2018 per-machine split --------------------------------------------------------------


def fixture(d: Path) -> Path:
    d.mkdir()
    (d / "machine_usage.csv").write_text(
        "m_1,0,10,50,,,1,1,1\n"
        "m_2,0,50,50,,,1,1,1\n"
        "m_1,60,30,50,,,1,1,1\n"
        "m_3,60,80,50,,,1,1,1\n"
        "m_2,60,70,50,,,1,1,1\n"
        "m_3,120,101,50,,,1,1,1\n"  # invalid (> 100): not a reading
        "m_1,400,90,50,,,1,1,1\n"  # beyond the window
    )
    return d


def test_split_a_fixture_by_name_and_by_busiest(tmp_path, capsys):
    d = fixture(tmp_path / "v2018")
    # busiest over [0, 300): m_3 80%, m_2 60% (50, 70), m_1 20% (10, 30)
    rows = fleet.split(d, 2, tmp_path / "busy", 0, 300)
    assert [(r["machine"], r["readings"]) for r in rows] == [("m_3", 1), ("m_2", 2)]
    m2 = read(tmp_path / "busy" / "m_2.parquet").entities[fleet.ENTITY]
    assert m2.role == "node" and m2.cpu_cores[:2].tolist() == pytest.approx([0.5 * 96, 0.7 * 96])
    index = json.loads((tmp_path / "busy" / "index.json").read_text())
    assert [m["file"] for m in index["machines"]] == ["m_3.parquet", "m_2.parquet"]
    # by name, in the order given
    assert [r["machine"] for r in fleet.split(d, ["m_1", "m_3"], tmp_path / "named", 0, 300)] == ["m_1", "m_3"]
    with pytest.raises(TraceError, match="no readings of 'm_9' in the window"):
        fleet.split(d, ["m_9"], tmp_path / "x", 0, 300)
    with pytest.raises(TraceError, match="the table has 3 machines"):
        fleet.split(d, 4, tmp_path / "x", 0, 300)
    # a directory with other traces would mix them into the set
    with pytest.raises(TraceError, match="holds other traces"):
        fleet.split(d, ["m_2"], tmp_path / "named", 0, 300)
    # the command line
    assert (
        main(["trace", "alibaba2018", str(d), "--machines", "m_1,m_2", "--start", "0s", "--end", "300s", "--out", str(tmp_path / "c")]) == 0
    )
    assert "wrote 2 traces" in capsys.readouterr().out
    assert main(["trace", "alibaba2018", str(d), "--machines", "2", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "a fleet needs both --machines M1,M2,...|N and --out DIR" in capsys.readouterr().err
    assert main(["trace", "alibaba2018", str(d), "--machines", "2", "--out", str(tmp_path / "y"), "-o", str(tmp_path / "x.parquet")]) == 2
    assert "leave out --machine and -o" in capsys.readouterr().err


@pytest.mark.skipif(not (SAMPLE / "machine_usage_head100k.csv").exists(), reason="the real v2018 sample is not beside the project")
def test_split_the_real_sample_against_its_own_rows(tmp_path):
    start, end = 86_400.0, 172_800.0
    # the table's own rows, read here without the loader: readings per machine in day 2
    readings: dict[str, list[float]] = {}
    with (SAMPLE / "machine_usage_head100k.csv").open(newline="") as f:
        for row in csv.reader(f):
            t, cpu = float(row[1]), row[2]
            if start <= t < end and cpu.strip() and 0 <= float(cpu) <= 100:
                readings.setdefault(row[0], []).append(float(cpu))
    by_mean = sorted(readings, key=lambda m: (-sum(readings[m]) / len(readings[m]), m))
    rows = fleet.split(SAMPLE, 3, tmp_path / "day2", start, end)
    assert [r["machine"] for r in rows] == by_mean[:3]
    assert [r["readings"] for r in rows] == [len(readings[m]) for m in by_mean[:3]]
    assert sorted(p.name for p in (tmp_path / "day2").iterdir()) == sorted([f"{m}.parquet" for m in by_mean[:3]] + ["index.json"])
    for r in rows:
        e = read(tmp_path / "day2" / str(r["file"])).entities[fleet.ENTITY]
        assert e.t_s[-1] < end - start and 0 <= e.cpu_cores.min() and e.cpu_cores.max() <= 96
    # every machine of the sample with readings that day
    assert len(fleet.split(SAMPLE, len(readings), tmp_path / "all", start, end)) == len(readings)


def test_windows_run_in_worker_processes(tmp_path):
    """--jobs 2: the window runs (their cut traces in the study's temporary directory) and the
    whole runs go to worker processes; every trial ends complete or pruned."""
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    d = machines(tmp_path / "set", {"a": 1.0, "b": 2.0})
    assert main(["tune", str(path), "--trace-set", str(d), "--jobs", "2", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    trials = study_of(tmp_path / "o", "fleet:koordinator").trials
    S = optuna.trial.TrialState
    assert len(trials) == 9 and {t.state for t in trials} <= {S.COMPLETE, S.PRUNED}
    assert all(t.user_attrs["ran_in"] > 0 for t in trials if t.state is S.COMPLETE)
