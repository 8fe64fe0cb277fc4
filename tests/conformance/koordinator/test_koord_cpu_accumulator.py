"""koord-scheduler's CPU accumulator (`takeCPUs`) against its own unit tests,
pkg/scheduler/plugins/nodenumaresource/cpu_accumulator_test.go at koordinator a7a1b76:
topology (sockets, NUMA nodes per socket, cores per node, threads per core), the CPUs
already allocated, the CPUs needed → the set of CPUs upstream expects."""

from __future__ import annotations

import pytest
from koord_cases import build_topology, case, cpuset

from policies.cpu_bind import take_cpus

F = "pkg/scheduler/plugins/nodenumaresource/cpu_accumulator_test.go"

# (test, subcase, topology, allocated, need, want) — shared by both NUMA strategies where
# upstream's two tables list the same case (the want differs per table and is given there).
FULL_MOST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 2, "0-1"),
    ("with allocated cpus", (1, 1, 4, 2), "0-1", 2, "2-3"),
    ("allocate whole socket", (2, 1, 4, 2), "", 8, "0-7"),
    ("allocate across socket", (2, 1, 4, 2), "", 12, "0-11"),
    ("allocate whole socket with partially-allocated socket", (2, 1, 4, 2), "0-1", 8, "8-15"),
    ("allocate in the smallest idle socket", (2, 2, 4, 2), "0-5,16-23", 6, "24-29"),
    ("allocate the most of CPUs on the same socket", (2, 2, 4, 2), "0-5,16-23", 12, "6-15,24-25"),
    ("allocate from first socket", (2, 2, 4, 2), "0-3,8-11", 4, "4-7"),
    ("allocate with less spread cpus", (2, 2, 2, 2), "0,2,4,8,12", 4, "10,11,14,15"),
    ("allocate with the most spread cpus", (2, 2, 2, 2), "0,2,4,8,10,12", 6, "5,6,7,13,14,15"),
    ("allocate with the most spread cpus on the smallest idle cpus socket", (2, 2, 2, 2), "0,2,4,8,9,10,12", 6, "6,7,11,13,14,15"),
]
FULL_LEAST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 2, "0-1"),
    ("with allocated cpus", (1, 1, 4, 2), "0-1", 2, "2-3"),
    ("allocate whole socket", (2, 1, 4, 2), "", 8, "0-7"),
    ("allocate across socket", (2, 1, 4, 2), "", 12, "0-11"),
    ("allocate whole socket with partially-allocated socket", (2, 1, 4, 2), "0-1", 8, "8-15"),
    ("allocate in the most idle socket", (2, 2, 4, 2), "0-5,16-23", 6, "8-13"),
    ("allocate the most of CPUs on the same socket", (2, 2, 4, 2), "0-5,16-23", 12, "6-15,24-25"),
    ("allocate from second socket", (2, 2, 4, 2), "0-3,8-11", 4, "16-19"),
    ("allocate with less spread cpus", (2, 2, 2, 2), "0,2,4,8,12", 4, "10,11,14,15"),
    ("allocate with the less spread cpus 2", (2, 2, 2, 2), "0,2,4,8,10,12", 6, "6,7,14,15,1,3"),
    ("allocate with the most spread cpus on the most idle cpus socket 3", (2, 2, 4, 2), "0,2,4,8,9,10,12", 6, "16-21"),
]
SPREAD_MOST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 4, "0,2,4,6"),
    ("allocate satisfied the partially-allocated socket", (2, 1, 4, 2), "0,2", 4, "1,3,4,6"),
    ("allocate cpus on full-free socket", (2, 1, 4, 2), "0-3", 4, "8,10,12,14"),
    ("allocate most of CPUs in the same socket and overlapped-cores", (2, 1, 4, 2), "0,2", 6, "1,3-7"),
]
SPREAD_LEAST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 4, "0,2,4,6"),
    ("allocate satisfied the partially-allocated socket", (2, 1, 4, 2), "0,2", 4, "8,10,12,14"),
    ("allocate cpus on full-free socket", (2, 1, 4, 2), "0-3", 4, "8,10,12,14"),
    ("allocate most of CPUs in the same socket and overlapped-cores", (2, 1, 4, 2), "0,2", 6, "8,10,12,14,9,11"),
]
TABLES = [
    ("TestTakeFullPCPUs", "FullPCPUs", "MostAllocated", FULL_MOST),
    ("TestTakeFullPCPUsWithNUMALeastAllocated", "FullPCPUs", "LeastAllocated", FULL_LEAST),
    ("TestTakeSpreadByPCPUs", "SpreadByPCPUs", "MostAllocated", SPREAD_MOST),
    ("TestTakeSpreadByPCPUsWithNUMALeastAllocated", "SpreadByPCPUs", "LeastAllocated", SPREAD_LEAST),
]


@pytest.mark.parametrize(
    ("topology", "allocated", "need", "policy", "strategy", "want"),
    [
        case(F, test, sub, topo, allocated, need, policy, strategy, want)
        for test, policy, strategy, rows in TABLES
        for sub, topo, allocated, need, want in rows
    ],
)
def test_take_cpus(topology: tuple[int, int, int, int], allocated: str, need: int, policy: str, strategy: str, want: str) -> None:
    got = take_cpus(build_topology(*topology), cpuset(allocated), need, policy, strategy)
    assert set(got) == cpuset(want)
    assert len(got) == need


# TestTakeCPUsWithExclusivePolicy: (subcase, topology, exclusively allocated CPUs, the
# policy they are held with (upstream default PCPULevel), the bind policy (default
# SpreadByPCPUs), the new pod's exclusive policy (default PCPULevel), need, want); MostAllocated.
EXCLUSIVE = [
    ("allocate cpus on full-free socket with PCPULevel", (2, 1, 4, 2), "0,2", "PCPULevel", "SpreadByPCPUs", "PCPULevel", 4, "8,10,12,14"),
    ("allocate overlapped cpus with PCPULevel", (2, 1, 4, 2), "", "PCPULevel", "SpreadByPCPUs", "PCPULevel", 10, "0-4,6,8,10,12,14"),
    (
        "allocate cpus on large-size partially-allocated socket with PCPULevel",
        (2, 1, 8, 2),
        "0,2",
        "PCPULevel",
        "SpreadByPCPUs",
        "PCPULevel",
        4,
        "4,6,8,10",
    ),
    ("allocate cpus with none exclusive policy", (2, 1, 8, 2), "0,2", "PCPULevel", "SpreadByPCPUs", "None", 4, "1,3,4,6"),
    (
        "allocate cpus on full-free socket with NUMANodeLevel",
        (2, 1, 4, 2),
        "0,2",
        "NUMANodeLevel",
        "SpreadByPCPUs",
        "NUMANodeLevel",
        4,
        "8,10,12,14",
    ),
    (
        "allocate cpus on partially-allocated socket without NUMANodeLevel",
        (2, 1, 4, 2),
        "0,2",
        "NUMANodeLevel",
        "SpreadByPCPUs",
        "None",
        4,
        "1,3,4,6",
    ),
    (
        "allocate cpus on full-free socket with NUMANodeLevel with PCPUs",
        (2, 1, 4, 2),
        "0,2",
        "NUMANodeLevel",
        "FullPCPUs",
        "NUMANodeLevel",
        4,
        "8-11",
    ),
    (
        "allocate cpus on partially-allocated socket without NUMANodeLevel with PCPUs",
        (2, 1, 4, 2),
        "0,2",
        "NUMANodeLevel",
        "FullPCPUs",
        "None",
        4,
        "4-7",
    ),
]


@pytest.mark.parametrize(
    ("topology", "allocated", "held_as", "policy", "exclusive", "need", "want"),
    [case(F, "TestTakeCPUsWithExclusivePolicy", row[0], *row[1:]) for row in EXCLUSIVE],
)
def test_take_cpus_exclusive(
    topology: tuple[int, int, int, int], allocated: str, held_as: str, policy: str, exclusive: str, need: int, want: str
) -> None:
    cpus = cpuset(allocated)
    got = take_cpus(build_topology(*topology), cpus, need, policy, "MostAllocated", exclusive, dict.fromkeys(cpus, held_as))
    assert set(got) == cpuset(want)


@pytest.mark.parametrize(
    "strategy",
    [
        case(F, "TestCPUSpreadByPCPUs", "spread order of all free CPUs", "MostAllocated"),
        case(F, "TestCPUSpreadByPCPUsWithNUMALeastAllocated", "spread order of all free CPUs", "LeastAllocated"),
    ],
)
def test_spread_order(strategy: str) -> None:
    # freeCPUs then spreadCPUs on an empty 2×2×4×2 node: all first threads, then all second
    # threads. Taking all 32 CPUs with SpreadByPCPUs walks exactly that final fallback order.
    got = take_cpus(build_topology(2, 2, 4, 2), set(), 32, "SpreadByPCPUs", strategy)
    assert got == [*range(0, 32, 2), *range(1, 32, 2)]


@pytest.mark.parametrize("_", [case(F, "TestTakePreferredCPUs", "takeCPUs without preferred CPUs", None)])
def test_take_two_spread(_: None) -> None:
    assert sorted(take_cpus(build_topology(2, 1, 16, 2), set(), 2, "SpreadByPCPUs", "MostAllocated")) == [0, 2]
