"""Predictions on a busy host (issue 17): the service's CPU per request measured from what its
cgroup consumed (replay.calibration.service_cpu), the other tenants' CPU measured from the
node's counters (replay.host_run.others_share) and run beside every prediction
(replay.background). Truth: arithmetic worked by hand from known counter deltas, and a
simulated "host" run whose service CPU is known exactly (a constant service time)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from replay.background import BACKGROUND_PERIOD, background_cpus, background_of, mean_background, with_background
from replay.calibration import AloneRun, fit_service, service_cpu
from replay.compare import root_own_cpus
from replay.host_run import others_share
from sim.duration import parse_duration
from sim.results import ExperimentResult
from sim.runner import run_variant
from sim.scenario import Scenario, Variant

pytest.importorskip("sim._core")

PCTS = {50.0: 0.4, 90.0: 0.5, 99.0: 0.6}


# --- the service's CPU per request, from its cgroup ------------------------------------------


def test_service_cpu_is_the_cgroups_cpu_less_the_generators_over_requests_and_threads():
    # 2 CPUs; the cgroup used 0.6 of the node = 1.2 CPU·s/s at 5 requests/s: 240 ms a request;
    # the generator (in that cgroup) used 0.4 CPU·s/s = 80 ms a request; the server's 160 ms
    # run on 2 threads: 80 ms each
    alone = AloneRun(qps=5.0, percentiles=PCTS, busy=0.6, generator_cpu=0.4)
    assert service_cpu(alone, 0.08, ncpus=2, threads=2) == pytest.approx(0.08)
    assert service_cpu(alone, 0.0, ncpus=2, threads=1) == pytest.approx(0.24)
    # nothing measured, or nothing left for the server: not known (the mean is fitted)
    assert service_cpu(AloneRun(qps=5.0, percentiles=PCTS), 0.08, 2, 2) is None
    assert service_cpu(AloneRun(qps=5.0, percentiles=PCTS, busy=0.1), 0.08, 2, 2) is None


def test_the_fit_keeps_the_measured_cpu_as_every_familys_mean_and_reports_what_it_misses():
    alone = AloneRun(qps=5.0, percentiles=PCTS, busy=0.6, generator_cpu=0.4, others=0.3)
    seen = []

    def simulate(svc, client, delay):
        seen.append(svc)
        # the model with that CPU is 20% short of the host's alone QPS (as on a host whose
        # contention the model does not carry)
        return {"QPS": 4.0, "P50": 0.4, "P90": 0.5, "P99": 0.6}

    fit = fit_service("ch", alone, simulate, ncpus=2, clients=4, threads=2, background_cpus=0.6)
    means = {int(s.get("mean", s.get("value", "0ns"))[:-2]) for s in seen if s["dist"] != "empirical"}
    assert means == {80_000_000}  # never refitted to the QPS
    assert fit.cpu_s == pytest.approx(0.08) and fit.client_cpu_s == pytest.approx(0.08)
    assert fit.contention == pytest.approx(-0.2)  # reported, not refitted away
    doc = fit.to_dict()
    assert doc["service_cpu_from"] == "cgroup" and doc["alone_qps_unexplained"] == pytest.approx(-0.2)
    assert doc["background_cpus"] == 0.6
    text = fit.describe()
    assert "80 ms per request per thread, measured from its cgroup" in text
    assert "-20.0% off the host's: contention the model does not explain" in text
    assert "0.60 CPUs busy outside the run" in text


def constant_service(cpus: int = 2) -> Scenario:
    """A closed loop fanned out over every CPU, 10 ms of CPU per thread, no generator CPU."""
    doc = {
        "scenario": {"name": "busy", "duration": "6s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
        "node": {"cores_per_socket": cpus},
        "cgroups": {"online": {"cpu.shares": 1024}},
        "workloads": {
            "web": {
                "kind": "closed_loop",
                "cgroup": "online",
                "clients": 3,
                "fanout": "ncpus",
                "service": {"dist": "constant", "value": "10ms"},
            }
        },
    }
    return Scenario.from_document(doc)


def test_calibrate_services_measures_a_known_service_cpu_from_a_simulated_host_run():
    from replay.compare import calibrate_services

    sc = constant_service()
    base = next(v for v in sc.variants() if v.baseline)
    run = run_variant(base, 7)  # stands for the host: its cgroup's CPU is 20 ms a request
    host = ExperimentResult(sc.name, 7, sc.duration_s, sc.warmup_s, base.name)
    host.runs[base.name] = run
    fit = calibrate_services(sc, host, 1, set())["web"]
    # the cgroup's CPU over the window / completed requests / 2 threads = 10 ms (the window's
    # edges cut a request or two of ~500)
    assert fit.cpu_s == pytest.approx(0.010, rel=0.01)
    # nothing between the requests: a constant fits — or a lognormal as narrow as the
    # scheduling differences between the two seeds leave (the balancer moves the threads of a
    # group whose weight swings between the CPUs: lb_groups.rs `cpu_load`)
    assert fit.family == "constant" or (fit.family == "lognormal" and fit.service["sigma"] < 0.1), (fit.family, fit.service)


# --- the other tenants ------------------------------------------------------------------------


@dataclass
class Cg:
    cpu_s: float


def test_the_background_is_the_nodes_busy_time_less_our_top_level_cgroups():
    # 10 s on 2 CPUs (capacity 20 CPU·s); /proc/stat's busy time rose 12 s; our cgroups used
    # 5 s (online, which holds online/x's 1 s) and 3 s (offline): the others used 4 s, 0.2 of
    # the node, 0.4 CPUs
    a, b = {"node_busy_s": 100.0}, {"node_busy_s": 112.0}
    cgroups = {"online": Cg(5.0), "online/x": Cg(1.0), "offline": Cg(3.0)}
    share = others_share(a, b, cgroups, ["online", "online/x", "offline"], 20.0)
    assert share == pytest.approx(0.2)
    assert background_cpus(share, 2) == pytest.approx(0.4)
    # never negative (counter granularity), and unknown without the node's counters
    assert others_share(a, {"node_busy_s": 107.0}, cgroups, ["online", "offline"], 20.0) == 0.0
    assert others_share({}, b, cgroups, ["online"], 20.0) is None
    assert background_cpus(None, 2) == 0.0
    assert mean_background([0.2, None, 0.6, math.nan]) == pytest.approx(0.4)
    assert mean_background([]) == 0.0


def test_the_prediction_runs_the_measured_background_beside_the_service():
    sc = constant_service()
    got = with_background(sc, 1.3)
    # floor(1.3) + 1 = 2 threads, each in the root cgroup in a session (autogroup) of its own,
    # each running 0.65 of every period: every one sleeps in every period
    bg = {n: w for n, w in got.workloads.items() if n.startswith("background")}
    assert len(bg) == 2 and len({w.session for w in bg.values()}) == 2
    for name, w in bg.items():
        spec = w.core_spec(name, 2)
        assert spec["kind"] == "duty" and spec["cgroup"] == "/" and spec["max_threads"] == 1
        assert spec["cores"] == pytest.approx(0.65)
    assert background_of(got) == pytest.approx(1.3)
    assert background_of(with_background(sc, 0.6)) == pytest.approx(0.6)
    assert len([n for n in with_background(sc, 1.0).workloads if n.startswith("background")]) == 2  # 0.5 each, never a hog
    assert background_of(with_background(sc, 5.0)) == pytest.approx(2.0)  # at most the node
    assert "background0" not in sc.workloads  # the scenario itself is left alone
    assert with_background(sc, 0.0) is sc and with_background(sc, 0.001) is sc
    # alone on an otherwise idle node it uses what was measured
    idle = Scenario.from_document(
        {
            "scenario": {"name": "bg", "duration": "5s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
            "node": {"cores_per_socket": 2},
            "cgroups": {"x": {}},
            "workloads": {"h": {"kind": "hog", "cgroup": "x", "threads": 1, "enabled": False}},
        }
    )
    for cpus in (0.7, 1.3):
        run = run_variant(Variant("bg", True, with_background(idle, cpus)), 1)
        assert root_own_cpus(run) == pytest.approx(cpus, rel=0.02)


def test_the_background_runs_the_bursts_its_tenants_were_measured_in():
    sc = constant_service()

    def periods(got) -> set[int]:
        return {w.core_spec(n, 2)["period_ns"] for n, w in got.workloads.items() if n.startswith("background")}

    # 0.03 CPUs in 3 ms bursts: one thread, 3 ms of every 100 ms; in 30 ms bursts, 30 ms of
    # every second, but a period is at most a tenth of the 5 s window; 1.3 CPUs in 20 ms
    # bursts: two threads of 0.65, each 20 ms of every 20 / 0.65 ms
    assert periods(with_background(sc, 0.03, 0.003)) == {100_000_000}
    assert periods(with_background(sc, 0.03, 0.030)) == {500_000_000}
    assert periods(with_background(sc, 1.3, 0.020)) == {round(20e6 / 0.65)}
    assert background_of(with_background(sc, 1.3, 0.020)) == pytest.approx(1.3)
    # not measured: the default period; a hog's whole-run burst is held to a tenth of the
    # measured window (5 s here) and a tick's worth to 1 ms
    assert periods(with_background(sc, 0.03)) == {parse_duration(BACKGROUND_PERIOD)}
    assert periods(with_background(sc, 0.5, 10.0)) == {500_000_000}
    assert periods(with_background(sc, 0.5, 1e-6)) == {1_000_000}
    # alone on an idle node it still uses what was measured, in those bursts
    idle = Scenario.from_document(
        {
            "scenario": {"name": "bg", "duration": "5s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
            "node": {"cores_per_socket": 2},
            "cgroups": {"x": {}},
            "workloads": {"h": {"kind": "hog", "cgroup": "x", "threads": 1, "enabled": False}},
        }
    )
    run = run_variant(Variant("bg", True, with_background(idle, 0.1, 0.05)), 1)
    assert root_own_cpus(run) == pytest.approx(0.1, rel=0.02)


def test_predict_gives_each_case_its_own_background_and_says_it():
    from replay.compare import predict
    from replay.fidelity import load_service

    svc = load_service("builtin", ["alone", "stress"], ["scenario.duration=3s", "scenario.warmup=0.5s"])
    alone = run_variant(svc.variants["alone"], 5)
    host = ExperimentResult(svc.scenario.name, 5, svc.scenario.duration_s, svc.scenario.warmup_s, "alone")
    host.runs["alone"] = alone
    predicted, factors = predict(svc.scenario, host, 1, set(), background={"alone": 0.0, "stress": 0.5})
    assert factors["alone background CPUs"] == 0.0 and factors["stress background CPUs"] == 0.5
    assert root_own_cpus(predicted.runs["alone"]) == 0
    assert root_own_cpus(predicted.runs["stress"]) > 0
    # ... and says what the model ran of it (the case given none says nothing)
    assert factors["stress background CPUs run"] == pytest.approx(root_own_cpus(predicted.runs["stress"]))
    assert "alone background CPUs run" not in factors


def test_the_suite_says_what_the_model_ran_of_the_background():
    from replay.fidelity import _background_run

    svc = {
        "cases": ["alone", "stress", "idle"],
        "calibration": {
            "1": {"alone background CPUs": 0.0, "stress background CPUs run": 0.02, "idle background CPUs run": 0.0},
            "2": {"stress background CPUs run": 0.04, "idle background CPUs run": None},
        },
    }
    assert _background_run(svc) == pytest.approx({"stress": 0.03, "idle": 0.0})
    assert _background_run({"cases": ["alone"]}) == {}


# --- one calibration per service ---------------------------------------------------------------


def test_the_case_runs_do_not_change_the_fit(tmp_path: Path):
    """The suite calibrates each service once, on its alone runs: changing every other case's
    host measurements and backgrounds leaves the fitted figures as they were (and changes that
    case's prediction, which does run beside its background)."""
    from replay.compare import metrics
    from replay.fidelity import METRICS, Suite, load_service

    def suite(stress_seed: int, stress_background: float) -> Suite:
        svc = load_service("builtin", ["alone", "stress"], ["scenario.duration=3s", "scenario.warmup=0.5s"])
        for rep in range(2):
            for case, seed in (("alone", 101 + rep), ("stress", stress_seed + rep)):
                v = svc.variants[case]
                run = run_variant(v, seed)
                svc.host.setdefault(case, []).append({m: metrics(run, v.scenario).get(k, math.nan) for m, k in METRICS.items()})
                svc.background.setdefault(case, []).append(0.2 if case == "alone" else stress_background)
                if case == svc.baseline:
                    svc.alone.append(run)
        s = Suite([svc], reps=2, seeds=1, seed=1, out=tmp_path, command="test", say=lambda m: None)
        s.predict()
        return s

    a, b = suite(201, 0.0), suite(301, 0.8)
    ca, cb = a.services[0].calibration["1"], b.services[0].calibration["1"]
    fitted = {k: v for k, v in ca.items() if "background" not in k}
    assert fitted == {k: v for k, v in cb.items() if "background" not in k}
    assert ca["alone background CPUs"] == cb["alone background CPUs"] == pytest.approx(0.2)
    assert (ca["stress background CPUs"], cb["stress background CPUs"]) == (0.0, pytest.approx(0.8))
    assert a.services[0].sim["stress"] != b.services[0].sim["stress"]
