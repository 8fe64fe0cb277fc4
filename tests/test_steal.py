"""[node.steal]: the hypervisor takes a busy vCPU away (core_rs/model/src/steal.rs),
hand-worked on one CPU: a stall strikes only a CPU that has run without going idle for
`after`, its running task makes no progress and is charged nothing, and a wakeup onto a
stalled CPU waits for the stall's end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.errors import ScenarioError
from sim.runner import run_variant
from sim.scenario import Scenario, Variant

pytest.importorskip("sim._core")


def node(workloads: dict, cgroups: dict, steal: dict | None) -> Scenario:
    doc = {
        "scenario": {"name": "steal", "duration": "6s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
        "node": {"cores_per_socket": 1, **({"steal": steal} if steal else {})},
        "cgroups": cgroups,
        "workloads": workloads,
    }
    return Scenario.from_document(doc)


SLEEPER = {"kind": "closed_loop", "cgroup": "web", "clients": 1, "think": "1ms", "service": {"dist": "constant", "value": "1ms"}}
HOG = {"kind": "hog", "cgroup": "batch", "threads": 1}
# on average one stall in each millisecond the CPU runs, each 200 µs long
STALLS = {"rate": 1000, "length": "200us"}


def run(s: Scenario, seed: int = 1):
    return run_variant(Variant("v", True, s), seed)


def test_a_request_is_held_up_by_the_stalls_that_strike_while_it_runs():
    r = run(node({"web": SLEEPER}, {"web": {}}, STALLS)).services["web"]
    # 1 ms of work plus 200 µs for each of the Poisson(1) stalls that strike during it (one
    # arriving during a stall is lost): mean 1.2 ms, and the median has exactly one
    assert r.mean_s == pytest.approx(1.2e-3, rel=0.03)
    assert r.p50_s == pytest.approx(1.2e-3, rel=1e-6)
    # P(no stall) = e^-1: the fastest requests took exactly their 1 ms
    assert min(r.latencies_s) == pytest.approx(1e-3, rel=1e-9)
    # without the table: 1 ms, every one
    assert run(node({"web": SLEEPER}, {"web": {}}, None)).services["web"].p99_s == pytest.approx(1e-3, rel=1e-9)


def test_a_cpu_that_goes_idle_often_is_not_struck_but_one_a_hog_keeps_busy_is():
    after = {**STALLS, "after": "2ms"}
    # the sleeper's CPU runs 1 ms and idles 1 ms: never 2 ms without going idle
    alone = run(node({"web": SLEEPER}, {"web": {}}, after)).services["web"]
    assert alone.p99_s == pytest.approx(1e-3, rel=1e-9)
    # a SCHED_IDLE hog keeps the CPU running: struck as often as with `after` = 0, and a
    # wakeup inside a stall (1/6 of the time) waits on average half of one (+17 µs)
    cgroups = {"web": {}, "batch": {"cpu.idle": 1}}
    beside = run(node({"web": SLEEPER, "batch": HOG}, cgroups, after)).services["web"]
    assert beside.mean_s == pytest.approx(1.2e-3 + 1e-4 / 6, rel=0.03)


def test_stolen_time_is_charged_to_nobody():
    r = run(node({"batch": HOG}, {"batch": {}}, STALLS))
    # a stall (200 µs) for every 1 ms the hog runs: it gets 1 / 1.2 of the CPU
    assert r.cgroups["batch"].cpu_share == pytest.approx(1 / 1.2, rel=0.02)


def test_the_same_seed_gives_the_same_stalls_and_another_seed_others():
    lat = [run(node({"web": SLEEPER}, {"web": {}}, STALLS), seed).services["web"].latencies_s for seed in (1, 1, 2)]
    assert list(lat[0]) == list(lat[1])
    assert list(lat[0]) != list(lat[2])


def test_a_bad_steal_table_names_its_field():
    with pytest.raises(ScenarioError, match=r"node\.steal\.rate"):
        node({"web": SLEEPER}, {"web": {}}, {"rate": 0, "length": "10us"})
    with pytest.raises(ScenarioError, match=r"node\.steal\.length"):
        node({"web": SLEEPER}, {"web": {}}, {"rate": 10, "length": "-1us"})


def test_a_wakeup_onto_a_stalled_cpu_waits_for_the_stall_to_end():
    # stalls of 2 ms, 200 a second, on a CPU a SCHED_IDLE hog keeps busy. The sleeper's
    # think (1 ms) starts on a CPU that is not stalled: a stall began in it with probability
    # 1 − e^-0.2 = 0.1813, on average 0.4834 ms in (an exponential cut at 1 ms), so the wakeup
    # waits 2 − (1 − 0.4834) = 1.4834 ms of it; its 1 ms of work meets Poisson(0.2) stalls
    long = {"rate": 200, "length": "2ms", "after": "2ms"}
    cgroups = {"web": {}, "batch": {"cpu.idle": 1}}
    beside = run(node({"web": SLEEPER, "batch": HOG}, cgroups, long)).services["web"]
    assert beside.mean_s == pytest.approx(1e-3 + 0.2 * 2e-3 + 0.1813 * 1.4834e-3, rel=0.04)
    # neither a wait nor a stall in the work: e^-0.2 · e^-0.2 of the requests took just 1 ms
    lat = np.asarray(beside.latencies_s)
    assert np.mean(np.isclose(lat, 1e-3, rtol=1e-9)) == pytest.approx(math.exp(-0.4), abs=0.035)
    # alone the CPU idles every millisecond: never struck
    assert run(node({"web": SLEEPER}, {"web": {}}, long)).services["web"].p99_s == pytest.approx(1e-3, rel=1e-9)
