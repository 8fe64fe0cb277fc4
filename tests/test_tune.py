"""`colosim tune`: the SLO and metric language, the search space, the aggregation over seeds
and cases (hand-worked), and whole studies on a 4-CPU node where the answer is known by
exhaustive search."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from policies import POLICIES
from sim.cli import main
from sim.errors import ScenarioError
from sim.tuning.goals import Metric, parse_metric, parse_slo
from sim.tuning.outcome import UNMEASURABLE, summarize
from sim.tuning.space import parse_range, search_space

# An LSR service bound to one CPU of a 2-core SMT node and a BE hog under Koordinator's CPU
# suppress: the larger cpuSuppressThresholdPercent, the more CPUs the hog gets — and from
# some threshold on it shares the service's physical core, which stretches its latency.
TINY = """
[scenario]
name = "tiny"
duration = "3s"
warmup = "500ms"
seed = 1

[node]
sockets = 1
cores_per_socket = 2
threads_per_core = 2

[pods.online]
qos = "LSR"
priority_class = "koord-prod"
cpu_request = 1
cpu_limit = 1
memory_request = "1Gi"
memory_limit = "1Gi"
cpu_bind_policy = "SpreadByPCPUs"

[pods.offline]
qos = "BE"

[workloads.web]
kind = "closed_loop"
pod = "online"
clients = 4
workers = 1
service = { dist = "exponential", mean = "5ms" }

[workloads.batch]
kind = "hog"
pod = "offline"
threads = 4

[policy]
name = "koordinator"

[tune]
params = { cpu_suppress_threshold_percent = [30, 100] }
slo = ["web.p99 <= 1.4 * solo"]
trials = 30
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def tune(path: Path, out: Path, *extra: str) -> int:
    return main(["tune", str(path), "--out", str(out), "--no-progress", *extra])


def load(out: Path, name: str = "tiny:koordinator") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'tune.db'}")


# --- the language ----------------------------------------------------------------------


def test_slo_absolute_and_relative():
    s = parse_slo("web.p99 <= 120ms", ["web"], "--slo")
    assert s.at_most and s.bound == pytest.approx(0.12) and s.factor is None
    assert s.violation(0.1) == pytest.approx(-0.02) and s.violation(0.13) == pytest.approx(0.01)
    r = parse_slo("web.p99<=1.1*solo", ["web"], "--slo")
    assert r.factor == pytest.approx(1.1) and r.violation(0.2, solo=0.2) == pytest.approx(-0.02)
    q = parse_slo("web.qps >= 100", ["web"], "--slo")
    assert not q.at_most and q.violation(90) == 10 and q.violation(120) == -20
    assert parse_slo("web.p999 <= solo", ["web"], "x").factor == 1.0
    assert math.isinf(s.violation(math.nan))  # a service that completed nothing breaks its SLO


@pytest.mark.parametrize(
    "text, message",
    [
        ("web.p99 < 1s", 'an SLO reads "METRIC <= BOUND"'),
        ("api.p99 <= 1s", "'api' is not a request-serving workload of the scenario (those are: web)"),
        ("web.p95 <= 1s", "unknown statistic 'p95' of web"),
        ("web.p99 <= fast", "bound 'fast' is neither a number"),
        ("batch_cpu >= 2 * solo", "batch_cpu has no solo value"),
        ("web.qps >= 10ms", "web.qps is not a time"),
        ("throughput >= 3", "unknown metric 'throughput'"),
    ],
)
def test_slo_errors_name_the_problem(text, message):
    with pytest.raises(ScenarioError) as err:
        parse_slo(text, ["web"], "--slo[0]")
    assert str(err.value).startswith("--slo[0]: ") and message in str(err.value)


def test_metric_directions_and_worst():
    assert parse_metric("batch_cpu", [], "x").sense.value == "maximize"
    p99 = parse_metric("web.p99", ["web"], "x")
    assert p99.sense.value == "minimize" and p99.worst([0.1, 0.3, 0.2]) == 0.3
    qps = parse_metric("web.qps", ["web"], "x")
    assert qps.worst([100, 90, 95]) == 90


def test_search_space_defaults_ranges_and_errors():
    koord = POLICIES["koordinator"]
    dims = search_space(koord, None, "tune.params")
    assert [d.name for d in dims] == list(koord.tuned)
    t = next(d for d in dims if d.name == "cpu_suppress_threshold_percent")
    assert (t.low, t.high, t.default, t.param.integer) == (0, 100, 65, True)
    assert t.distribution() == optuna.distributions.IntDistribution(0, 100)
    assert search_space(koord, {"cpu_suppress_threshold_percent": (40, 90)}, "w")[0].low == 40
    with pytest.raises(
        ScenarioError, match=r"w: 'cpu_threshold' is not a parameter of koordinator \(known: cpu_suppress_threshold_percent"
    ):
        search_space(koord, {"cpu_threshold": None}, "w")
    with pytest.raises(
        ScenarioError, match=r"w.cpu_suppress_threshold_percent: range \[40, 120\] must be increasing and within \[0, 100\]"
    ):
        search_space(koord, {"cpu_suppress_threshold_percent": (40, 120)}, "w")
    with pytest.raises(ScenarioError, match="an integer parameter needs an integer range"):
        search_space(koord, {"cpu_suppress_threshold_percent": (40.5, 90)}, "w")
    with pytest.raises(ScenarioError, match="policy static has nothing to tune"):
        search_space(POLICIES["static"], None, "tune.params")
    assert parse_range("a=1:2.5", "--param") == ("a", (1.0, 2.5))
    with pytest.raises(ScenarioError, match="a's range reads LOW:HIGH"):
        parse_range("a=1-2", "--param")


def test_summarize_by_hand():
    """Two seeds × two cases: batch CPU adds over cases and averages over seeds; latency takes
    the worst case; the SLO's violation is the worst over seeds and cases, against each one's
    own solo value."""
    m = [
        {"a": {"batch_cpu": 10.0, "utilization": 0.5, "w.p99": 0.10}, "b": {"batch_cpu": 20.0, "utilization": 0.7, "w.p99": 0.30}},
        {"a": {"batch_cpu": 12.0, "utilization": 0.4, "w.p99": 0.12}, "b": {"batch_cpu": 14.0, "utilization": 0.6, "w.p99": 0.20}},
    ]
    solo = [
        {"a": {"w.p99": 0.10}, "b": {"w.p99": 0.25}},
        {"a": {"w.p99": 0.10}, "b": {"w.p99": 0.25}},
    ]
    p99 = Metric("w.p99", "w", "p99")
    slo = parse_slo("w.p99 <= 1.1 * solo", ["w"], "x")
    out = summarize(m, solo, [Metric("batch_cpu")], [slo], [Metric("batch_cpu"), Metric("utilization"), p99])
    assert out.values == [pytest.approx((30 + 26) / 2)]
    assert out.summary["batch_cpu"] == {"mean": pytest.approx(28.0), "worst": 26.0}
    assert out.summary["utilization"]["mean"] == pytest.approx((0.6 + 0.5) / 2)
    assert out.summary["w.p99"] == {"mean": pytest.approx(0.25), "worst": 0.30}
    # worst violation: seed 1 case a, 0.12 - 1.1 × 0.10 = 0.01 (case b: 0.30 - 0.275 = 0.025!)
    assert out.constraints[slo.text] == pytest.approx(0.30 - 1.1 * 0.25)
    assert not out.feasible
    nan = [{"a": {"batch_cpu": 1.0, "utilization": 0.1, "w.p99": math.nan}}]
    bad = summarize(nan, [{"a": {"w.p99": 0.1}}], [Metric("batch_cpu")], [slo], [p99])
    assert bad.constraints[slo.text] == UNMEASURABLE


# --- whole studies ----------------------------------------------------------------------


def exhaustive(path: Path) -> dict[int, dict[str, float]]:
    """Every integer threshold in [30, 100], straight through the objective function: the
    truth the tuner's answer is checked against."""
    from sim.scenario import read_document
    from sim.tuning.evaluate import measure

    doc = read_document(path)
    out = {}
    for t in range(30, 101):
        m = measure(doc, {"policy.cpu_suppress_threshold_percent": t}, [1], ["tiny"], ["batch"])[0]["tiny"]
        out[t] = m
    return out


def test_constrained_study_finds_the_exhaustive_optimum(tiny, tmp_path, capsys):
    truth = exhaustive(tiny)
    from sim.scenario import read_document
    from sim.tuning.evaluate import measure

    solo = measure(read_document(tiny), {"workloads.batch.enabled": False}, [1], ["tiny"], ["batch"])[0]["tiny"]["web.p99"]
    ok = {t: m for t, m in truth.items() if m["web.p99"] <= 1.4 * solo}
    best_cpu = max(m["batch_cpu"] for m in ok.values())
    # the case is a real trade-off: the largest thresholds break the SLO
    assert len(ok) < len(truth) and best_cpu < max(m["batch_cpu"] for m in truth.values())

    out = tmp_path / "out"
    assert tune(tiny, out) == 0
    printed = capsys.readouterr().out
    study = load(out)
    assert len(study.trials) == 30
    first = study.trials[0]
    assert first.user_attrs.get("defaults") and first.params == {"cpu_suppress_threshold_percent": 65}
    best = max((t for t in study.trials if all(v <= 0 for v in t.constraints.values())), key=lambda t: t.values[0])
    assert best.values[0] == pytest.approx(best_cpu)
    assert ok[best.params["cpu_suppress_threshold_percent"]]["batch_cpu"] == pytest.approx(best_cpu)
    # the table: the default and the best, with the improvement
    assert "| cpu_suppress_threshold_percent | [30, 100] |      65 |" in printed
    d = truth[65]["batch_cpu"]
    assert f"{(best_cpu / d - 1) * 100:+.1f}%" in printed
    assert "SLO web.p99 <= 1.4 * solo" in printed

    # The policy file runs unchanged under `colosim run --policy` and measures the same.
    policy = out / "tuned_policy.toml"
    assert f"cpu_suppress_threshold_percent = {best.params['cpu_suppress_threshold_percent']}" in policy.read_text()
    assert main(["run", str(tiny), "--policy", str(policy), "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    import json

    run = json.loads((tmp_path / "run" / "results.json").read_text())["runs"]["tiny"]
    assert run["services"]["web"]["p99_s"] == pytest.approx(best.user_attrs["summary"]["web.p99"]["worst"])
    report = (out / "tune_report.html").read_text()
    assert "Optimization history" in report and "Trade-off" in report and "Best against the defaults" in report


def test_same_seed_same_study(tiny, tmp_path, capsys):
    for name in ("a", "b"):
        assert tune(tiny, tmp_path / name, "--trials", "8") == 0
    a, b = load(tmp_path / "a"), load(tmp_path / "b")
    assert [t.params for t in a.trials] == [t.params for t in b.trials]
    assert [t.values for t in a.trials] == [t.values for t in b.trials]


def test_resume_adds_up_to_the_total_and_refuses_another_setup(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "4") == 0
    assert tune(tiny, out, "--trials", "7") == 0
    study = load(out)
    assert len(study.trials) == 7 and sum(bool(t.user_attrs.get("defaults")) for t in study.trials) == 1
    capsys.readouterr()
    assert tune(tiny, out, "--trials", "9", "--slo", "web.p99 <= 2 * solo") == 2
    err = capsys.readouterr().err
    assert "was set up differently (slo)" in err and err.count("\n") == 1
    assert len(load(out).trials) == 7


def test_a_killed_study_resumes(tiny, tmp_path, capsys):
    """Trials left RUNNING by a study process of this machine that is gone are failed as
    orphans (by the old "host:pid" record, or by an owner whose pid now belongs to another
    process), do not count, and the study completes its trials; one of another machine with a
    live heartbeat is left alone."""
    from sim import liveness

    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "3") == 0
    study = load(out)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = study.ask()
    old.set_user_attr("worker", f"{socket.gethostname()}:{dead.pid}")
    reused = study.ask()  # our own pid, but another process's start time: a reused pid
    reused.set_user_attr("owner", {**liveness.me(), "start": liveness.start_time(os.getpid()) - 1})
    remote = study.ask()
    remote.set_user_attr("owner", {**liveness.me(), "host": "elsewhere", "pid": 1})
    study._storage.record_heartbeat(remote._trial_id)
    assert tune(tiny, out, "--trials", "6") == 0
    study = load(out)
    S = optuna.trial.TrialState
    states = [t.state for t in study.trials]
    for t in (old, reused):
        frozen = study.trials[t.number]
        assert frozen.state is S.FAIL and frozen.user_attrs["orphaned"]
        assert "its study process (pid " in frozen.user_attrs["error"] and "is gone" in frozen.user_attrs["error"]
    assert states[remote.number] is S.RUNNING
    # 3 + 3 more: the remote trial counts (it may still finish), the orphans do not
    assert states.count(S.COMPLETE) == 5 and len(states) == 8


def test_leftover_placeholders_are_withdrawn_not_left_waiting(tiny, tmp_path, capsys):
    """A placeholder this process enqueued and nobody asked for is failed when it stops asking
    (and does not count); a peer's placeholder, and one a peer already popped, are left alone."""
    from sim import liveness
    from sim.tuning.study import WORKER, counted, withdraw_placeholders

    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "2") == 0
    study = load(out)
    before = counted(study)
    S = optuna.trial.TrialState
    study.enqueue_trial({}, user_attrs={"asker": liveness.me()})
    popped = study.ask()  # a peer's pop of it: RUNNING now, that peer's trial
    study.enqueue_trial({}, user_attrs={"asker": liveness.me()})
    peer = {**liveness.me(), "pid": 1, "start": liveness.start_time(1)}
    study.enqueue_trial({}, user_attrs={"asker": peer})
    mine = study.trials[-2].number
    assert withdraw_placeholders(study) == 1
    trials = load(out).trials
    assert trials[mine].state is S.FAIL and trials[mine].user_attrs["orphaned"] and trials[mine].user_attrs["worker"] == WORKER
    assert trials[popped.number].state is S.RUNNING and trials[-1].state is S.WAITING
    assert counted(load(out)) == before + 1  # the popped one runs; the withdrawn one does not count


def test_a_trial_of_another_machine_fails_when_its_heartbeat_stops(tiny, tmp_path, capsys, monkeypatch):
    import sim.tuning.study

    monkeypatch.setattr(sim.tuning.study, "GRACE_S", 1)
    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "2") == 0
    study = load(out)
    remote = study.ask()
    remote.set_user_attr("owner", {"host": "elsewhere", "boot": "b", "pidns": "p", "pid": 1, "start": 1})
    study._storage.record_heartbeat(remote._trial_id)
    time.sleep(2.5)  # the database's clock has whole seconds
    assert tune(tiny, out, "--trials", "3") == 0
    frozen = load(out).trials[remote.number]
    assert frozen.state is optuna.trial.TrialState.FAIL and frozen.user_attrs["orphaned"]
    assert frozen.user_attrs["error"] == "its study process (pid 1 on elsewhere) sent no heartbeat for 1 s"


def test_failed_trials_are_recorded_and_the_study_goes_on(tmp_path, capsys):
    """rubik refuses high_water_mark >= alarm_water_mark (80): those trials fail with the
    agent's reason; the others complete."""
    path = tmp_path / "rubik.toml"
    path.write_text(
        TINY.replace('[policy]\nname = "koordinator"', '[policy]\nname = "rubik"\nquota_turbo = ["kubepods/pod-online"]').split("[tune]")[0]
        + '[tune]\nparams = { high_water_mark = [50, 100] }\ntrials = 12\nsampler = "random"\n'
    )
    out = tmp_path / "out"
    assert tune(path, out) == 0
    printed = capsys.readouterr().out
    study = load(out, "tiny:rubik")
    S = optuna.trial.TrialState
    failed = [t for t in study.trials if t.state is S.FAIL]
    assert len(study.trials) == 12 and failed
    assert all(t.params["high_water_mark"] >= 80 for t in failed)
    assert all(t.state is S.COMPLETE for t in study.trials if t.params["high_water_mark"] < 80)
    assert "must be below alarm_water_mark" in failed[0].user_attrs["error"]
    assert "failed trials:" in printed and "must be below alarm_water_mark" in printed


def test_pareto_front_is_the_non_dominated_set(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "14", "--objective", "batch_cpu", "--objective", "web.p99", "--slo", "web.qps >= 1") == 0
    printed = capsys.readouterr().out
    study = load(out)
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE]
    done = [t for t in study.trials if t.state is optuna.trial.TrialState.COMPLETE]

    def dominated(t):
        return any(u.values[0] >= t.values[0] and u.values[1] <= t.values[1] and u.values != t.values for u in done)

    front = {t.number for t in done if not dominated(t)}
    files = {int(p.stem.split("_")[1]) for p in (out / "pareto").glob("trial_*.toml")}
    assert files == front and front
    assert "Pareto set" in printed
    assert "Pareto front" in (out / "tune_report.html").read_text()


def test_no_feasible_trial_writes_no_policy(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "3", "--slo", "web.p99 <= 1us") == 0
    printed = capsys.readouterr().out
    assert "no trial met every SLO" in printed and not (out / "tuned_policy.toml").exists()
    # the least-violating trial is shown: its violation is the least of all trials'
    study = load(out)
    least = min(max(t.constraints.values()) for t in study.trials)
    near = next(t for t in study.trials if max(t.constraints.values()) == least)
    assert f"closest: trial #{near.number} (worst SLO violation " in printed and "default vs closest" in printed


def test_parallel_trials_run_in_their_own_processes(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "6", "--jobs", "2") == 0
    study = load(out)
    assert len(study.trials) == 6
    assert all(t.state is optuna.trial.TrialState.COMPLETE for t in study.trials)
    # every trial was asked by this process and simulated in a process of its own
    assert {t.user_attrs["worker"] for t in study.trials} == {f"{socket.gethostname()}:{os.getpid()}"}
    ran_in = [t.user_attrs["ran_in"] for t in study.trials]
    assert len(set(ran_in)) == 6 and os.getpid() not in ran_in


@pytest.mark.parametrize(
    "args, message",
    [
        (["--slo", "web.p99 <= soon"], "--slo[0]: bound 'soon' is neither a number"),
        (["--param", "cpu_threshold"], "--param: 'cpu_threshold' is not a parameter of koordinator"),
        (["--objective", "web.p95"], "--objective: unknown statistic 'p95' of web"),
        (["--objective", "batch_cpu", "--objective", "utilization"], "have no trade-off"),
        (["--policy", "kube"], "--policy: unknown policy 'kube'"),
        (["--jobs", "0"], "--jobs: must be >= 1"),
        (["--policy", "static"], "tune.params: 'cpu_suppress_threshold_percent' is not a parameter of static (known: none)"),
        (["--policy", "static", "--param", "x"], "--param: 'x' is not a parameter of static (known: none)"),
    ],
)
def test_bad_setup_is_one_line_before_any_trial(tiny, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    assert tune(tiny, out, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("colosim: error: ") and message in err and err.count("\n") == 1
    assert not (out / "tune.db").exists()


def test_bad_tune_table_and_policy_file(tmp_path, capsys):
    path = tmp_path / "t.toml"
    path.write_text(TINY.replace("trials = 30", "trials = 0"))
    assert tune(path, tmp_path / "o") == 2
    assert "tune.trials: Input should be greater than or equal to 1" in capsys.readouterr().err
    bad = tmp_path / "p.toml"
    bad.write_text('[policy]\nname = "koordinator"\n[node]\nsockets = 2\n')
    assert main(["run", str(path), "--policy", str(bad), "--no-progress"]) == 2
    assert "a policy file holds one [policy] table and nothing else (found node)" in capsys.readouterr().err


def test_experiment_beats_koordinator_defaults(root, tmp_path, capsys):
    """experiments/tune_koordinator.toml, a short study (one seed): the best configuration
    gives the batch pod more CPU than Koordinator's defaults and holds the online SLO, which
    the defaults also hold (the bound online pod leaves them room)."""
    out = tmp_path / "out"
    assert tune(root / "experiments" / "tune_koordinator.toml", out, "--trials", "20", "--seeds", "1", "--jobs", "2") == 0
    study = load(out, "tune_koordinator:koordinator")
    default = study.trials[0]
    assert default.user_attrs["defaults"] and all(v <= 0 for v in default.constraints.values())
    feasible = [t for t in study.trials if t.values and all(v <= 0 for v in t.constraints.values())]
    best = max(feasible, key=lambda t: t.values[0])
    assert best.values[0] > 1.2 * default.values[0]
    assert best.params["cpu_suppress_threshold_percent"] > 65
    # the SLO's own arithmetic, from the stored numbers: worst P99 within 10% of solo
    solo = study.user_attrs["solo"]["1"]["tune_koordinator"]["wrk.p99"]
    assert best.user_attrs["summary"]["wrk.p99"]["worst"] <= 1.1 * solo
    assert "Hyperparameter Importances" in (out / "tune_report.html").read_text()


def test_a_trial_whose_process_dies_fails_and_the_study_goes_on(tiny, tmp_path, capsys, monkeypatch):
    from tune_crash import crash_on_defaults

    import sim.tuning.study

    monkeypatch.setattr(sim.tuning.study, "run_job", crash_on_defaults)
    out = tmp_path / "out"
    assert tune(tiny, out, "--trials", "6", "--jobs", "2") == 0
    study = load(out)
    S = optuna.trial.TrialState
    assert len(study.trials) == 6
    assert study.trials[0].state is S.FAIL and study.trials[0].user_attrs["error"] == "the trial's process died"
    # a trial running beside it in the broken pool may fail with it; the rest complete
    assert sum(t.state is S.COMPLETE for t in study.trials) >= 4
    assert "the trial's process died" in capsys.readouterr().out
