"""Shared hardware through the scenario layer and the seam20 binding: LLC occupancy, memory
bandwidth, CAT and MBA, perf counters and resctrl's schemata rules
(core_rs/model/src/contention.rs, resctrl.rs; docs/model.md "Shared hardware").

Truths used: hand-worked CPI arithmetic (CPI = cpi_base + apki/1000 x m(c) x L0 x GHz / mlp
with the loaded-latency term switched off, queue_factor = 0), symmetry (identical threads hold
equal shares), the kernel's schemata rules (arch/x86/kernel/cpu/resctrl/ctrlmondata.c:
cbm_validate, bw_validate), and the model's own definition of "alone" (speed 1: identical to
a run without a profile)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sim import NodeEnvironment
from sim.errors import ScenarioError
from sim.scenario import Scenario

MIB = 1 << 20
GHZ = 2.5
L0 = 90.0


def doc(workloads: dict[str, Any], cgroups: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    node = {"cores_per_socket": 4, "ghz": GHZ, "llc": {"size_mb": 8.0, "ways": 8}, "memory_bandwidth": {"peak_gbps": 20.0}}
    node.update(extra.pop("node", {}))
    return {
        "scenario": {"name": "llc", "duration": "2s", "sample_interval": "0s"},
        "node": node,
        "cgroups": cgroups if cgroups is not None else {"online": {}, "offline": {}},
        "workloads": workloads,
        **extra,
    }


def env_of(document: dict[str, Any]) -> NodeEnvironment:
    return NodeEnvironment(Scenario.from_document(document).core_spec())


def run(document: dict[str, Any], seconds: float = 2.0) -> NodeEnvironment:
    env = env_of(document)
    env.run(until=seconds)
    return env


SERVICE = {"kind": "closed_loop", "cgroup": "online", "clients": 1, "service": {"dist": "constant", "value": "1ms"}}
CACHEY = {"cpi_base": 1.0, "llc_apki": 20.0, "footprint_mb": 0.5}
STREAM = {"cpi_base": 1.0, "llc_apki": 30.0, "footprint_mb": 4096.0, "mlp": 2.0}


def completed(env: NodeEnvironment, name: str = "web") -> int:
    return env.node.service_stats(name)["completed"]


def test_no_profile_is_bit_identical_whatever_the_hardware_tables_say():
    """Without a profile the shared-hardware tables change nothing: the same latencies and
    CPU per CPU to the bit (the model is not even built)."""
    work = {
        "web": {**SERVICE, "clients": 3, "service": {"dist": "exponential", "mean": "2ms"}},
        "hog": {"kind": "hog", "cgroup": "offline", "threads": 6},
    }
    plain = run(doc(work, node={"llc": {}, "memory_bandwidth": {}}))
    tables = run(
        doc(
            work,
            node={"llc": {"size_mb": 2.0, "ways": 4}, "memory_bandwidth": {"peak_gbps": 1.0}, "threads_per_core": 2},
            resctrl={"be": {"schemata": "L3:0=1\nMB:0=10", "cgroups": ["offline"]}},
        )
    )
    smt = run(doc(work, node={"threads_per_core": 2}))
    assert plain.node.service_latencies("web") != smt.node.service_latencies("web")  # the test can tell
    assert tables.node.service_latencies("web") == smt.node.service_latencies("web")
    assert tables.node.cpu_busy() == smt.node.cpu_busy()


def test_a_service_alone_runs_at_speed_one():
    """CPI_ref is the workload alone on an idle node: one profiled thread alone runs exactly
    as it would without a profile (speed 1 after quantisation)."""
    alone = {"web": SERVICE}
    profiled = {"web": {**SERVICE, "contention": CACHEY}}
    a, b = run(doc(alone)), run(doc(profiled))
    assert completed(a) > 1000
    assert a.node.service_latencies("web") == b.node.service_latencies("web")


def test_perf_counters_follow_the_cpi_by_hand():
    """A hog alone with queue_factor 0 (latency L0 at any load): CPI = 1 + apki/1000 x
    m(C) x L0 x GHz / mlp with m(C) = (1 + C/F)^-1 over the whole 8 MiB LLC; cycles = CPU
    time x GHz, instructions = cycles / CPI, cache-references = instructions x apki/1000, cache-misses = references x m(C).
    A cgroup without a profile counts CPI 1 and no misses."""
    profile = {"cpi_base": 1.2, "llc_apki": 10.0, "footprint_mb": 2.0, "mlp": 2.0}
    env = run(
        doc(
            {
                "hog": {"kind": "hog", "cgroup": "offline", "threads": 1, "contention": profile},
                "plain": {"kind": "hog", "cgroup": "online", "threads": 1},
            },
            node={"memory_bandwidth": {"peak_gbps": 20.0, "queue_factor": 0.0}},
        ),
        1.0,
    )
    miss = (1 + 8.0 / 2.0) ** -1
    cpi = 1.2 + 10.0 / 1000 * miss * L0 * GHZ / 2.0
    p = env.node.perf_counters("offline")
    assert p["cycles"] == pytest.approx(1e9 * GHZ, rel=1e-9)  # one CPU for 1 s
    assert p["cycles"] / p["instructions"] == pytest.approx(cpi, rel=1e-6)
    assert p["cache-misses"] == pytest.approx(p["instructions"] * 10.0 / 1000 * miss, rel=1e-6)
    assert p["cache-references"] == pytest.approx(p["instructions"] * 10.0 / 1000, rel=1e-6)  # apki
    q = env.node.perf_counters("online")
    assert q["instructions"] == q["cycles"] and q["cache-misses"] == q["cache-references"] == 0
    assert env.node.perf_counters("")["cycles"] == p["cycles"] + q["cycles"]


def two_groups(a: str, b: str, **extra: Any) -> dict[str, Any]:
    return {"a": {"schemata": a, "cgroups": ["online"]}, "b": {"schemata": b, "cgroups": ["offline"]}, **extra}


def test_two_identical_threads_each_hold_half_the_llc():
    profile = {"llc_apki": 10.0, "footprint_mb": 64.0}
    env = run(
        doc(
            {
                "x": {"kind": "hog", "cgroup": "online", "threads": 1, "contention": profile},
                "y": {"kind": "hog", "cgroup": "offline", "threads": 1, "contention": profile},
            },
            resctrl=two_groups("", ""),
        ),
        0.5,
    )
    half = env.node.resctrl_info()["llc_bytes"] / 2
    assert env.node.resctrl_info()["llc_bytes"] == 8 * MIB
    for g in ("a", "b"):
        assert env.node.resctrl_mon(g)[0]["llc_occupancy"] == pytest.approx(half, rel=1e-6)
    assert env.node.resctrl_mon("")[0]["llc_occupancy"] == 0


def service_run(resctrl: dict[str, Any] | None, antagonist: bool) -> NodeEnvironment:
    work: dict[str, Any] = {"web": {**SERVICE, "contention": CACHEY}}
    if antagonist:
        work["stream"] = {"kind": "hog", "cgroup": "offline", "threads": 2, "contention": STREAM}
    extra = {"resctrl": resctrl} if resctrl else {}
    # queue_factor 0: memory latency does not rise with load, so only the cache couples them
    return run(doc(work, node={"memory_bandwidth": {"peak_gbps": 100.0, "queue_factor": 0.0}}, **extra))


def test_cat_with_disjoint_masks_isolates_the_service():
    """A streaming antagonist evicts a cache-friendly service's lines; with CAT masks that
    do not overlap (service ways 0-5, antagonist 6-7) the service runs exactly as it does
    alone in ways 0-5."""
    alone = service_run(None, False)
    shared = service_run(None, True)
    isolated = service_run(two_groups("L3:0=3f", "L3:0=c0"), True)
    alone_in_six = service_run(two_groups("L3:0=3f", "L3:0=c0"), False)
    assert completed(shared) < 0.9 * completed(alone)
    assert completed(alone_in_six) < completed(alone)  # six ways hold less than eight
    assert isolated.node.service_latencies("web") == alone_in_six.node.service_latencies("web")


def test_mba_caps_the_groups_bandwidth():
    """MB:0=30: the antagonist group's mbm_total_bytes grow at 30% of the socket's peak."""
    stream = {"cpi_base": 1.0, "llc_apki": 60.0, "footprint_mb": 4096.0, "mlp": 16.0}
    work = {"stream": {"kind": "hog", "cgroup": "offline", "threads": 4, "contention": stream}}
    peak = 20e9

    def rate(schemata: str) -> float:
        """Bytes/s over 0.5-1.5 s (after the first solve; speeds are kept to 2^-10)."""
        env = env_of(doc(work, resctrl={"b": {"schemata": schemata, "cgroups": ["offline"]}}))
        env.run(until=0.5)
        before = env.node.resctrl_mon("b")[0]["mbm_total_bytes"]
        env.run(until=1.5)
        return env.node.resctrl_mon("b")[0]["mbm_total_bytes"] - before

    assert rate("") > 0.5 * peak
    assert rate("MB:0=30") == pytest.approx(0.3 * peak, rel=2e-3)


def test_profiled_runs_are_deterministic():
    work = {
        "web": {**SERVICE, "clients": 4, "service": {"dist": "exponential", "mean": "1ms"}, "contention": CACHEY},
        "stream": {"kind": "hog", "cgroup": "offline", "threads": 5, "contention": STREAM},
    }
    document = doc(work, node={"threads_per_core": 2})
    a, b = run(document), run(document)
    assert a.node.service_latencies("web") == b.node.service_latencies("web")
    assert a.node.perf_counters("")["instructions"] == b.node.perf_counters("")["instructions"]


def test_runtime_resctrl_writes_follow_the_kernels_rules():
    env = env_of(doc({"web": SERVICE}, node={"sockets": 2, "llc": {"ways": 11}}))
    node = env.node
    info = node.resctrl_info()
    assert info["cbm_mask"] == "7ff" and info["l3_domains"] == [0, 1] and info["num_closids"] == 16
    assert node.resctrl_read_schemata("") == "L3:0=7ff;1=7ff\nMB:0=100;1=100"
    node.resctrl_write("be", "L3:1=3f\nMB:0=15")
    assert node.resctrl_read_schemata("be") == "L3:0=7ff;1=3f\nMB:0=20;1=100"  # MB rounded up to 10s
    for bad, why in [
        ("L3:0=5", "non-consecutive"),
        ("L3:0=0", "out of range"),
        ("L3:0=fff", "out of range"),
        ("MB:0=5", r"out of range \[10,100\]"),
        ("L2:0=1", "unknown or unsupported resource"),
    ]:
        with pytest.raises(ValueError, match=why) as err:
            node.resctrl_write("be", bad)
        assert 'resctrl group "be"' in str(err.value)
    assert node.resctrl_read_schemata("be") == "L3:0=7ff;1=3f\nMB:0=20;1=100"
    for i in range(14):
        node.resctrl_write(f"g{i}", "")
    with pytest.raises(ValueError, match="no free CLOSID"):
        node.resctrl_write("one-too-many", "")
    node.resctrl_remove("g0")
    assert "g0" not in node.resctrl_groups() and node.resctrl_groups()[0] == ""
    node.resctrl_assign("be", "online")
    with pytest.raises(KeyError, match="no resctrl group"):
        node.resctrl_assign("nope", "online")
    with pytest.raises(KeyError):
        node.resctrl_assign("be", "nope")


def test_min_cbm_bits_is_enforced():
    node = env_of(doc({"web": SERVICE}, node={"llc": {"ways": 8, "min_cbm_bits": 2}})).node
    with pytest.raises(ValueError, match="at least 2 bits"):
        node.resctrl_write("g", "L3:0=8")
    node.resctrl_write("g", "L3:0=18")


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"workloads": {"web": {**SERVICE, "contention": {"llc_apki": -1.0, "footprint_mb": 1.0}}}}, "workloads.web.contention.llc_apki"),
        ({"workloads": {"web": {**SERVICE, "contention": {"llc_apki": 1.0}}}}, "workloads.web.contention.footprint_mb"),
        ({"resctrl": {"be": {"cgroups": ["nope"]}}}, "resctrl.be.cgroups[0]"),
        ({"node": {"llc": {"ways": 0}}}, "node.llc.ways"),
    ],
)
def test_bad_scenario_fields_are_named(change: dict[str, Any], where: str):
    base = doc({"web": SERVICE})
    base.update(change)
    with pytest.raises(ScenarioError, match=where.replace("[", r"\[").replace("]", r"\]")):
        Scenario.from_document(base)


def test_a_bad_schemata_in_the_scenario_names_its_group():
    with pytest.raises(ValueError, match=r"resctrl\.be\.schemata: .*non-consecutive"):
        env_of(doc({"web": SERVICE}, resctrl={"be": {"schemata": "L3:0=5", "cgroups": ["offline"]}}))


def test_cpu_busy_stays_the_cpu_time():
    """Contention slows work, not the CPU time it is charged."""
    env = run(doc({"stream": {"kind": "hog", "cgroup": "offline", "threads": 4, "contention": STREAM}}), 1.0)
    busy = np.frombuffer(env.node.cpu_busy(), dtype="<u8").sum()
    assert busy == 4 * 10**9


@pytest.mark.parametrize(("pressure", "speed"), [(None, 0.6), (1.0, 0.5), (0.25, 0.8)])
def test_smt_siblings_slow_each_other_by_their_core_pressure(pressure: float | None, speed: float):
    """Two profiled hogs on the two threads of one core, neither missing the LLC (apki 0):
    CPI = cpi_base x (1 + the sibling's core_pressure), so instructions / cycles =
    1 / (1 + pressure); the default pressure 1/smt_speed - 1 gives smt_speed (0.6)."""
    profile: dict[str, Any] = {"cpi_base": 1.0, "llc_apki": 0.0, "footprint_mb": 1.0}
    if pressure is not None:
        profile["core_pressure"] = pressure
    env = run(
        doc(
            {"pair": {"kind": "hog", "cgroup": "offline", "threads": 2, "contention": profile}},
            node={"cores_per_socket": 1, "threads_per_core": 2},
        ),
        1.0,
    )
    p = env.node.perf_counters("offline")
    assert p["cycles"] == pytest.approx(2 * GHZ * 1e9, rel=1e-9)
    assert p["instructions"] / p["cycles"] == pytest.approx(speed, abs=1e-3)  # speeds kept to 2^-10
