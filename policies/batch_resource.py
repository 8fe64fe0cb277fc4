"""Koordinator's batch resources (slo-controller plugin `batchresource`;
../shared/reference/koordinator.md §5): the kubernetes.io/batch-cpu and batch-memory a node
advertises for BE pods — what high-priority pods and the system leave, minus a safety margin:

    margin     = capacity × (100 − reclaimThresholdPercent) / 100
    batch(usage) = max(capacity − margin − max(system used, reserved) − HP used, 0)

with HP = pods neither koord-batch nor koord-free; a pod without a metric counts its
request, an LSE pod always its CPU request. Pure functions, tested by hand-worked cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies.pods import Pod, QoSClass

CPU_RECLAIM_THRESHOLD_PERCENT = 60  # cpuReclaimThresholdPercent
MEMORY_RECLAIM_THRESHOLD_PERCENT = 65  # memoryReclaimThresholdPercent
AGGREGATE_SECONDS = 300  # aggregateDurationSeconds: NodeMetric averages
REPORT_INTERVAL_S = 60  # metricReportIntervalSeconds
DIFF_THRESHOLD = 0.1  # resourceDiffThreshold
UPDATE_TIME_THRESHOLD_S = 300  # updateTimeThresholdSeconds


@dataclass(frozen=True)
class HPSums:
    used: int
    request: int
    max_used_req: int


def hp_sums(
    pods: Iterable[Pod], usage: Mapping[str, float | None], resource: str = "cpu", metric_hp: Mapping[str, bool] | None = None
) -> HPSums:
    """§5.2 (`calculateOnNode`): Σ over the listed high-priority pods (Running or Pending —
    the caller lists only those) of usage (request if no metric; LSE CPU: request), request,
    and max(request, usage) — a pod without a metric is left out of the last (the
    node-level quirk). `usage` is keyed by cgroup; a metric no listed pod claims is
    "dangling" (the pod is gone, or no longer Running/Pending) and counts in HP used and
    max(used, request) unless its metric's priority is batch or free (`metric_hp[key]`
    False; a metric without a priority counts)."""
    used = request = maxur = 0
    claimed: set[str] = set()
    for p in pods:
        claimed.add(p.cgroup)
        if not p.is_hp:
            continue
        req = p.cpu_request if resource == "cpu" else p.memory_request
        u = usage.get(p.cgroup)
        request += req
        if u is None:
            used += req
            continue
        if resource == "cpu" and p.qos is QoSClass.LSE:
            used += req
        else:
            used += int(u)
        maxur += max(req, int(u))
    for key, u in usage.items():
        if key in claimed or u is None or not (metric_hp or {}).get(key, True):
            continue
        used += int(u)
        maxur += int(u)
    return HPSums(used, request, maxur)


def safety_margin(capacity: int, reclaim_threshold_percent: float) -> int:
    """`GetNodeSafetyMargin`: capacity × getReserveRatio, the ratio (100 − thr)/100 taken
    first as Go does (float64, truncated); a threshold above 100 gives a negative margin."""
    return int(capacity * ((100 - reclaim_threshold_percent) / 100))


def batch_allocatable(
    capacity: int,
    reclaim_threshold_percent: float,
    system_used: int,
    reserved: int,
    hp: HPSums,
    policy: str = "usage",
    threshold_percent: float | None = None,
) -> int:
    """§5.3 in the resource's integer unit (millicores, bytes); `threshold_percent`
    (batchCPUThresholdPercent / batchMemoryThresholdPercent) caps it at that share of
    capacity (`CalculateBatchResourceByPolicy`)."""
    margin = safety_margin(capacity, reclaim_threshold_percent)
    system = max(system_used, reserved)
    if policy == "usage":
        out = max(capacity - margin - system - hp.used, 0)
    elif policy == "request":
        out = max(capacity - margin - reserved - hp.request, 0)
    elif policy == "maxUsageRequest":
        out = max(capacity - margin - system - hp.max_used_req, 0)
    else:
        raise ValueError(f"unknown calculate policy {policy!r} (usage, request, maxUsageRequest)")
    if threshold_percent is not None:
        out = min(out, int(capacity * (threshold_percent / 100)))
    return out


def needs_sync(old: int | None, new: int, since_s: float) -> bool:
    """`NeedSync`: patch the node when the value moved by more than 10% or 300 s passed."""
    if old is None:
        return True
    return abs(new - old) > old * DIFF_THRESHOLD or since_s >= UPDATE_TIME_THRESHOLD_S


# --- the Mid tier (slo-controller plugin midresource; util.CalculateMidResourceByPolicy) ----

Amount = tuple[int, int]  # (CPU millicores, memory bytes)
DEGRADE_TIME_MINUTES = 15  # DefaultColocationStrategy's degradeTimeMinutes


@dataclass(frozen=True)
class MidStrategy:
    """The ColocationStrategy's Mid-tier fields (DefaultColocationStrategy: thresholds 100,
    unallocated 0, static reserved 0, reclaim mode by policy)."""

    static: bool = False  # midReclaimMode "static"
    static_cpu_reserved_percent: int = 0
    static_memory_reserved_percent: int = 0
    cpu_threshold_percent: int = 100
    memory_threshold_percent: int = 100
    unallocated_percent: int = 0


def mid_degrade_needed(metric_age_s: float | None, degrade_minutes: int = DEGRADE_TIME_MINUTES) -> bool:
    """`isDegradeNeeded`: no NodeMetric (or no update time), or one older than
    degradeTimeMinutes: the Mid resources are reset (a NodeMetric without prod reclaimable
    is not degraded: it counts as 0)."""
    return metric_age_s is None or metric_age_s > degrade_minutes * 60


def mid_unallocated(capacity: Amount, kubelet_reserved: Amount, system_used: Amount, prod_requests: Amount) -> Amount:
    """`getUnallocated`: max(capacity − max(kubelet reserved, system used + host
    applications above mid) − Σ requests of the Running/Pending prod (or priority-less)
    pods, 0)."""
    cpu, memory = (max(capacity[i] - max(kubelet_reserved[i], system_used[i]) - prod_requests[i], 0) for i in (0, 1))
    return cpu, memory


def mid_allocatable(
    s: MidStrategy, capacity: Amount, unallocated: Amount, node_usage: Amount | None, prod_reclaimable: Amount | None
) -> Amount:
    """mid-cpu (millicores) and mid-memory (bytes):

        static:  min(capacity × staticReserved%, capacity × threshold%)
        policy:  min(min(prodReclaimable, capacity − node usage) + unallocated × unallocated%,
                     capacity × threshold%)

    prod reclaimable missing counts 0; node usage missing (invalid NodeMetric) leaves
    nothing unused. Float steps as upstream (int64(float64(x) × ratio))."""
    thresholds = (s.cpu_threshold_percent / 100, s.memory_threshold_percent / 100)
    if s.static:
        reserved = (s.static_cpu_reserved_percent / 100, s.static_memory_reserved_percent / 100)
        out = [int(capacity[i] * reserved[i]) for i in (0, 1)]
    else:
        unused = (0, 0) if node_usage is None else (capacity[0] - node_usage[0], capacity[1] - node_usage[1])
        reclaim = prod_reclaimable or (0, 0)
        ratio = s.unallocated_percent / 100
        out = [max(min(reclaim[i], unused[i]), 0) + int(unallocated[i] * ratio) for i in (0, 1)]
    return min(out[0], int(capacity[0] * thresholds[0])), min(out[1], int(capacity[1] * thresholds[1]))
