"""The slo-controller's Mid tier (policies/batch_resource.mid_*) against its own unit tests,
pkg/slo-controller/noderesource/plugins/midresource/plugin_test.go at koordinator a7a1b76.
CPU in millicores, memory in bytes (G = 10^9 as resource.MustParse writes it).

getTestNode: capacity 100 CPUs / 210G, allocatable 100 / 200G (the kubelet reserves 10G);
the pods are a Running koord-prod LS pod requesting 20 CPUs / 40G and a koord-batch BE pod
(not high priority: not counted)."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.batch_resource import MidStrategy, mid_allocatable, mid_degrade_needed, mid_unallocated

F = "pkg/slo-controller/noderesource/plugins/midresource/plugin_test.go"
G = 10**9
CAPACITY = (100_000, 210 * G)
KUBELET_RESERVED = (0, 10 * G)
PROD_REQUESTS = (20_000, 40 * G)
POLICY = MidStrategy()
EXCEEDS = MidStrategy(cpu_threshold_percent=10, memory_threshold_percent=20, unallocated_percent=10)
THRESHOLDS = {"cpu_threshold_percent": 10, "memory_threshold_percent": 20, "unallocated_percent": 10}
STATIC = MidStrategy(static=True, static_cpu_reserved_percent=10, static_memory_reserved_percent=10, **THRESHOLDS)
STATIC_ALL = MidStrategy(static=True, static_cpu_reserved_percent=100, static_memory_reserved_percent=100, **THRESHOLDS)

# (subcase, strategy, node usage (None: invalid NodeMetric), prod reclaimable (None: nil),
# system + host-application usage above mid, want (mid-cpu, mid-memory))
CALCULATE = [
    ("calculate correctly when node metric is valid", POLICY, (20_000, 45 * G), (10_000, 15 * G), (0, 0), (10_000, 15 * G)),
    (
        "calculate correctly where the prod reclaimable exceeds the mid threshold",
        EXCEEDS,
        (30_000, 50 * G),
        (15_000, 30 * G),
        (0, 0),
        (10_000, 42 * G),
    ),
    ("calculate correctly when prod reclaimable is nil", POLICY, (30_000, 50 * G), None, (0, 0), (0, 0)),
    (
        "calculate correctly when set reserved resource in static mode: not exceed",
        STATIC,
        (30_000, 50 * G),
        (15_000, 30 * G),
        (0, 0),
        (10_000, 21 * G),
    ),
    (
        "calculate correctly when set reserved resource in static mode: exceed",
        STATIC_ALL,
        (30_000, 50 * G),
        (15_000, 30 * G),
        (0, 0),
        (10_000, 42 * G),
    ),
    ("calculate correctly where node metrics is invalid", POLICY, None, (20_000, 20 * G), (0, 0), (0, 0)),
    (
        "calculate correctly where the prod reclaimable exceeds the node free resource",
        POLICY,
        (90_000, 200 * G),
        (20_000, 20 * G),
        (0, 0),
        (10_000, 10 * G),
    ),
    # a prod host application's 5 CPUs / 15G count as system usage (above the 10G reserved)
    ("including product host application usage", POLICY, (30_000, 50 * G), None, (5_000, 15 * G), (0, 0)),
    # mid and batch host applications do not
    ("including mid host application usage", POLICY, (30_000, 50 * G), None, (0, 0), (0, 0)),
    ("including batch host application usage", POLICY, (30_000, 50 * G), None, (0, 0), (0, 0)),
]


@pytest.mark.parametrize(
    ("strategy", "usage", "reclaimable", "system", "want"), [case(F, "TestPluginCalculate", *row) for row in CALCULATE]
)
def test_calculate(
    strategy: MidStrategy,
    usage: tuple[int, int] | None,
    reclaimable: tuple[int, int] | None,
    system: tuple[int, int],
    want: tuple[int, int],
) -> None:
    unallocated = mid_unallocated(CAPACITY, KUBELET_RESERVED, system, PROD_REQUESTS)
    assert mid_allocatable(strategy, CAPACITY, unallocated, usage, reclaimable) == want


def test_unallocated_as_the_messages_give_it() -> None:
    """The messages of TestPluginCalculate: Unallocated 80000 / 160G, and 75000 / 155G with the
    prod host application."""
    assert mid_unallocated(CAPACITY, KUBELET_RESERVED, (0, 0), PROD_REQUESTS) == (80_000, 160 * G)
    assert mid_unallocated(CAPACITY, KUBELET_RESERVED, (5_000, 15 * G), PROD_REQUESTS) == (75_000, 155 * G)


# degradeTimeMinutes 10 in TestPluginCalculate ("degrade when node metric is expired": the
# NodeMetric is 30 min old, so both Mid resources are reset); isDegradeNeeded's own cases
# with its timeout of 10 minutes: (subcase, the NodeMetric's age (None: none / no update
# time), degrade minutes, want)
DEGRADE = [
    ("TestPluginCalculate", "degrade when node metric is expired", 30 * 60, 5, True),
    ("TestPlugin_isDegradeNeeded", "empty NodeMetric should degrade", None, 10, True),
    ("TestPlugin_isDegradeNeeded", "empty NodeMetric status should degrade", None, 10, True),
    ("TestPlugin_isDegradeNeeded", "outdated NodeMetric status should degrade", 11 * 60, 10, True),
    ("TestPlugin_isDegradeNeeded", "outdated NodeMetric status should degrade 1", 11 * 60, 10, True),
    ("TestPlugin_isDegradeNeeded", "NodeMetric without prod reclaimable should degrade", 0, 10, False),
    ("TestPlugin_isDegradeNeeded", "valid NodeMetric status should not degrade", 0, 10, False),
]


@pytest.mark.parametrize(("age", "minutes", "want"), [case(F, test, sub, *rest) for test, sub, *rest in DEGRADE])
def test_degrade(age: float | None, minutes: int, want: bool) -> None:
    assert mid_degrade_needed(age, minutes) is want
