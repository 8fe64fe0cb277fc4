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


def hp_sums(pods: Iterable[Pod], usage: Mapping[str, float | None], resource: str = "cpu") -> HPSums:
    """§5.2: Σ over high-priority pods of usage (request if no metric; LSE CPU: request),
    request, and max(request, usage) — a pod without a metric is left out of the last (the
    node-level quirk)."""
    used = request = maxur = 0
    for p in pods:
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
    return HPSums(used, request, maxur)


def batch_allocatable(
    capacity: int,
    reclaim_threshold_percent: float,
    system_used: int,
    reserved: int,
    hp: HPSums,
    policy: str = "usage",
) -> int:
    """§5.3 in the resource's integer unit (millicores, bytes)."""
    margin = int(capacity * (100 - reclaim_threshold_percent) / 100)
    system = max(system_used, reserved)
    if policy == "usage":
        return max(capacity - margin - system - hp.used, 0)
    if policy == "request":
        return max(capacity - margin - reserved - hp.request, 0)
    if policy == "maxUsageRequest":
        return max(capacity - margin - system - hp.max_used_req, 0)
    raise ValueError(f"unknown calculate policy {policy!r} (usage, request, maxUsageRequest)")


def needs_sync(old: int | None, new: int, since_s: float) -> bool:
    """`NeedSync`: patch the node when the value moved by more than 10% or 300 s passed."""
    if old is None:
        return True
    return abs(new - old) > old * DIFF_THRESHOLD or since_s >= UPDATE_TIME_THRESHOLD_S
