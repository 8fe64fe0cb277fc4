"""koordlet's memory eviction (qosmanager plugin memoryevict: MemoryEvict by node usage and
its victim order over all priorities) against its own unit tests,
pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict_test.go at koordinator a7a1b76.
Bytes (1G = 10^9, as resource.MustParse("120G"))."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.memory_evict import EvictablePod, eviction_order, to_release

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
