"""rubik dynCache, as pkg/services/dyncache/*_test.go define it (openeuler-mirror/rubik @
1b6fece), ported case by case; ids "<upstream file>::<Test>/<case>".

Upstream's init test writes the groups' schemata files into a fake resctrl directory (cbm_mask
and NUMA node directories made by the test); here the same inputs go to the pure arithmetic
and the expected files are upstream's literal strings. Its sync tests assert nothing beyond
"does not crash"; their level resolution and placement are checked against what sync.go does.
Its dynamic tests need perf hardware counters and assert nothing: not ported (the controller's
steps are checked below against hand-worked cases of dynamic.go's arithmetic instead).
"""

from __future__ import annotations

import pytest

from policies import dyn_cache as dc
from policies.policy import PolicyError

INIT = "pkg/services/dyncache/dyncache_init_test.go::TestCacheLimit_InitCacheLimitDir"
VAL = "pkg/services/dyncache/dyncache_test.go::TestCacheLimit_Validate"
SYNC = "pkg/services/dyncache/sync_test.go::TestCacheLimit_SyncCacheLimit"
HOST_NS = "pid:[4026531836]"


def test_init_tc1_schemata():
    """dyncache_init_test.go::TestCacheLimit_InitCacheLimitDir/TC1-normal cache limit dir setting: cbm_mask 7fff (15 ways), 4 NUMA nodes, the
    default percentages."""
    want = {
        "rubik_max": "L3:0=7fff;1=7fff;2=7fff;3=7fff\nMB:0=100;1=100;2=100;3=100\n",
        "rubik_high": "L3:0=7f;1=7f;2=7f;3=7f\nMB:0=50;1=50;2=50;3=50\n",
        "rubik_middle": "L3:0=f;1=f;2=f;3=f\nMB:0=30;1=30;2=30;3=30\n",
        "rubik_low": "L3:0=7;1=7;2=7;3=7\nMB:0=10;1=10;2=10;3=10\n",
        "rubik_dynamic": "L3:0=7;1=7;2=7;3=7\nMB:0=10;1=10;2=10;3=10\n",
    }
    dc.check_host(HOST_NS, True, True)
    assert dc.groups(dc.validate(dc.Config()), 4, "7fff") == want


INIT_ERRORS = [
    # (id, pid namespace link (None: not a link), resctrl mounted, schemata present, cbm_mask)
    (f"{INIT}/TC2-not share with host pid namespace", "pid:[4026531836x]", True, True, "7fff"),
    (f"{INIT}/TC3-pid namespace file is not link file", None, True, True, "7fff"),
    (f"{INIT}/TC4-resctrl path not exist", HOST_NS, False, False, "7fff"),
    (f"{INIT}/TC5-resctrl schemata file not exist", HOST_NS, True, False, "7fff"),
    # the default /sys/fs/resctrl: not mounted where the test runs (nor on this host)
    (f"{INIT}/TC6-no numa path", HOST_NS, False, False, "7fff"),
    (f"{INIT}/TC7-empty cbm mask file", HOST_NS, True, True, ""),
]


@pytest.mark.parametrize("case", INIT_ERRORS, ids=[c[0] for c in INIT_ERRORS])
def test_init_errors(case):
    _, ns, mounted, schemata, mask = case
    with pytest.raises(dc.DynCacheError):
        dc.check_host(ns, mounted, schemata)
        dc.groups(dc.Config(), 0, mask)


def test_init_tc8_low_cbm_mask():
    """dyncache_init_test.go::TestCacheLimit_InitCacheLimitDir/TC8-low cmb mask value: cbm_mask 1 (one way), no NUMA node directories: every
    group gets one way (at least 1) and no entries."""
    dc.check_host(HOST_NS, True, True)
    g = dc.groups(dc.Config(), 0, "1")
    assert set(g) == {"rubik_" + lv for lv in dc.LEVELS} and set(g.values()) == {"L3:\nMB:\n"}
    assert dc.l3_mask(dc.cbm_ways("1"), 20) == "1"


def cfg(mode="static", ai=0, pd=0, l3=(0, 0, 0), mb=(0, 0, 0)) -> dc.Config:
    """A Config literal: what it leaves out is Go's zero value."""
    return dc.Config(mode, ai, pd, dc.Levels(*l3), dc.Levels(*mb))


VALIDATE = [
    # (id, config, error message part or None for valid); minAdjustInterval = minPerfDur = 10,
    # the max ones 10000, minPercent 10, maxPercent 100, num2 = 2
    (f"{VAL}/TC-static mode config", cfg(ai=11, pd=11, l3=(11, 51, 99), mb=(11, 51, 99)), None),
    (f"{VAL}/TC-invalid mode config", cfg(mode="invalid mode"), "mode"),
    (f"{VAL}/TC-invalid adjust interval less than min value", cfg(ai=9), "10"),
    (f"{VAL}/TC-invalid adjust interval greater than max value", cfg(ai=10_001), "10000"),
    (f"{VAL}/TC-invalid perf duration less than min value", cfg(ai=5001, pd=9), "perf duration"),
    (f"{VAL}/TC-invalid perf duration greater than max value", cfg(ai=5001, pd=10_001), "perf duration"),
    (f"{VAL}/TC-invalid percent value", cfg(ai=5001, pd=5001, l3=(9, 0, 0)), "percentage"),
    (f"{VAL}/TC-invalid l3 percent low value larger than mid value", cfg(ai=5001, pd=5001, l3=(12, 11, 11), mb=(10, 11, 12)), "l3_percent"),
    (
        f"{VAL}/TC-invalid memband percent mid value larger than high value",
        cfg(ai=5001, pd=5001, l3=(10, 11, 12), mb=(10, 51, 50)),
        "mem_band_percent",
    ),
]


@pytest.mark.parametrize("case", VALIDATE, ids=[v[0] for v in VALIDATE])
def test_validate(case):
    _, c, msg = case
    if msg is None:
        assert dc.validate(c) is c
    else:
        with pytest.raises(PolicyError, match=msg):
            dc.validate(c)


def test_new_cache_limit_defaults():
    """dyncache_test.go::TestNewCacheLimit/TC-do nothing: NewDynCache's configuration."""
    assert dc.Config() == cfg(ai=1000, pd=1000, l3=(20, 30, 50), mb=(10, 30, 50))
    assert (dc.MAX_MISS, dc.MIN_MISS) == (20, 10)


PLACE = [
    # (id, annotation, default mode, each container's cgroup.procs (None: pod gone), group or error)
    (f"{SYNC}/TC1-normal case", "low", "static", [["12345"]], ("rubik_low/tasks", ["12345"])),
    (f"{SYNC}/TC2-empty annotation with static mode config", None, "static", [["12345"]], ("rubik_max/tasks", ["12345"])),
    (f"{SYNC}/TC3-empty annotation with dynamic mode config", None, "dynamic", [["12345"]], ("rubik_dynamic/tasks", ["12345"])),
    (f"{SYNC}/TC4-invalid annotation", "invalid", "static", [["12345"]], None),
    (f"{SYNC}/TC5-pod just deleted", "low", "static", None, ("rubik_low/tasks", [])),
    (f"{SYNC}/TC7-pod without containers", "low", "static", [], ("rubik_low/tasks", [])),
]


@pytest.mark.parametrize("case", PLACE, ids=[p[0] for p in PLACE])
def test_sync_placement(case):
    _, anno, mode, procs, want = case
    if want is None:
        with pytest.raises(dc.DynCacheError):
            dc.placement(anno, mode, procs)
    else:
        assert dc.placement(anno, mode, procs) == want


# --- ours (not upstream cases): the reference's worked masks and dynamic.go's steps, by hand ---
def test_masks_by_hand():
    # rubik.md §4.6: 15-bit 7fff: 50% -> 7 ways 7f, 30% -> 4 ways f, 20% -> 3 ways 7
    assert [dc.l3_mask(15, p) for p in (50, 30, 20, 10, 100)] == ["7f", "f", "7", "1", "7fff"]
    assert dc.cbm_ways("fffff") == 20 and dc.l3_mask(20, 100) == "fffff"  # where upstream overflows
    assert dc.cbm_ways("7ff") == 11 and dc.l3_mask(11, 50) == "1f"


def test_dynamic_steps_by_hand():
    c = dc.Config()
    assert dc.next_dynamic((20, 10), c, [(5, 5)]) == (25, 15)  # all below minMiss: +5
    assert dc.next_dynamic((50, 50), c, [(5, 5)]) == (50, 50)  # already at high
    assert dc.next_dynamic((45, 45), c, [(5, 5), (25, 0)]) == (20, 10)  # a pod at maxMiss: -50, clamped to low
    assert dc.next_dynamic((30, 30), c, [(12, 0), (3, 3)]) == (30, 30)  # between: unchanged
    assert dc.next_dynamic((30, 30), c, [(12, 0), (0, 20)]) == (20, 10)  # a later pod at maxMiss still lowers
    assert dc.miss_percent(19, 99) == 19 and dc.miss_percent(0, 0) == 0


def test_the_policy_records_the_writes_it_cannot_make():
    """ours: the rubik policy with dyn_cache records each group's schemata (two NUMA nodes
    here) and each offline pod's group, and applies nothing (no cache model, no resctrl)."""
    from policies import build_policy
    from policies.cgroup import Cpu, NodeStats
    from policies.policy import Observation

    p = build_policy({"name": "rubik", "offline": ["be"], "dyn_cache": {"cbm_mask": "7fff"}, "cache_limit": {"be": "low"}})
    obs = Observation(0.0, NodeStats(4, 0, 0), {}, {}, tuple(Cpu(i, i, 0, i // 2) for i in range(4)))
    cache = [d for d in p.attach(obs) if d.what.startswith("dynCache")]
    assert "rubik_high/schemata = 'L3:0=7f;1=7f\\nMB:0=50;1=50'" in cache[0].what
    assert cache[1].what.endswith("be's tasks → rubik_low/tasks")
    assert all(not d.writes for d in cache)
    with pytest.raises(PolicyError, match="dyn_cache.cbm_mask"):
        build_policy({"name": "rubik", "dyn_cache": {"cbm_mask": "xyz"}})
    with pytest.raises(PolicyError, match="cache_limit"):
        build_policy({"name": "rubik", "cache_limit": {"be": "mid"}})  # the docs' "mid"; the code's level is "middle"
