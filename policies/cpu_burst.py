"""Koordinator's CPU burst (koordlet qosmanager plugin `cpuburst`;
../shared/reference/koordinator.md §2): a static cpu.cfs_burst_us of cpuBurstPercent × limit,
and the CFS-quota burst state machine — each round a container's quota is scaled ×1.2 when it
was throttled and the node's share pool is idle, ×0.8 when the pool is overloaded or the
container's token bucket is spent, kept otherwise, and held in [base, base × cfsQuotaBurstPercent].
Pure functions, tested against hand-worked cases.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

CFS_PERIOD_US = 100_000
CPU_BURST_PERCENT = 1000  # static burst = 10 × limit
CFS_QUOTA_BURST_PERCENT = 300  # quota ceiling = 3 × limit
SHARE_POOL_THRESHOLD_PERCENT = 50


class PoolState(enum.Enum):
    OVERLOAD = "overload"
    COOLING = "cooling"
    IDLE = "idle"
    UNKNOWN = "unknown"


class Op(enum.Enum):
    SCALE_UP = "scaleUp"
    SCALE_DOWN = "scaleDown"
    REMAIN = "remain"
    RESET = "reset"


def static_burst_us(limit_cores: float, cpu_burst_percent: float = CPU_BURST_PERCENT) -> int:
    """`calcStaticCPUBurstVal`: cpu.cfs_burst_us = limit × cpuBurstPercent / 100 × period."""
    return int(limit_cores * cpu_burst_percent / 100 * CFS_PERIOD_US)


def container_static_burst_us(policy: str, limit_cores: float, cpu_burst_percent: float = CPU_BURST_PERCENT) -> int:
    """`calcStaticCPUBurstVal`: the container's cfs_burst_us — 0 without the static part
    (policy none or cfsQuotaBurstOnly) or without a CPU limit. The pod's is the sum."""
    if policy not in ("cpuBurstOnly", "auto") or limit_cores <= 0:
        return 0
    return static_burst_us(limit_cores, cpu_burst_percent)


def pool_state(share_pool_cpus: float, share_pool_usage: float, threshold_percent: float = SHARE_POOL_THRESHOLD_PERCENT) -> PoolState:
    """`getNodeStateForBurst`: how busy the share pool (CPUs not reserved by LSE/LSR pods) is."""
    ratio = share_pool_usage / share_pool_cpus if share_pool_cpus > 0 else 1.0
    thr = threshold_percent / 100
    if ratio >= thr:
        return PoolState.OVERLOAD
    if ratio >= 0.9 * thr:
        return PoolState.COOLING
    return PoolState.IDLE


def node_state(
    ncpus: int | None,
    node_used: float | None,
    pods: list[tuple[str, float, float | None]],
    threshold_percent: float = SHARE_POOL_THRESHOLD_PERCENT,
) -> PoolState:
    """`getNodeStateForBurst` from its inputs: the node's logical CPUs and CPU usage (None
    when there is no CPU info or no metric: unknown) and each pod's (koord QoS, CPU request
    cores, usage or None). The share pool is the node less LSE/LSR requests; its usage the
    node's less LSE/LSR/BE pods' (system usage stays in, conservatively)."""
    if ncpus is None or node_used is None:
        return PoolState.UNKNOWN
    total, usage = float(ncpus), node_used
    for qos, request, used in pods:
        if qos in ("LSE", "LSR"):
            total -= request
        if used is not None and qos in ("LSE", "LSR", "BE"):
            usage -= used
    return pool_state(total, usage, threshold_percent)


def container_op(quota_burst_on: bool, allowed: bool, throttle_ratio: float | None) -> Op:
    """`genOperationByContainer`."""
    if not quota_burst_on:
        return Op.RESET
    if not allowed:
        return Op.SCALE_DOWN
    if throttle_ratio is not None and throttle_ratio > 0:
        return Op.SCALE_UP
    return Op.REMAIN


def node_override(op: Op, state: PoolState) -> Op:
    """`changeOperationByNode`: an overloaded pool turns scale-up and remain into scale-down;
    a cooling or unknown one holds scale-up back."""
    if state is PoolState.OVERLOAD and op in (Op.SCALE_UP, Op.REMAIN):
        return Op.SCALE_DOWN
    if state in (PoolState.COOLING, PoolState.UNKNOWN) and op is Op.SCALE_UP:
        return Op.REMAIN
    return op


def target_quota(op: Op, current: int, base: int, ceil: int) -> int:
    """×1.2 up, ×0.8 down, base on reset, kept on remain; clamped to [base, ceil]."""
    target = {
        Op.SCALE_UP: int(current * 1.2),
        Op.SCALE_DOWN: int(current * 0.8),
        Op.RESET: base,
        Op.REMAIN: current,
    }[op]
    return max(base, min(target, ceil))


def quota_ceiling(base: int, cfs_quota_burst_percent: float = CFS_QUOTA_BURST_PERCENT) -> int:
    return int(base * cfs_quota_burst_percent / 100) if cfs_quota_burst_percent > 100 else base


@dataclass
class Limiter:
    """`burstLimiter`: a token bucket per container bounding how long it may stay boosted.
    With no period (< 0, the default) it allows everything; with a percent below 100 nothing."""

    period_s: float
    percent: float
    tokens: float = 0.0

    @property
    def capacity(self) -> float:
        return self.period_s * (self.percent - 100)

    def allow(self, usage_percent: int, dt_s: float) -> bool:
        if self.period_s < 0:
            return True
        if self.percent < 100:
            return False
        if usage_percent >= 100:
            self.tokens -= (usage_percent - 100) * int(dt_s)
        elif usage_percent < 60:
            self.tokens += (100 - usage_percent) * int(dt_s)
        self.tokens = max(-self.capacity, min(self.tokens, self.capacity))
        return self.tokens > 0


def quota_burst_enabled(policy: str) -> bool:
    """`cfsQuotaBurstEnabled`: the CFS-quota burst part is on for cfsQuotaBurstOnly and auto."""
    return policy in ("cfsQuotaBurstOnly", "auto")


@dataclass(frozen=True)
class ContainerQuota:
    """One running container as `applyCFSQuotaBurst` sees it."""

    base: int  # MilliCPUToQuota(limit) µs; ≤ 0 (no limit): the container is skipped
    current: int  # its cpu.cfs_quota_us now
    throttle_ratio: float | None  # last nr_throttled/nr_periods sample; None: no sample
    allowed: bool = True  # what its burst limiter said this round


def apply_cfs_quota_burst(
    policy: str, cfs_quota_burst_percent: float, containers: list[ContainerQuota], pod_quota: int, state: PoolState
) -> tuple[int, list[int]]:
    """`applyCFSQuotaBurst` for one pod: each container's next quota and the pod's. With the
    quota burst off (policy none or cpuBurstOnly) the operation is `reset`, so a quota raised
    earlier returns to the limit (koordlet's cfsReset). The pod quota moves by the same delta
    as each container; a pod quota ≤ 0 (unlimited) is left alone."""
    out = []
    for c in containers:
        if c.base <= 0:
            out.append(c.current)
            continue
        op = node_override(container_op(quota_burst_enabled(policy), c.allowed, c.throttle_ratio), state)
        target = target_quota(op, c.current, c.base, quota_ceiling(c.base, cfs_quota_burst_percent))
        if pod_quota > 0:
            pod_quota += target - c.current
        out.append(target)
    return pod_quota, out
