"""koordlet's resctrl QoS against its own unit tests:
pkg/koordlet/qosmanager/plugins/resctrl/resctrl_reconcile_test.go (koordinator 09869da) and
pkg/koordlet/util/system/resctrl_test.go (02cb14a), case by case.

Upstream writes each group's `schemata` file in a fake /sys/fs/resctrl and reads it back; a
test filesystem keeps only the last write, so its expected file is the group's last line
written. Here the same inputs go to policies/resctrl_qos.py and the expected strings are
upstream's literals. Cases that exercise only the filesystem (an invalid sysfs path, the
executor's update cache, PID-level task diffs) have no equivalent in a model that assigns
cgroups rather than PIDs: listed in docs/conformance.md, not ported.
"""

from __future__ import annotations

import pytest
from koord_cases import case

from policies import resctrl_qos as rq
from policies.pods import QoSClass
from policies.resctrl import ResctrlAssign, ResctrlInfo, ResctrlWrite

R = "pkg/koordlet/qosmanager/plugins/resctrl/resctrl_reconcile_test.go"
S = "pkg/koordlet/util/system/resctrl_test.go"
C = rq.ClassResctrl

CAT = [
    # (cbm, start %, end %, mask or None for an error)
    case(R, "Test_calculateCatL3Schemata", "do not panic but throw an error for empty input", 0, 0, 0, None),
    case(R, "Test_calculateCatL3Schemata", "cbm value is invalid", 0x101, 0, 100, None),
    case(R, "Test_calculateCatL3Schemata", "cbm value is invalid 1", 4, 0, 100, None),
    case(R, "Test_calculateCatL3Schemata", "percent value is invalid", 0xFF, -10, 100, None),
    case(R, "Test_calculateCatL3Schemata", "percent value is invalid 1", 0xFF, 30, 30, None),
    case(R, "Test_calculateCatL3Schemata", "calculate l3 schemata correctly", 0xFF, 0, 100, "ff"),
    case(R, "Test_calculateCatL3Schemata", "calculate l3 schemata correctly 1", 0x3FF, 10, 80, "fe"),
    case(R, "Test_calculateCatL3Schemata", "calculate l3 schemata correctly 2", 0x7FF, 10, 50, "3c"),
    case(R, "Test_calculateCatL3Schemata", "calculate l3 schemata correctly 3", 0x3FF, 0, 30, "7"),
    case(R, "Test_calculateCatL3Schemata", "calculate l3 schemata correctly 4", 0x3FF, 10, 85, "1fe"),
]


@pytest.mark.parametrize(("cbm", "start", "end", "want"), CAT)
def test_cat_l3_mask(cbm, start, end, want):
    if want is None:
        with pytest.raises(rq.ResctrlQosError):
            rq.cat_l3_mask(cbm, start, end)
    else:
        assert rq.cat_l3_mask(cbm, start, end) == want


T_L3 = "TestResctrlReconcile_calculateAndApplyRDTL3PolicyForGroup"
L3 = [
    # (group, cbm, l3 number, strategy {class: config}, the group's file afterwards: None = not
    # written, "error" = CalculateCatL3MaskValue failed)
    case(R, T_L3, "warning for empty input", "", 0, 0, {}, None),
    case(R, T_L3, "warning to empty policy", "LS", 0xF, 2, {"BE": C(False, 0, 100)}, None),
    case(R, T_L3, "throw an error for calculating schemata failed", "LS", 0x4, 2, {"LS": C(False, 0, 100)}, "error"),
    case(R, T_L3, "apply policy correctly", "LS", 0xF, 2, {"LS": C(False, 0, 100)}, "L3:0=f;1=f;\n"),
    case(R, T_L3, "apply policy correctly 1", "LS", 0x7FF, 2, {"LS": C(False, 10, 50), "BE": C(False, 0, 100)}, "L3:0=3c;1=3c;\n"),
    case(R, T_L3, "apply policy correctly 2", "LSR", 0x7FF, 2, {"LSR": C(False, 0, 50), "BE": C(False, 0, 100)}, "L3:0=3f;1=3f;\n"),
    case(
        R,
        T_L3,
        "calculate the policy but no need to update",
        "BE",
        0x7FF,
        1,
        {"LS": C(False, 0, 100), "BE": C(False, 10, 50)},
        "L3:0=3c;\n",
    ),
]


@pytest.mark.parametrize(("group", "cbm", "l3num", "strategy", "want"), L3)
def test_l3_policy_for_group(group, cbm, l3num, strategy, want):
    cfg = strategy.get(group)
    cfg = None if cfg is None else C(cfg.enable, cfg.cat_range_start_percent, cfg.cat_range_end_percent)  # L3 only
    if want == "error":
        with pytest.raises(rq.ResctrlQosError):
            rq.group_writes(group, format(cbm, "x"), range(l3num), cfg)
        return
    writes = rq.group_writes(group, format(cbm, "x"), range(l3num), cfg)
    assert (writes[-1].schemata if writes else None) == want


T_MB = "TestResctrlReconcile_calculateAndApplyRDTMbPolicyForGroup"
MB = [
    # (group, l3 number, vendor, strategy {class: mbaPercent}, the group's file afterwards)
    case(R, T_MB, "warning for empty input", "", 0, rq.INTEL, {}, None),
    case(R, T_MB, "warning to empty policy", "LS", 2, rq.INTEL, {"BE": 90}, None),
    case(R, T_MB, "apply policy correctly on intel", "LS", 2, rq.INTEL, {"LS": 90}, "MB:0=90;1=90;\n"),
    case(R, T_MB, "apply policy correctly on amd", "BE", 4, rq.AMD, {"BE": 30}, "MB:0=48;1=48;2=48;3=48;\n"),
    case(R, T_MB, "apply unlimited policy correctly on amd", "BE", 4, rq.AMD, {"BE": 100}, "MB:0=2048;1=2048;2=2048;3=2048;\n"),
    case(R, T_MB, "calculate the policy but no need to update", "BE", 2, rq.INTEL, {"LS": 100, "BE": 90}, "MB:0=90;1=90;\n"),
    case(R, T_MB, "calculate the policy but no need to update 1", "BE", 1, rq.INTEL, {"LS": 90, "BE": 80}, "MB:0=80;\n"),
]


@pytest.mark.parametrize(("group", "l3num", "vendor", "strategy", "want"), MB)
def test_mb_policy_for_group(group, l3num, vendor, strategy, want):
    cfg = C(mba_percent=strategy[group]) if group in strategy else None  # MB only
    writes = rq.group_writes(group, "ff", range(l3num), cfg, vendor)
    assert (writes[-1].schemata if writes else None) == want


T_MBA = "Test_calculateMbaPercentForGroup"
MBA = [
    case(R, T_MBA, "mbPercent not config", None, rq.INTEL, ""),
    case(R, T_MBA, "mbPercent value is invalid,not between (0,100]", 0, rq.INTEL, ""),
    case(R, T_MBA, "mbPercent value is invalid,not between (0,100]#01", 101, rq.INTEL, ""),
    case(R, T_MBA, "mbPercent value is invalid, not multiple of 10", 85, rq.INTEL, "90"),
    case(R, T_MBA, "mbPercent value is valid on intel", 80, rq.INTEL, "80"),
    case(R, T_MBA, "mbPercent value is valid on amd", 80, rq.AMD, str(int(0.8 * rq.AMD_CCD_MAX_MB_GBPS))),
    case(R, T_MBA, "mbPercent value is unlimited on amd", 100, rq.AMD, "2048"),
]


@pytest.mark.parametrize(("percent", "vendor", "want"), MBA)
def test_mba_value(percent, vendor, want):
    assert rq.mba_value(percent, vendor) == want


def test_reconcile_rdt_resctrl_policy():
    """resctrl_reconcile_test.go::TestResctrlReconcile_reconcileRDTResctrlPolicy/test: cbm
    7ff on two L3 caches; LSR 0–100, LS 0–100 with MBA 90, BE 0–50. The BE file ends as its L3
    line, the LS file as its MB line (the last written); then an empty L3 list, an invalid
    and an empty cbm write nothing."""
    strategy = {"LSR": C(False, 0, 100), "LS": C(False, 0, 100, 90), "BE": C(False, 0, 50)}
    writes, skipped = rq.policy_writes(strategy, ResctrlInfo(cbm_mask="7ff", l3_domains=(0, 1)))
    last = {w.group: w.schemata for w in writes}
    assert last["BE"] == "L3:0=3f;1=3f;\n" and last["LS"] == "MB:0=90;1=90;\n" and not skipped
    assert [w.group for w in writes] == ["LSR", "LS", "LS", "BE"]
    for info in (ResctrlInfo(cbm_mask="7ff", l3_domains=()), ResctrlInfo(cbm_mask="invalid"), ResctrlInfo(cbm_mask="")):
        writes, skipped = rq.policy_writes(strategy, info)
        assert writes == [] and len(skipped) == 1
    assert rq.policy_writes(strategy, None)[0] == []  # "log error for invalid nodeCPUInfo"


def test_reconcile_resctrl_groups():
    """resctrl_reconcile_test.go::TestResctrlReconcile_reconcileResctrlGroups/test: the
    default strategy with BE and LSR enabled; a BE pod's tasks go to "BE", an LSE pod's to
    "LSR" (upstream: the tasks files "122450122454123111128912" and "4321432243234400")."""
    strategy = dict(rq.DEFAULTS)
    strategy["BE"] = C(True, 0, 30, 100)
    strategy["LSR"] = C(True, 0, 100, 100)
    got = rq.assignments(strategy, [("kubepods.slice/p0", QoSClass.BE), ("kubepods.slice/p1", QoSClass.LSE)])
    assert got == [ResctrlAssign("BE", "kubepods.slice/p0"), ResctrlAssign("LSR", "kubepods.slice/p1")]


T_RAW = "TestResctrlSchemataRaw"
RAW = [
    # (cache ids, l3 mask, mb percent, L3String, MBString)
    case(S, T_RAW, "new l3 schemata", [0], "f", "", "L3:0=f;\n", None),
    case(S, T_RAW, "new mba schemata", [0], "", "90", None, "MB:0=90;\n"),
    case(S, T_RAW, "new l3 with mba schemata", [0, 1], "fff", "100", "L3:0=fff;1=fff;\n", "MB:0=100;1=100;\n"),
    case(S, T_RAW, "non-contiguous cache ids", [0, 8], "fff", "100", "L3:0=fff;8=fff;\n", "MB:0=100;8=100;\n"),
]


@pytest.mark.parametrize(("ids", "mask", "mb", "want_l3", "want_mb"), RAW)
def test_schemata_raw(ids, mask, mb, want_l3, want_mb):
    if mask:
        assert rq.line("L3", mask, ids) == want_l3
    if mb:
        assert rq.line("MB", mb, ids) == want_mb


T_VALID = "TestCheckResctrlSchemataValid"
VALID = [
    case(S, T_VALID, "check failed when schemata dir not exist", None, True),
    case(S, T_VALID, "check failed when schemata content is empty", "", True),
    case(S, T_VALID, "check failed when schemata content is missing L3 CAT", "MB:0=100;1=100", True),
    case(S, T_VALID, "check successfully when schemata content is valid", "MB:0=100;1=100\nL3:0=fff;1=fff", False),
    case(
        S,
        T_VALID,
        "check successfully when schemata content is valid 1",
        "    L3:0=ffff;1=ffff;2=ffff;3=ffff;4=ffff\n    MB:0=2048;1=2048;2=2048;3=2048;4=2048",
        False,
    ),
]


@pytest.mark.parametrize(("text", "want_err"), VALID)
def test_check_root_schemata(text, want_err):
    if want_err:
        with pytest.raises(rq.ResctrlQosError):
            rq.check_root_schemata(text)
    else:
        rq.check_root_schemata(text)


# --- ours: the policy end to end through the seam (tests/fake_resctrl.py) --------------------


def test_policy_writes_groups_and_assigns_pods_through_the_seam():
    """The koordinator policy with resctrl_qos: the NodeSLO defaults (BE 0–30 %) on the
    fake node's 11-way cbm_mask give BE ways [0, ceil(3.3)) = 4 ways, 00f as the kernel
    prints it; BE enabled assigns the BE cgroup; LS not enabled assigns nothing."""
    from fake_resctrl import FakeResctrlNode, backend

    from policies import PolicyRunner, build_policy

    node = FakeResctrlNode(["kubepods/besteffort", "be", "ls"])
    p = build_policy(
        {"name": "koordinator", "besteffort": "kubepods/besteffort", "be": ["be"], "ls": ["ls"], "resctrl_qos": {"BE": {"enable": True}}}
    )
    r = PolicyRunner(p, backend(node))
    r.apply(p.attach(r.observe()))
    assert node.resctrl_read_schemata("BE") == "L3:0=00f;1=00f\nMB:0=100;1=100"
    assert node.resctrl_read_schemata("LS") == "L3:0=7ff;1=7ff\nMB:0=100;1=100"
    assert node.assigned == {"be": "BE"}
    assert [d for d in r.decisions if d.what.startswith("write refused")] == []
    assert any(isinstance(a, ResctrlWrite) for d in r.decisions for a in d.resctrl)


def test_policy_configuration_errors_name_the_field():
    from policies import build_policy
    from policies.policy import PolicyError

    for table, field in (
        ({"BE": {"enable": 1}}, "resctrl_qos.BE.enable"),
        ({"LSE": {}}, "resctrl_qos.LSE"),
        ({"BE": {"mba_percent": 101}}, "resctrl_qos.BE.mba_percent"),
        ({"BE": {"cat_range_start_percent": 50, "cat_range_end_percent": 40}}, "resctrl_qos.BE.cat_range_end_percent"),
        ({"BE": {"catRangeEndPercent": 40}}, "resctrl_qos.BE.catRangeEndPercent"),
    ):
        with pytest.raises(PolicyError, match=field.replace(".", r"\.")):
            build_policy({"name": "koordinator", "besteffort": "be", "resctrl_qos": table})
