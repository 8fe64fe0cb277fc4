"""rubik dynCache, as pkg/services/dyncache/*_test.go define it (openeuler-mirror/rubik @
1b6fece), ported case by case; ids "<upstream file>::<Test>/<case>".

Upstream's init test writes the groups' schemata files into a fake resctrl directory (cbm_mask
and NUMA node directories made by the test); here the same inputs go to the pure arithmetic
and the expected files are upstream's literal strings. Its sync tests assert nothing beyond
"does not crash"; their level resolution and placement are checked against what sync.go does.
Its dynamic tests (TestCacheLimit_StartDynamic) read the test machine's perf counters and
assert nothing; here they run on a stated reading and assert dynamic.go's outcome, which for
all but the first case does not depend on the reading.
"""

from __future__ import annotations

import pytest

from policies import dyn_cache as dc
from policies.perf import PerfCounters
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


DYN = "pkg/services/dyncache/dynamic_test.go::TestCacheLimit_StartDynamic"
BIG = 2**63 - 1  # math.MaxInt64
# one online pod's perf window: 5 LLC misses of 100 references, int(100 × 5 / 101) = 4 %
QUIET = PerfCounters(0, 0, 5, 100)
STEPS = [
    # (id, MaxMiss, MinMiss, the dynamic group's schemata written, or None: no write).
    # Upstream: cbm_mask 3ff (10 ways), 4 NUMA nodes, dynamic mode, the offline pod at
    # "dynamic", the dynamic level at its start (l3 20 %, mb 10 %); it asserts nothing (its
    # readings are the test machine's perf counters): the expected writes are dynamic.go's
    # outcome for the reading above, which only the first case depends on.
    (f"{DYN}/TC-normal dynamic setting", 20, 10, "L3:0=3;1=3;2=3;3=3\nMB:0=15;1=15;2=15;3=15\n"),
    # every reading is >= 0: lower by 50, clamped to (20, 10) = unchanged: flush writes nothing
    (f"{DYN}/TC-max and min miss both 0", 0, 0, None),
    # no reading reaches either line: +5
    (f"{DYN}/TC-start dynamic with very high water line", BIG, BIG, "L3:0=3;1=3;2=3;3=3\nMB:0=15;1=15;2=15;3=15\n"),
    # every reading reaches MinMiss 0 but not MaxMiss: no step
    (f"{DYN}/TC-start dynamic with low min water line", BIG, 0, None),
]


@pytest.mark.parametrize(("max_miss", "min_miss", "want"), [s[1:] for s in STEPS], ids=[s[0] for s in STEPS])
def test_start_dynamic(max_miss, min_miss, want):
    c = dc.Config(default_limit_mode="dynamic", perf_duration=10)
    d = dc.Dynamic(c, (c.l3.low, c.mb.low), 0.0)
    assert d.step(0.0, {"online": PerfCounters(0, 0, 0, 0)}, max_miss, min_miss) is None  # the window opens
    nxt = d.step(0.010, {"online": QUIET}, max_miss, min_miss)
    got = None if nxt is None else dc.schemata(nxt[0], nxt[1], 4, dc.cbm_ways("3ff"))
    assert got == want


def test_start_dynamic_without_a_dynamic_pod():
    """dynamic_test.go::TestCacheLimit_StartDynamic/TC-dynamic not exist: two online pods and
    no offline pod at "dynamic": startDynamic returns at once — the policy runs no dynamic
    controller and watches no perf counters."""
    from policies import build_policy

    p = build_policy({"name": "rubik", "online": ["web", "db"], "offline": [], "dyn_cache": {"default_limit_mode": "dynamic"}})
    assert list(p.perf_watch()) == []
    p2 = build_policy({"name": "rubik", "online": ["web"], "offline": ["be"], "dyn_cache": {"default_limit_mode": "static"}})
    assert list(p2.perf_watch()) == []


def rubik_on(node, table):
    from fake_resctrl import backend

    from policies import PolicyRunner, build_policy

    p = build_policy(table)
    r = PolicyRunner(p, backend(node))
    r.apply(p.attach(r.observe()))
    return p, r


def test_the_policy_writes_its_groups_through_the_seam():
    """ours: the five groups on the node's cache (cbm_mask 7ff: 11 ways; two NUMA nodes, two L3
    domains): high 50 % → floor(5.5) = 5 ways 1f, middle 30 % → 3 ways 7, low 20 % → 2 ways 3;
    as the kernel prints them (zero-padded to 3 hex digits). be (annotated low) goes to
    rubik_low, be2 (no annotation, static mode) to rubik_max."""
    from fake_resctrl import FakeResctrlNode

    from policies import build_policy

    node = FakeResctrlNode(["be", "be2", "web"])
    p, r = rubik_on(node, {"name": "rubik", "offline": ["be", "be2"], "online": ["web"], "dyn_cache": {}, "cache_limit": {"be": "low"}})
    assert node.resctrl_read_schemata("rubik_high") == "L3:0=01f;1=01f\nMB:0=50;1=50"
    assert node.resctrl_read_schemata("rubik_middle") == "L3:0=007;1=007\nMB:0=30;1=30"
    assert node.resctrl_read_schemata("rubik_low") == "L3:0=003;1=003\nMB:0=10;1=10"
    assert node.resctrl_read_schemata("rubik_max") == "L3:0=7ff;1=7ff\nMB:0=100;1=100"
    assert node.assigned == {"be": "rubik_low", "be2": "rubik_max"}
    assert not [d for d in r.decisions if d.what.startswith("write refused")]
    with pytest.raises(PolicyError, match="cache_limit"):
        build_policy({"name": "rubik", "cache_limit": {"be": "mid"}})  # the docs' "mid"; the code's level is "middle"
    with pytest.raises(PolicyError, match="dyn_cache.cbm_mask"):
        build_policy({"name": "rubik", "dyn_cache": {"cbm_mask": "7ff"}})  # the node's, not a key


def test_a_numa_node_without_its_own_l3_domain_is_refused():
    """ours: rubik writes one entry per NUMA node; on a node with 4 NUMA nodes but 2 L3
    domains the kernel refuses domains 2 and 3 (unknown domain): every write is recorded as
    refused and the policy goes on, as rubik logs the error (and its tasks write fails)."""
    from fake_resctrl import FakeResctrlNode

    node = FakeResctrlNode(["be"], numa=4)
    _, r = rubik_on(node, {"name": "rubik", "offline": ["be"], "dyn_cache": {}})
    refused = [d.what for d in r.decisions if d.what.startswith("write refused")]
    assert len(refused) == 6 and all("unknown domain 2" in w for w in refused[:5])
    assert "no resctrl group named 'rubik_max'" in refused[5]  # the fake creates a group only with a valid write


def test_the_dynamic_level_follows_the_online_pods_misses():
    """ours, hand-worked through the seam: dynamic mode, adjust 1 s, perf window 1 s, ticks
    every 0.5 s. Window [0.5, 1.5]: web's LLC misses 5 % of references (int(100·5/101) = 4 <
    10): +5 → L3 25 % of 11 ways = floor(2.75) = 2 ways, MB 15 — which the kernel rounds up
    to 20. Window [2.5, 3.5]: 30 % (int(100·30/101) = 29 >= 20): −50 → clamped to (20, 10)."""
    from fake_resctrl import FakeResctrlNode

    node = FakeResctrlNode(["be", "web"])
    table = {"name": "rubik", "offline": ["be"], "online": ["web"], "sync_interval": 0.5}
    p, r = rubik_on(node, {**table, "dyn_cache": {"default_limit_mode": "dynamic", "adjust_interval": 1000, "perf_duration": 1000}})
    assert node.assigned == {"be": "rubik_dynamic"}
    misses = {1.5: (5, 100), 3.5: (35, 100)}
    total = [0, 0]
    for k in range(1, 9):
        t = k * 0.5
        dm, dr = misses.get(t, (0, 0))
        total = [total[0] + dm, total[1] + dr]
        node.perf["web"] = {"cycles": 0, "instructions": 0, "cache-misses": total[0], "cache-references": total[1]}
        node.t_ns = round(t * 1e9)
        r.apply(p.tick(r.observe()))
        if t == 1.5:
            assert node.resctrl_read_schemata("rubik_dynamic") == "L3:0=003;1=003\nMB:0=20;1=20"
    steps = [(d.t, d.inputs["l3_percent"], d.inputs["mb_percent"]) for d in r.decisions if d.what.startswith("dynCache dynamic")]
    assert steps == [(1.5, 25, 15), (3.5, 20, 10)]
    assert node.resctrl_read_schemata("rubik_dynamic") == "L3:0=003;1=003\nMB:0=10;1=10"
