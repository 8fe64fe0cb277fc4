"""koordlet's memory eviction (qosmanager plugin memoryevict: MemoryEvict by node usage and
its victim order over all priorities) against its own unit tests,
pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict_test.go at koordinator a7a1b76.
Bytes (1G = 10^9, as resource.MustParse("120G"))."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.evict_round import kill_and_evict
from policies.evict_tasks import PodState, Thresholds, allocatable_task, config_error, memory_tasks, victim
from policies.memory_evict import EvictablePod, eviction_order, to_release
from policies.pods import Pod, PriorityClass, QoSClass

F = "pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict_test.go"
G = 10**9

# Test_calculateReleaseByUsedThresholdPercent on a 120G node: (subcase, used G, threshold,
# lower (0: unset, threshold − 2), want bytes)
USED = [
    ("test_memoryevict_MemoryEvictThresholdPercent_lower78", 115, 80, 0, 20_400_000_000),
    ("test_memoryevict_MemoryEvictThresholdPercent_lower80", 115, 80, 80, 18_000_000_000),
    ("lower than threshold", 80, 80, 80, 0),
]


@pytest.mark.parametrize(
    ("used", "threshold", "lower", "want"), [case(F, "Test_calculateReleaseByUsedThresholdPercent", *row) for row in USED]
)
def test_release_by_used_threshold(used: int, threshold: int, lower: int, want: int) -> None:
    assert to_release(120 * G, (120 - used) * G, threshold, lower) == want


def pod(name: str, prio: int, used: int, label: int | None = None, **kw: object) -> EvictablePod:
    return EvictablePod(name, prio, used * G, label_priority=label, **kw)  # type: ignore[arg-type]


# Test_getPodEvictInfoAndSortByPriority, EvictEnabledPriorityThreshold 3000, ordered by
# memory used descending last: (subcase, pods, want names in order)
SORT = [
    (
        "test_memoryevict_MemoryEvictThresholdPercent_80",
        [
            pod("test_failed_pod", 1000, 0, 1000, phase="Failed"),
            pod("test_evictDisabled_pod", 1000, 40, 1000, evict_enabled=False),
            pod("test_higher_priority", 3400, 30, 1000),
            pod("test_podPriority_120_2000", 120, 10, 2000),
            pod("test_podPriority_120_3000", 120, 5, 3000),
            pod("test_podPriority_120_4000", 120, 20, 4000),
            pod("test_podPriority_100_9999", 100, 10),
            pod("test_podPriority_100_9999_1", 100, 11),
        ],
        [
            "test_podPriority_100_9999_1",
            "test_podPriority_100_9999",
            "test_podPriority_120_2000",
            "test_podPriority_120_3000",
            "test_podPriority_120_4000",
        ],
    ),
    (
        "test_memoryevict_sort_by_eviction_priority_annotation",
        [
            pod("test_evictPriority_100", 120, 40, 3000, eviction_priority="100"),
            pod("test_evictPriority_negative", 120, 5, 4000, eviction_priority="-1"),
            pod("test_evictPriority_unset", 100, 10),
            pod("test_evictPriority_invalid", 120, 20, eviction_priority="invalid"),
        ],
        ["test_evictPriority_negative", "test_evictPriority_unset", "test_evictPriority_invalid", "test_evictPriority_100"],
    ),
]


@pytest.mark.parametrize(("pods", "want"), [case(F, "Test_getPodEvictInfoAndSortByPriority", *row) for row in SORT])
def test_eviction_order(pods: list[EvictablePod], want: list[str]) -> None:
    assert [p.name for p in eviction_order(pods, 3000)] == want


# --- the memory evictor's round (memory_evict.go at a7a1b76: buildEvictTask, KillAndEvictPods) --

GI = 1 << 30
BATCH_MIN, BATCH_MAX, MID_MAX = 5000, 5999, 7999


def mpod(name: str, qos: QoSClass, priority: int, memory: int = 0, evict_enabled: bool = False) -> Pod:
    """createMemoryEvictTestPod[WithPriorityAnnotationLabels]: a pod of QoS `qos` with
    spec.priority `priority` and one container requesting `memory` of its class's resource.
    A priority outside every koord range takes its class from the QoS
    (GetPodPriorityClassWithDefault: BE → koord-batch, LSR/LS → koord-prod); upstream's
    QoSNone pod is taken as LS here (neither is BE, both request plain memory)."""
    klass = next((c for c in PriorityClass if c.low <= priority <= c.high), PriorityClass.for_qos(qos))
    return Pod(name, qos, klass, priority, 0, None, memory, memory or None, name, eviction_enabled=evict_enabled)


# Test_generateConfigCheck: (subcase, feature, thresholds (None: no strategy), want error)
T = Thresholds
CONFIG = [
    ("BEMemoryEvict - ResourceThresholdStrategy nil", "BEMemoryEvict", None, "resourceThresholdStrategy not config"),
    ("BEMemoryEvict - MemoryEvictThresholdPercent nil", "BEMemoryEvict", T(), "threshold percent is nil"),
    ("BEMemoryEvict - MemoryEvictThresholdPercent < 0", "BEMemoryEvict", T(-1), "threshold percent(-1) should equal or greater than 0"),
    ("BEMemoryEvict - MemoryEvictLowerPercent == nil", "BEMemoryEvict", T(80), None),
    (
        "BEMemoryEvict - MemoryEvictLowerPercent > MemoryEvictThresholdPercent",
        "BEMemoryEvict",
        T(80, 90),
        "lower percent(90) should less than threshold percent(80)",
    ),
    ("BEMemoryEvict - valid config", "BEMemoryEvict", T(80, 70), None),
    ("MemoryEvict - ResourceThresholdStrategy nil", "MemoryEvict", None, "resourceThresholdStrategy not config"),
    ("MemoryEvict - MemoryEvictThresholdPercent nil", "MemoryEvict", T(), "threshold percent is nil"),
    ("MemoryEvict - MemoryEvictThresholdPercent < 0", "MemoryEvict", T(-1), "threshold percent(-1) should equal or greater than 0"),
    ("MemoryEvict - EvictEnabledPriorityThreshold nil", "MemoryEvict", T(80, 70), "EvictEnabledPriorityThreshold not config"),
    (
        "MemoryEvict - MemoryEvictLowerPercent == MemoryEvictThresholdPercent",
        "MemoryEvict",
        T(80, 80, evict_enabled_priority_threshold=BATCH_MAX),
        "lower percent(80) should less than threshold percent(80)",
    ),
    ("MemoryEvict - valid config", "MemoryEvict", T(85, 75, evict_enabled_priority_threshold=BATCH_MAX), None),
    ("MemoryAllocatableEvict - ResourceThresholdStrategy nil", "MemoryAllocatableEvict", None, "ResourceThresholdStrategy not config"),
    (
        "MemoryAllocatableEvict - MemoryAllocatableEvictThresholdPercent nil",
        "MemoryAllocatableEvict",
        T(),
        "MemoryAllocatableEvictThresholdPercent not config",
    ),
    (
        "MemoryAllocatableEvict - MemoryAllocatableEvictThresholdPercent < 0",
        "MemoryAllocatableEvict",
        T(memory_allocatable_evict_threshold_percent=-1),
        "threshold percent(-1) should greater than 0",
    ),
    (
        "MemoryAllocatableEvict - AllocatableEvictPriorityThreshold nil",
        "MemoryAllocatableEvict",
        T(memory_allocatable_evict_threshold_percent=80, memory_allocatable_evict_lower_percent=70),
        "AllocatableEvictPriorityThreshold not config",
    ),
    (
        "MemoryAllocatableEvict - AllocatableEvictPriorityThreshold > PriorityMidValueDefault",
        "MemoryAllocatableEvict",
        T(
            memory_allocatable_evict_threshold_percent=80,
            memory_allocatable_evict_lower_percent=70,
            allocatable_evict_priority_threshold=MID_MAX + 1,
        ),
        f"priorityThresholdPercent({MID_MAX + 1}) should less than {MID_MAX}, koor-prod pods should not be killed",
    ),
    (
        "MemoryAllocatableEvict - valid config",
        "MemoryAllocatableEvict",
        T(
            memory_allocatable_evict_threshold_percent=85,
            memory_allocatable_evict_lower_percent=75,
            allocatable_evict_priority_threshold=BATCH_MAX,
        ),
        None,
    ),
    (
        "unknown feature",
        "xxx",
        T(
            memory_allocatable_evict_threshold_percent=85,
            memory_allocatable_evict_lower_percent=75,
            allocatable_evict_priority_threshold=BATCH_MAX,
        ),
        "unknown feature: xxx",
    ),
]


@pytest.mark.parametrize(("feature", "thresholds", "want"), [case(F, "Test_generateConfigCheck", *row) for row in CONFIG])
def test_config_check(feature: str, thresholds: Thresholds | None, want: str | None) -> None:
    assert config_error(feature, thresholds) == want


# Test_calculateReleaseByAllocatableThresholdPercent on a 120G node: (subcase, node
# allocatable, pods, thresholds (threshold, lower, priority threshold), want release, want
# what each pod gives back)
ALLOC100 = {"batch-memory": 100 * GI}
ALLOC_BOTH = {"batch-memory": 100 * GI, "mid-memory": 100 * GI}
B1_85, M1_85 = mpod("batch-pod-1", QoSClass.BE, BATCH_MIN, 85 * GI), mpod("mid-pod-1", QoSClass.LS, 7000, 85 * GI)
ALLOCATABLE = [
    (
        "allocatable threshold not exceeded",
        ALLOC100,
        [mpod("batch-pod-1", QoSClass.BE, BATCH_MIN, 20 * GI), mpod("batch-pod-2", QoSClass.BE, BATCH_MIN, 30 * GI)],
        (80, 70, BATCH_MAX),
        {},
        {"batch-pod-1": {}, "batch-pod-2": {}},
    ),
    (
        "allocatable threshold exceeded - batch memory",
        ALLOC100,
        [mpod("batch-pod-1", QoSClass.BE, BATCH_MIN, 45 * GI), mpod("batch-pod-2", QoSClass.BE, BATCH_MIN, 40 * GI)],
        (80, 70, BATCH_MAX),
        {"batch-memory": 16106127360},
        {"batch-pod-1": {"batch-memory": 45 * GI}, "batch-pod-2": {"batch-memory": 40 * GI}},
    ),
    (
        "allocatable threshold exceeded - mixed priority",
        ALLOC_BOTH,
        [B1_85, M1_85],
        (80, 70, MID_MAX),
        {"batch-memory": 16106127360, "mid-memory": 16106127360},
        {"batch-pod-1": {"batch-memory": 85 * GI}, "mid-pod-1": {"mid-memory": 85 * GI}},
    ),
    (
        "allocatable threshold exceeded - mixed priority, lower AllocatableEvictPriorityThreshold",
        ALLOC_BOTH,
        [B1_85, M1_85],
        (80, 70, BATCH_MAX),
        {"batch-memory": 16106127360},
        {"batch-pod-1": {"batch-memory": 85 * GI}},
    ),
    (
        "allocatable threshold = 0",
        ALLOC100,
        [mpod("batch-pod-1", QoSClass.BE, BATCH_MIN, 50 * GI)],
        (0, 0, BATCH_MAX),
        {"batch-memory": 50 * GI},
        {"batch-pod-1": {"batch-memory": 50 * GI}},
    ),
    (
        "node without allocatable batch-memory resource",
        {},
        [mpod("batch-pod-1", QoSClass.BE, BATCH_MIN, 50 * GI)],
        (80, 70, BATCH_MAX),
        {"batch-memory": 50 * GI},
        {"batch-pod-1": {"batch-memory": 50 * GI}},
    ),
]


@pytest.mark.parametrize(
    ("allocatable", "pods", "thresholds", "want", "gives"),
    [case(F, "Test_calculateReleaseByAllocatableThresholdPercent", *row) for row in ALLOCATABLE],
)
def test_release_by_allocatable(allocatable: dict, pods: list[Pod], thresholds: tuple, want: dict, gives: dict) -> None:
    # upstream calls calculateReleaseByAllocatableThresholdPercent itself (no config check:
    # "threshold = 0" with lower 0 would fail it); every pod has a metric here
    states = [PodState(p, memory_used=0) for p in pods]
    task = allocatable_task("MemoryAllocatableEvict", "memory", states, {"memory": 120 * G, **allocatable}, *thresholds)
    tasks = [] if task is None else [task]
    if not want:
        assert tasks == []
        return
    (task,) = tasks
    assert dict(task.to_release) == want
    # the task's calculateFunc on a PodEvictInfo of each listed pod
    assert {p.name: dict(task.gives(victim(PodState(p)))) for p in pods if p.name in gives} == gives


# Test_memoryEvict: the whole round. Pods (name, QoS, spec.priority, memory used G) on a
# 120G node (MockTestNode("80", "120G"): allocatable memory 120G, no batch-memory).
BASE = [
    ("test_lsr_pod", QoSClass.LSR, 1000),
    ("test_ls_pod", QoSClass.LS, 500),
    ("test_noqos_pod", QoSClass.LS, 100),
    ("test_be_pod_priority100_1", QoSClass.BE, 100),
    ("test_be_pod_priority100_2", QoSClass.BE, 100),
    ("test_be_pod_priority120", QoSClass.BE, 120),
]
USED_115 = [40, 30, 10, 5, 20, 10]  # G, in BASE's order, with the node at 115G
BATCH_PODS = [
    mpod("batch-pod-1", QoSClass.BE, BATCH_MIN, 20 * GI, evict_enabled=True),
    mpod("batch-pod-2", QoSClass.BE, BATCH_MIN, 30 * GI, evict_enabled=True),
]


def base(used: list[int]) -> list[PodState]:
    return [PodState(mpod(n, q, p), memory_used=u * G) for (n, q, p), u in zip(BASE, used, strict=True)]


BE3 = ["test_be_pod_priority100_2", "test_be_pod_priority100_1", "test_be_pod_priority120"]
ROUND = [
    # (subcase, features, node used G, pods, thresholds, node batch-memory allocatable (None:
    # none; 0 stands for the node without memory capacity), want evicted)
    ("test_memoryevict_no_thresholdConfig", [], 0, [], None, None, []),
    ("test_MemoryEvictThresholdPercent_not_valid", [], 0, [], T(-1), None, []),
    # MockTestNode("80", "0"): no memory capacity
    ("test_node_memorycapacity_invalid", [], 115, [], T(80), 0, []),
    ("test_memory_under_evict_line", [], 80, base([30, 20, 10, 4, 8, 8]), T(80), None, []),
    (
        "only feature BEMemoryEvict: MemoryEvictThresholdPercent_sort_by_priority_and_usage_82",
        ["BEMemoryEvict"],
        115,
        base(USED_115),
        T(82),
        None,
        ["test_be_pod_priority100_2"],
    ),
    ("only feature BEMemoryEvict: MemoryEvictThresholdPercent_80", ["BEMemoryEvict"], 115, base(USED_115), T(80), None, BE3[:2]),
    ("only feature BEMemoryEvict: MemoryEvictThresholdPercent_50", ["BEMemoryEvict"], 115, base(USED_115), T(50), None, BE3),
    ("only feature BEMemoryEvict: MemoryEvictLowerPercent_80", ["BEMemoryEvict"], 115, base(USED_115), T(82, 80), None, BE3[:1]),
    ("only feature BEMemoryEvict: MemoryEvictLowerPercent_78", ["BEMemoryEvict"], 115, base(USED_115), T(82, 78), None, BE3[:2]),
    ("only feature BEMemoryEvict: MemoryEvictLowerPercent_74", ["BEMemoryEvict"], 115, base(USED_115), T(82, 74), None, BE3),
    (
        "only feature MemoryAllocatableEvict: MemoryAllocatableEvictThresholdPercent_80,MemoryAllocatableEvictLowerPercent_70",
        ["MemoryAllocatableEvict"],
        115,
        [PodState(BATCH_PODS[0], memory_used=10 * G), PodState(BATCH_PODS[1], memory_used=20 * G)],
        T(
            memory_allocatable_evict_threshold_percent=80,
            memory_allocatable_evict_lower_percent=70,
            allocatable_evict_priority_threshold=BATCH_MIN,
        ),
        None,
        ["batch-pod-2", "batch-pod-1"],
    ),
    (
        "feature BEMemoryEvict/MemoryEvict: MemoryEvictLowerPercent_74 BEMemoryEvict ok, MemoryEvict invalid configuration",
        ["BEMemoryEvict", "MemoryEvict"],
        115,
        base(USED_115),
        T(82, 74),
        None,
        BE3,
    ),
    (
        "feature BEMemoryEvict/MemoryEvict: MemoryEvictLowerPercent_74 BEMemoryEvict/MemoryEvict ok",
        ["BEMemoryEvict", "MemoryEvict"],
        115,
        base(USED_115),
        T(82, 74, evict_enabled_priority_threshold=3000),
        None,
        BE3,
    ),
    (
        "feature BEMemoryEvict/MemoryEvict/MemoryAllocatableEvict: MemoryEvictLowerPercent_74 BEMemoryEvict/MemoryEvict ok, "
        "MemoryAllocatableEvict invalid configuration",
        ["BEMemoryEvict", "MemoryEvict", "MemoryAllocatableEvict"],
        115,
        base(USED_115),
        T(82, 74, evict_enabled_priority_threshold=3000),
        None,
        BE3,
    ),
    (
        "feature BEMemoryEvict/MemoryEvict/MemoryAllocatableEvict: MemoryEvictLowerPercent_74 BEMemoryEvict/MemoryEvict ok, "
        "MemoryAllocatableEvict invalid configuration#01",
        ["BEMemoryEvict", "MemoryEvict", "MemoryAllocatableEvict"],
        115,
        [*base(USED_115), PodState(BATCH_PODS[0], memory_used=10 * G), PodState(BATCH_PODS[1], memory_used=20 * G)],
        T(
            82,
            74,
            memory_allocatable_evict_threshold_percent=45,
            memory_allocatable_evict_lower_percent=40,
            evict_enabled_priority_threshold=3000,
            allocatable_evict_priority_threshold=BATCH_MIN,
        ),
        100 * GI,
        [*BE3, "batch-pod-2"],
    ),
]


@pytest.mark.parametrize(
    ("features", "used", "states", "thresholds", "batch_memory", "want"), [case(F, "Test_memoryEvict", *row) for row in ROUND]
)
def test_memory_evict_round(
    features: list[str], used: int, states: list[PodState], thresholds: Thresholds | None, batch_memory: int | None, want: list[str]
) -> None:
    capacity = 0 if batch_memory == 0 else 120 * G
    allocatable = {"memory": capacity, "batch-memory": batch_memory or None}
    tasks, _ = memory_tasks(features, thresholds or Thresholds(), states, capacity, used * G, allocatable)
    assert [v.label for v in kill_and_evict(tasks).evicted] == want


def test_memory_evict_counts_its_victims_memory_a_thousandfold() -> None:
    """Ours, from the code (koordinator.md §4.4): MemoryEvict's candidate builder stores
    `int64(result * 1000)`, so the first victim covers any release. 120G node at 115G used,
    threshold 80 (lower 78): release 120G × 17% = 20.4G; the first eviction-enabled pod uses
    only 1G but counts as 1000G — the second is spared (BEMemoryEvict, unscaled, would take
    both)."""
    a = PodState(mpod("a", QoSClass.BE, 100, evict_enabled=True), memory_used=1 * G)
    b = PodState(mpod("b", QoSClass.BE, 100, evict_enabled=True), memory_used=G // 2)
    t = T(80, evict_enabled_priority_threshold=3000)
    tasks, _ = memory_tasks(["MemoryEvict"], t, [a, b], 120 * G, 115 * G, {})
    r = kill_and_evict(tasks)
    assert [v.label for v in r.evicted] == ["a"] and r.released["podUsed"] == {"memory": 1000 * G}
    tasks, _ = memory_tasks(["BEMemoryEvict"], t, [a, b], 120 * G, 115 * G, {})
    assert [v.label for v in kill_and_evict(tasks).evicted] == ["a", "b"]
