"""koordlet's memory QoS (CgroupReconcile, every 1 s): memory.min / memory.low / memory.high
of each pod from its requests and limits, and the sums at the Kubernetes QoS directories
(../shared/reference/koordinator.md §3, cgroup_reconcile.go), in integer arithmetic.

Per class (LSR — also LSE —, LS, BE, SYSTEM) the NodeSLO has `enable` and the percents; a
class that is not enabled gets nothing written (min/low/throttling 0), which is the default
of every class. Koordinator's recommended values (policy "auto") are all-zero percents too:
memory QoS does something only when the operator sets the percents.

Pod level: memory.min = request × minLimitPercent / 100; memory.low = request ×
lowLimitPercent / 100, raised to min if 0 < low < min. Container level (one container per
pod here, so the pod's cgroup): memory.high = no limit when throttlingPercent is 0, else
floor((request + (limit − request) × throttling / 100) / page) × page, with the node's
allocatable memory for a pod without a limit, raised to min if 0 < high < min. A BE pod's
request and limit are its batch-memory. QoS directories: kubepods/burstable and
kubepods/besteffort get the sums of their pods' min and low (when some pod there has an
enabled class), kubepods the sums over all pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.pods import BESTEFFORT, BURSTABLE, KUBEPODS, KubeQoS, Pod, QoSClass
from policies.policy import PolicyError

PAGE = 4096
CLASSES = ("LSR", "LS", "BE", "SYSTEM")


@dataclass(frozen=True)
class ClassConfig:
    """One class's `MemoryQOS` of the NodeSLO (percents; 0 = not set)."""

    enable: bool = False
    min_limit_percent: int = 0
    low_limit_percent: int = 0
    throttling_percent: int = 0
    oom_kill_group: bool = False
    # Alibaba Cloud Linux files, written when set (0: not set): async reclaim watermarks
    # (wmarkScalePermill is per ten-thousand in the kernel file) and the OOM priority
    wmark_ratio: int = 0
    wmark_scale_permill: int = 0
    # memory.wmark_min_adj in [−25, 50]: below 0 lowers the memcg's share of the global min
    # watermark (reclaimed later: protects LS), above 0 raises it towards low (reclaimed
    # earlier: penalises BE); recommended −25 for LSR/LS, 50 for BE (`DefaultMemoryQOS`)
    wmark_min_adj: int = 0
    priority_enable: bool = False
    priority: int = 0


def parse_classes(table: Any, where: str) -> dict[str, ClassConfig]:
    """`memory_qos = { LS = { enable = true, min_limit_percent = 100, ... }, BE = {...} }`."""
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: must be a table of classes ({', '.join(CLASSES)})")
    out = {}
    for cls, fields in table.items():
        w = f"{where}.{cls}"
        if cls not in CLASSES:
            raise PolicyError(f"{w}: unknown class (known: {', '.join(CLASSES)}; LSE uses LSR's)")
        if not isinstance(fields, Mapping):
            raise PolicyError(f"{w}: must be a table")
        known = set(ClassConfig.__dataclass_fields__)
        for k, v in fields.items():
            if k not in known:
                raise PolicyError(f"{w}.{k}: unknown field (known: {', '.join(sorted(known))})")
            if k in ("enable", "oom_kill_group", "priority_enable"):
                if not isinstance(v, bool):
                    raise PolicyError(f"{w}.{k}: must be true or false")
            elif k == "priority" and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 12):
                raise PolicyError(f"{w}.{k}: must be an integer in [0, 12] (got {v!r})")
            elif k == "wmark_scale_permill" and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1000):
                raise PolicyError(f"{w}.{k}: must be an integer in [0, 1000] (got {v!r})")
            elif k == "wmark_min_adj" and (isinstance(v, bool) or not isinstance(v, int) or not -25 <= v <= 50):
                raise PolicyError(f"{w}.{k}: must be an integer in [-25, 50] (got {v!r})")
            elif k not in ("priority", "wmark_scale_permill", "wmark_min_adj") and (
                isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 100
            ):
                raise PolicyError(f"{w}.{k}: must be an integer percent in [0, 100] (got {v!r})")
        out[cls] = ClassConfig(**fields)
    return out


def class_of(pod: Pod) -> str:
    return {QoSClass.LSE: "LSR", QoSClass.LSR: "LSR", QoSClass.LS: "LS", QoSClass.BE: "BE", QoSClass.SYSTEM: "SYSTEM"}[pod.qos]


def pod_values(pod: Pod, cfg: ClassConfig, allocatable: int) -> dict[str, int]:
    """memory.min / memory.low / memory.high of one pod (bytes; high -1 = no limit)."""
    if not cfg.enable:
        return {}
    req = pod.memory_request or 0
    lim = pod.memory_limit if pod.memory_limit else -1
    mn = req * cfg.min_limit_percent // 100
    low = req * cfg.low_limit_percent // 100
    if 0 < low < mn:
        low = mn
    if cfg.throttling_percent == 0 or (lim <= 0 and allocatable <= 0):
        high = -1
    else:
        top = lim if lim > 0 else allocatable
        high = (req + (top - req) * cfg.throttling_percent // 100) // PAGE * PAGE
        if 0 < high < mn:
            high = mn
    return {"memory.min": mn, "memory.low": low, "memory.high": high}


def cgroup_values(pods: tuple[Pod, ...], classes: Mapping[str, ClassConfig], allocatable: int) -> dict[str, dict[str, int]]:
    """Every memory QoS file koordlet would write, by cgroup, parents first."""
    per_pod = {p.cgroup: pod_values(p, classes.get(class_of(p), ClassConfig()), allocatable) for p in pods}
    out: dict[str, dict[str, int]] = {}
    sums = {KubeQoS.BURSTABLE: [0, 0, False], KubeQoS.BESTEFFORT: [0, 0, False], KubeQoS.GUARANTEED: [0, 0, False]}
    for p in pods:
        v = per_pod[p.cgroup]
        if v:
            s = sums[p.kube_qos]
            s[0] += v["memory.min"]
            s[1] += v["memory.low"]
            s[2] = True
    total = [sum(s[0] for s in sums.values()), sum(s[1] for s in sums.values()), any(s[2] for s in sums.values())]
    for path, s in ((KUBEPODS, total), (BURSTABLE, sums[KubeQoS.BURSTABLE]), (BESTEFFORT, sums[KubeQoS.BESTEFFORT])):
        if s[2]:
            out[path] = {"memory.min": s[0], "memory.low": s[1]}
    for p in pods:
        if per_pod[p.cgroup]:
            out[p.cgroup] = per_pod[p.cgroup]
            cfg = classes.get(class_of(p), ClassConfig())
            if cfg.oom_kill_group:
                out[p.cgroup]["memory.oom.group"] = 1
            if cfg.wmark_ratio:
                out[p.cgroup]["memory.wmark_ratio"] = cfg.wmark_ratio
            if cfg.wmark_scale_permill:
                out[p.cgroup]["memory.wmark_scale_factor"] = cfg.wmark_scale_permill
            if cfg.wmark_min_adj:
                out[p.cgroup]["memory.wmark_min_adj"] = cfg.wmark_min_adj
            if cfg.priority_enable:
                out[p.cgroup]["memory.use_priority_oom"] = 1
                out[p.cgroup]["memory.priority"] = cfg.priority
    return out
