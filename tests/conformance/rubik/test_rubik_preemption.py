"""rubik's preemption service, as pkg/services/preemption/preemption_test.go defines it
(openeuler-mirror/rubik @ 1b6fece), ported case by case; ids "<upstream file>::<Test>/<case>".

Upstream's fake pods: GenFakeOfflinePod has annotation volcano.sh/preemptable "true",
GenFakeOnlinePod "false", GenFakeBestEffortPod none; `.WithContainers(3)` adds three
containers. The files start as the test's keys say ("0"). Where upstream only asserts "no
error", the port also checks what rubik's own validateConfig then checks: every file of the
pod holds its level's value.
"""

from __future__ import annotations

import pytest

from policies import preemption as pre
from policies.file_write import FileWrite
from policies.policy import PolicyError

F = "pkg/services/preemption/preemption_test.go"
POD = "kubepods/burstable/podfake"


def fake(annotations=None, containers=0, labels=None) -> pre.PodInfo:
    return pre.PodInfo(POD, tuple(f"{POD}/c{i}" for i in range(containers)), annotations, labels)


def files(pod: pre.PodInfo, resources, value="0") -> dict[tuple[str, str], str]:
    return {(cg, pre.FILES[r][0]): value for r in resources for cg in (pod.cgroup, *pod.containers)}


OFFLINE = {pre.PREEMPTABLE: "true"}
ONLINE = {pre.PREEMPTABLE: "false"}

ADD = [
    # (id, resources, pod, error?)
    (f"{F}::TestPreemptionAddFunc/TC1-set offline pod qos ok", ("cpu", "memory"), fake(OFFLINE), False),
    (f"{F}::TestPreemptionAddFunc/TC2-set online pod qos ok", ("cpu", "memory"), fake(ONLINE, 3), False),
    (f"{F}::TestPreemptionAddFunc/TC3-empty pod info", ("cpu", "memory", "net"), None, True),
    (f"{F}::TestPreemptionAddFunc/TC4-invalid annotation key", ("cpu",), fake({"undefine": "true"}), False),
    (f"{F}::TestPreemptionAddFunc/TC5-invalid annotation value", ("cpu",), fake({pre.PREEMPTABLE: "undefine"}), False),
]


@pytest.mark.parametrize("case", ADD, ids=[a[0] for a in ADD])
def test_add_pod(case):
    _, resources, pod, err = case
    if err:
        with pytest.raises(pre.PreemptionError):
            pre.add_pod(pod, resources)
        return
    state = files(pod, resources)
    for q in pre.add_pod(pod, resources):
        state[(q.cgroup, q.file)] = q.value
    # validateConfig: each file holds the pod's level
    assert all(state[(q.cgroup, q.file)] == q.value for q in pre.expected(pod, resources))
    assert all(v == ("-1" if pod.offline else "0") for v in state.values())


UPDATE = [
    # (id, old pod, new pod, writes expected (as (cgroup count, value)) or None for an error)
    (f"{F}::TestPreemptionUpdatePod/TC1-online to offline", fake(ONLINE, 3), fake(OFFLINE, 3), "-1"),
    (f"{F}::TestPreemptionUpdatePod/TC2-offline to online", fake(OFFLINE), fake({pre.PREEMPTABLE: "false"}), None),
    (f"{F}::TestPreemptionUpdatePod/TC3-online to online", fake(ONLINE), fake(ONLINE), ""),
]


@pytest.mark.parametrize("case", UPDATE, ids=[u[0] for u in UPDATE])
def test_update_pod(case):
    _, old, new, want = case
    before = files(old, ("cpu",))
    if want is None:
        with pytest.raises(pre.PreemptionError):
            pre.update_pod(old, new, before, ("cpu",))
        return
    writes = pre.update_pod(old, new, before, ("cpu",))
    if not want:
        assert writes == []
    else:  # the pod and its three containers, cpu.qos_level = -1
        assert sorted(writes, key=lambda q: q.cgroup) == sorted(
            (FileWrite(cg, "cpu.qos_level", want) for cg in (new.cgroup, *new.containers)), key=lambda q: q.cgroup
        )


VALIDATE = [
    (f"{F}::TestPreemptionValidate/TC1-normal config", ["cpu", "memory"], True),
    (f"{F}::TestPreemptionValidate/TC2-abnormal config", ["undefine"], False),
    (f"{F}::TestPreemptionValidate/TC3-empty config", [], False),
]


@pytest.mark.parametrize("case", VALIDATE, ids=[v[0] for v in VALIDATE])
def test_validate(case):
    _, resources, ok = case
    if ok:
        assert pre.validate(resources) == tuple(resources)
    else:
        with pytest.raises(PolicyError):
            pre.validate(resources)
