"""koordlet's peak prediction (policies/peak_prediction.py) against its own unit tests,
pkg/koordlet/prediction/{peak_predictor,predict_server}_test.go at koordinator a7a1b76.
CPU in millicores, memory in bytes (Mi = 2^20), ages in seconds. Upstream's mock predict
server answers a table, else its default result or error: `Fixed`."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.peak_prediction import (
    NODE,
    SYSTEM,
    Fixed,
    Flags,
    PodInfo,
    PredictServer,
    cpu_histogram,
    memory_histogram,
    node_item,
    pod_reclaimable,
    priority_reclaimable,
    prod_reclaimable,
)
from policies.pods import Pod, PriorityClass, QoSClass

F = "pkg/koordlet/prediction/peak_predictor_test.go"
S = "pkg/koordlet/prediction/predict_server_test.go"
MI, GI = 1 << 20, 1 << 30
HOUR = 3600.0
COLD_HOUR = Flags(cold_start_s=HOUR)
ZERO = {"p95": (0, 0), "p98": (0, 0)}  # testZeroResult
PREDICTION = {"p95": (500, 512 * MI), "p98": (800, 768 * MI)}  # testPredictionResult


def prod(uid: str, cpu: int, memory: int, age_s: float, leaving: bool = False, klass: PriorityClass = PriorityClass.PROD) -> PodInfo:
    """A pod with spec.priority koord-prod's minimum (or none, whose class follows its
    Kubernetes QoS: a pod with requests only is Burstable → LS → koord-prod)."""
    pod = Pod(uid, QoSClass.LS, klass, klass.low, cpu, None, memory, None, uid)
    return PodInfo(pod, age_s, uid, leaving)


def batch(uid: str, cpu: int, memory: int, age_s: float) -> PodInfo:
    pod = Pod(uid, QoSClass.BE, PriorityClass.BATCH, PriorityClass.BATCH.low, cpu, None, memory, None, uid)
    return PodInfo(pod, age_s, uid)


# TestProdReclaimablePredictor_AddPod: cold start 1 h, margin 10%
SYS = {"p95": (300, 512 * MI), "p98": (500, 512 * MI)}
PROD = {"p95": (1000, GI), "p98": (1200, GI)}
POD = {"p95": (500, 768 * MI), "p98": (1000, GI)}
POD1 = prod("pod-1-uid", 1000, GI, 60)  # cold start
POD2 = prod("pod-2-uid", 2000, 2 * GI, 2 * HOUR)  # normal
POD3 = prod("pod-3-uid", 2000, 2 * GI, 2 * HOUR, leaving=True)  # being deleted
SERVER = Fixed(
    {node_item("koord-prod"): PROD, node_item("koord-batch"): ZERO, SYSTEM: SYS, "pod-1-uid": POD, "pod-2-uid": POD, "pod-3-uid": ZERO},
    default={},
)
N1 = int(1.1 * 1024 * 1024 * 1024)  # number1, Go's folded constant truncated
N2 = int(1.1 * 1536 * 1024 * 1024)  # number2
ADD_POD = [
    ("node allocatable == pods' requests", (3000, 3 * GI), (1450, 2 * GI - N1), (1570, 3 * GI - N2)),
    ("node allocatable > pods' requests", (8000, 8 * GI), (1450, 2 * GI - N1), (1570, 3 * GI - N2)),
    ("node allocatable < pods' requests", (1000, GI), (1000 - 550, 0), (0, 0)),
]


@pytest.mark.parametrize(
    ("allocatable", "by_pod", "by_priority"), [case(F, "TestProdReclaimablePredictor_AddPod", *row) for row in ADD_POD]
)
def test_prod_reclaimable(allocatable: tuple[int, int], by_pod: tuple[int, int], by_priority: tuple[int, int]) -> None:
    pods = [POD1, POD2, POD3]
    a = pod_reclaimable(pods, SERVER, allocatable, COLD_HOUR)
    b = priority_reclaimable(pods, SERVER, allocatable)
    assert (a.result, b.result, a.errors) == (by_pod, by_priority, ())
    r = prod_reclaimable(pods, SERVER, allocatable, COLD_HOUR)
    assert r.result == (min(by_pod[0], by_priority[0]), min(by_pod[1], by_priority[1]))
    # the node peak is the larger of the two predictors' peaks
    assert r.peak == (max(a.peak[0], b.peak[0]), max(a.peak[1], b.peak[1]))


PEAK = int(1.1 * 768 * 1024 * 1024)
POD_CASES = [
    ("node allocatable > pods' requests ", (3000, 3 * GI), (2000 - 550, 2 * GI - PEAK)),
    ("node allocatable  < pods' requests ", (1000, GI), (1000 - 550, GI - PEAK)),
]


@pytest.mark.parametrize(("allocatable", "want"), [case(F, "TestPodReclaimablePredictor", *row) for row in POD_CASES])
def test_pod_reclaimable(allocatable: tuple[int, int], want: tuple[int, int]) -> None:
    pods = [POD1, POD2, POD3, batch("pod-4-uid", 2000, 2 * GI, 2 * HOUR)]
    r = pod_reclaimable(pods, Fixed({}, default=PREDICTION), allocatable, COLD_HOUR)
    assert r.result == want


@pytest.mark.parametrize("sub", [case(F, "TestPodReclaimablePredictor_GetPeak", "", None)])
def test_pod_peak(sub: None) -> None:
    pods = [
        prod("pod-cold-start-uid", 1000, GI, 60),
        prod("pod-normal-uid", 2000, 2 * GI, 2 * HOUR),
        prod("pod-predict-failed-uid", 500, 512 * MI, 2 * HOUR),
    ]
    r = pod_reclaimable(pods, Fixed({"pod-normal-uid": PREDICTION}), (0, 0), COLD_HOUR)
    # a failed prediction is an error, and the pod's request counts in the peak
    assert len(r.errors) == 1 and "pod-predict-failed-uid" in r.errors[0]
    assert r.peak == (550 + 1000 + 500, int(1.1 * 768 * 1024 * 1024) + GI + 512 * MI)


PRIORITY_SERVER = Fixed(
    {
        node_item("koord-prod"): {"p95": (500, 768 * MI), "p98": (800, GI)},
        node_item("koord-batch"): {"p95": (1000, GI), "p98": (1500, 2048 * MI)},
        SYSTEM: SYS,
    },
    default={},
)
PRIORITY = [
    ("node allocatable > pods' requests ", (3000, 3 * GI), (1000 - 800, (2048 - (512 + 1024)) * MI)),
    ("node allocatable < pods' requests ", (900, GI), (900 - 800, 0)),
]


@pytest.mark.parametrize(("allocatable", "want"), [case(F, "Test_priorityReclaimablePredictor", *row) for row in PRIORITY])
def test_priority_reclaimable(allocatable: tuple[int, int], want: tuple[int, int]) -> None:
    pods = [prod("pod-1-uid", 1000, 2048 * MI, 60), batch("pod-2-uid", 2000, 2 * GI, 2 * HOUR)]
    assert priority_reclaimable(pods, PRIORITY_SERVER, allocatable, Flags(margin_percent=0)).result == want


@pytest.mark.parametrize("sub", [case(S, "TestDefaultHistogram", "", None)])
def test_default_histograms(sub: None) -> None:
    """The smallest and largest values come back within one bucket's growth (5%)."""
    for h, lo, hi in ((cpu_histogram(), 0.05, 1024.0), (memory_histogram(), 10 << 20, 1 << 31)):
        h.add(lo, 1, 0.0)
        h.add(hi, 1, 0.0)
        assert abs(h.percentile(1.0) - hi) / hi <= 0.05
        assert abs(h.percentile(0.0) - lo) / lo <= 0.05


@pytest.mark.parametrize("sub", [case(S, "TestPredictServerMainLoop", "", None)])
def test_training(sub: None) -> None:
    server = PredictServer()
    pods = [("pod1", "", 1.0, 128 * MI), ("pod2", "", 3.0, 128 * MI)]
    server.train(0.0, pods, 0.0, 256 * MI)
    assert len(server.models) == 9  # pods (2) + node (1) + priority classes (5) + system (1)
    p90 = server.prediction(NODE)["p90"]
    assert p90[0] == 25 and p90[1] >= 10 << 20  # node CPU 0: the first bucket's top, 0.025
    for i in range(2, 101):
        server.train(0.0, [("pod1", "", float(i), 128 * MI), pods[1]], 0.0, 256 * MI)
    assert server.prediction("pod1")["p90"][0] >= 90


@pytest.mark.parametrize("sub", [case(S, "TestPredictServerGCOldModels", "", None)])
def test_gc(sub: None) -> None:
    server = PredictServer()
    server.train(0.0, [], 0.0, 256 * MI)
    assert len(server.models) == 7  # node, 5 priority classes, system
    server.gc(30 * 60.0 + 60.0)
    assert server.models == {}
