"""koordlet's CPU eviction (qosmanager plugin cpuevict: BECPUEvict with evictByRealLimit /
evictByAllocatable, CPUEvict by node usage, CPUAllocatableEvict) against its own unit
tests, pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict_test.go at koordinator a7a1b76.
CPU in millicores."""

from __future__ import annotations

from dataclasses import replace

import pytest
from koord_cases import case

from policies.cpu_evict import (
    BEState,
    allocatable_config_error,
    be_limit,
    release_by_used_threshold,
    satisfaction_config_error,
    to_release,
    used_threshold_config_error,
    window_valid,
)
from policies.evict_round import USED as POD_USED
from policies.evict_round import kill_and_evict, release_by_allocatable
from policies.evict_tasks import PodState, Thresholds, cpu_tasks
from policies.pods import Pod, PriorityClass, QoSClass

F = "pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict_test.go"

# Test_CPUEvict_calculateMilliReleaseByBESatisfaction: satisfaction lower 30 / upper 40;
# (subcase, usage threshold %, policy, node batch-cpu allocatable, window average (count,
# real limit, usage, request), latest sample (count, real limit, usage, request), want).
# The node's batch-cpu is 30000 unless given; cpuEvictTimeWindowSeconds unset: 1 s window.
Z = (0, 0, 0, 0)
R, A = "evictByRealLimit", "evictByAllocatable"
SATISFACTION = [
    ("test_avgMetricQueryResult_Error", 90, R, 30000, Z, Z, 0),
    ("test_avgMetricQueryResult_Metric_nil", 90, R, 30000, Z, Z, 0),
    ("test_avgMetricQueryResult_aggregateInfo_nil", 90, R, 30000, Z, Z, 0),
    ("test_avgMetricQueryResult_count_not_enough", 90, R, 30000, (10, 0, 0, 0), Z, 0),
    ("test_avgMetricQueryResult_CPURealLimit_zero", 90, R, 30000, (59, 0, 20000, 0), Z, 0),
    ("test_avgMetricQueryResult_cpuUsage_not_enough", 90, R, 30000, (59, 20000, 10000, 0), Z, 0),
    ("test_avgMetricQueryResult_cpuRequest_zero", 90, R, 30000, (59, 20000, 19000, 0), Z, 0),
    ("test_avgMetricQueryResult_ResourceSatisfaction_enough", 90, R, 30000, (59, 20000, 19000, 40000), Z, 0),
    (
        "test_avgMetricQueryResult_need_release_but_currentMetricQueryResult_invalid",
        90,
        R,
        30000,
        (59, 10000, 9500, 50000),
        (1, 0, 0, 0),
        0,
    ),
    (
        "test_avgMetricQueryResult_need_release_but_currentMetricQueryResult_cpuUsage_not_enough",
        90,
        R,
        30000,
        (59, 10000, 9500, 50000),
        (1, 10000, 5000, 50000),
        0,
    ),
    ("test_avgRelease>currentRelease", 90, R, 30000, (59, 10000, 9500, 50000), (1, 14000, 13000, 50000), 6000),
    ("test_avgRelease<currentRelease", 90, R, 30000, (59, 13000, 12000, 50000), (1, 11000, 10000, 50000), 7000),
    ("test_BEUsageThresholdPercent_50_avgMetricQueryResult_cpuUsage_not_enough", 50, R, 30000, (59, 20000, 9000, 0), Z, 0),
    (
        "test_BEUsageThresholdPercent_50_avgMetricQueryResult_need_release_but_currentMetricQueryResult_cpuUsage_not_enough",
        50,
        R,
        30000,
        (59, 10000, 6000, 50000),
        (1, 10000, 4000, 50000),
        0,
    ),
    ("test_BEUsageThresholdPercent_50_avgRelease>currentRelease", 50, R, 30000, (59, 10000, 6000, 50000), (1, 14000, 8000, 50000), 6000),
    (
        "test_BEUsageThresholdPercent_50_avgMetricQueryResult_skip_release_when_allocatable_small_but_policy_by_reallimit",
        50,
        R,
        8000,
        (59, 10000, 6000, 50000),
        (1, 10000, 4000, 50000),
        0,
    ),
    (
        "test_BEUsageThresholdPercent_50_avgMetricQueryResult_need_release_since_allocatable_is_small",
        50,
        A,
        8000,
        (59, 10000, 6000, 50000),
        (1, 10000, 4000, 50000),
        12000,
    ),
    (
        "test_BEUsageThresholdPercent_50_avgMetricQueryResult_need_release_since_allocatable_is_zero",
        50,
        A,
        0,
        (59, 10000, 6000, 50000),
        (1, 10000, 4000, 50000),
        20000 - 1,
    ),
]


@pytest.mark.parametrize(
    ("threshold", "policy", "allocatable", "avg", "latest", "want"),
    [case(F, "Test_CPUEvict_calculateMilliReleaseByBESatisfaction", *row) for row in SATISFACTION],
)
def test_release_by_be_satisfaction(
    threshold: int, policy: str, allocatable: int, avg: tuple[int, ...], latest: tuple[int, ...], want: int
) -> None:
    count, real, used, request = avg
    if not window_valid(1, 1, count):
        assert want == 0
        return
    states = [BEState(u, r, be_limit(policy, lim, allocatable)) for _, lim, u, r in (avg, latest)]  # type: ignore[arg-type]
    assert to_release(states[0], states[1], 30, 40, threshold) == want


SATISFACTION_CONFIG = [
    ("test_nil", None, None, "CPUEvictBESatisfactionLowerPercent or CPUEvictBESatisfactionUpperPercent not config"),
    ("test_lowPercent_invalid", 0, 50, "CPUEvictBESatisfactionLowerPercent(0) is not valid! must (0,60]"),
    ("test_upperPercent_invalid", 30, 100, "CPUEvictBESatisfactionUpperPercent(100) is not valid,must (0,100)"),
    ("test_lowPercent>upperPercent", 40, 30, "CPUEvictBESatisfactionUpperPercent(30) < CPUEvictBESatisfactionLowerPercent(40)"),
    ("test_valid", 30, 40, None),
]


@pytest.mark.parametrize(("lower", "upper", "want"), [case(F, "Test_isSatisfactionConfigValid", *row) for row in SATISFACTION_CONFIG])
def test_satisfaction_config(lower: int | None, upper: int | None, want: str | None) -> None:
    assert satisfaction_config_error(lower, upper) == want


USED_CONFIG = [
    ("CPUEvictThresholdPercent nil", None, None, None, "CPUEvictThresholdPercent not config"),
    ("CPUEvictThresholdPercent < 0", -1, None, None, "threshold percent(-1) should greater than 0"),
    ("CPUEvictLowerPercent == nil", 20, None, 0, None),
    ("CPUEvictLowerPercent > CPUEvictThresholdPercent", 20, 30, None, "lower percent(30) should less than threshold percent(20)"),
    ("EvictEnabledPriorityThreshold nil", 20, 10, None, "EvictEnabledPriorityThreshold not config"),
    ("nil error", 20, 10, 0, None),
]


@pytest.mark.parametrize(("threshold", "lower", "prio", "want"), [case(F, "Test_isUsedThresholdConfigValid", *row) for row in USED_CONFIG])
def test_used_threshold_config(threshold: int | None, lower: int | None, prio: int | None, want: str | None) -> None:
    assert used_threshold_config_error(threshold, lower, prio) == want


ALLOC_CONFIG = [
    ("CPUAllocatableEvictThresholdPercent nil", None, None, None, "CPUAllocatableEvictThresholdPercent not config"),
    ("CPUAllocatableEvictThresholdPercent < 0", -1, None, None, "threshold percent(-1) should equal or greater than 0"),
    ("CPUAllocatableEvictLowerPercent == nil", 80, None, 5999, "CPUAllocatableEvictLowerPercent not config"),
    (
        "CPUAllocatableEvictLowerPercent > CPUAllocatableEvictThresholdPercent",
        80,
        90,
        None,
        "lower percent(90) should less than threshold percent(80)",
    ),
    (
        "CPUAllocatableEvictLowerPercent == CPUAllocatableEvictThresholdPercent",
        80,
        80,
        None,
        "lower percent(80) should less than threshold percent(80)",
    ),
    ("AllocatableEvictPriorityThreshold nil", 80, 70, None, "AllocatableEvictPriorityThreshold not config"),
    (
        "invalid config higher than PriorityMidValueMax",
        90,
        0,
        9999,
        "priorityThresholdPercent(9999) should less than 7999, koor-prod pods should not be killed",
    ),
    ("AllocatableEvictPriorityThreshold == PriorityMidValueDefault", 80, 70, 7500, None),
    ("valid config with batch priority", 85, 75, 7999, None),
]


@pytest.mark.parametrize(
    ("threshold", "lower", "prio", "want"), [case(F, "Test_isAllocatableThresholdConfigValid", *row) for row in ALLOC_CONFIG]
)
def test_allocatable_config(threshold: int | None, lower: int | None, prio: int | None, want: str | None) -> None:
    assert allocatable_config_error(threshold, lower, prio) == want


# Test_calculateReleaseByUsedThresholdPercent on a 100-CPU node: (subcase, node used cores,
# threshold, lower, want milli)
USED = [
    ("test_cpuevict_CPUEvictThresholdPercent_lower78", 81, 80, None, 3000),
    ("test_cpuevict_CPUEvictThresholdPercent_lower80", 81, 80, 80, 1000),
    ("lower than threshold", 11, 80, 80, 0),
]


@pytest.mark.parametrize(
    ("used", "threshold", "lower", "want"), [case(F, "Test_calculateReleaseByUsedThresholdPercent", *row) for row in USED]
)
def test_release_by_used_threshold(used: float, threshold: int, lower: int | None, want: int) -> None:
    assert release_by_used_threshold(100_000, used, threshold, lower) == want


# Test_calculateMilliReleaseByAllocatableThresholdPercent: (subcase, pods (resource,
# request, priority), node allocatable, threshold, lower, priority threshold, want release).
# Upstream's first case writes its requests as 2*000 and 3*000, i.e. 0.
ALLOC = [
    ("allocatable threshold not exceeded", [("batch-cpu", 0, 100), ("batch-cpu", 0, 100)], {"batch-cpu": 100}, 80, 70, 5999, {}),
    (
        "allocatable threshold exceeded - batch cpu",
        [("batch-cpu", 45000, 5000), ("batch-cpu", 40000, 5000)],
        {"batch-cpu": 100000},
        80,
        70,
        5999,
        {"batch-cpu": 15000},
    ),
    (
        "allocatable threshold exceeded - mixed priority",
        [("batch-cpu", 85000, 5000), ("mid-cpu", 85000, 7000)],
        {"batch-cpu": 100000, "mid-cpu": 100000},
        80,
        70,
        7999,
        {"batch-cpu": 15000, "mid-cpu": 15000},
    ),
    (
        "allocatable threshold exceeded - mixed priority, lower AllocatableEvictPriorityThreshold",
        [("batch-cpu", 85000, 5000), ("mid-cpu", 85000, 7000)],
        {"batch-cpu": 100000, "mid-cpu": 100000},
        80,
        70,
        5999,
        {"batch-cpu": 15000},
    ),
    ("allocatable threshold = 0", [("batch-cpu", 85000, 5000)], {"batch-cpu": 100000, "mid-cpu": 100000}, 0, 0, 5999, {"batch-cpu": 85000}),
    ("node without allocatable batch-cpu resource", [("batch-cpu", 85000, 5000)], {}, 80, 70, 5999, {"batch-cpu": 85000}),
]


@pytest.mark.parametrize(
    ("pods", "allocatable", "threshold", "lower", "prio", "want"),
    [case(F, "Test_calculateMilliReleaseByAllocatableThresholdPercent", *row) for row in ALLOC],
)
def test_release_by_allocatable(
    pods: list[tuple[str, int, int]], allocatable: dict, threshold: int, lower: int, prio: int, want: dict[str, int]
) -> None:
    requested: dict[str, int] = {}
    for res, req, priority in pods:
        if priority <= prio:  # pods above the priority threshold are not counted
            requested[res] = requested.get(res, 0) + req
    assert release_by_allocatable(requested, allocatable, threshold, lower) == want


# --- the CPU evictor's victims and round (cpu_evict.go at a7a1b76) ---------------------------


def cpod(name: str, qos: QoSClass, priority: int, label: int | None = None, enabled: bool = True, res: tuple[str, int] = ("", 0)) -> Pod:
    """createCPUEvictTestPodWithLabels / mockBEPodForCPUEvict / mockPodForCPUEvictWithPriority:
    QoS label, spec.priority, the eviction-enabled and priority labels, and one container
    requesting `res` (batch-cpu or mid-cpu, millicores). A priority outside every koord range
    takes its class from the QoS (BE → koord-batch, others → koord-prod; upstream's QoSNone
    pod is taken as LS: both request plain cpu, and it has none)."""
    klass = next((c for c in PriorityClass if c.low <= priority <= c.high), PriorityClass.for_qos(qos))
    return Pod(name, qos, klass, priority, res[1], res[1] or None, 0, None, name, eviction_enabled=enabled, priority_label=label)


def test_be_victims_order() -> None:
    """Test_getBEPodEvictInfoAndSort/test_sort: BE pods by spec.priority, then used/request
    descending (16 CPUs of batch-cpu each); LS/LSR pods are no candidates."""
    states = [
        PodState(cpod("pod_lsr", QoSClass.LSR, 9500), 12_000),
        PodState(cpod("pod_ls", QoSClass.LS, 9500), 12_000),
        PodState(cpod("pod_be_1_priority100", QoSClass.BE, 100, res=("batch-cpu", 16_000)), 3000),
        PodState(cpod("pod_be_2_priority100", QoSClass.BE, 100, res=("batch-cpu", 16_000)), 4000),
        PodState(cpod("pod_be_3_priority10", QoSClass.BE, 10, res=("batch-cpu", 16_000)), 4000),
    ]
    (task,), _ = cpu_tasks(
        ["BECPUEvict"],
        Thresholds(cpu_evict_be_satisfaction_lower_percent=30, cpu_evict_be_satisfaction_upper_percent=40),
        states,
        0,
        0,
        {},
        1,
    )
    assert [(v.label, v.cpu_used, v.pod.cpu_request if v.pod else 0) for v in task.victims] == [
        ("pod_be_3_priority10", 4000, 16_000),
        ("pod_be_2_priority100", 4000, 16_000),
        ("pod_be_1_priority100", 3000, 16_000),
    ]


# the pods of Test_cpuEvict, each with its CPU used (cores; None: no metric)
POD0 = PodState(cpod("test_failed_pod", QoSClass.LSR, 1000, 1000), None, phase="Failed")
POD1 = PodState(cpod("test_evictDisabled_pod", QoSClass.LSR, 1000, 1000, enabled=False), 4000)
POD2 = PodState(cpod("test_higher_priority", QoSClass.LS, 3400, 1000), 3000)
POD3 = PodState(cpod("test_podPriority_120_2000", QoSClass.LS, 120, 2000), 1000)
POD4 = PodState(cpod("test_podPriority_120_3000", QoSClass.BE, 120, 3000), 5000)
POD5 = PodState(cpod("test_podPriority_120_4000", QoSClass.BE, 120, 4000), 2000)
POD6 = PodState(cpod("test_podPriority_100_9999", QoSClass.BE, 100), 1000)
POD7 = PodState(cpod("test_podPriority_100_9999_1", QoSClass.BE, 100), 2000)
POD8 = PodState(cpod("batch-pod-1", QoSClass.BE, 100, res=("batch-cpu", 85_000)), 4000)
POD9 = PodState(cpod("mid-pod-1", QoSClass.LS, 7000, res=("mid-cpu", 85_000)), 3000)
EIGHT = [POD0, POD1, POD2, POD3, POD4, POD5, POD6, POD7]
USED_78 = Thresholds(cpu_evict_threshold_percent=78, evict_enabled_priority_threshold=3000)
ALLOC_80 = Thresholds(
    cpu_allocatable_evict_threshold_percent=80, cpu_allocatable_evict_lower_percent=70, allocatable_evict_priority_threshold=7999
)
BOTH = replace(ALLOC_80, cpu_evict_threshold_percent=78, evict_enabled_priority_threshold=3000)
EXTENDED = {"batch-cpu": 100_000, "mid-cpu": 100_000}
CPU_ROUND = [
    # (subcase, features, pods, thresholds, node allocatable besides cpu, pods upstream
    # asserts evicted). The node has 100 CPUs, 81 used on average.
    ("only feature: CPUEvict", ["CPUEvict"], EIGHT, USED_78, {}, [POD3, POD4, POD6, POD7]),
    ("only feature: CPUAllocatableEvict", ["CPUAllocatableEvict"], [POD8, POD9], ALLOC_80, EXTENDED, [POD8, POD9]),
    ("feature CPUEvict ok, BECPUEvict invalid configuration", ["CPUEvict", "BECPUEvict"], EIGHT, USED_78, {}, [POD3, POD4, POD6, POD7]),
    (
        "feature CPUAllocatableEvict ok, BECPUEvict invalid configuration",
        ["CPUAllocatableEvict", "BECPUEvict"],
        [*EIGHT, POD8, POD9],
        BOTH,
        {},
        [POD8, POD9],
    ),
    (
        "feature CPUEvict/CPUAllocatableEvict ok",
        ["CPUAllocatableEvict", "CPUEvict"],
        [*EIGHT, POD8, POD9],
        BOTH,
        {},
        [POD2, POD4, POD5, POD6, POD7, POD8, POD9, POD3],
    ),
]


@pytest.mark.parametrize(("features", "states", "thresholds", "allocatable", "want"), [case(F, "Test_cpuEvict", *row) for row in CPU_ROUND])
def test_cpu_evict_round(
    features: list[str], states: list[PodState], thresholds: Thresholds, allocatable: dict, want: list[PodState]
) -> None:
    tasks, skipped = cpu_tasks(features, thresholds, states, 100_000, 81.0, {"cpu": 100_000, **allocatable})
    evicted = {v.label for v in kill_and_evict(tasks).evicted}
    # upstream asserts that these were evicted (and nothing about the others)
    assert {s.pod.name for s in want} <= evicted
    if "BECPUEvict" in features:
        assert skipped == {"BECPUEvict": "CPUEvictBESatisfactionLowerPercent or CPUEvictBESatisfactionUpperPercent not config"}


def test_cpu_evict_takes_exactly_the_used_threshold_release() -> None:
    """Ours, hand-worked on Test_cpuEvict's pods: 81% used, threshold 78 (lower 76) ⇒ release
    100000 × 5 / 100 = 5000 m of used CPU. Candidates (eviction-enabled, priority ≤ 3000,
    running, with a metric) by spec.priority then the priority label, used descending:
    100_9999_1 (2000), 100_9999 (1000), 120_2000 (1000), 120_3000 (5000) ⇒ 9000 ≥ 5000; the
    4000-label pod is spared."""
    tasks, _ = cpu_tasks(["CPUEvict"], USED_78, EIGHT, 100_000, 81.0, {})
    r = kill_and_evict(tasks)
    assert [v.label for v in r.evicted] == [s.pod.name for s in (POD7, POD6, POD3, POD4)]
    assert r.released[POD_USED] == {"cpu": 9000}
