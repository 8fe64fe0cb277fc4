"""rubik's quotaBurst, as pkg/services/quotaburst/quotaburst_test.go defines it
(openeuler-mirror/rubik @ 1b6fece), ported case by case; ids "<upstream file>::<Test>/<case>".

Upstream's fake pod writes the test's files ({} = none) into the pod's cgroup and into each of
its containers' (`.WithContainers(1)`: one). Upstream asserts only AddPod's error; the port
also checks the writes the code makes (a refused cgroup is logged and skipped), by NumCPU.
"""

from __future__ import annotations

import pytest

from policies import quota_burst as qb
from policies.file_write import FileWrite

F = "pkg/services/quotaburst/quotaburst_test.go"
POD, CON = "kubepods/podq", "kubepods/podq/c0"
NCPUS = (2, 8, 64)


def files(keys: dict[str, str], containers: int) -> tuple[list[str], dict[str, dict[str, str]]]:
    cons = [CON][:containers]
    return cons, {cg: dict(keys) for cg in [POD, *cons]}


B, P, Q = qb.BURST, qb.PERIOD, qb.QUOTA
ADD = [
    # (id, files, containers, annotation, error?, expected writes)
    (
        f"{F}::TestBurst_AddPod/TC-1: set burst successfully",
        {B: "0", P: "100000", Q: "100000"},
        1,
        "1000",
        False,
        [(CON, "1000"), (POD, "1000")],
    ),
    (f"{F}::TestBurst_AddPod/TC-2.1: parseQuotaBurst invalid burst < 0", {}, 0, "-100", True, []),
    (f"{F}::TestBurst_AddPod/TC-2.2: parseQuotaBurst invalid burst non int64", {}, 0, "abc", True, []),
    (f"{F}::TestBurst_AddPod/TC-3.1: matchQuota quota file not existed", {B: "0"}, 1, "10000", False, []),
    (f"{F}::TestBurst_AddPod/TC-3.2: matchQuota quota value invalid", {B: "0", Q: "abc"}, 0, "10000", False, []),
    (f"{F}::TestBurst_AddPod/TC-3.3: matchQuota period file not existed", {B: "0", Q: "10000"}, 0, "10000", False, []),
    (f"{F}::TestBurst_AddPod/TC-3.4: matchQuota period value invalid", {B: "0", P: "abc", Q: "10000"}, 0, "10000", False, []),
    (f"{F}::TestBurst_AddPod/TC-3.5: matchQuota quota > max", {B: "0", P: "0", Q: "10000"}, 0, "10000", False, []),
    # the container refuses (quota < burst); the pod then takes 0 × burst = 0
    (f"{F}::TestBurst_AddPod/TC-3.6: matchQuota quota < burst", {B: "0", P: "10000", Q: "10000"}, 1, "200000000", False, [(POD, "0")]),
    (f"{F}::TestBurst_AddPod/Tc-4: burst file not existed", {}, 0, "1", False, []),
]


@pytest.mark.parametrize("case", ADD, ids=[a[0] for a in ADD])
def test_add_pod(case):
    _, keys, n, annotation, err, want = case
    cons, fs = files(keys, n)
    for ncpus in NCPUS:
        if err:
            with pytest.raises(qb.QuotaBurstError):
                qb.pod_writes(POD, cons, annotation, fs, ncpus)
        else:
            assert qb.pod_writes(POD, cons, annotation, fs, ncpus) == [FileWrite(cg, B, v) for cg, v in want], f"NumCPU {ncpus}"


def test_update_pod_same_burst():
    """quotaburst_test.go::TestBurst_UpdatePod/TC1-same burst: nothing to do."""
    assert qb.same("10", "10", [], [])


def test_update_pod_different_burst():
    """quotaburst_test.go::TestBurst_UpdatePod/TC2-different burst: set again (a pod with no
    cgroup files: no writes, no error)."""
    assert not qb.same(None, "10", [], [])
    assert qb.pod_writes("", [], "10", {}, 8) == []


def test_pre_start_pod_without_annotation():
    """quotaburst_test.go::TestBurst_PreStart/TC1-set pod: a pod without the annotation."""
    assert qb.pod_writes(POD, [], None, {}, 8) == []


def test_same_sees_new_containers():
    """ours: UpdatePod's `same` also looks at the container count and ids."""
    assert not qb.same("10", "10", ["a"], ["a", "b"]) and not qb.same("10", "10", ["a"], ["b"])


def test_burst_equal_to_quota_is_taken():
    """ours: the doc's "burst <= quota" and matchQuota's `quota < burst` refusal meet at
    equality, which is accepted; a quota of -1 (unlimited) is refused."""
    fs = {B: "0", P: "100000", Q: "50000"}
    assert qb.refusal(50_000, fs, 8) is None and qb.refusal(50_001, fs, 8) is not None
    assert qb.refusal(0, {**fs, Q: "-1"}, 8) is not None
