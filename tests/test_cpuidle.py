"""[node.cpuidle]: a wakeup of an idle CPU waits its idle state's exit latency
(core_rs/model/src/cpuidle.rs), hand-worked on small nodes: only a CPU that had nothing to run
pays it, so a hog that keeps the CPUs busy (even a SCHED_IDLE one, which every wakeup
preempts) takes it away, and an exchange on one CPU never pays it."""

from __future__ import annotations

import pytest
from exchange import kv

from sim.errors import ScenarioError
from sim.runner import run_variant
from sim.scenario import Scenario, Variant

pytest.importorskip("sim._core")

EXIT = {"cpuidle": {"exit_latency": "100us"}}


def node(cpus: int, workloads: dict, cgroups: dict, **node_extra) -> Scenario:
    doc = {
        "scenario": {"name": "cpuidle", "duration": "4s", "warmup": "1s", "seed": 1, "sample_interval": "0s"},
        "node": {"cores_per_socket": cpus, **node_extra},
        "cgroups": cgroups,
        "workloads": workloads,
    }
    return Scenario.from_document(doc)


def sleeper(**extra) -> dict:
    """One client that thinks 1 ms (no task of its own) and then asks 1 ms of CPU."""
    return {
        "kind": "closed_loop",
        "cgroup": "web",
        "clients": 1,
        "think": "1ms",
        "service": {"dist": "constant", "value": "1ms"},
        **extra,
    }


def p50(s: Scenario, service: str = "web") -> float:
    return run_variant(Variant("v", True, s), 1).services[service].p50_s


def test_a_request_that_wakes_an_idle_cpu_waits_the_exit_latency():
    # the server thread sleeps through the think; its CPU has nothing else: 1 ms + 0.1 ms
    assert p50(node(2, {"web": sleeper()}, {"web": {}}, **EXIT)) == pytest.approx(1.1e-3, rel=1e-6)
    # without an idle state: 1 ms
    assert p50(node(2, {"web": sleeper()}, {"web": {}})) == pytest.approx(1e-3, rel=1e-6)


def test_a_sched_idle_hog_keeps_the_cpus_awake_and_takes_the_latency_away():
    hog = {"kind": "hog", "cgroup": "batch", "threads": 2}
    cgroups = {"web": {}, "batch": {"cpu.idle": 1}}
    # the wakeup preempts the hog at once (an idle entity loses to any other): 1 ms
    assert p50(node(2, {"web": sleeper(), "batch": hog}, cgroups, **EXIT)) == pytest.approx(1e-3, rel=1e-6)


def test_an_exchange_on_one_cpu_never_waits_an_exit():
    # the generator wakes the server and then blocks: the CPU is running the waker, not idle
    cross = {"client_threads": 1, "cross_cpu": {"server": "200us", "client": "300us"}}
    assert p50(kv(1, EXIT, **cross), "kv") == pytest.approx(1.5e-3, rel=1e-6)
    # apart, each message wakes a CPU its receiver left idle: 0.5 + 0.3 + 1 + 0.2 + 2 × 0.1
    assert p50(kv(2, EXIT, **cross), "kv") == pytest.approx(2.2e-3, rel=1e-6)


def test_drawn_latencies_are_the_same_for_the_same_seed_and_move_the_mean_by_theirs():
    lat = {"cpuidle": {"exit_latency": {"dist": "exponential", "mean": "50us"}}}
    runs = [run_variant(Variant("v", True, node(2, {"web": sleeper()}, {"web": {}}, **lat)), 1) for _ in range(2)]
    assert runs[0].services["web"].p99_s == runs[1].services["web"].p99_s
    # a request's latency is 1 ms + its draw: the mean latency moves by the mean draw
    svc = runs[0].services["web"]
    assert svc.mean_s == pytest.approx(1.05e-3, rel=0.02)


def test_a_bad_exit_latency_names_its_field():
    with pytest.raises(ScenarioError, match=r"node\.cpuidle\.exit_latency"):
        node(2, {"web": sleeper()}, {"web": {}}, cpuidle={"exit_latency": "-1us"})


def test_a_longer_halt_exits_from_the_deepest_state_its_length_reached():
    # the server's CPU halts when it finishes a request and is woken 1 ms later (the think):
    # a halt of 1 ms reaches a state of residency 500 µs (exit 300 µs), not one of 2 ms
    def deeper(*states: tuple[str, str]) -> dict:
        return {"cpuidle": {"exit_latency": "100us", "deeper": [{"target_residency": r, "exit_latency": e} for r, e in states]}}

    web = {"web": sleeper()}
    assert p50(node(2, web, {"web": {}}, **deeper(("500us", "300us")))) == pytest.approx(1.3e-3, rel=1e-6)
    assert p50(node(2, web, {"web": {}}, **deeper(("2ms", "300us")))) == pytest.approx(1.1e-3, rel=1e-6)
    # at exactly its residency a halt reaches the state (the kernel's `target_residency <= `)
    assert p50(node(2, web, {"web": {}}, **deeper(("1ms", "300us")))) == pytest.approx(1.3e-3, rel=1e-6)
    # of two states the halt reached, the deeper one; a third it did not reach is not taken
    three = deeper(("200us", "200us"), ("800us", "400us"), ("5ms", "2ms"))
    assert p50(node(2, web, {"web": {}}, **three)) == pytest.approx(1.4e-3, rel=1e-6)
    # a think of 3 ms (a 3 ms halt) reaches the 800 µs state too, and no further
    slow = {"web": sleeper(think="3ms")}
    assert p50(node(2, slow, {"web": {}}, **three)) == pytest.approx(1.4e-3, rel=1e-6)
    # a SCHED_IDLE hog keeps the CPU from halting at all: no exit, however long the think
    hog = {"kind": "hog", "cgroup": "batch", "threads": 2}
    cgroups = {"web": {}, "batch": {"cpu.idle": 1}}
    assert p50(node(2, {**slow, "batch": hog}, cgroups, **three)) == pytest.approx(1e-3, rel=1e-6)


def test_deeper_states_out_of_order_are_refused_by_name():
    states = [{"target_residency": "1ms", "exit_latency": "20us"}, {"target_residency": "1ms", "exit_latency": "40us"}]
    with pytest.raises(ScenarioError, match=r"node\.cpuidle\.deeper\[1\]\.target_residency: must be above the state before it's \(1ms"):
        node(2, {"web": sleeper()}, {"web": {}}, cpuidle={"exit_latency": "10us", "deeper": states})
    with pytest.raises(ScenarioError, match=r"node\.cpuidle\.deeper\[0\]\.target_residency: must be > 0"):
        node(
            2,
            {"web": sleeper()},
            {"web": {}},
            cpuidle={"exit_latency": "10us", "deeper": [{"target_residency": "0us", "exit_latency": "1us"}]},
        )
