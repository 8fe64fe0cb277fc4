"""koordlet's resctrl QoS (../shared/reference/koordinator.md §8 "Resctrl"; upstream
pkg/koordlet/qosmanager/plugins/resctrl/resctrl_reconcile.go and
pkg/koordlet/util/system/resctrl.go): NodeSLO `resourceQOSStrategy.<class>.resctrlQOS`
{enable, catRangeStartPercent, catRangeEndPercent, mbaPercent} → three resctrl groups named
"LSR", "LS" and "BE" (koordlet's resctrlGroupList; LSE pods share LSR's group).

Each reconcile (feature gate RdtResctrl, off by default):
* every group's L3 line: the CBM of ways [ceil(ways·start%), ceil(ways·end%)) of the root's
  cbm_mask (CalculateCatL3MaskValue), the same mask on every L3 domain; skipped where either
  percent is unset, an error (no write) for a bad cbm_mask or range;
* every group's MB line: mbaPercent in (0, 100], rounded UP to a multiple of 10 on Intel
  (calculateIntel), or on AMD a GB/s value, 25·8·0.8·pct/100 truncated, 2048 for 100 %;
  skipped where unset or out of range;
* the tasks of every running pod whose class has resctrlQOS.enable go to its class's group.
Note the L3 and MB lines are written whether or not the class is enabled: `enable` gates only
the task assignment, as upstream does.

Defaults (sloconfig.DefaultResctrlQOS): LSR and LS 0–100 %, MB 100 %; BE 0–30 %, MB 100 %;
enable unset (false).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from policies.pods import Pod, QoSClass
from policies.policy import PolicyError, known_table
from policies.resctrl import ResctrlAssign, ResctrlInfo, ResctrlWrite

GROUPS = ("LSR", "LS", "BE")
UNKNOWN = "Unknown"
INTEL, AMD = "GenuineIntel", "AuthenticAMD"
AMD_CCD_MAX_MB_GBPS = 25 * 8 * 0.8  # AMDCCDMaxMBGbps: measured on EPYC Milan, discounted by 0.8
AMD_UNLIMITED_MB = "2048"


class ResctrlQosError(ValueError):
    """What CalculateCatL3MaskValue returns as an error (koordlet logs it and skips the group)."""


@dataclass(frozen=True)
class ClassResctrl:
    """One class's resctrlQOS; None = not set (the merged NodeSLO leaves it out)."""

    enable: bool = False
    cat_range_start_percent: int | None = None
    cat_range_end_percent: int | None = None
    mba_percent: int | None = None


# sloconfig.DefaultResctrlQOS per class
DEFAULTS: dict[str, ClassResctrl] = {
    "LSR": ClassResctrl(False, 0, 100, 100),
    "LS": ClassResctrl(False, 0, 100, 100),
    "BE": ClassResctrl(False, 0, 30, 100),
}
FIELDS = ("enable", "cat_range_start_percent", "cat_range_end_percent", "mba_percent")
# the BE class's percents the koordinator policy also takes as flat (tunable) parameters
FLAT_FIELDS = ("cat_range_end_percent", "mba_percent")


def group_of(qos: QoSClass) -> str:
    """getPodResctrlGroup: LSE and LSR → "LSR", LS → "LS", BE → "BE", else Unknown."""
    return {QoSClass.LSE: "LSR", QoSClass.LSR: "LSR", QoSClass.LS: "LS", QoSClass.BE: "BE"}.get(qos, UNKNOWN)


def cat_l3_mask(cbm: int, start: int, end: int) -> str:
    """CalculateCatL3MaskValue: cbm must be a contiguous low mask (cbm+1 a power of two);
    0 <= start < end <= 100; ways [ceil(ways·start/100), ceil(ways·end/100)) as hex."""
    if (cbm + 1) & cbm:  # bits.OnesCount(cbm+1) != 1
        raise ResctrlQosError(f"illegal cbm {cbm}")
    if start < 0 or end > 100 or end <= start:
        raise ResctrlQosError(f"illegal l3 cat percent: start {start}, end {end}")
    ways = cbm.bit_length()
    lo = math.ceil(ways * start / 100)
    hi = math.ceil(ways * end / 100)
    return format((1 << hi) - (1 << lo), "x")


def mba_value(percent: int | None, vendor: str = INTEL) -> str:
    """calculateMbaPercentForGroup: "" (no change) when unset or outside (0, 100]; Intel
    rounds up to a multiple of 10 (mbaPercent/10*10 + 10); AMD converts to GB/s."""
    if percent is None or percent <= 0 or percent > 100:
        return ""
    if vendor == AMD:
        return AMD_UNLIMITED_MB if percent == 100 else str(int(AMD_CCD_MAX_MB_GBPS * percent / 100))
    return str(percent // 10 * 10 + 10) if percent % 10 else str(percent)


def line(resource: str, value: str, domains: Sequence[int]) -> str:
    """ResctrlSchemataRaw.L3String / MBString: every cache id in order, each entry ended by
    ';', the line by '\\n' (the kernel ignores the empty last token)."""
    return f"{resource}:" + "".join(f"{d}={value};" for d in sorted(domains)) + "\n"


def check_root_schemata(text: str | None) -> None:
    """CheckResctrlSchemataValid: the root schemata must exist and carry L3 CAT and MBA."""
    from policies.resctrl import Schemata

    if text is None:
        raise ResctrlQosError("cannot read resctrl schemata: no such file")
    s = Schemata.parse(text)
    if not s.l3:
        raise ResctrlQosError("resctrl schemata is invalid: L3 CAT is invalid, msg: no L3 CAT info")
    if not s.mb:
        raise ResctrlQosError("resctrl schemata is invalid: MBA is invalid, msg: no MBA info")


def group_writes(group: str, cbm_mask: str, domains: Sequence[int], cfg: ClassResctrl | None, vendor: str = INTEL) -> list[ResctrlWrite]:
    """calculateAndApplyRDTL3PolicyForGroup then …MbPolicyForGroup for one group: the L3
    line, then the MB line, each only where it applies. A bad mask or range raises."""
    if cfg is None:
        return []
    out = []
    if cfg.cat_range_start_percent is not None and cfg.cat_range_end_percent is not None:
        mask = cat_l3_mask(int(cbm_mask, 16), cfg.cat_range_start_percent, cfg.cat_range_end_percent)
        out.append(ResctrlWrite(group, line("L3", mask, domains)))
    mb = mba_value(cfg.mba_percent, vendor)
    if mb:
        out.append(ResctrlWrite(group, line("MB", mb, domains)))
    return out


def policy_writes(
    strategy: Mapping[str, ClassResctrl], info: ResctrlInfo | None, vendor: str = INTEL
) -> tuple[list[ResctrlWrite], list[str]]:
    """reconcileRDTResctrlPolicy: every group's writes, and what was skipped and why (an
    unparsable or empty cbm_mask, no L3 domain, a bad range: koordlet logs and goes on)."""
    if info is None or not info.cbm_mask:
        return [], ["failed to get cat l3 cbm, cbm is empty"]
    try:
        mask = int(info.cbm_mask, 16)
    except ValueError:
        return [], [f"failed to parse cat l3 cbm {info.cbm_mask}"]
    if not 0 <= mask < 2**32:
        return [], [f"failed to parse cat l3 cbm {info.cbm_mask}: out of range"]
    if not info.l3_domains:
        return [], ["failed to get the number of l3 caches, invalid value 0"]
    writes: list[ResctrlWrite] = []
    skipped = []
    for group in GROUPS:
        try:
            writes += group_writes(group, info.cbm_mask, info.l3_domains, strategy.get(group), vendor)
        except ResctrlQosError as err:
            skipped.append(f"failed to apply l3 cat policy for group {group}: {err}")
    return writes, skipped


def assignments(strategy: Mapping[str, ClassResctrl], pods: Iterable[tuple[str, QoSClass]]) -> list[ResctrlAssign]:
    """reconcileResctrlGroups: each (pod cgroup, class) whose class has resctrlQOS.enable, to
    its class's group (LSE with LSR; a class with no group is left alone)."""
    out = []
    for cgroup, qos in pods:
        cls = "LSR" if qos is QoSClass.LSE else qos.value
        cfg = strategy.get(cls)
        group = group_of(qos)
        if cfg is None or not cfg.enable or group == UNKNOWN:
            continue
        out.append(ResctrlAssign(group, cgroup))
    return out


def pod_classes(pods: Iterable[Pod], ls: Iterable[str], be: Iterable[str]) -> list[tuple[str, QoSClass]]:
    """The node's pods by class; without pods, the policy's `ls` and `be` cgroups."""
    pods = list(pods)
    if pods:
        return [(p.cgroup, p.qos) for p in pods]
    return [(cg, QoSClass.LS) for cg in ls] + [(cg, QoSClass.BE) for cg in be]


def parse(table: Any, where: str) -> dict[str, ClassResctrl] | None:
    """`resctrl_qos = { BE = { enable = true, cat_range_end_percent = 30, mba_percent = 50 },
    LS = {…}, LSR = {…} }` merged over DefaultResctrlQOS; None (the table absent) = the
    feature gate off."""
    if table is None:
        return None
    classes = ", ".join(GROUPS)
    known_table(table, GROUPS, where, f"a table of classes ({classes})", f"classes: {classes}; LSE pods use LSR's")
    out = dict(DEFAULTS)
    for cls, t in table.items():
        w = f"{where}.{cls}"
        known_table(t, FIELDS, w, f"a table of {', '.join(FIELDS)}", f"fields: {', '.join(FIELDS)}")
        if "enable" in t and not isinstance(t["enable"], bool):
            raise PolicyError(f"{w}.enable: must be true or false")
        for k in FIELDS[1:]:
            v = t.get(k)
            if k in t and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 100):
                raise PolicyError(f"{w}.{k}: must be an integer percentage in [0, 100] (got {v!r})")
        out[cls] = replace(out[cls], **dict(t))
        c = out[cls]
        if c.cat_range_start_percent is not None and c.cat_range_end_percent is not None:
            if c.cat_range_end_percent <= c.cat_range_start_percent:
                raise PolicyError(f"{w}.cat_range_end_percent: must be above cat_range_start_percent ({c.cat_range_start_percent})")
    return out


def with_flat(strategy: Mapping[str, ClassResctrl] | None, flat: Mapping[str, int], where: str) -> dict[str, ClassResctrl] | None:
    """The BE class's flat percents (resctrl_be_*; 0 = unset) over the table's: any set one
    turns resctrl QoS on (DefaultResctrlQOS for the rest) and enables BE with it."""
    set_ = {k: v for k, v in flat.items() if v}
    if not set_:
        return None if strategy is None else dict(strategy)
    out = dict(strategy or DEFAULTS)
    be = replace(out["BE"], enable=True, **set_)
    if be.cat_range_start_percent is not None and be.cat_range_end_percent is not None:
        if be.cat_range_end_percent <= be.cat_range_start_percent:
            raise PolicyError(
                f"{where}.resctrl_be_cat_range_end_percent: must be above BE's cat_range_start_percent ({be.cat_range_start_percent})"
            )
    out["BE"] = be
    return out
