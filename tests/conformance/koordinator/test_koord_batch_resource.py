"""slo-controller's batch resources (noderesource plugin batchresource, node level) against
its own unit tests, pkg/slo-controller/noderesource/plugins/batchresource/plugin_test.go
(TestPluginCalculate) at koordinator a7a1b76. CPU in millicores, memory in bytes (1 G =
10^9, as resource.MustParse("120G")); upstream's NUMA-zone expectations are not ported (the
simulator has no NodeResourceTopology zones), its node-level batch-cpu/batch-memory are."""

from __future__ import annotations

import pytest
from koord_cases import case, cpuset

from policies.batch_resource import batch_allocatable, hp_sums
from policies.pods import Pod, PriorityClass, QoSClass

F = "pkg/slo-controller/noderesource/plugins/batchresource/plugin_test.go"
T = "TestPluginCalculate"
G = 10**9
PROD, MID, BATCH = PriorityClass.PROD, PriorityClass.MID, PriorityClass.BATCH
LS, LSR, LSE, BE = QoSClass.LS, QoSClass.LSR, QoSClass.LSE, QoSClass.BE


def pod(name: str, qos: QoSClass, prio: PriorityClass, cpu: int, mem: int) -> Pod:
    """A Running/Pending pod with requests = limits (`makeResourceReq`), cores and G."""
    return Pod(name, qos, prio, prio.value[3], cpu * 1000, cpu * 1000, mem * G, mem * G, name)


# getTestPodList / getTestResourceMetrics: podA (LS, prod by QoS) 20 CPU/20G metric 11/11G;
# podB (BE, batch) metric 10/10G; podC (no labels, requests = limits: Guaranteed → LSR →
# prod) 2 × 10 CPU/20G, Pending, metric 22/22G; podD (BE) Succeeded, not counted, no metric.
DEFAULT_PODS = [pod("podA", LS, PROD, 20, 20), pod("podB", BE, BATCH, 0, 0), pod("podC", LSR, PROD, 20, 40)]
DEFAULT_METRICS = {"podA": (11, 11), "podB": (10, 10), "podC": (22, 22)}
DEFAULT_SYSTEM = (7, 12)

# "pods in multiple priority classes": podProd (LS) 10/10G m 5/5G; podProd1 (prod by
# priority) 10/10G m 6/6G; podBatch (BE) m 10/10G; podMid (BE label, koord-mid priority)
# 2 × 10/20G, Pending, m 22/22G; podProd2 Succeeded (not listed), no metric.
MULTI_PODS = [
    pod("podProd", LS, PROD, 10, 10),
    pod("podProd1", LS, PROD, 10, 10),
    pod("podBatch", BE, BATCH, 10, 10),
    pod("podMid", BE, MID, 20, 40),
]
MULTI_METRICS = {"podProd": (5, 5), "podProd1": (6, 6), "podBatch": (10, 10), "podMid": (22, 22)}
# the same with podProd labelled LSE (its CPU counts by request)
LSE_PODS = [pod("podProdLSE", LSE, PROD, 10, 10), *MULTI_PODS[1:]]
LSE_METRICS = {"podProdLSE": (5, 5), "podProd1": (6, 6), "podBatch": (10, 10), "podMid": (22, 22)}
# "pods terminated": podProd (LS) m 5/5G, podProd1 (prod) without a metric, podProd2
# Succeeded but reported (10/10G, no priority in the metric: dangling, counted); system 5/10G.
TERMINATED_PODS = [pod("podProd", LS, PROD, 10, 10), pod("podProd1", LS, PROD, 10, 10)]
TERMINATED_METRICS = {"podProd": (5, 5), "podProd2": (10, 10)}
# "missing metric LSE pod and dangling pod": podProdLSE without a metric; podProd2
# (Succeeded) reported with priority prod: dangling; memory by request.
DANGLING_METRICS = {"podProd1": (6, 6, True), "podProd2": (2, 4, True), "podBatch": (10, 10, False), "podMid": (22, 22, True)}
# "some pods not shown in list": also podProd3 (prod, 4/8G) and podBatch2 (batch, 8/8G)
NOT_LISTED_METRICS = {**DANGLING_METRICS, "podProd3": (4, 8, True), "podBatch2": (8, 8, False)}

BASE = dict(
    pods=DEFAULT_PODS,
    metrics=DEFAULT_METRICS,
    system=DEFAULT_SYSTEM,
    reclaim=(65, 65),
    policy=("usage", "usage"),
    caps=(None, None),
    capacity=(100, 120),
    allocatable=(100, 120),
    reservation=(None, "", None),
)

# (subcase, changes to BASE, want batch-cpu milli, want batch-memory G). `reservation` is
# the node.koordinator.sh/reservation annotation: (resources.cpu cores, reservedCPUs,
# resources.memory G) — reservedCPUs, when set, overrides resources.cpu.
CASES = [
    ("calculate with memory usage", {}, 25000, 33),
    ("calculate with memory usage and reserve nothing from node.annotation", {}, 25000, 33),
    (
        "calculate with memory usage and reserve specific cpus from node.annotation and left equal sys.used",
        {"reservation": (None, "0-1", None)},
        25000,
        33,
    ),
    (
        "calculate with memory usage and reserve specific cpus from node.annotation and right equal sys.used",
        {"reservation": (None, "0-19", None)},
        12000,
        33,
    ),
    (
        "calculate with memory usage and reserve cpus by quantity from node.annotation and right equal sys.used",
        {"reservation": (20, "", None)},
        12000,
        33,
    ),
    (
        "calculate with memory usage and reserve cpus by quantity and specific cores from node.annotation and right equal sys.used",
        {"reservation": (20, "0-9", None)},
        22000,
        33,
    ),
    (
        "calculate with memory usage and reserve memory from node.annotation and right equal sys.used",
        {"reservation": (None, "", 20)},
        25000,
        25,
    ),
    (
        "calculate with memory usage and reserve memory from node.annotation and left equal sys.used",
        {"reservation": (None, "", 5)},
        25000,
        33,
    ),
    (
        "calculate with memory usage and reserve memory and cpu from node.annotation and left equal sys.used",
        {"reservation": (2, "", 5)},
        25000,
        33,
    ),
    (
        "calculate with memory usage and reserve memory and cpu from node.annotation and right equal sys.used",
        {"reservation": (10, "", 20)},
        22000,
        25,
    ),
    (
        "calculate with memory usage and reserve memory and specific cores from node.annotation and right equal sys.used",
        {"reservation": (None, "0-9", 20)},
        22000,
        25,
    ),
    (
        "calculate with memory usage and reserve memory and cpu which kubelet reserved is the biggest among node.annotation, sys.used and kubelet reserved",
        {"reservation": (2, "", 5), "allocatable": (90, 100)},
        22000,
        25,
    ),
    ("calculate with memory request", {"reclaim": (70, 80), "policy": ("usage", "request")}, 30000, 36),
    (
        "calculate with memory request and reserve memory from node.annotation and left equal sys.used",
        {"reclaim": (70, 80), "policy": ("usage", "request"), "reservation": (None, "", 5)},
        30000,
        31,
    ),
    (
        "calculate with memory request and reserve memory which kubelet reserved is the biggest among node.annotation, sys.used and kubelet reserve",
        {"reclaim": (70, 80), "policy": ("usage", "request"), "reservation": (None, "", 5), "allocatable": (90, 100)},
        27000,
        16,
    ),
    (
        "calculate with memory request and reserve memory from node.annotation and right equal sys.used",
        {"reclaim": (70, 80), "policy": ("usage", "request"), "reservation": (None, "", 10)},
        30000,
        26,
    ),
    ("calculate with pods in multiple priority classes", {"pods": MULTI_PODS, "metrics": MULTI_METRICS}, 25000, 33),
    ("calculate with pods terminated", {"pods": TERMINATED_PODS, "metrics": TERMINATED_METRICS, "system": (5, 10)}, 35000, 43),
    ("calculate with pods QoS=LSE", {"pods": LSE_PODS, "metrics": LSE_METRICS}, 20000, 33),
    (
        "calculate NUMA resources with memory not over-committed, missing metric LSE pod and dangling pod",
        {"pods": LSE_PODS, "metrics": DANGLING_METRICS, "policy": ("usage", "request")},
        18000,
        18,
    ),
    (
        "calculate NUMA resources with memory not over-committed, some pods not shown in list",
        {"pods": LSE_PODS, "metrics": NOT_LISTED_METRICS, "policy": ("usage", "request")},
        14000,
        18,
    ),
    ("calculate with cpu maxUsageRequest and memory request", {"reclaim": (70, 80), "policy": ("maxUsageRequest", "request")}, 21000, 36),
    ("calculate with adjusted reclaim ratio", {"reclaim": (150, 120), "policy": ("maxUsageRequest", "request")}, 101000, 84),
    (
        "calculate with batch cpu threshold percent only",
        {"reclaim": (150, 120), "policy": ("maxUsageRequest", "request"), "caps": (100, None)},
        100000,
        84,
    ),
    (
        "calculate with batch memory threshold percent only",
        {"reclaim": (150, 120), "policy": ("maxUsageRequest", "request"), "caps": (None, 100)},
        101000,
        84,
    ),
    (
        "calculate with both batch cpu/mem threshold percent",
        {"reclaim": (150, 120), "policy": ("maxUsageRequest", "request"), "caps": (100, 100)},
        100000,
        84,
    ),
    (
        "calculate without batch cpu/mem threshold percent-with different xxxCalculatePolicy",
        {"reclaim": (150, 120), "policy": ("usage", "maxUsageRequest")},
        110000,
        72,
    ),
    (
        "calculate with both batch cpu/mem threshold percent-with different xxxCalculatePolicy",
        {"reclaim": (150, 120), "policy": ("usage", "maxUsageRequest"), "caps": (100, 100)},
        100000,
        72,
    ),
]


@pytest.mark.parametrize(("change", "want_cpu", "want_mem"), [case(F, T, sub, change, cpu, mem) for sub, change, cpu, mem in CASES])
def test_calculate_on_node(change: dict, want_cpu: int, want_mem: int) -> None:
    c = {**BASE, **change}
    metrics = c["metrics"]
    metric_hp = {k: (v[2] if len(v) > 2 else True) for k, v in metrics.items()}
    anno_cpu, reserved_cpus, anno_mem = c["reservation"]
    # the annotation: |reservedCPUs| overrides resources.cpu; the node's reservation is the
    # larger of it and the kubelet's (capacity − allocatable)
    anno_cpu_milli = len(cpuset(reserved_cpus)) * 1000 if reserved_cpus else (anno_cpu or 0) * 1000
    got = []
    for i, (unit, resource) in enumerate(((1000, "cpu"), (G, "memory"))):
        usage = {k: v[i] * unit for k, v in metrics.items()}
        hp = hp_sums(c["pods"], usage, resource, metric_hp)
        capacity = c["capacity"][i] * unit
        anno = anno_cpu_milli if i == 0 else (anno_mem or 0) * G
        reserved = max(capacity - c["allocatable"][i] * unit, anno)
        got.append(batch_allocatable(capacity, c["reclaim"][i], c["system"][i] * unit, reserved, hp, c["policy"][i], c["caps"][i]))
    assert got == [want_cpu, want_mem * G]
