"""rubik's pod bandwidth management (preemption.resource contains "net"; rubik.md §4.5):
rubik hands oncn-bwm its water mark and the offline rates, enables it, and marks offline pods
with net_cls.classid = 4294967295 (online pods are left at 0). The kernel side — offline
traffic paced at `low` while online traffic is at or above the water mark, at `high`
otherwise, re-chosen every 10 ms — is core_rs/model/src/net.rs.

Rates are rubik's units: MB = MiB per second. rubik's validation: waterline in
[20, 9999 × 1024], low and high in [1, 9999 × 1024], low < high.
"""

from __future__ import annotations

from policies.cgroup import Knob, KnobWrite

OFFLINE_CLASSID = 4_294_967_295
MAX_MB = 9999 * 1024
# bwmcli's defaults (rubik has none of its own: the three are required there)
WATERLINE_MB = 20
LOW_MB = 20
HIGH_MB = 1024


def writes(offline: list[str], waterline_mb: int, low_mb: int, high_mb: int) -> list[KnobWrite]:
    """What rubik writes at start: the node-wide settings on the root, then the marks."""
    return [
        KnobWrite("", Knob.NET_QOS_WATERLINE, f"{waterline_mb}mb"),
        KnobWrite("", Knob.NET_QOS_BANDWIDTH, f"{low_mb}mb,{high_mb}mb"),
        KnobWrite("", Knob.NET_QOS_ENABLE, "1"),
    ] + [KnobWrite(cg, Knob.NET_CLS_CLASSID, OFFLINE_CLASSID) for cg in offline]
