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
