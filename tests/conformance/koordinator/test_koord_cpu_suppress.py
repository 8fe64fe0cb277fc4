"""koordlet's CPU suppress (qosmanager plugin cpusuppress) against its own unit tests,
pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress_test.go at koordinator a7a1b76."""

from __future__ import annotations

import pytest
from koord_cases import case, cpuset

from policies.cgroup import Cpu, format_cpus, parse_cpus
from policies.cpu_suppress import be_cpuset, cfs_quota, cpuset_size, pick_cpus, suppress_milli

F = "pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress_test.go"

# ProcessorInfo rows (CPUID, CoreID, SocketID, NodeID) as upstream lists them.
HT_2x2 = [(0, 0, 0, 0), (1, 1, 0, 0), (2, 2, 1, 1), (3, 3, 1, 1), (4, 0, 0, 0), (5, 1, 0, 0), (6, 2, 1, 1), (7, 3, 1, 1)]
PAIRS_2x2 = [(0, 0, 0, 0), (1, 0, 0, 0), (2, 1, 0, 0), (3, 1, 0, 0), (4, 2, 1, 1), (5, 2, 1, 1), (6, 3, 1, 1), (7, 3, 1, 1)]
PAIRS_4S = [(i, i // 2, i // 4, i // 8) for i in range(16)]
PAIRS_4S_SHUFFLED = [PAIRS_4S[i] for i in (12, 13, 14, 2, 3, 11, 4, 5, 8, 15, 0, 1, 9, 10, 6, 7)]


def cpus(rows: list[tuple[int, int, int, int]]) -> list[Cpu]:
    return [Cpu(cpu=c, core=k, socket=s, node=n) for c, k, s, n in rows]


# Test_calculateBESuppressCPUSetPolicy: (subcase, cpus needed, processors, want in order)
SET_POLICY = [
    ("do not panic but return empty cpuset for insufficient cpus", 0, [], []),
    ("allocate cpus with scattering on numa nodes and stacking on HTs 0.", 3, HT_2x2, [0, 4, 2]),
    ("allocate cpus with scattering on numa nodes and stacking on HTs 1.", 3, PAIRS_2x2, [0, 1, 4]),
    ("allocate cpus with scattering on numa nodes and stacking on HTs 2. (also scattering on sockets)", 5, PAIRS_4S, [0, 1, 4, 5, 8]),
    (
        "allocate cpus with scattering on numa nodes and stacking on HTs 3. (regardless of the initial order)",
        5,
        PAIRS_4S_SHUFFLED,
        [0, 1, 4, 5, 8],
    ),
    ("allocate cpus for slow scale up:increase cpunum == maxIncreaseCPUNum", 5, PAIRS_4S_SHUFFLED, [0, 1, 4, 5, 8]),
]


@pytest.mark.parametrize(("need", "rows", "want"), [case(F, "Test_calculateBESuppressCPUSetPolicy", *row) for row in SET_POLICY])
def test_pick_cpus(need: int, rows: list[tuple[int, int, int, int]], want: list[int]) -> None:
    assert pick_cpus(cpus(rows), need) == want


# adjustByCPUSet with the tests' mock pods: an LSR pod bound to "0,6", an LSE pod to "7".
# (test, subcase, BE cpus wanted, old BE cpuset, reservedCPUs annotation, exclusive system-QoS
# cpuset, want — the BE cpuset file afterwards; an empty pick writes nothing).
LSR, LSE = cpuset("0,6"), cpuset("7")
ADJUST = [
    ("Test_cpuSuppress_adjustByCPUSet", "test scale lower by cpuset.", 3, "7,6,3,2", "", "", "2-4"),
    ("Test_cpuSuppress_adjustByCPUSet", "test scale up by cpuset.", 3, "7,6", "", "", "2-4"),
    (
        "Test_cpuSuppress_adjustByCPUSet_withCPUsReservedFromNodeAnno",
        "test scale by cpuset and ensure there is enough cpu available for bepod.",
        3,
        "7,6,3,2",
        "3",
        "",
        "0,4-5",
    ),
    (
        "Test_cpuSuppress_adjustByCPUSet_withCPUsReservedFromNodeAnno",
        "test scale by cpuset and cpus that bepod can used less than bepod needed.",
        3,
        "7,6,3,2",
        "1-6",
        "",
        "7,6,3,2",
    ),
    (
        "Test_cpuSuppress_adjustByCPUSet_withCPUsReservedFromNodeAnno",
        "test scale by cpuset and just enough cpu allocated to bepod.",
        3,
        "7,6,3,2",
        "0-1,5-6",
        "",
        "2-4",
    ),
    (
        "Test_cpuSuppress_adjustByCPUSet_withSystemQOSResourceFromNodeAnno",
        "test scale by cpuset and ensure there is enough cpu available for bepod.",
        3,
        "7,6,3,2",
        "",
        "3",
        "0,4-5",
    ),
    (
        "Test_cpuSuppress_adjustByCPUSet_withSystemQOSResourceFromNodeAnno",
        "test scale by cpuset and cpus that be pod can used less than be pod needed. there is nothing to do because the cpu runs out",
        3,
        "7,6,3,2",
        "",
        "1-6",
        "7,6,3,2",
    ),
    (
        "Test_cpuSuppress_adjustByCPUSet_withSystemQOSResourceFromNodeAnno",
        "test scale by cpuset and just enough cpu allocated to bepod.",
        3,
        "7,6,3,2",
        "",
        "0-1,5-6",
        "2-4",
    ),
    # {"cpuset":"1-6","cpusetExclusive":false}: a shared system-QoS cpuset excludes nothing
    ("Test_cpuSuppress_adjustByCPUSet_withSystemQOSResourceFromNodeAnno", "system qos cpu is not exclusive", 3, "7,6,3,2", "", "", "2-4"),
]


@pytest.mark.parametrize(("cores", "old", "reserved", "system_qos", "want"), [case(F, test, sub, *rest) for test, sub, *rest in ADJUST])
def test_adjust_by_cpuset(cores: int, old: str, reserved: str, system_qos: str, want: str) -> None:
    topology = cpus(PAIRS_2x2)
    size = cpuset_size(cores * 1000, len(parse_cpus(old)), len(topology))
    new = be_cpuset(topology, size, LSR, LSE, cpuset(reserved) | cpuset(system_qos))
    assert (format_cpus(set(new)) if new else old) == want


# Test_cpuSuppress_adjustByCfsQuota on an 80-CPU node: (subcase, suppress milli, old quota, want)
P = 100_000
CFS = [
    ("increase CFSQuota: cpuQuantity > preBECPU + maxIncreaseCPU", 20_000, 10 * P, 10 * P + int(0.1 * 80 * P)),
    ("increase CFSQuota: preBECPU < cpuQuantity < preBECPU + maxIncreaseCPU", 20_000, 19 * P, 20 * P),
    ("suppress beCPU: preBECPU > cpuQuantity", 20_000, 24 * P, 20 * P),
    ("bypass minDeltaQuota!", 20_000, int(19.8 * P), int(19.8 * P)),
    ("minQuota 2000 not bypass!", 1, int(0.8 * P), 2000),
    ("increase CFSQuota: first time set quota with beUnsetQuota, scale without step limit", 20_000, -1, 20 * P),
]


@pytest.mark.parametrize(("milli", "old", "want"), [case(F, "Test_cpuSuppress_adjustByCfsQuota", *row) for row in CFS])
def test_adjust_by_cfs_quota(milli: int, old: int, want: int) -> None:
    assert cfs_quota(milli, old, 80) == want


# Test_cpuSuppress_calculateBESuppressCPU with beCPUUsedThreshold 70: (subcase, capacity
# cores, node used cores, [(usage cores, is BE)] for pods and host apps — a metric without a
# pod counts as not BE, a host app is BE only with QoS BE under kubepods-besteffort —, min
# percent, want milli).
CALC = [
    ("does not panic on empty (non-nil) input", 0, 0.0, [], None, 0),
    ("calculate correctly for missing podMeta or transient metrics", 20, 11.0, [(8.0, False), (4.0, True)], None, 6000),
    ("calculate be suppress cpus correctly", 20, 12.0, [(8.0, False), (2.0, True)], None, 4000),
    ("calculate be suppress cpus correctly with ls host app", 20, 12.0, [(8.0, False), (2.0, True), (1.0, False)], None, 4000),
    # upstream's second subcase of this name: the host app is BE under kubepods-besteffort
    ("calculate be suppress cpus correctly with ls host app#01", 20, 12.0, [(8.0, False), (2.0, True), (1.0, True)], None, 5000),
    ("calculate be suppress cpus with min", 20, 12.0, [(8.0, False), (2.0, True)], 60, 12000),
]


@pytest.mark.parametrize(
    ("capacity", "node_used", "usage", "min_percent", "want"), [case(F, "Test_cpuSuppress_calculateBESuppressCPU", *row) for row in CALC]
)
def test_calculate_be_suppress_cpu(
    capacity: int, node_used: float, usage: list[tuple[float, bool]], min_percent: int | None, want: int
) -> None:
    ls_used = sum(u for u, be in usage if not be)
    all_used = sum(u for u, _ in usage)
    assert suppress_milli(capacity, 70, ls_used, node_used, all_used, 0.0, min_percent) == want
