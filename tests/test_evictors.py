"""koordlet's evictors over all priorities running in a simulation (koordinator.md §4.1–4.4):
CPUEvict, MemoryEvict, CPUAllocatableEvict and MemoryAllocatableEvict, enabled by their
feature gates (`evict_features`), read the NodeSLO thresholds, kill through the seam
(cgroup.kill) and record each eviction as a decision. The victims follow upstream's order:
the eviction-priority annotation, spec.priority, the priority label, then the amount."""

from __future__ import annotations

import pytest

from policies import PolicyError, build_policy
from sim.runner import run_scenario
from sim.scenario import Scenario

CPU_NODE = """
[scenario]
name = "ce"
duration = "30s"
seed = 1

[node]
cores_per_socket = 8

[pods.web]
qos = "LS"
cpu_request = 2
[pods.mid]
qos = "LS"
priority_class = "koord-mid"
cpu_request = 1
eviction_enabled = true
[pods.batch_a]
qos = "BE"
priority = 5500
cpu_request = 3
eviction_enabled = true
[pods.batch_b]
qos = "BE"
priority = 5100
cpu_request = 2
eviction_enabled = true

[workloads.web]
kind = "hog"
pod = "web"
threads = 2
[workloads.mid]
kind = "hog"
pod = "mid"
threads = 1
[workloads.a]
kind = "hog"
pod = "batch_a"
threads = 3
[workloads.b]
kind = "hog"
pod = "batch_b"
threads = 2

[policy]
name = "koordinator"
cpu_suppress_threshold_percent = 100  # BE may use every CPU LS leaves: the node runs full
evict_features = ["CPUEvict"]
cpu_evict_threshold_percent = 85
evict_enabled_priority_threshold = 7999
"""


def kills(run) -> list[tuple[float, str, list[str]]]:
    return [
        (d["t_s"], d["what"].split(":")[0], [w["cgroup"] for w in d["writes"] if w["knob"] == "cgroup.kill"])
        for d in run.decisions
        if any(w["knob"] == "cgroup.kill" for w in d["writes"])
    ]


def test_cpu_evict_kills_the_lowest_priority_pod_once_the_node_passes_the_threshold():
    # 8 hog threads; CPU suppress (threshold 100%) leaves BE a 5-CPU cpuset beside 3 LS
    # cores, so the node runs at ≈ 88% ≥ 85% ⇒ release 8000 × (88 − 83) / 100 = 400 m of used
    # CPU. Candidates (eviction-enabled, priority ≤ 7999): batch_b (5100, ≈ 1 core), batch_a
    # (5500, ≈ 3 cores), mid (7500, 1 core): spec.priority first, so batch_b, whose ≈ 1000 m
    # cover the release, though batch_a uses more. The CPU evictor starts in its 20 s cool-down.
    run = run_scenario(Scenario.from_toml(CPU_NODE), progress=False).runs["ce"]
    (ev,) = kills(run)
    assert ev[1] == "CPUEvict" and ev[2] == ["kubepods/besteffort/pod-batch_b"]
    assert ev[0] == pytest.approx(20.0, abs=1.0)
    d = next(d for d in run.decisions if d["what"].startswith("CPUEvict"))
    assert d["inputs"]["node_usage_percent"] >= 85
    release = 8000 * (d["inputs"]["node_usage_percent"] - 83) // 100
    assert d["inputs"]["released_cpu"] >= release
    # after it, 7 threads on 8 CPUs stay at or under the threshold's lower side: nothing more
    assert run.cgroups["kubepods/besteffort/pod-batch_a"].cpu_share > run.cgroups["kubepods/besteffort/pod-batch_b"].cpu_share


def test_the_eviction_priority_annotation_comes_before_spec_priority():
    sc = CPU_NODE.replace("priority = 5500\n", "priority = 5500\neviction_priority = -1\n")
    run = run_scenario(Scenario.from_toml(sc), progress=False).runs["ce"]
    (ev,) = kills(run)
    assert ev[2] == ["kubepods/besteffort/pod-batch_a"]


def test_a_pod_without_the_eviction_enabled_label_is_never_a_candidate():
    sc = CPU_NODE.replace("cpu_request = 2\neviction_enabled = true\n", "cpu_request = 2\n")  # batch_b
    run = run_scenario(Scenario.from_toml(sc), progress=False).runs["ce"]
    (ev,) = kills(run)
    assert ev[2] == ["kubepods/besteffort/pod-batch_a"]


def test_cpu_allocatable_evict_releases_the_batch_requests_above_the_advertised_batch_cpu():
    # With no batch-cpu advertised yet (the slo-controller reports at 60 s) the node "has
    # none": upstream releases every batch-cpu request (5000 m) — both BE pods go, in their
    # order: spec.priority before the request, so batch_b (5100) before batch_a (5500).
    sc = CPU_NODE.replace('evict_features = ["CPUEvict"]', 'evict_features = ["CPUAllocatableEvict"]')
    sc += "cpu_allocatable_evict_threshold_percent = 80\ncpu_allocatable_evict_lower_percent = 70\nallocatable_evict_priority_threshold = 5999\n"
    run = run_scenario(Scenario.from_toml(sc), progress=False).runs["ce"]
    (ev,) = kills(run)
    assert ev[1] == "CPUAllocatableEvict"
    assert ev[2] == ["kubepods/besteffort/pod-batch_b", "kubepods/besteffort/pod-batch_a"]


MEMORY_NODE = """
[scenario]
name = "me"
duration = "20s"
seed = 1

[node]
cores_per_socket = 4
memory = "4Gi"

[pods.web]
qos = "LS"
cpu_request = 1
memory_request = "2Gi"
[pods.cache]
qos = "LS"
priority_class = "koord-mid"
memory_request = "512Mi"
eviction_enabled = true
[pods.big]
qos = "BE"
priority = 5000
eviction_enabled = true
[pods.small]
qos = "BE"
priority = 5000
eviction_enabled = true

[workloads.web]
kind = "memory_hog"
pod = "web"
bytes = "1536Mi"
mode = "keep"
start = "5s"
[workloads.cache]
kind = "memory_hog"
pod = "cache"
bytes = "300Mi"
mode = "keep"
[workloads.big]
kind = "memory_hog"
pod = "big"
bytes = "1Gi"
mode = "keep"
[workloads.small]
kind = "memory_hog"
pod = "small"
bytes = "400Mi"
mode = "keep"

[policy]
name = "koordinator"
evict_features = ["MemoryEvict"]
evict_enabled_priority_threshold = 7999
"""


def test_memory_evict_takes_one_pod_by_priority_then_usage():
    # 1.5 GiB + 300 + 1024 + 400 MiB of 4 GiB ≈ 80% ≥ 70% (from 5 s): release ≈ 12% of 4 GiB.
    # Candidates by spec.priority: big and small (5000) before cache (7500); big uses more and
    # its 1 GiB covers the release (upstream would count it ×1000 anyway: its quirk, followed).
    run = run_scenario(Scenario.from_toml(MEMORY_NODE), progress=False).runs["me"]
    (ev,) = kills(run)
    assert ev[1] == "MemoryEvict" and ev[2] == ["kubepods/besteffort/pod-big"]
    assert 5.0 <= ev[0] < 6.5
    assert run.cgroups["kubepods/besteffort/pod-small"].memory["current"] == 400 * 2**20


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"evict_features": ["CPUEvict"]}, "CPUEvict is enabled but its thresholds are not valid: CPUEvictThresholdPercent not config"),
        (
            {"evict_features": ["MemoryEvict"]},
            "MemoryEvict is enabled but its thresholds are not valid: EvictEnabledPriorityThreshold not config",
        ),
        (
            {"evict_features": ["MemoryAllocatableEvict"], "memory_allocatable_evict_threshold_percent": 80},
            "MemoryAllocatableEvictLowerPercent not config",
        ),
        ({"evict_features": ["CPUEvicts"]}, "policy.evict_features: must be a list of koordlet feature gates"),
        ({"allocatable_evict_priority_threshold": 9000}, r"policy.allocatable_evict_priority_threshold: must be in \[-1, 7999\]"),
    ],
)
def test_bad_evictor_configuration_is_named(extra, message):
    with pytest.raises(PolicyError, match=message):
        build_policy({"name": "koordinator", "besteffort": "be", **extra})


def test_be_cpu_evict_by_allocatable_waits_for_the_advertised_batch_cpu():
    """cpuEvictPolicy evictByAllocatable: BECPUEvict measures the BE requests against the
    node's batch-cpu instead of the BE real limit. None is advertised before the first
    NodeMetric report (60 s): the limit is then −1, never "used enough", so the pod that the
    real-limit policy evicts at 20 s survives until the report; batch-cpu is then
    8 − 3.2 (margin) − 2 (web) ≈ 2.8 CPUs, satisfaction 2.8 / 16 = 17.5% ≤ 40%, BE uses its
    4 CPUs (≥ 90% of 2.8): release 16 × (0.6 − 0.175) ≈ 6.8 CPUs → batch1 (priority 5100)."""
    from tests.test_koordinator import EVICT_SCENARIO

    sc = EVICT_SCENARIO.replace('duration = "40s"', 'duration = "70s"').replace(
        "cpu_evict_be_satisfaction_upper_percent = 60\n",
        'cpu_evict_be_satisfaction_upper_percent = 60\ncpu_evict_policy = "evictByAllocatable"\n',
    )
    run = run_scenario(Scenario.from_toml(sc), progress=False).runs["evict"]
    (ev,) = kills(run)
    assert ev[2] == ["kubepods/besteffort/pod-batch1"] and 60.0 < ev[0] <= 61.0
    batch = next(d for d in run.decisions if d["what"].startswith("batch resources"))["inputs"]["batch_cpu_milli"]
    assert batch == pytest.approx(2800, abs=50)  # the web pod's 2 CPUs average a little under 2
    d = next(d for d in run.decisions if d["what"].startswith("BE CPU evict"))
    assert d["inputs"]["be_limit_milli"] == batch
    assert d["inputs"]["release_milli"] == int(16_000 * (60 / 100 - batch / 16_000))
