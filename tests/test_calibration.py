"""The service calibration of `colosim replay --compare` (replay/calibration.py) against
truth worked out by hand: samples drawn with numpy from known distributions, reduced to what a
load generator reports (QPS and percentiles) of one client on an otherwise idle CPU, where
latency is the service time; the load generator's CPU and the delay as the closed loop
accounts them (CPU·s/s = QPS × CPU per request); and the quality a poor fit is reported with."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

from replay.calibration import POOR_FIT, AloneRun, Fit, apply_fit, calibration_doc, client_rounds, fit_service, shortened, simulator_of
from replay.cgroupfs import HostError
from replay.workloads import ExitClock, HostWorkload, generator_cpu_rate, reap_switches
from sim.runner import run_variant
from sim.scenario import Scenario, Variant

pytest.importorskip("sim._core")

N = 40_000


def one_client(service: dict | None = None, cpus: int = 1, **extra) -> Scenario:
    web = {"kind": "closed_loop", "cgroup": "svc", "clients": 1, "service": service or {"dist": "constant", "value": "1ms"}, **extra}
    doc = {
        "scenario": {"name": "calibration", "duration": "60s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
        "node": {"cores_per_socket": cpus},
        "cgroups": {"svc": {}},
        "workloads": {"web": web},
    }
    return Scenario.from_document(doc)


def reported(sample: np.ndarray) -> AloneRun:
    """What a generator reports of one client whose requests take `sample`: QPS = 1 / mean
    (one request at a time, nothing between them), the percentiles wrk prints, a busy CPU."""
    return AloneRun(qps=1 / sample.mean(), percentiles={p: float(np.percentile(sample, p)) for p in (50.0, 75.0, 90.0, 99.0)}, busy=1.0)


def fit_of(sample: np.ndarray) -> Fit:
    alone = reported(sample)
    sc = shortened(one_client(), alone.qps)
    return fit_service("web", alone, simulator_of(sc, "web", 1, frozenset(), 1), ncpus=1, clients=1)


def test_a_lognormal_sample_is_fitted_as_lognormal_with_its_mean_and_sigma():
    mean, sigma = 2e-3, 0.6
    rng = np.random.default_rng(5)
    # numpy's mean is of the underlying normal: the lognormal's mean is exp(mu + sigma^2 / 2)
    sample = rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, N)
    fit = fit_of(sample)
    assert fit.family == "lognormal"
    assert abs(int(fit.service["mean"][:-2]) / 1e9 / mean - 1) < 0.03
    assert abs(fit.service["sigma"] / sigma - 1) < 0.10
    assert fit.quality == "good", fit.describe()


def test_an_exponential_sample_is_fitted_as_exponential():
    mean = 1e-3
    sample = np.random.default_rng(6).exponential(mean, N)
    fit = fit_of(sample)
    assert fit.family == "exponential", fit.tried
    assert abs(int(fit.service["mean"][:-2]) / 1e9 / mean - 1) < 0.03
    assert fit.quality == "good"


def test_a_bimodal_sample_falls_back_to_empirical_and_says_so():
    rng = np.random.default_rng(7)
    fast, slow = rng.normal(1e-3, 5e-5, N), rng.normal(10e-3, 5e-4, N)
    sample = np.where(rng.uniform(size=N) < 0.7, fast, slow)
    fit = fit_of(sample)
    assert fit.family == "empirical"
    # every parametric family missed some metric by more than POOR_FIT, and the fit says so
    assert any("fell back to an empirical histogram" in n for n in fit.notes)
    assert "empirical" in fit.describe()
    assert fit.tried["empirical"] < min(fit.tried[f] for f in ("constant", "exponential", "lognormal"))


def run_alone(sc: Scenario):
    from sim.runner import run_variant

    return run_variant(Variant("alone", True, sc), 1)


def test_a_client_cost_of_c_per_request_at_qps_q_adds_q_times_c_cpu_in_its_cgroup():
    # one client, 2 CPUs (no contention): service 1 ms, client 0.5 ms, think 3 ms (exp.)
    base = one_client(cpus=2, think={"dist": "exponential", "mean": "3ms"})
    plain = run_alone(base)
    costly = run_alone(one_client(cpus=2, think={"dist": "exponential", "mean": "3ms"}, client_cpu={"dist": "constant", "value": "500us"}))
    for run, per_request in ((plain, 1e-3), (costly, 1.5e-3)):
        svc, cg = run.services["web"], run.cgroups["svc"]
        # CPU·s/s of the cgroup = QPS x CPU per request (within what the window's edges cut)
        assert cg.cpu_s / run.measured_s == pytest.approx(svc.qps * per_request, rel=0.01)
    # the client's CPU is inside the latency the generator measures: 0.5 ms + 1 ms, always
    assert costly.services["web"].p50_s == pytest.approx(1.5e-3, rel=1e-3)
    assert costly.services["web"].p99_s == pytest.approx(1.5e-3, rel=1e-3)
    # and the loop is longer by it: QPS = 1 / (think + client + service)
    assert costly.services["web"].qps == pytest.approx(1 / 4.5e-3, rel=0.03)


def test_a_delay_is_latency_without_cpu():
    run = run_alone(one_client(cpus=2, delay={"dist": "constant", "value": "2ms"}))
    svc, cg = run.services["web"], run.cgroups["svc"]
    assert svc.p50_s == pytest.approx(3e-3, rel=1e-3)  # delay + service
    assert svc.qps == pytest.approx(1 / 3e-3, rel=0.01)
    # the CPU is the service's alone: the delay leaves the CPU idle (the gaps a batch fills)
    assert cg.cpu_s / run.measured_s == pytest.approx(svc.qps * 1e-3, rel=0.01)


def test_the_generator_cpu_per_request_is_its_measured_rate_over_qps():
    # a generator using 0.3 CPU·s/s at 1000 requests/s spends 300 µs per request
    alone = AloneRun(qps=1000.0, percentiles={50.0: 1e-3, 90.0: 1.2e-3, 99.0: 1.5e-3}, busy=1.0, generator_cpu=0.3)
    fit = fit_service("web", alone, lambda svc, c, d: {"QPS": 1000.0, "P50": 1e-3, "P90": 1.2e-3, "P99": 1.5e-3}, ncpus=1, clients=1)
    assert fit.client_cpu_s == pytest.approx(300e-6)
    sc = apply_fit(one_client(), fit)
    assert sc.workloads["web"].client_cpu.value == 300_000  # type: ignore[union-attr]


def test_cross_cpu_costs_are_taken_out_of_the_measured_cpu_per_request():
    # alone on 2 CPUs at 1000 requests/s: the generator used 0.3 CPU (300 µs a request) and
    # the cgroup 0.45 of the node, 900 µs a request, so the server 600 µs. With cross_cpu
    # server 200 µs, client 100 µs, every alone exchange paid them: 400 µs and 200 µs on one CPU
    alone = AloneRun(qps=1000.0, percentiles={50.0: 2e-3, 90.0: 2.4e-3, 99.0: 3e-3}, busy=0.45, generator_cpu=0.3)
    seen: list[tuple[dict, float]] = []

    def sim(svc, c, d):
        seen.append((svc, c.cpu_s))
        return {"QPS": 1000.0, "P50": 2e-3, "P90": 2.4e-3, "P99": 3e-3, "CPU share": 0.45}

    fit = fit_service("web", alone, sim, ncpus=2, clients=1, cross=(200e-6, 100e-6))
    assert fit.client_cpu_s == pytest.approx(200e-6)
    assert fit.cpu_s == pytest.approx(400e-6)
    assert all(c == pytest.approx(200e-6) for _, c in seen)
    assert any("cross_cpu" in n for n in fit.notes)
    # a cost beyond what was measured is one message naming the field
    with pytest.raises(HostError, match=r"workloads\.web\.cross_cpu\.client"):
        fit_service("web", alone, sim, ncpus=2, clients=1, cross=(0.0, 300e-6))
    with pytest.raises(HostError, match=r"workloads\.web\.cross_cpu\.server"):
        fit_service("web", alone, sim, ncpus=2, clients=1, cross=(700e-6, 0.0))


def test_cross_cpu_costs_are_taken_out_as_often_as_the_model_crossed():
    # the alone run of the test above, but its requests come in 2 rounds (the server traced
    # 2 sleeps a request): each request paid each cost twice, 400 µs a request and 200 µs
    # out of the server's 600 and the generator's 300 µs
    alone = AloneRun(qps=1000.0, percentiles={50.0: 2e-3, 90.0: 2.4e-3, 99.0: 3e-3}, busy=0.45, generator_cpu=0.3, server_switches=2000.0)

    def sim(svc, c, d):
        return {"QPS": 1000.0, "P50": 2e-3, "P90": 2.4e-3, "P99": 3e-3, "CPU share": 0.45}

    fit = fit_service("web", alone, sim, ncpus=2, clients=1, cross=(200e-6, 100e-6))
    assert fit.rounds == 2
    assert fit.client_cpu_s == pytest.approx(100e-6) and fit.cpu_s == pytest.approx(200e-6)
    # the model's own count of crossings a request (from a first fit) replaces the rounds
    fit = fit_service("web", alone, sim, ncpus=2, clients=1, cross=(200e-6, 100e-6), crossings=0.5)
    assert fit.client_cpu_s == pytest.approx(250e-6) and fit.cpu_s == pytest.approx(500e-6)
    # without a generator's CPU the model's clients run no task: nothing crosses
    fit = fit_service("web", replace(alone, generator_cpu=0.0), sim, ncpus=2, clients=1, cross=(200e-6, 100e-6))
    assert fit.cpu_s == pytest.approx(900e-6) and not any("cross_cpu" in n for n in fit.notes)


def test_a_fitted_delay_stays_within_the_time_round_the_loop():
    # one client at 1000 requests/s: 1 ms round the loop, so no request can wait longer inside
    # its latency. A model that matched the host only with a delay of 5 ms or more (as a delay
    # only some requests wait can seem to) must not be given one
    alone = AloneRun(qps=1000.0, percentiles={50.0: 1e-3, 90.0: 1.2e-3, 99.0: 1.5e-3}, busy=0.25, generator_cpu=0.1, others=0.0)
    exact = {"QPS": 1000.0, "P50": 1e-3, "P90": 1.2e-3, "P99": 1.5e-3, "CPU share": 0.25}

    def sim(svc, c, d):
        # closer to the host the longer the delay, up to 5 ms
        off = 1 + max(0.0, 5e-3 - d[0]) / 5e-3
        return {m: v * off for m, v in exact.items()}

    fit = fit_service("web", alone, sim, ncpus=2, clients=1)
    assert 0 < fit.delay_s <= 1e-3


def test_client_threads_take_the_rounds_fitted():
    # a generator pool runs every round of its clients in turn (core_rs cross_cpu.rs)
    fit = Fit("web", "constant", {"dist": "constant", "value": "1ms"}, 300e-6, 0.0, {}, {}, rounds=5)
    sc = apply_fit(one_client(client_threads=1), fit)
    assert sc.workloads["web"].rounds == 5  # type: ignore[union-attr]
    assert one_client(client_threads=1, rounds=3, client_cpu={"dist": "constant", "value": "1ms"}).workloads["web"].rounds == 3  # type: ignore[union-attr]


def test_an_unmeasured_generator_is_said():
    alone = AloneRun(qps=1000.0, percentiles={50.0: 1e-3, 90.0: 1.2e-3, 99.0: 1.5e-3}, generator_cpu=math.nan)
    fit = fit_service("web", alone, lambda svc, c, d: {"QPS": 1000.0, "P50": 1e-3, "P90": 1.2e-3, "P99": 1.5e-3}, ncpus=1, clients=1)
    assert fit.client_cpu_s == 0
    assert any("not measured" in n for n in fit.notes)


def test_a_poor_fit_is_reported_in_the_output_and_in_comparison_json():
    good = Fit("a", "lognormal", {}, 0.0, 0.0, measured={"QPS": 100.0, "P50": 0.01}, fitted={"QPS": 104.0, "P50": 0.0105})
    poor = Fit("b", "lognormal", {}, 0.0, 0.0, measured={"QPS": 100.0, "P50": 0.01}, fitted={"QPS": 100.0, "P50": 0.0125})
    assert good.quality == "good" and "POOR FIT" not in good.describe()
    assert poor.quality == "poor" and poor.poor == ["P50"]
    assert poor.residuals["P50"] == pytest.approx(0.25)
    assert "POOR FIT: P50" in poor.describe()
    assert calibration_doc({"a": good})["quality"] == "good"
    doc = calibration_doc({"a": good, "b": poor})
    assert doc["quality"] == "poor"
    assert doc["services"]["b"]["poor_metrics"] == ["P50"]
    assert doc["poor_fit_threshold"] == POOR_FIT
    # a metric the simulation could not reproduce at all is a miss, not a pass
    lost = Fit("c", "constant", {}, 0.0, 0.0, measured={"QPS": 100.0}, fitted={"QPS": math.nan})
    assert lost.quality == "poor"


def test_builtin_workloads_refuse_the_generator_fields_on_the_host():
    sc = one_client(client_cpu={"dist": "constant", "value": "10us"})
    w = sc.workloads["web"]
    with pytest.raises(HostError, match=r"workloads\.web\.client_cpu: does not replay with host = \"builtin\""):
        HostWorkload("web", w, {}, "workloads.web").check()


def test_a_zombie_generators_cpu_is_read_before_it_is_reaped():
    # the child burns 0.3 s of its own CPU clock (not wall time) and says how much it used
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\nprint(time.process_time())"
    p = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    started = time.monotonic()
    while os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT) is None:
        pass
    wall = time.monotonic() - started
    rate = generator_cpu_rate(p.pid, wall)
    out, _ = p.communicate()
    used = float(out)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert rate * wall == pytest.approx(used, abs=3 * tick)


def test_a_generators_rate_is_over_its_own_lifetime_not_until_its_exit_is_noticed():
    # the child burns 0.3 s of its CPU clock and exits; the run looks for its exit only 2 s
    # after its start (a trace's teardown): its rate is its CPU over the time it lived
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\nprint(time.process_time())"
    w = HostWorkload("web", one_client().workloads["web"], {}, "workloads.web")
    w._gen_started = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    w._gen_proc = p
    w._gen_exit = clock = ExitClock(p.pid)
    time.sleep(2.0)
    noticed = time.monotonic() - w._gen_started
    w._wait_generator(timeout=5.0)
    used = float(p.stdout.read())  # type: ignore[union-attr]
    lived = clock.at() - w._gen_started
    # a one-threaded child uses no more CPU than the time it lived, which ended well before
    assert used <= lived < noticed - 0.5
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert w.generator_cpu * lived == pytest.approx(used, abs=3 * tick)
    assert w.generator_cpu > 1.5 * used / noticed  # what the run's notice would have given


def test_an_alone_run_beside_other_work_is_a_poor_calibration():
    alone = AloneRun(qps=1000.0, percentiles={50.0: 1e-3, 90.0: 1.2e-3, 99.0: 1.5e-3}, others=0.4)
    fit = fit_service("web", alone, lambda svc, c, d: {"QPS": 1000.0, "P50": 1e-3, "P90": 1.2e-3, "P99": 1.5e-3}, ncpus=1, clients=1)
    assert not fit.poor  # every metric fitted ...
    assert fit.quality == "poor"  # ... but to a disturbed window
    assert "DISTURBED: 40%" in fit.describe()
    assert calibration_doc({"web": fit})["services"]["web"]["disturbed"] is True


def test_node_busy_time_is_read_from_proc_stat(tmp_path):
    from replay.cgroupfs import read_node_busy_s

    f = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice: busy excludes idle,
    # iowait and guest (already counted in user)
    f.write_text("cpu  100 20 30 5000 70 4 6 10 50 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n")
    assert read_node_busy_s(f) == pytest.approx(170 / os.sysconf("SC_CLK_TCK"))


def test_gaps_are_not_fitted_to_a_disturbed_alone_run():
    # half the node idle for this service, but 40% of it busy with other tenants' work
    alone = AloneRun(qps=1000.0, percentiles={50.0: 1e-3, 90.0: 1.2e-3, 99.0: 1.5e-3}, busy=0.5, others=0.4)
    seen = []

    def simulate(svc, c, d):
        seen.append(d)
        return {"QPS": 1000.0, "P50": 1e-3, "P90": 1.2e-3, "P99": 1.5e-3, "CPU share": 1.0}

    fit = fit_service("web", alone, simulate, ncpus=1, clients=4)
    assert set(seen) == {(0.0, 0.0)} and fit.delay_s == 0 and "CPU share" not in fit.measured
    assert any("no delay fitted" in n for n in fit.notes)


def test_validate_says_when_the_calibration_behind_its_errors_is_poor():
    from sim.tuning.validate import table_text

    variant = {"measured": {"QPS": 100.0}, "predicted": {"QPS": 90.0}}
    poor = {"services": {"web": {"quality": "poor", "poor_metrics": ["P50"]}}}
    good = {"services": {"web": {"quality": "good", "poor_metrics": []}}}
    text = table_text(
        {"best": {"variants": {"alone": variant}, "calibration": poor}, "default": {"variants": {"alone": variant}, "calibration": good}}
    )
    assert "best: the service model of web fits its alone run poorly (P50)" in text
    assert "default: the service model" not in text


def test_the_rounds_are_the_generators_voluntary_switches_per_request():
    # 450 voluntary switches/s at 10 requests/s: the generator waits for the server 45 times
    # a request, so client_cpu and the service alternate in 45 parts
    alone = AloneRun(qps=10.0, percentiles={50.0: 0.4, 90.0: 0.5, 99.0: 0.6}, busy=1.0, generator_cpu=0.9, generator_switches=450.0)
    seen = []

    def simulate(svc, c, d):
        seen.append(c)
        return {"QPS": 10.0, "P50": 0.4, "P90": 0.5, "P99": 0.6}

    fit = fit_service("web", alone, simulate, ncpus=2, clients=4)
    assert seen and all(c.rounds == 45 and c.cpu_s == pytest.approx(0.09) for c in seen)
    assert fit.rounds == 45 and fit.to_dict()["rounds"] == 45 and "in 45 rounds" in fit.describe()
    sc = apply_fit(one_client(), fit)
    w = sc.workloads["web"]
    assert w.rounds == 45  # type: ignore[union-attr]
    assert w.core_spec("web", 1)["rounds"] == 45
    assert fit.rounds_from == "generator" and "the server's were not traced" in fit.describe()
    # nothing to split, or nothing measured: one round
    assert client_rounds(AloneRun(qps=10.0, percentiles={}, generator_switches=450.0), 0.0).k == 1
    assert client_rounds(AloneRun(qps=10.0, percentiles={}, generator_switches=math.nan), 0.09).k == 1
    assert client_rounds(AloneRun(qps=10.0, percentiles={}, generator_switches=2.0), 0.09).k == 1
    # one round leaves the scenario as it was (the core spec without `rounds`: bit-identical)
    one = apply_fit(one_client(), Fit("web", "constant", {"dist": "constant", "value": "1ms"}, 1e-4, 0.0, {}, {}))
    assert "rounds" not in one.workloads["web"].core_spec("web", 1)


def test_traced_server_switches_set_the_rounds_per_thread():
    # the server's threads slept 3,000 times a second at 10 requests/s over 2 threads: each
    # sleeps 150 times a request (149 waits inside it, one for the next), so the exchange
    # comes in 150 rounds, whatever the generator's 450 switches/s say (it waits for the
    # server's blocks only, not for the server's threads waiting for each other)
    alone = AloneRun(
        qps=10.0,
        percentiles={50.0: 0.4, 90.0: 0.5, 99.0: 0.6},
        busy=1.0,
        generator_cpu=0.9,
        generator_switches=450.0,
        server_switches=3000.0,
    )
    assert client_rounds(alone, 0.09, threads=2) == (150, "server")
    assert client_rounds(alone, 0.09, threads=1) == (300, "server")
    # 1,040 switches/s over 2 threads at 10 requests/s: 52 rounds (rounded), at least one
    assert client_rounds(replace(alone, server_switches=1040.0), 0.09, threads=2).k == 52
    assert client_rounds(replace(alone, server_switches=0.0), 0.09, threads=2) == (1, "server")
    # not traced (NaN): the generator's count stands in
    assert client_rounds(replace(alone, server_switches=math.nan), 0.09, threads=2) == (45, "generator")
    seen = []

    def simulate(svc, c, d):
        seen.append(c)
        return {"QPS": 10.0, "P50": 0.4, "P90": 0.5, "P99": 0.6}

    fit = fit_service("web", alone, simulate, ncpus=2, clients=4, threads=2)
    assert seen and all(c.rounds == 150 for c in seen)
    assert fit.rounds == 150 and fit.rounds_from == "server" and fit.to_dict()["rounds_from"] == "server"
    assert "150 rounds with the server (each server thread's voluntary switches per request, traced)" in fit.describe()


def test_the_servers_switches_are_its_cgroups_traced_sleeps_less_the_generators():
    # a simulated "host" of known rounds: 3 clients, each request 20 rounds over 2 server
    # threads, in one cgroup. Its traced sleeps (the core's run segments that ended asleep)
    # are the client's 20 a request and each server thread's 20: 60 a request. Less the
    # generator's (wait4 would give 20 a request), the server's are 40 a request, and over
    # its 2 threads the calibration counts the 20 rounds back
    from replay.host_run import with_server_switches
    from replay.workloads import MeasuredService

    doc = {
        "scenario": {"name": "rounds", "duration": "5s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
        "node": {"cores_per_socket": 2},
        "cgroups": {"online": {}},
        "workloads": {
            "web": {
                "kind": "closed_loop",
                "cgroup": "online",
                "clients": 3,
                "fanout": 2,
                "rounds": 20,
                "client_cpu": {"dist": "constant", "value": "2ms"},
                "service": {"dist": "constant", "value": "4ms"},
            }
        },
    }
    sc = Scenario.from_document(doc)
    run = run_variant(next(iter(sc.variants())), 3)
    got = run.services["web"]
    qps = got.qps
    run.services["web"] = MeasuredService(
        **{f: getattr(got, f) for f in ("name", "latencies_s", "completions_s", "started", "completed", "measured_s")},
        generator_switches=20 * qps,
    )
    sleeps = {"online": sum(run.cgroups["online"].segments["blocked"])}  # type: ignore[index]
    with_server_switches(run, sc, sleeps)
    server = run.services["web"].server_switches  # type: ignore[attr-defined]
    assert server / qps == pytest.approx(40, rel=0.01)
    alone = AloneRun(qps=qps, percentiles={}, generator_switches=20 * qps, server_switches=server)
    assert client_rounds(alone, 0.002, threads=2) == (20, "server")
    # the cgroup untraced, or the kernel lost events (a lost sleep would be missed): nothing
    # is made up
    for untraced, lost in (({}, 0), (sleeps, 3)):
        run.services["web"].server_switches = math.nan  # type: ignore[attr-defined]
        with_server_switches(run, sc, untraced, lost)
        assert math.isnan(run.services["web"].server_switches)  # type: ignore[attr-defined]


def test_rounds_need_a_client_cpu_to_split_and_say_so():
    from sim.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"workloads\.web\.rounds.*client_cpu"):
        one_client(rounds=3)
    with pytest.raises(ScenarioError, match=r"workloads\.web\.rounds.*workers"):
        one_client(rounds=3, workers=2, client_cpu={"dist": "constant", "value": "10us"})


def test_a_reaped_generators_voluntary_switches_count_every_thread():
    # three threads each sleep 20 times: every sleep is a voluntary switch, 60 at least, all
    # of them summed by wait4 over the whole thread group (one thread alone would show <= 21)
    prog = (
        "import threading, time\n"
        "def nap():\n    for _ in range(20): time.sleep(0.002)\n"
        "ts = [threading.Thread(target=nap) for _ in range(3)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "raise SystemExit(3)"
    )
    p = subprocess.Popen([sys.executable, "-c", prog])
    while os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT) is None:
        pass
    switches = reap_switches(p)
    assert 60 <= switches < 1000
    assert p.returncode == 3 and p.wait() == 3
    assert math.isnan(reap_switches(p))  # already reaped
