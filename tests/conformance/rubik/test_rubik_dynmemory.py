"""rubik dynMemory. rubik 2's pkg/services/dynmemory has no unit tests (fssr is checked in
tests/test_fssr.py against the reference's worked numbers); its dynlevel strategy is rubik
1.0's, whose pkg/memory/status_test.go (openeuler-mirror/rubik tag v1.0.0) is ported here case
by case, ids "<upstream file>::<Test>[/<case>]". The writes of each level (dynlevel.go has no
test) are checked against hand-worked cases of its arithmetic, marked as ours.
"""

from __future__ import annotations

import pytest

from policies import dyn_memory as dm
from policies.dyn_memory import Pressure as P
from policies.file_write import FileWrite

ST = "v1.0.0:pkg/memory/status_test.go"


def test_set_status():
    """status_test.go::TestSetStatus: set() moves the level and zeroes the relieve count."""
    s = dm.DynLevel(level=P.RELIEVE, relieve_cnt=3)
    s.set(P.NORMAL)
    assert (s.level, s.relieve_cnt) == (P.NORMAL, 0)


def test_is_normal():
    """status_test.go::TestIsNormal."""
    s = dm.DynLevel(level=P.RELIEVE)
    assert s.level != P.NORMAL
    s.set(P.NORMAL)
    assert s.level == P.NORMAL and s.relieve_cnt == 0


def test_is_relieve():
    """status_test.go::TestIsRelieve."""
    assert dm.DynLevel(level=P.RELIEVE).level == P.RELIEVE


LEVELS = [
    (f"{ST}::TestGetLevelInPressure/0.04", 0.04, P.CRITICAL),
    (f"{ST}::TestGetLevelInPressure/0.09", 0.09, P.HIGH),
    (f"{ST}::TestGetLevelInPressure/0.13", 0.13, P.MID),
    (f"{ST}::TestGetLevelInPressure/0.25", 0.25, P.LOW),
]


@pytest.mark.parametrize("case", LEVELS, ids=[c[0] for c in LEVELS])
def test_level_in_pressure(case):
    _, free, want = case
    assert dm.level_in_pressure(free) == want


def test_transition_status():
    """status_test.go::TestTransitionStatus: 4% free → critical; 60% → relieve; with the
    relieve count at its maximum, 60% → normal."""
    s = dm.DynLevel()
    s.transition(0.04)
    assert s.level == P.CRITICAL
    s.transition(0.6)
    assert s.level == P.RELIEVE
    s.relieve_cnt = dm.RELIEVE_MAX_CNT
    s.transition(0.6)
    assert s.level == P.NORMAL


# --- ours: dynlevel.go's writes, by hand (GiB = 2**30) ---
G = 2**30
OFF = {"be": 3 * G}


def test_reclaim_by_level_by_hand():
    free = 10 * G  # 2% of it: 214748364 bytes (int64(float64(free) * 0.02))
    extra = 214_748_364
    assert dm.DynLevel(P.NORMAL).reclaim(free, OFF, {}) == []
    assert dm.DynLevel(P.LOW).reclaim(free, OFF, {}) == [FileWrite("be", "memory.soft_limit_in_bytes", str(3 * G + extra))]
    assert dm.DynLevel(P.MID).reclaim(free, OFF, {}) == [FileWrite("be", "memory.force_empty", "0")]
    assert dm.DynLevel(P.HIGH).reclaim(free, OFF, {}) == [FileWrite("be", "memory.limit_in_bytes", str(3 * G + extra))]
    assert dm.DynLevel(P.CRITICAL).reclaim(free, OFF, {}) == [
        FileWrite("", "drop_caches", "3"),
        FileWrite("be", "memory.limit_in_bytes", str(3 * G + extra)),
    ]


def test_relieve_raises_by_ten_percent_then_lifts_by_hand():
    s = dm.DynLevel(P.RELIEVE)
    limit = 1000 * 2**20
    writes = []
    for _ in range(dm.RELIEVE_MAX_CNT):
        w = s.reclaim(0, OFF, {"be": limit})
        writes.append(w)
        if s.relieve_cnt < dm.RELIEVE_MAX_CNT:
            limit = int(w[0].value)
    # four raises of 10% (1048576000 → 1153433600 → …), then both limits lifted
    assert [int(w[0].value) for w in writes[:4]] == [1153433600, 1268776960, 1395654656, 1535220121]
    assert writes[4] == [
        FileWrite("be", "memory.limit_in_bytes", str(dm.MAX_SYS_MEM_LIMIT)),
        FileWrite("be", "memory.soft_limit_in_bytes", str(dm.MAX_SYS_MEM_LIMIT)),
    ]
    s.transition(0.6)
    assert s.level == P.NORMAL
    # an unlimited container: ×1.1 leaves int64, rubik writes nothing
    assert dm.DynLevel(P.RELIEVE).reclaim(0, OFF, {"be": dm.MAX_SYS_MEM_LIMIT}) == []
