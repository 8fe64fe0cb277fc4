"""koordlet's CPU eviction (qosmanager plugin cpuevict: BECPUEvict with evictByRealLimit /
evictByAllocatable, CPUEvict by node usage, CPUAllocatableEvict) against its own unit
tests, pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict_test.go at koordinator a7a1b76.
CPU in millicores."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.cpu_evict import (
    BEState,
    allocatable_config_error,
    be_limit,
    release_by_allocatable,
    release_by_used_threshold,
    satisfaction_config_error,
    to_release,
    used_threshold_config_error,
    window_valid,
)

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
