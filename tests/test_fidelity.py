"""`colosim fidelity` without a host: its statistics against hand-worked cases and textbook
results, the load generators' reports parsed, bad input refused with one message, and the
whole scoring path with the simulator standing in for the host."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from replay.calibration import measured_metrics
from replay.cgroupfs import host_cpus
from replay.cpuidle import ExitLatency
from replay.fidelity import CASES, FIDELITY_DIR, METRICS, SERVICES, Suite, load_service, text
from replay.scoring import WITHIN, Interval, bootstrap_ci, kendall_tau, median_abs_error, meets_goal, order, ranking, score
from replay.steal import stalls_from
from replay.workloads import parse_pgbench_log, parse_redis_csv
from sim.cli import main
from sim.runner import run_variant
from sim.scenario import load_scenario

# --- statistics ---------------------------------------------------------------------------


def test_bootstrap_interval_contains_the_mean_and_is_the_same_every_time():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    ci = bootstrap_ci(x)
    assert ci.mean == 3.0 and ci.n == 5
    assert 1.0 <= ci.lo < 3.0 < ci.hi <= 5.0
    assert bootstrap_ci(x) == ci  # seeded: the same values, the same interval
    y = list(np.random.default_rng(5).normal(10, 2, 12))
    assert bootstrap_ci(y, seed=2) != bootstrap_ci(y)  # ... and the seed is what fixes it


def test_bootstrap_interval_narrows_with_n_as_the_normal_theory_says():
    """The mean's 95% interval is about mean +- 1.96 sd / sqrt(n) (sd of the sample, as the
    bootstrap resamples it): four times the values, half the width."""
    base = [1.0, 2.0, 3.0, 4.0, 5.0]
    w5 = bootstrap_ci(base).hi - bootstrap_ci(base).lo
    big = bootstrap_ci(base * 4)
    w20 = big.hi - big.lo
    assert w20 == pytest.approx(2 * 1.96 * math.sqrt(2.0) / math.sqrt(20), rel=0.15)  # sd of 1..5 (ddof 0) = sqrt(2)
    assert w20 / w5 == pytest.approx(0.5, rel=0.3)
    assert big.contains(3.0) and not big.contains(4.0)


def test_bootstrap_interval_of_one_value_or_none():
    assert bootstrap_ci([7.0]) == Interval(7.0, 7.0, 7.0, 1)
    empty = bootstrap_ci([math.nan])
    assert empty.n == 0 and math.isnan(empty.mean) and not empty.contains(1.0)


@pytest.mark.parametrize(
    "a,b,tau",
    [
        ([1, 2, 3, 4], [10, 20, 30, 40], 1.0),
        ([1, 2, 3, 4], [4, 3, 2, 1], -1.0),
        ([1, 2, 3, 4], [1, 3, 2, 4], (5 - 1) / 6),  # one of six pairs swapped
        ([1, 2, 2], [1, 2, 3], 2 / math.sqrt(2 * 3)),  # a tie in a: 2 concordant of 2 x 3 untied
    ],
)
def test_kendall_tau_hand_worked(a, b, tau):
    assert kendall_tau(a, b) == pytest.approx(tau)


def test_kendall_tau_is_scipys_tau_b():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = rng.integers(0, 4, 7).astype(float), rng.integers(0, 4, 7).astype(float)
        want = stats.kendalltau(a, b).statistic
        got = kendall_tau(list(a), list(b))
        assert (math.isnan(want) and math.isnan(got)) or got == pytest.approx(want)


def test_kendall_tau_of_all_ties_is_undefined():
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1])


def test_error_inside_and_within_arithmetic():
    s = score([100.0, 100.0, 100.0], [90.0, 90.0, 90.0])
    assert s.error == pytest.approx(-0.10)
    assert s.within and not s.inside and not s.overlap  # 10% off, and the host never varied
    s = score([90.0, 100.0, 110.0], [105.0, 105.0, 105.0])
    assert s.error == pytest.approx(0.05) and s.within and s.inside and s.overlap
    s = score([100.0, 100.0], [125.0, 130.0])
    assert s.error == pytest.approx(0.275) and not s.within and not s.inside
    nothing = score([], [1.0])
    assert math.isnan(nothing.error) and not nothing.within


def test_ranking_orders_best_first_by_the_metric():
    scores = {
        "alone": score([100.0], [100.0]),
        "stress": score([50.0], [60.0]),
        "idle": score([95.0], [99.0]),
    }
    r = ranking("QPS", scores)
    assert r is not None and r.host == ["alone", "idle", "stress"] and r.sim == r.host and r.same_order and r.tau == 1.0
    r = ranking("P99 (s)", scores)  # smaller is better
    assert r is not None and r.host == ["stress", "idle", "alone"]
    swapped = {**scores, "idle": score([95.0], [101.0])}
    r = ranking("QPS", swapped)
    assert r is not None and not r.same_order and r.tau == pytest.approx(1 / 3)  # one of three pairs swapped
    assert ranking("QPS", {"alone": scores["alone"]}) is None
    # the same prediction to 3 significant digits is a tie: no order, tau-b of the rest
    flat = {"a": score([100.0], [238_001.0]), "b": score([90.0], [237_996.0]), "c": score([80.0], [100.0])}
    r = ranking("QPS", flat)
    assert r is not None and r.tau == pytest.approx(2 / math.sqrt(3 * 2)) and r.sim == ["a", "b", "c"]
    assert r.sim_text == "a = b > c" and r.host_text == "a > b > c" and not r.same_order
    assert order(["a", "b"], [1.0, 1.0], True) == ["a", "b"]  # a tie keeps the given order


def test_the_goal_of_a_case_hand_worked():
    # QPS and P50 within 10% (or inside the host's interval), P99 within 15% (no interval rule)
    steady = [100.0, 100.0, 100.0]  # a host that never varied: its interval is the point
    row = {"QPS": score(steady, [109.9]), "P50 (s)": score(steady, [90.1]), "P99 (s)": score(steady, [114.9])}
    assert meets_goal(row) is True  # every bound met, just
    assert meets_goal({**row, "P99 (s)": score(steady, [115.1])}) is False
    assert meets_goal({**row, "QPS": score(steady, [110.1])}) is False
    assert meets_goal({**row, "P50 (s)": score(steady, [89.9])}) is False
    spread = [80.0, 100.0, 120.0]  # mean 100, interval about [80, 120]
    assert meets_goal({**row, "QPS": score(spread, [112.0])}) is True  # 12% off, inside the spread
    assert meets_goal({**row, "P99 (s)": score(spread, [112.0])}) is True
    assert meets_goal({**row, "P99 (s)": score(spread, [118.0])}) is False  # inside, but 18% off
    # a metric without a host run or a prediction: counted neither way; extra metrics do not count
    assert meets_goal({**row, "P50 (s)": score([], [90.0])}) is None
    assert meets_goal({k: v for k, v in row.items() if k != "P99 (s)"}) is None
    assert meets_goal({**row, "offline CPU (share)": score(steady, [300.0])}) is True


def test_median_absolute_error():
    scores = [score([1.0], [v]) for v in (0.8, 1.1, 1.05)] + [score([], [1.0])]
    assert median_abs_error(scores) == pytest.approx(0.1)
    assert math.isnan(median_abs_error([]))


# --- the load generators' reports ---------------------------------------------------------

REDIS_CSV = """"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"GET","100000.00","0.050","0.008","0.040","0.070","0.090","4.0"
"GET","50000.00","0.100","0.008","0.080","0.130","0.210","2.0"
"""


def test_redis_batches_make_one_report():
    r = parse_redis_csv("redis", REDIS_CSV, 10.0, 50_000)
    # two batches of 50,000: 0.5 s + 1 s, 100,000 requests in 1.5 s
    assert r.qps == pytest.approx(100_000 / 1.5)
    assert r.completed == 100_000
    assert r.p50_s == pytest.approx(0.060e-3) and r.p99_s == pytest.approx(0.150e-3)
    assert r.p90_s == pytest.approx((0.060 + (0.100 - 0.060) * 40 / 45) * 1e-3)  # between P50 and P95


def test_redis_without_a_finished_batch_is_one_clear_error():
    from sim.errors import HostError

    with pytest.raises(HostError, match="no batch of 50000"):
        parse_redis_csv("redis", REDIS_CSV.splitlines()[0], 10.0, 50_000)


def test_pgbench_log_gives_every_transaction_in_the_window():
    # client, transaction, latency (us), script, epoch s, epoch us; the run started at 1000.0
    logs = ["0 0 2000 0 1000 500000\n0 1 3000 0 1001 500000\n", "1 0 1000 0 1002 900000\n1 1 9000 0 1009 100000\n"]
    s = parse_pgbench_log("pg", logs, 1000.0, warmup_s=1.0, duration_s=3.0)
    assert list(s.completions_s) == pytest.approx([1.5, 2.9])  # 0.5 before the warm-up, 9.1 after the end
    assert list(s.latencies_s) == pytest.approx([0.003, 0.001])
    assert s.qps == pytest.approx(2 / 2.0)


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--services", "nosuch"], "--services: unknown service 'nosuch' (known: builtin, clickhouse"),
        (["--services", "missing.toml"], "--services: missing.toml: no such scenario file"),
        (["--services", "redis", "--cases", "alone,bogus"], "--cases: no case 'bogus' in"),
        (["--services", "redis", "--reps", "0"], "--reps: must be at least 1 (got 0)"),
        (["--services", "redis", "--seeds", "0"], "--seeds: must be at least 1 (got 0)"),
        (["--services", "redis", "--duration", "-1"], "--duration: must be a positive number of seconds"),
        (["--services", "redis", "--duration", "1"], "scenario.warmup: must be less than scenario.duration (1s) (got 2s)"),
        (["--services", ","], "--services: name at least one service"),
    ],
)
def test_bad_input_is_one_clear_message(argv, message, capsys, tmp_path):
    assert main(["fidelity", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("colosim: error: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "fidelity.json").exists()


@pytest.mark.parametrize(
    "host,message",
    [
        ('{ program = "redis", test = "bogus" }', 'workloads.svc.host.test: a redis test is "get", "set"'),
        ('{ program = "nginx", test = "get" }', 'workloads.svc.host.test: is only for program = "redis" or "postgres"'),
    ],
)
def test_a_load_generator_test_is_checked(tmp_path, host, message):
    from sim.errors import ScenarioError

    path = tmp_path / "s.toml"
    path.write_text(f"""
[scenario]
name = "s"
duration = "2s"
[cgroups.online]
[workloads.svc]
kind = "closed_loop"
cgroup = "online"
clients = 2
service = "1ms"
host = {host}
""")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert message in str(err.value)


def test_every_suite_scenario_has_the_standard_cases():
    names = sorted(p.stem for p in FIDELITY_DIR.glob("*.toml"))
    assert set(SERVICES) | {"builtin"} == set(names)
    for name in names:
        sc = load_scenario(FIDELITY_DIR / f"{name}.toml")
        variants = sc.variants()
        assert [v.name for v in variants] == list(CASES), name
        assert variants[0].baseline and not variants[0].scenario.workloads["stress"].enabled
        services = [w for w in sc.workloads.values() if w.role == "service"]
        assert len(services) == 1 and services[0].host.program == ("builtin" if name == "builtin" else name)


# --- the scoring path, with the simulator as the host ------------------------------------

SHORT = ["scenario.duration=3s", "scenario.warmup=0.5s"]


def simulated_suite(out: Path, cases: tuple[str, ...] = ("alone", "stress", "idle")) -> dict:
    """The builtin service's suite with the simulator standing in for the host (seeds 101..103
    as its repetitions): predicted with seeds 1..3 from one calibration on those alone runs.
    Returns the JSON document it wrote."""
    svc = load_service("builtin", list(cases), SHORT)
    for rep in range(3):
        for case in svc.cases:
            from replay.compare import metrics

            v = svc.variants[case]
            run = run_variant(v, 101 + rep)
            svc.host.setdefault(case, []).append({m: metrics(run, v.scenario).get(k, math.nan) for m, k in METRICS.items()})
            if case == svc.baseline:
                svc.alone.append(run)
    suite = Suite([svc], reps=3, seeds=3, seed=1, out=out, command="colosim fidelity (simulated host)", say=lambda m: None, overrides=SHORT)
    suite.complete = True
    suite.finish()
    return json.loads((out / "fidelity.json").read_text())


def test_the_simulator_scored_against_itself_agrees(tmp_path):
    doc = simulated_suite(tmp_path)
    assert (tmp_path / "fidelity.html").exists()
    svc = doc["services"]["builtin"]
    assert set(svc["scores"]) == {"alone", "stress", "idle"}
    for case, row in svc["scores"].items():
        assert {"QPS", "P50 (s)", "P99 (s)"} <= set(row), case
        assert ("offline CPU (share)" in row) == (case != "alone")
        for m in ("QPS", "P50 (s)"):
            assert row[m]["host"]["n"] == 3 and row[m]["sim"]["n"] == 3
            assert abs(row[m]["error"]) < 0.10, (case, m, row[m])
    # the calibration of a model on its own runs changes nothing much
    for factors in svc["calibration"].values():
        assert factors["web"] == pytest.approx(1.0, rel=0.1)
    qps = next(r for r in svc["rankings"] if r["metric"] == "QPS")
    assert qps["host"][-1] == qps["sim"][-1] == "stress"  # both see the unisolated hog hurt most
    o = doc["overall"]
    assert o["scored"] == 2 * 4  # stress and idle x QPS, P50, P99, offline CPU
    assert o["median |error| QPS"] < 0.10
    assert {m: c["scored"] for m, c in o["per metric"].items()} == dict.fromkeys(METRICS, 2)
    assert o[f"within {WITHIN:.0%}"] == sum(c["within"] for c in o["per metric"].values())
    # the goal, per colocated case, as meets_goal has it from the case's scores
    assert set(o["goal"]["cases"]) == {"builtin: stress", "builtin: idle"}
    for key, met in o["goal"]["cases"].items():
        row = svc["scores"][key.split(": ")[1]]
        assert met == all(
            abs(row[m]["error"]) <= (0.15 if m == "P99 (s)" else 0.10) or (m != "P99 (s)" and row[m]["inside"])
            for m in ("QPS", "P50 (s)", "P99 (s)")
        )
    out = text(doc)
    assert "alone (calibrated)" in out and "median |error| of QPS" in out and "Kendall tau" in out
    assert (
        f"cases meeting the goal (QPS and P50 within 10% or inside the host's interval, P99 within 15%): {sum(o['goal']['cases'].values())} of 2"
        in out
    )


def test_the_suite_is_deterministic(tmp_path):
    a = simulated_suite(tmp_path / "a", ("alone", "quota"))
    b = simulated_suite(tmp_path / "b", ("alone", "quota"))
    assert a["services"] == b["services"]


# --- a failing case, an interrupt: what finished is kept (the host faked by the simulator) ---


class _NoSession:
    """Session's place: no lock, no cgroups."""

    def __init__(self, **kw):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


# an idle exit of 10 µs, as replay/cpuidle.py would report it
FAKE_EXIT = ExitLatency((0, 1), 100, 50.0, 80.0, 30.0, 60.0, 10.0, 10.0, 10.0, [9_999, 10_001], [1.0])
# stalls of 100 µs, 2 a second, as replay/steal.py would report them
FAKE_STALLS = stalls_from([np.array([1_000_000_000, 100_000, 1, 100_000, 2], dtype=np.int64)], [], 4e6, [0, 1], 0.0)


def _fake_host(monkeypatch, behave):
    """Replace the host by the simulator: run_on_host runs the variant in the simulator, after
    `behave(call number, variant)` had its say (raise to fail or interrupt that run)."""
    import replay.fidelity as fidelity
    from replay.host_run import HostRun

    calls = []

    def run_on_host(variant, seed, session, substituted, trace=False):
        calls.append(variant.name)
        behave(len(calls), variant)
        return HostRun(run_variant(variant, seed))

    monkeypatch.setattr(fidelity, "Session", _NoSession)
    monkeypatch.setattr(fidelity, "missing_knobs", lambda session: set())
    monkeypatch.setattr(fidelity, "measure_exit_latency", lambda: FAKE_EXIT)
    monkeypatch.setattr(fidelity, "measure_stalls", lambda: FAKE_STALLS)
    monkeypatch.setattr(fidelity, "run_on_host", run_on_host)
    return calls


def _run_suite(tmp_path, cases="alone,stress", reps="2"):
    return main(
        [
            "fidelity",
            "--services",
            "builtin",
            "--cases",
            cases,
            "--reps",
            reps,
            "--out",
            str(tmp_path),
            *(a for s in SHORT for a in ("--set", s)),
        ]
    )


def test_a_failing_run_is_recorded_and_the_suite_goes_on(tmp_path, monkeypatch, capsys):
    from sim.errors import HostError

    def behave(n, variant):
        if n == 2:
            raise HostError("workloads.stress: stress exited at start (status 1)")

    calls = _fake_host(monkeypatch, behave)
    assert _run_suite(tmp_path) == 1
    assert calls == ["alone", "stress", "alone", "stress"]
    doc = json.loads((tmp_path / "fidelity.json").read_text())
    svc = doc["services"]["builtin"]
    assert svc["failures"] == [{"case": "stress", "rep": 0, "error": "workloads.stress: stress exited at start (status 1)"}]
    assert len(svc["host"]["alone"]) == 2 and len(svc["host"]["stress"]) == 1
    assert svc["scores"]["stress"]["QPS"]["host"]["n"] == 1
    assert doc["complete"] and "1 host run failed" in capsys.readouterr().err


def test_an_interrupt_keeps_and_scores_the_finished_runs(tmp_path, monkeypatch):
    seen = []

    def behave(n, variant):
        if n == 3:
            # the JSON on disk already holds the two runs before the interrupt
            seen.append(json.loads((tmp_path / "fidelity.json").read_text())["services"]["builtin"]["host"])
            raise KeyboardInterrupt

    _fake_host(monkeypatch, behave)
    assert _run_suite(tmp_path) == 130
    assert {c: len(v) for c, v in seen[0].items()} == {"alone": 1, "stress": 1}
    doc = json.loads((tmp_path / "fidelity.json").read_text())
    assert doc["interrupted"] and not doc["complete"]
    assert doc["services"]["builtin"]["scores"]["stress"]["QPS"]["sim"]["n"] == 3
    assert (tmp_path / "fidelity.html").exists()


def test_rescore_gives_the_same_scores_and_follows_the_data(tmp_path, capsys):
    doc = simulated_suite(tmp_path / "a")
    assert main(["fidelity", "--rescore", str(tmp_path / "a/fidelity.json"), "--out", str(tmp_path / "b")]) == 0
    again = json.loads((tmp_path / "b/fidelity.json").read_text())
    assert again == doc
    # one host repetition of stress's QPS doubled: its mean, and so its error, follow
    host = doc["services"]["builtin"]["host"]["stress"]
    host[0]["QPS"] *= 2
    (tmp_path / "c.json").write_text(json.dumps(doc))
    assert main(["fidelity", "--rescore", str(tmp_path / "c.json"), "--out", str(tmp_path / "c")]) == 0
    s = json.loads((tmp_path / "c/fidelity.json").read_text())["services"]["builtin"]["scores"]["stress"]["QPS"]
    assert s["host"]["mean"] == pytest.approx(sum(h["QPS"] for h in host) / 3)
    assert s["error"] == pytest.approx(s["sim"]["mean"] / s["host"]["mean"] - 1)
    capsys.readouterr()
    (tmp_path / "bad.json").write_text('{"services": 3}')
    assert main(["fidelity", "--rescore", str(tmp_path / "bad.json"), "--out", str(tmp_path / "d")]) == 2
    assert "--rescore" in capsys.readouterr().err


def test_repredict_redoes_the_prediction_from_the_kept_host_measurements(tmp_path, capsys):
    # the same code on the same kept measurements: the same calibration and predictions
    doc = simulated_suite(tmp_path / "a", ("alone", "stress"))
    kept = doc["services"]["builtin"]["alone_measured"]
    assert kept["ncpus"] == len(host_cpus()) and set(kept["services"]) == {"web"}
    assert doc["config"]["overrides"] == SHORT  # what the host ran is what is predicted again
    assert main(["fidelity", "--repredict", str(tmp_path / "a/fidelity.json"), "--out", str(tmp_path / "b")]) == 0
    again = json.loads((tmp_path / "b/fidelity.json").read_text())
    assert again["services"] == doc["services"]
    # more seeds: the first ones' predictions are the same, and one more run per case is added
    assert main(["fidelity", "--repredict", str(tmp_path / "a/fidelity.json"), "--seeds", "4", "--out", str(tmp_path / "s")]) == 0
    more = json.loads((tmp_path / "s/fidelity.json").read_text())
    assert more["config"]["seeds"] == 4 and doc["config"]["seeds"] + 1 == 4
    for case in ("alone", "stress"):
        assert more["services"]["builtin"]["sim"][case][:3] == doc["services"]["builtin"]["sim"][case]
        assert len(more["services"]["builtin"]["sim"][case]) == 4
    # --rescore predicts nothing: --seeds is refused by name
    assert main(["fidelity", "--rescore", str(tmp_path / "a/fidelity.json"), "--seeds", "4", "--out", str(tmp_path / "r")]) == 2
    assert "--seeds: --rescore predicts nothing" in capsys.readouterr().err
    # the prediction follows the kept alone run: the cgroup measured busier alone means more
    # CPU per request (replay.calibration.service_cpu), so fewer queries predicted in every case
    web = kept["services"]["web"]
    web["busy"] *= 1.5
    (tmp_path / "c.json").write_text(json.dumps(doc))
    assert main(["fidelity", "--repredict", str(tmp_path / "c.json"), "--out", str(tmp_path / "c")]) == 0
    moved = json.loads((tmp_path / "c/fidelity.json").read_text())["services"]["builtin"]
    assert moved["host"] == doc["services"]["builtin"]["host"]  # the host's runs are kept as they were
    for case in ("alone", "stress"):
        before = sum(r["QPS"] for r in doc["services"]["builtin"]["sim"][case])
        after = sum(r["QPS"] for r in moved["sim"][case])
        assert after < 0.9 * before, case
    # a file from before --repredict existed: one clear message, nothing written
    capsys.readouterr()
    del doc["services"]["builtin"]["alone_measured"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert main(["fidelity", "--repredict", str(tmp_path / "old.json"), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "--repredict" in err and "alone_measured" in err and not (tmp_path / "d").exists()
    # a suite run on another number of CPUs is not repredicted on this host's topology
    doc["services"]["builtin"]["alone_measured"] = kept
    doc["host"]["cpus"] = len(host_cpus()) + 2
    (tmp_path / "other.json").write_text(json.dumps(doc))
    assert main(["fidelity", "--repredict", str(tmp_path / "other.json"), "--out", str(tmp_path / "e")]) == 2
    assert "CPUs" in capsys.readouterr().err


def test_the_pooled_alone_run_keeps_the_load_generators_cpu():
    """The calibration fits the generator's CPU (client_cpu) from the alone run: the suite's
    pooled alone run carries the median over the repetitions that measured it."""
    from dataclasses import dataclass, field

    from replay.fidelity import pooled_alone
    from replay.workloads import ReportedService

    @dataclass
    class Cg:
        cpu_share: float
        cpu_s: float = 0.0
        runnable_us: list | None = None

    @dataclass
    class Run:  # the fields pooled_alone reads of a RunResult
        services: dict
        measured_s: float = 10.0
        ncpus: int = 2
        cgroups: dict = field(default_factory=dict)
        others_cpu_share: float | None = None
        others_burst_s: float | None = None

    def svc(qps: float, gen: float, switches: float = math.nan) -> ReportedService:
        return ReportedService(
            "ch",
            np.empty(0),
            np.empty(0),
            0,
            0,
            10.0,
            reported={50.0: 0.5, 90.0: 0.8, 99.0: 1.0},
            reported_qps=qps,
            generator_cpu=gen,
            generator_switches=switches,
        )

    pooled = pooled_alone([Run({"ch": svc(6.0, 0.4, 300.0)}), Run({"ch": svc(7.0, math.nan)}), Run({"ch": svc(8.0, 0.6, 340.0)})])
    got = pooled.services["ch"]
    assert got.qps == 7.0 and got.generator_cpu == pytest.approx(0.5)
    # ... and its voluntary switches (the rounds are fitted from them)
    assert got.generator_switches == pytest.approx(320.0)
    none = pooled_alone([Run({"ch": svc(6.0, math.nan)})]).services["ch"]
    assert math.isnan(none.generator_cpu) and math.isnan(none.generator_switches)
    # the service cgroup's CPU share (its CPU per request) is the median; the other tenants'
    # share the mean of the repetitions that measured it
    runs = [
        Run({"ch": svc(6.0, 0.4)}, cgroups={"online": Cg(0.5)}, others_cpu_share=0.1, others_burst_s=0.002),
        Run({"ch": svc(7.0, 0.4)}, cgroups={"online": Cg(0.9)}, others_cpu_share=None),
        Run({"ch": svc(8.0, 0.4)}, cgroups={"online": Cg(0.6)}, others_cpu_share=0.4, others_burst_s=0.030),
    ]
    pooled = pooled_alone(runs)
    assert pooled.cgroups["online"].cpu_share == pytest.approx(0.6)
    assert pooled.cgroups["online"].cpu_s == pytest.approx(0.6 * 2 * 10.0)
    assert pooled.others_cpu_share == pytest.approx(0.25)
    # ... and their bursts the median of the traced repetitions (none traced: not measured)
    assert pooled.others_burst_s == pytest.approx(0.016)
    assert pooled_alone(runs[1:2]).others_burst_s is None
    # the service's queue on each CPU (traced runs): the times at each count summed over them
    runs[0].cgroups["online"].runnable_us = [[1, 2, 3], [4, 0, 0]]
    runs[2].cgroups["online"].runnable_us = [[10, 0, 0], [0, 5, 5]]
    assert pooled_alone(runs).cgroups["online"].runnable_us == [[11, 2, 3], [4, 5, 5]]
    assert pooled_alone(runs[1:2]).cgroups["online"].runnable_us is None


def test_the_suite_says_each_services_queue_alone_host_beside_model():
    from replay.compare import QUEUE_EMPTY, QUEUE_MEAN, QUEUE_SD, queue_figures
    from replay.fidelity import _queue_line

    host = queue_figures([[10, 30, 60], [0, 0, 100]])  # 5% empty; mean (30 + 120 + 200) / 200
    assert host[QUEUE_EMPTY] == pytest.approx(0.05) and host[QUEUE_MEAN] == pytest.approx(1.75)
    assert host[QUEUE_SD] == pytest.approx(math.sqrt((10 * 1.75**2 + 30 * 0.75**2 + 160 * 0.25**2) / 200))
    svc = {
        "alone_measured": {"services": {"pg": {"queue": host}}},
        # the model's alone case per seed (predict's factors): the median is the second's
        "calibration": {
            str(seed): {f"pg alone {QUEUE_EMPTY}": e, f"pg alone {QUEUE_MEAN}": 3.0 + e, f"pg alone {QUEUE_SD}": 0.5, "pg": 1.0}
            for seed, e in ((1, 0.0), (2, 0.01), (3, 0.04))
        },
    }
    line = _queue_line(svc)
    assert line == (
        "pg's queue on a CPU alone, host (traced) / model: empty 5.00% / 1.00% of CPU-time; "
        f"runnable mean 1.75 / 3.01, sd {host[QUEUE_SD]:.2f} / 0.50"
    )
    assert _queue_line({"alone_measured": {"services": {"pg": {"queue": None}}}, "calibration": svc["calibration"]}) is None


def test_the_pooled_alone_run_keeps_only_the_percentiles_the_generator_reported():
    # redis-benchmark's CSV reports min, P50, P95, P99, max: the calibration fits P50, P95 and
    # P99 (their medians over the repetitions), never a P90 interpolated between P50 and P95
    # (0.5 + 0.4 × (0.95 - 0.5) / 0.45 = 0.9 here, where the host's own P90 is unknown)
    from dataclasses import dataclass, field

    from replay.compare import alone_runs
    from replay.fidelity import load_service, pooled_alone
    from replay.workloads import ReportedService

    @dataclass
    class Run:
        services: dict
        measured_s: float = 10.0
        ncpus: int = 2
        cgroups: dict = field(default_factory=dict)
        others_cpu_share: float | None = None
        others_burst_s: float | None = None

    def redis(p50: float, p95: float) -> ReportedService:
        pct = {0.0: 0.1, 50.0: p50, 95.0: p95, 99.0: 2.0, 100.0: 9.0}
        return ReportedService("redis", np.empty(0), np.empty(0), 0, 0, 10.0, reported=pct, reported_qps=1.0)

    got = pooled_alone([Run({"redis": redis(0.5, 0.9)}), Run({"redis": redis(0.6, 1.3)}), Run({"redis": redis(0.4, 1.0)})])
    assert got.services["redis"].reported == {50.0: 0.5, 95.0: 1.0, 99.0: 2.0}
    # ... which the calibration takes as P50, P95, P99
    scenario = load_service("redis", None, []).scenario
    alone = alone_runs(scenario, got)["redis"]
    assert sorted(alone.percentiles) == [50.0, 95.0, 99.0]
    assert set(measured_metrics(alone, False)) == {"QPS", "P50", "P95", "P99"}


def test_ranking_counts_the_pairs_the_host_tells_apart_and_how_many_the_simulator_orders_alike():
    # host: alone and idle overlap (noise), stress is far below both; QPS: higher is better
    scores = {
        "alone": score([100.0, 104.0, 96.0], [100.0]),
        "idle": score([101.0, 105.0, 97.0], [90.0]),  # the sim puts idle under alone: the host cannot tell
        "stress": score([50.0, 52.0, 48.0], [95.0]),  # the sim puts stress over idle: the host tells apart
    }
    r = ranking("QPS", scores)
    assert r is not None and r.separated == 2  # alone vs stress, idle vs stress
    assert r.agreed == 1 and r.disagreed == ("idle vs stress",) and r.agrees_where_separated is False
    assert not r.same_order
    fixed = {**scores, "stress": score([50.0, 52.0, 48.0], [60.0])}
    r = ranking("QPS", fixed)
    assert r is not None and r.agreed == r.separated == 2 and r.agrees_where_separated is True
    # a prediction that ties two cases the host tells apart does not order them
    tied = {**fixed, "stress": score([50.0, 52.0, 48.0], [90.0])}
    r = ranking("QPS", tied)
    assert r is not None and r.disagreed == ("idle vs stress",)
    # P99: smaller is better, the host's better case first
    p99 = {"alone": score([1.0, 1.1, 0.9], [1.0]), "stress": score([3.0, 3.1, 2.9], [0.5])}
    r = ranking("P99 (s)", p99)
    assert r is not None and r.disagreed == ("alone vs stress",)
    # nothing told apart: no verdict
    r = ranking("QPS", {"a": score([1.0, 2.0], [1.0]), "b": score([1.5, 1.6], [2.0])})
    assert r is not None and r.separated == 0 and r.agrees_where_separated is None


def test_the_suite_measures_the_idle_exit_once_and_keeps_it_for_a_prediction_that_asks(tmp_path, monkeypatch, capsys):
    calls = _fake_host(monkeypatch, lambda n, v: None)
    assert _run_suite(tmp_path, cases="alone", reps="1") == 0 and calls == ["alone"]
    doc = json.loads((tmp_path / "fidelity.json").read_text())
    # kept with the host, with the --set that puts it in a prediction; not in this one
    assert doc["host"]["cpuidle"]["p50_us"] == 10.0 and doc["host"]["cpuidle"]["override"] == FAKE_EXIT.override()
    assert doc["host"]["steal"]["rate_per_s"] == 2.0 and doc["host"]["steal"]["override"] == FAKE_STALLS.override()
    assert doc["config"]["overrides"] == SHORT
    # a user's own [node.cpuidle] replaces the measurement
    monkeypatch.setattr("replay.fidelity.measure_exit_latency", lambda: pytest.fail("measured"))
    mine = 'node.cpuidle={exit_latency = "5us"}'
    assert (
        main(
            [
                "fidelity",
                "--services",
                "builtin",
                "--cases",
                "alone",
                "--reps",
                "1",
                "--out",
                str(tmp_path / "m"),
                "--set",
                mine,
                *(a for s in SHORT for a in ("--set", s)),
            ]
        )
        == 0
    )
    doc = json.loads((tmp_path / "m/fidelity.json").read_text())
    assert doc["host"]["cpuidle"] is None and mine in doc["config"]["overrides"]
    # --repredict takes another; --rescore, which predicts nothing, refuses one
    assert (
        main(
            [
                "fidelity",
                "--repredict",
                str(tmp_path / "m/fidelity.json"),
                "--out",
                str(tmp_path / "r"),
                "--set",
                'node.cpuidle={exit_latency = "9us"}',
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "r/fidelity.json").read_text())["config"]["overrides"][-1] == 'node.cpuidle={exit_latency = "9us"}'
    capsys.readouterr()
    assert main(["fidelity", "--rescore", str(tmp_path / "m/fidelity.json"), "--out", str(tmp_path / "s"), "--set", mine]) == 2
    assert "--repredict" in capsys.readouterr().err


def test_the_suite_scores_the_batchs_regime_in_every_run(tmp_path, capsys):
    # the host starved the batch in 2 of 3 repetitions, the model in 1 of 3 seeds: the regimes
    # disagree, both sides split, and the errors in the host's regime count only its runs
    doc = simulated_suite(tmp_path / "a", ("alone", "stress", "idle"))
    svc = doc["services"]["builtin"]
    for side, shares, qps in (("host", [0.01, 0.02, 0.45], [100.0, 110.0, 60.0]), ("sim", [0.46, 0.005, 0.47], [50.0, 99.0, 55.0])):
        for run, share, q in zip(svc[side]["stress"], shares, qps, strict=True):
            run["offline CPU (share)"], run["QPS"] = share, q
    (tmp_path / "c.json").write_text(json.dumps(doc))
    assert main(["fidelity", "--rescore", str(tmp_path / "c.json"), "--out", str(tmp_path / "c")]) == 0
    again = json.loads((tmp_path / "c/fidelity.json").read_text())
    r = again["services"]["builtin"]["regimes"]
    assert set(r) == {"stress"}  # idle: cpu.idle's weight claims next to nothing
    s = r["stress"]
    assert s["claim"] == pytest.approx(0.5) and s["threshold"] == pytest.approx(0.125)
    assert s["host"] == ["starved", "starved", "shared"] and s["sim"] == ["shared", "starved", "shared"]
    assert (s["host_majority"], s["sim_majority"], s["agree"]) == ("starved", "shared", False)
    q = s["in_host_regime"]["QPS"]
    assert (q["host_runs"], q["sim_runs"]) == (2, 1)
    assert q["error"] == pytest.approx(99.0 / ((100.0 + 110.0) / 2) - 1)
    o = again["overall"]["regimes"]
    assert (o["cases"], o["told"], o["agree"]) == (1, 1, 0)
    assert o["disagree"] == o["model split"] == o["host split"] == ["builtin: stress"]
    assert o["median |error| in the host's regime"]["QPS"]["median"] == pytest.approx(abs(q["error"]))
    # over all the runs the error is the means' (the suite's own score)
    assert o["median |error| in the host's regime"]["QPS"]["all runs"] == pytest.approx(
        abs(np.mean([50, 99, 55]) / np.mean([100, 110, 60]) - 1)
    )
    out = capsys.readouterr().out
    assert "batch regime, stress (starved: under 0.125 of the node" in out
    assert "host starved 2 of 3 (0.010 0.020 0.450); model starved 1 of 3 (0.460 0.005 0.470)" in out
    assert "in the host's regime (starved: 2 repetitions, 1 seed) QPS -5.7%" in out
    assert "the model's seeds mostly settle where the host's repetitions mostly did in 0 of 1 (not: builtin: stress)" in out
