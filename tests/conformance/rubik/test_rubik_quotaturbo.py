"""rubik quotaTurbo, as its own unit tests define it: every case of
pkg/lib/cpu/quotaturbo/{driverevent,cpuquota,statusstore,config}_test.go and
pkg/services/quotaturbo/quotaturbo_test.go that decides something, ported case by case
(openeuler-mirror/rubik @ 1b6fece). Each case's id is "<upstream file>::<Test>/<subtest>".

Inputs are upstream's, in its units (µs periods and quotas, ns throttled time and usage
timestamps, utilisation in %); a field a Go struct literal leaves out is its zero value here
too (e.g. `Config{AlarmWaterMark: 60}` has ElevateLimit 0). Expectations are upstream's
assertions; where upstream computes one from runtime.NumCPU(), the case is checked for several
CPU counts. Cases that only exercise file I/O, logging or goroutines are listed in
docs/conformance.md ("rubik") as not ported.
"""

from __future__ import annotations

import pytest

from policies import quota_turbo as qt
from policies.cgroup import Knob, KnobWrite
from policies.policy import PolicyError
from policies.rubik import Rubik

NCPUS = (2, 8, 64)  # runtime.NumCPU() stand-ins
DE = "pkg/lib/cpu/quotaturbo/driverevent_test.go"
CQ = "pkg/lib/cpu/quotaturbo/cpuquota_test.go"
SS = "pkg/lib/cpu/quotaturbo/statusstore_test.go"
CF = "pkg/lib/cpu/quotaturbo/config_test.go"
SV = "pkg/services/quotaturbo/quotaturbo_test.go"
CON = "kubepods/testPod1/testCon1"
POD = "kubepods/testPod1"


def con(limit=0.0, period=0, quota=0, cur=(0, 0), pre=(0, 0), usage=(), name=CON) -> qt.Container:
    """A CPUQuota with upstream's fields (cur/pre: cpu.stat's NrThrottled, ThrottledTime ns)."""
    c = qt.Container(name, limit, period, quota, cur[0], cur[1], pre[0], pre[1])
    c.usage.extend(usage)
    return c


def marks(high=0.0, alarm=0.0, elevate=0.0, ratio=0.0, floating=0.0) -> qt.Marks:
    return qt.Marks(high, alarm, elevate, ratio, floating)


# --- the rules (driverevent_test.go): (id, rule, marks, util history, container, expected
# quotaDelta as a function of NumCPU) ---
RULES = [
    (f"{DE}::TestEventDriverElevate/TC1 - CPU usage >= the alarmWaterMark.", "elevate", marks(alarm=60), [90], con(), lambda n: 0.0),
    (
        f"{DE}::TestEventDriverElevate/TC2 - the container is not suppressed.",
        "elevate",
        marks(alarm=70, elevate=1.0),
        [60],
        con(period=100_000, cur=(1, 10), pre=(1, 10)),
        lambda n: 0.0,
    ),
    (
        f"{DE}::TestEventDriverElevate/TC3 - increase the quota of the suppressed container",
        "elevate",
        marks(alarm=60, elevate=1.0),
        [40],
        con(period=100_000, cur=(50, 200_000), pre=(40, 100_000)),
        # need = 100 µs / 10 periods / 100000 = 0.0001 cores; coefficient min(0.0001, 1% × n)/0.0001
        lambda n: min(0.0001, 0.01 * n) / 0.0001 * 0.0001 * 100_000,
    ),
    (f"{DE}::TestSlowFallback/TC1-CPU usage <= the highWaterMark.", "slow", marks(high=60, ratio=0.1), [40], con(), lambda n: 0.0),
    (
        f"{DE}::TestSlowFallback/TC2-the container is suppressed.",
        "slow",
        marks(high=50, alarm=80, ratio=0.1),
        [70],
        con(limit=1, period=100_000, quota=200_000, cur=(10, 0), pre=(0, 0)),
        lambda n: 0.0,
    ),
    (
        f"{DE}::TestSlowFallback/TC3-decrease the quota of the uncompressed containers",
        "slow",
        marks(high=40, alarm=90, ratio=0.1),
        [60.0],
        con(limit=2, period=100_000, quota=400_000, cur=(10, 100_000), pre=(10, 100_000)),
        lambda n: (60.0 - 40) / (90 - 40) * 0.1 * (2 * 100_000 - 400_000),
    ),
    (f"{DE}::TestFastFallback/TC1-CPU usage <= the AlarmWaterMark.", "fast", marks(alarm=30), [10], con(), lambda n: 0.0),
    (
        f"{DE}::TestFastFallback/TC2-the quota of container is not increased.",
        "fast",
        marks(alarm=30),
        [48],
        con(limit=1, period=100, quota=100),
        lambda n: 0.0,
    ),
    (
        f"{DE}::TestFastFallback/TC3-decrease the quota of the containers",
        "fast",
        marks(alarm=65),
        [90],
        con(limit=3, period=10_000, quota=40_000),
        lambda n: (65 - 90) / 100 * n * 10_000,
    ),
    (
        f"{DE}::TestEventDriverAdjustQuota/TC1-no promotion",
        "adjust",
        marks(high=73, alarm=80),
        [1, -qt.CPU_FLOATING_LIMIT],
        con(limit=1, period=80, quota=100),
        lambda n: 0.0,
    ),
    (
        f"{DE}::TestEventDriverAdjustQuota/TC2-make a promotion",
        "adjust",
        marks(high=73, alarm=97),
        [10],
        con(limit=2, period=2000, quota=5000, cur=(1, 200), pre=(0, 100)),
        # ElevateLimit is 0 in this Config literal, so the coefficient is min(0.00005, 0)/0.00005
        lambda n: min(0.00005, 0.0 * n) / 0.00005 * 0.00005 * 2000,
    ),
]


@pytest.mark.parametrize("case", RULES, ids=[r[0] for r in RULES])
def test_rule(case):
    _, rule, m, history, template, expected = case
    for n in NCPUS:
        c = con(template.limit, template.period, template.quota, (template.nr_throttled, template.throttled_ns))
        c.prev_nr_throttled, c.prev_throttled_ns = template.prev_nr_throttled, template.prev_throttled_ns
        util = history[-1]  # getLastCPUUtil
        if rule == "elevate":
            qt.elevate([c], util, m, n)
        elif rule == "slow":
            qt.slow_fallback([c], util, m)
        elif rule == "fast":
            qt.fast_fallback([c], util, m, n)
        else:
            qt.adjust_quota([c], util, history, n, m)
        assert c.delta == pytest.approx(expected(n), rel=1e-12, abs=1e-12), f"NumCPU {n}"


SHARP = [
    (f"{DE}::TestSharpFluctuates/TC1-the cpu changes rapidly", [90, 90 - qt.CPU_FLOATING_LIMIT - 1], True),
    (f"{DE}::TestSharpFluctuates/TC2-the cpu changes steadily", [90, 90 - qt.CPU_FLOATING_LIMIT + 1], False),
]


@pytest.mark.parametrize("case", SHARP, ids=[s[0] for s in SHARP])
def test_sharp_fluctuates(case):
    _, history, want = case
    assert qt.sharp_fluctuates(history, qt.CPU_FLOATING_LIMIT) is want


# (id, container with usage samples (timestamp ns, usage ns), heightLimit, expected)
MAX_QUOTA = [
    (f"{DE}::TestGetMaxQuota/TC1-empty cpu usage", con(), 100, 100.0),
    (
        f"{DE}::TestGetMaxQuota/TC2-The remaining value is less than 3 times the upper limit.",
        con(limit=4, period=100, usage=[(100_000, 100_000), (200_000, 200_000)]),
        800,
        400 + 400 * 700 / (3 * 800),
    ),
    (
        f"{DE}::TestGetMaxQuota/TC3-The remaining value is greater than 3 times the limit height.",
        con(limit=1, period=100, usage=[(t, 0) for t in range(10_000, 80_000, 10_000)] + [(80_000, 100)]),
        200,
        200.0,
    ),
    (
        f"{DE}::TestGetMaxQuota/TC4-The remaining value is less than the initial value.",
        con(limit=10, period=10, usage=[(100, 0), (200, 1_000_000)]),
        150,
        100.0,
    ),
]


@pytest.mark.parametrize("case", MAX_QUOTA, ids=[m[0] for m in MAX_QUOTA])
def test_get_max_quota(case):
    _, c, height, want = case
    assert qt.max_quota(c, height) == pytest.approx(want, rel=1e-12)


# --- writing a quota change up the path (cpuquota_test.go TestCPUQuota_WriteQuota,
# statusstore_test.go TestStatusStore_writeQuota): (id, cgroup, readable quotas, cur, next,
# expected writes in order, or None for an error) ---
def w(cg: str, v: int) -> KnobWrite:
    return KnobWrite(cg, Knob.CPU_CFS_QUOTA_US, v)


WQ = f"{CQ}::TestCPUQuota_WriteQuota"
WRITES = [
    (f"{WQ}/TC1-empty cgroup path", "", {}, 100_000, 200_000, None),
    (f"{WQ}/TC2-fail to get paths", "/", {}, 100_000, 200_000, None),
    (f"{WQ}/TC3-None of the paths exist", CON, {}, 100_000, 200_000, None),
    # the pod is written first, the container fails, the pod is rolled back: nothing changes
    (f"{WQ}/TC4-Only pod path existed", CON, {POD: 100_000}, 100_000, 200_000, None),
    (f"{WQ}/TC5-success delta > 0", CON, {POD: 100_000, CON: 100_000}, 100_000, 200_000, [w(POD, 200_000), w(CON, 200_000)]),
    (f"{WQ}/TC6-success delta < 0", CON, {POD: 200_000, CON: 200_000}, 200_000, 100_000, [w(CON, 100_000), w(POD, 100_000)]),
    (f"{WQ}/TC6.1-success delta < 0 unlimited pod", CON, {POD: -1, CON: 200_000}, 200_000, 100_000, [w(CON, 100_000)]),
    (f"{WQ}/TC7-success delta = 0", "", {}, 100_000, 100_000, []),
    (f"{SS}::TestStatusStore_writeQuota/TC1-empty cgroup path", CON, {}, 100_000, 200_000, None),
]


@pytest.mark.parametrize("case", WRITES, ids=[x[0] for x in WRITES])
def test_write_quota(case):
    _, cg, quotas, cur, nxt, want = case
    if want is None:
        with pytest.raises(qt.QuotaTurboError):
            qt.quota_writes(cg, quotas, nxt - cur)
    else:
        assert qt.quota_writes(cg, quotas, nxt - cur) == want


# --- which containers quotaTurbo takes (statusstore_test.go TestIsAdjustmentAllowed): the
# cgroup exists? cpuLimit as a function of NumCPU ---
ALLOWED = [
    (f"{SS}::TestIsAdjustmentAllowed/TC1-allow adjustment", True, lambda n: n - 1, True),
    (f"{SS}::TestIsAdjustmentAllowed/TC2-cgroup path is not existed", False, lambda n: n - 1, False),
    (f"{SS}::TestIsAdjustmentAllowed/TC3-cpulimit = 0", True, lambda n: 0, False),
    (f"{SS}::TestIsAdjustmentAllowed/TC4-cpulimit over max", True, lambda n: n + 1, False),
    (f"{SS}::TestIsAdjustmentAllowed/TC5-cpurequest over max", True, lambda n: 0, False),
]


@pytest.mark.parametrize("case", ALLOWED, ids=[a[0] for a in ALLOWED])
def test_is_adjustment_allowed(case):
    _, exists, limit, want = case
    for n in NCPUS:
        assert qt.qualifies(exists, limit(n), n) is want


# --- a container joins (AddCgroup / NewCPUQuota) ---
FULL = {"period": 100_000, "quota": 200_000, "nr_throttled": 1, "throttled_ns": 1, "usage": 1_234_567}
ADD = [
    (f"{SS}::TestStatusStore_AddCgroup/TC1-empty cgroup path", "", 0.0, True, FULL, False),
    (f"{SS}::TestStatusStore_AddCgroup/TC3-cgroup not allow to adjust", CON, 3.0, False, {}, False),
    (f"{SS}::TestStatusStore_AddCgroup/TC4-failed to create CPUQuota", CON, 3.0, True, {"period": 100_000}, False),
    (f"{SS}::TestStatusStore_AddCgroup/TC5-add successfully", CON, 1.0, True, FULL, True),
    (f"{CQ}::TestNewCPUQuota/absent of period file", CON, 2.0, True, {**FULL, "period": None}, False),
    (f"{CQ}::TestNewCPUQuota/absent of throttle file", CON, 2.0, True, {**FULL, "nr_throttled": None, "throttled_ns": None}, False),
    (f"{CQ}::TestNewCPUQuota/absent of quota file", CON, 2.0, True, {**FULL, "quota": None}, False),
    (f"{CQ}::TestNewCPUQuota/absent of usage file", CON, 2.0, True, {**FULL, "usage": None}, False),
    (f"{CQ}::TestNewCPUQuota/all files present", CON, 2.0, True, FULL, True),
]


@pytest.mark.parametrize("case", ADD, ids=[a[0] for a in ADD])
def test_add_cgroup(case):
    _, cg, limit, exists, readings, ok = case
    if not ok:
        with pytest.raises(qt.QuotaTurboError):
            qt.new_container(cg, limit, 8, exists, readings)
        return
    c = qt.new_container(cg, limit, 8, exists, readings)
    # TestNewCPUQuota's assertions: usage, quota and period read; no throttling seen yet
    assert (c.usage[0][1], c.quota, c.period) == (1_234_567, 200_000, 100_000)
    assert c.new_nr_throttled == 0 and c.new_throttled_ns == 0


# --- a container leaves: its quota is recovered (RemoveCgroup) ---
REMOVE = [
    # (id, tracked?, cgroup exists?, readable quotas, container, expected writes or None = error)
    (f"{SS}::TestStatusStore_RemoveCgroup/TC1-empty cgroupPath", False, False, {}, con(name=""), []),
    (f"{SS}::TestStatusStore_RemoveCgroup/TC2-cgroupPath is not existed", True, False, {}, con(), []),
    (f"{SS}::TestStatusStore_RemoveCgroup/TC3-cgroupPath existed but can not set", True, True, {}, con(quota=100_000), None),
    (
        f"{SS}::TestStatusStore_RemoveCgroup/TC4-remove cgroupPath successfully",
        True,
        True,
        {CON: 250_000, POD: -1},
        con(limit=2, period=100_000, quota=250_000),
        [w(CON, 200_000)],
    ),
]


@pytest.mark.parametrize("case", REMOVE, ids=[r[0] for r in REMOVE])
def test_remove_cgroup(case):
    _, tracked, exists, quotas, c, want = case
    remove, _ = qt.sync_plan([c.cgroup] if tracked else [], {})
    assert remove == ([c.cgroup] if tracked else [])
    if not tracked:
        return
    if want is None:
        with pytest.raises(qt.QuotaTurboError):
            qt.recover_quota(c, exists, quotas)
    else:
        assert qt.recover_quota(c, exists, quotas) == want


def test_get_last_cpu_util():
    """statusstore_test.go::TestStatusStore_getLastCPUUtil/TC1-empty CPU Util, TC2-CPU Util is 20."""
    assert qt.last_util([]) == 0.0
    assert qt.last_util([(0, 20.0)]) == 20.0


def test_update_cpu_utils():
    """statusstore_test.go::TestStatusStore_updateCPUUtils: one sample, two, then with the
    first moved 60.000000001 s back a third update drops it."""
    h = qt.record_util([], 1_000_000_000_000, 0.0)
    assert len(h) == 1
    h = qt.record_util(h, 1_000_000_000_001, 5.0)
    assert len(h) == 2
    h[0] = (h[0][0] - 60_000_000_001, h[0][1])
    h = qt.record_util(h, 1_000_000_000_002, 7.0)
    assert len(h) == 2


# --- the service: pods' quotas reset at PreStart/Terminate (recoverOnePodQuota) ---
FOO, BAR = "kubepods/testPod1/testCon1", "kubepods/testPod1/testCon2"
TERMINATE = [
    (f"{SV}::TestQuotaTurbo_Terminate/TC1-one unlimited container is existed", 2, 0, {POD: -1, FOO: 200_000, BAR: -1}),
    (f"{SV}::TestQuotaTurbo_Terminate/TC2-all containers are unlimited", 2, 1, {POD: 300_000, FOO: 200_000, BAR: 100_000}),
    (f"{SV}::TestQuotaTurbo_Terminate/TC3-all containers are limited", 0, 0, {POD: -1, FOO: -1, BAR: -1}),
]


@pytest.mark.parametrize("case", TERMINATE, ids=[t[0] for t in TERMINATE])
def test_terminate_recovers_pod_quotas(case):
    _, foo, bar, want = case
    writes = qt.reset_pod_quotas(POD, {FOO: foo, BAR: bar}, {FOO: 100_000, BAR: 100_000})
    assert writes[0] == w(POD, -1)  # the pod is unlimited first, so no container write is refused
    final = {x.cgroup: x.value for x in writes}  # the files after the writes, in order
    assert final == want


# --- the service's and the library's configuration, through the policy's parameters ---
def rubik_ok(**cfg) -> bool:
    try:
        Rubik(cfg)
    except PolicyError:
        return False
    return True


CONFIG = [
    # (id, config (sync_interval in s = upstream's ms / 1000), valid?)
    (
        f"{SV}::TestConfig_Validate/TC1-alarmWaterMark is less or equal to highWaterMark",
        {"high_water_mark": 100, "alarm_water_mark": 60, "sync_interval": 1.0},
        False,
    ),
    (
        f"{SV}::TestConfig_Validate/TC2-highWater mark exceed the max quota turbo water mark(100)",
        {"high_water_mark": 1000, "alarm_water_mark": 100000, "sync_interval": 1.0},
        False,
    ),
    (
        f"{SV}::TestConfig_Validate/TC3-sync interval out of range(100-10000)",
        {"high_water_mark": 60, "alarm_water_mark": 80, "sync_interval": 0.001},
        False,
    ),
    (f"{SV}::TestConfig_Validate/TC4-normal case", {"high_water_mark": 60, "alarm_water_mark": 100, "sync_interval": 1.0}, True),
    (f"{SV}::TestQuotaTurbo_SetConfig/TC2-success", {}, True),
    (f"{SV}::TestQuotaTurbo_SetConfig/TC3-invalid config", {"alarm_water_mark": 101}, False),
    (f"{CF}::TestWithElevateLimit/TC1-set EvateLimit successfully", {"elevate_limit": 2.0}, True),
    (f"{CF}::TestWithElevateLimit/TC2-too large EvateLimit", {"elevate_limit": 100.01}, False),
    (f"{CF}::TestWithElevateLimit/TC3-negative EvateLimit", {"elevate_limit": -0.01}, False),
    (f"{CF}::TestWithCPUFloatingLimit/TC1-set CPUFloatingLimit successfully", {"cpu_floating_limit": 20.0}, True),
    (f"{CF}::TestWithCPUFloatingLimit/TC2-too large CPUFloatingLimit", {"cpu_floating_limit": 100.01}, False),
    (f"{CF}::TestWithCPUFloatingLimit/TC3-negative CPUFloatingLimit", {"cpu_floating_limit": -0.01}, False),
]


@pytest.mark.parametrize("case", CONFIG, ids=[c[0] for c in CONFIG])
def test_config(case):
    _, cfg, ok = case
    assert rubik_ok(**cfg) is ok
    if ok and cfg:
        assert all(Rubik(cfg).values[k] == v for k, v in cfg.items())  # the value set is the value used


MARKS = [
    (f"{CF}::TestWithWaterMark/TC1-set small WaterMark successfully", 10, 20, True),
    (f"{CF}::TestWithWaterMark/TC1.1-set large WaterMark successfully", 85, 90, True),
    (f"{CF}::TestWithWaterMark/TC2-alarmWaterMark = highwatermark", 80, 80, False),
    (f"{CF}::TestWithWaterMark/TC2.1-alarmWaterMark < highwatermark", 81, 80, False),
    (f"{CF}::TestWithWaterMark/TC3-highWaterMark < 0", -1, -1, False),
]


@pytest.mark.parametrize("case", MARKS, ids=[m[0] for m in MARKS])
def test_with_water_mark(case):
    _, high, alarm, ok = case
    assert (qt.check_marks(high, alarm) is None) is ok
    assert rubik_ok(high_water_mark=high, alarm_water_mark=alarm) is ok


def test_other_defaults():
    """config_test.go::TestOther/TC1-test other: NewConfig's defaults, and the slow fallback
    ratio set is the one used."""
    assert qt.Marks() == qt.Marks(high=60, alarm=80, elevate_limit=1.0, slow_fallback_ratio=0.1, floating_limit=10.0)
    v = Rubik().values
    assert (v["high_water_mark"], v["alarm_water_mark"], v["elevate_limit"], v["slow_fallback_ratio"], v["cpu_floating_limit"]) == (
        60,
        80,
        1.0,
        0.1,
        10.0,
    )
    assert Rubik({"slow_fallback_ratio": 0.3}).values["slow_fallback_ratio"] == 0.3


# --- the service syncs its containers each round (TestQuotaTurbo_AdjustQuota) ---
BAR2, FOO1 = "kubepods/testPod2/testCon2", "kubepods/testPod1/testCon1"
SYNC = [
    # bar is tracked, only foo is wanted: bar is removed (and recovered), foo is added (its
    # files are missing upstream, so its AddCgroup fails: see test_add_cgroup TC4)
    (
        f"{SV}::TestQuotaTurbo_AdjustQuota/TC1-fail add foo container & remove bar container successfully",
        [BAR2],
        {FOO1: 2.0},
        [BAR2],
        [FOO1],
    ),
    (
        f"{SV}::TestQuotaTurbo_AdjustQuota/TC2-no container add  & remove bar container successfully",
        [BAR2, FOO1],
        {FOO1: 2.0, BAR2: 2.0},
        [],
        [],
    ),
]


@pytest.mark.parametrize("case", SYNC, ids=[s[0] for s in SYNC])
def test_sync_cgroups(case):
    _, tracked, wanted, remove, add = case
    assert qt.sync_plan(tracked, wanted) == (remove, add)


def test_boundaries_by_hand():
    """ours (driverevent.go's comparisons, which upstream's cases do not reach): elevation
    still happens when the alarm mark is exactly elevate_limit away (a − U >= R); the slow
    fallback starts at U = H and the fast one at U = A."""
    m = marks(high=60, alarm=80, elevate=1.0, ratio=0.1)
    c = con(limit=1, period=100_000, quota=100_000, cur=(1, 1_000_000), pre=(0, 0))
    qt.elevate([c], 79.0, m, 64)
    assert c.delta == pytest.approx(1000.0)  # 1 ms short in one period: +1% of the period
    c = con(limit=1, period=100_000, quota=150_000)
    qt.slow_fallback([c], 60.0, m)
    assert c.delta == 0.0  # k = 0 at U = H: entered, nothing returned
    qt.slow_fallback([c], 70.0, m)
    assert c.delta == pytest.approx(0.05 * -50_000)
    c = con(limit=1, period=100_000, quota=150_000)
    qt.fast_fallback([c], 80.0, m, 64)
    assert c.delta == 0.0  # S = 0 at U = A
    qt.fast_fallback([c], 81.0, m, 64)
    assert c.delta == pytest.approx(-0.01 * 64 * 100_000)
