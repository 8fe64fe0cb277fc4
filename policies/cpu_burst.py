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


def pool_state(share_pool_cpus: float, share_pool_usage: float, threshold_percent: float = SHARE_POOL_THRESHOLD_PERCENT) -> PoolState:
    """`getNodeStateForBurst`: how busy the share pool (CPUs not reserved by LSE/LSR pods) is."""
    ratio = share_pool_usage / share_pool_cpus if share_pool_cpus > 0 else 1.0
    thr = threshold_percent / 100
    if ratio >= thr:
        return PoolState.OVERLOAD
    if ratio >= 0.9 * thr:
        return PoolState.COOLING
    return PoolState.IDLE


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
