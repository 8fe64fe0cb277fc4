"""koordlet's eviction round (plugins/util/evict.go `KillAndEvictPods`, `EvictTaskCheck`,
`subReleaseListNoNegative`) against its own unit tests,
pkg/koordlet/qosmanager/plugins/util/evict_test.go at koordinator a7a1b76. CPU in
millicores (a batch-cpu / mid-cpu quantity is its milli value), memory in bytes."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.evict_round import REQUEST, USED, Task, Victim, kill_and_evict, remaining, task_check

F = "pkg/koordlet/qosmanager/plugins/util/evict_test.go"
GI, MI = 1 << 30, 1 << 20

BATCH1 = Victim("batch-pod-1", "batch-pod-1", 800, 1536 * MI, {"batch-cpu": 1000, "batch-memory": 2 * GI}, "koord-batch")
BATCH2 = Victim("batch-pod-2", "batch-pod-2", 400, 768 * MI, {"batch-cpu": 500, "batch-memory": GI}, "koord-batch")
MID = Victim("mid-pod-1", "mid-pod-1", 1800, 3 * GI, {"mid-cpu": 2000, "mid-memory": 4 * GI}, "koord-mid")


def memory_used(v: Victim) -> dict[str, float]:
    return {"memory": v.memory_used}


def cpu_request_of_mid_and_batch(v: Victim) -> dict[str, float]:
    # the task's prioritiesMp: only koord-mid and koord-batch pods count
    if v.priority_class not in ("koord-mid", "koord-batch"):
        return {}
    return {k: q for k, q in v.requests.items() if k.endswith("-cpu")}


def test_kill_and_evict_pods() -> None:
    """Test_KillAndEvictPods: the memory task stops after both batch pods (2304 MiB ≥ 2 GiB);
    they already cover batch-cpu (1500 ≥ 1200), so the request task takes only mid-pod-1."""
    tasks = [
        Task("evict-by-memory-usage", USED, {"memory": 2 * GI}, [BATCH1, BATCH2], memory_used),
        Task(
            "evict-by-mid/batch-request cpu",
            REQUEST,
            {"batch-cpu": 1200, "mid-cpu": 1500},
            [BATCH1, BATCH2, MID],
            cpu_request_of_mid_and_batch,
        ),
    ]
    r = kill_and_evict(tasks)
    assert [v.name for v in r.evicted] == ["batch-pod-1", "batch-pod-2", "mid-pod-1"]
    assert r.released[USED]["memory"] == 2304 * MI + 3 * GI
    assert r.released[REQUEST]["batch-cpu"] == 1500
    assert r.released[REQUEST]["mid-cpu"] == 2000


def be(name: str, used: int) -> Victim:
    return Victim(name, name, memory_used=used)


@pytest.mark.parametrize(
    ("marked_used", "other_used", "want_new", "want_released"),
    [
        case(
            F, "Test_KillAndEvictPods_PendingRelease", "pending release satisfies the target, no new victim picked", 2 * GI, GI, [], 2 * GI
        ),
        case(
            F,
            "Test_KillAndEvictPods_PendingRelease",
            "pending release insufficient, evict the next victim",
            GI,
            2 * GI,
            ["other-pod"],
            3 * GI,
        ),
    ],
)
def test_pending_release(marked_used: int, other_used: int, want_new: list[str], want_released: int) -> None:
    tasks = [
        Task("evict-by-memory-usage", USED, {"memory": 2 * GI}, [be("marked-pod", marked_used), be("other-pod", other_used)], memory_used)
    ]
    r = kill_and_evict(tasks, still_present=frozenset({"marked-pod"}))
    assert [v.name for v in r.evicted] == want_new
    assert r.released[USED]["memory"] == want_released


# Test_SubReleaseListNoNegative: (subcase, a, b, want); CPU in millicores, memory in bytes
SUB = [
    ("nil a", None, {"cpu": 400, "memory": 512 * MI}, {}),
    ("nil b", {"cpu": 400, "memory": 512 * MI}, None, {"cpu": 400, "memory": 512 * MI}),
    ("cpu + memory/cpu + memory", {"cpu": 500, "memory": GI}, {"cpu": 400, "memory": 512 * MI}, {"cpu": 100, "memory": 512 * MI}),
    ("cpu + memory/cpu", {"cpu": 500, "memory": GI}, {"cpu": 400}, {"cpu": 100, "memory": GI}),
    ("cpu + memory/cpu, a<b", {"cpu": 400, "memory": GI}, {"cpu": 500}, {"memory": GI}),
    ("cpu + memory/cpu, a<b#01", {"cpu": -400, "memory": GI}, {"memory": GI}, {}),
    ("cpu/cpu + memory", {"memory": GI}, {"cpu": 400, "memory": GI}, {}),
]


@pytest.mark.parametrize(("a", "b", "want"), [case(F, "Test_SubReleaseListNoNegative", *row) for row in SUB])
def test_sub_release_list_no_negative(a: dict | None, b: dict | None, want: dict) -> None:
    assert remaining(a or {}, b or {}) == want


M = 1 / 1000  # resource.NewMilliQuantity of memory: milli-bytes
# Test_EvictTaskCheck: (subcase, task's target and amounts (None: no task), released, want
# done, want left to release (None when done))
CHECK = [
    ("nil task", None, None, True, None),
    ("nil ToReleaseResource", (USED, None), None, True, None),
    ("len(ToReleaseResource)=0", (USED, {}), None, True, None),
    ("nil released", (USED, {"cpu": 100}), None, False, {"cpu": 100}),
    (
        "target not exist",
        (USED, {"cpu": 100, "memory": GI}),
        {"podBatchResourceRequest": {"cpu": 500, "memory": GI}},
        False,
        {"cpu": 100, "memory": GI},
    ),
    ("cpu + mem/cpu + mem: success", (USED, {"cpu": 100, "memory": GI}), {USED: {"cpu": 500, "memory": GI}}, True, None),
    ("cpu + mem/cpu + mem: failed", (USED, {"cpu": 800, "memory": GI * M}), {USED: {"cpu": 500, "memory": GI * M}}, False, {"cpu": 300}),
    (
        "mem/cpu + mem: failed",
        ("podBatchResourceRequest", {"memory": 2 * GI * M}),
        {"podBatchResourceRequest": {"cpu": 500, "memory": GI * M}},
        False,
        {"memory": GI * M},
    ),
]


@pytest.mark.parametrize(("task", "released", "done", "left"), [case(F, "Test_EvictTaskCheck", *row) for row in CHECK])
def test_evict_task_check(task: tuple | None, released: dict | None, done: bool, left: dict | None) -> None:
    t = None if task is None else Task("", task[0], task[1] or {}, [], memory_used)
    got_done, got_left = task_check(t, released)
    assert got_done == done
    assert got_left == (None if left is None else pytest.approx(left))
