"""koordlet's memory QoS (qosmanager plugin cgreconcile) against its own unit tests,
pkg/koordlet/qosmanager/plugins/cgreconcile/cgroup_reconcile_test.go at koordinator a7a1b76
(TestCgroupResourceReconcile_calculateResources). The simulator gives a pod one container,
so upstream's pod-level files and its one container's memory.high are compared; a file the
simulator leaves unwritten holds the kernel's default (min/low/wmark_ratio/wmark_min_adj 0,
wmark_scale_factor 50), which is what upstream writes in those cases."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.memory_qos import ClassConfig, cgroup_values
from policies.pods import Pod, PriorityClass, QoSClass

F = "pkg/koordlet/qosmanager/plugins/cgreconcile/cgroup_reconcile_test.go"
T = "TestCgroupResourceReconcile_calculateResources"
GI = 1 << 30
PAGE = 4096
MAX = -1  # memory.high "max" (upstream writes MaxInt64)
DEFAULTS = {"memory.min": 0, "memory.low": 0, "memory.wmark_ratio": 0, "memory.wmark_scale_factor": 50, "memory.wmark_min_adj": 0}

# testutil.DefaultQOSStrategy: every class enabled, percents 0, wmark 95 (BE 80) / 20 / 0
DEFAULT_STRATEGY = {
    "LSR": ClassConfig(enable=True, wmark_ratio=95, wmark_scale_permill=20),
    "LS": ClassConfig(enable=True, wmark_ratio=95, wmark_scale_permill=20),
    "BE": ClassConfig(enable=True, wmark_ratio=80, wmark_scale_permill=20),
}
# createPodWithMemoryQOS(BestEffort, BE, policy auto, min 100, low 0, throttling 80,
# wmark 95/20, wmarkMinAdj 50): the pod's annotation, given here as its class's config
BE_POD_AUTO = {
    "BE": ClassConfig(enable=True, min_limit_percent=100, throttling_percent=80, wmark_ratio=95, wmark_scale_permill=20, wmark_min_adj=50)
}
# the pod-level-config pod's second container: batch-memory request = limit = 1Gi
BE_POD = Pod("be", QoSClass.BE, PriorityClass.BATCH, 5500, 1000, 1000, GI, GI, "kubepods/besteffort/pod-be")
# MockTestPodWithQOS(Burstable, LS): no memory request or limit on its containers
LS_POD = Pod("ls", QoSClass.LS, PriorityClass.PROD, 9500, 1000, 2000, 0, None, "kubepods/burstable/pod-ls")

CASES = [
    ("not panic when no pods exists", {}, [], {}),
    ("not panic when no pods exists with a valid resourceQoS config", {c: ClassConfig() for c in ("LSR", "LS", "BE")}, [], {}),
    (
        "single pod using node-level config",
        DEFAULT_STRATEGY,
        [LS_POD],
        {
            "kubepods": {"memory.min": 0, "memory.low": 0},
            "kubepods/burstable": {"memory.min": 0, "memory.low": 0},
            "kubepods/burstable/pod-ls": {
                "memory.min": 0,
                "memory.low": 0,
                "memory.wmark_ratio": 95,
                "memory.wmark_scale_factor": 20,
                "memory.high": MAX,
            },
        },
    ),
    (
        "single pod using pod-level config",
        BE_POD_AUTO,
        [BE_POD],
        {
            "kubepods": {"memory.min": GI, "memory.low": 0},
            "kubepods/besteffort": {"memory.min": GI, "memory.low": 0},
            "kubepods/besteffort/pod-be": {
                "memory.min": GI,
                "memory.low": 0,
                "memory.wmark_ratio": 95,
                "memory.wmark_scale_factor": 20,
                "memory.wmark_min_adj": 50,
                "memory.high": GI // PAGE * PAGE,
            },
        },
    ),
]


@pytest.mark.parametrize(("classes", "pods", "want"), [case(F, T, sub, *rest) for sub, *rest in CASES])
def test_calculate_resources(classes: dict, pods: list[Pod], want: dict) -> None:
    got = cgroup_values(tuple(pods), classes, GI)
    for cg, files in want.items():
        for f, v in files.items():
            assert got.get(cg, {}).get(f, DEFAULTS.get(f)) == v, (cg, f)
    assert set(got) <= set(want)
