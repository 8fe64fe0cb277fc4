"""koordlet's CPU burst (qosmanager plugin cpuburst) against its own unit tests,
pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst_test.go at koordinator a7a1b76.
Quotas in µs (period 100000), limits in cores."""

from __future__ import annotations

import pytest
from koord_cases import case

from policies.cpu_burst import ContainerQuota, Limiter, PoolState, apply_cfs_quota_burst, container_static_burst_us, node_state

F = "pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst_test.go"
P = 100_000
IDLE, COOLING, OVERLOAD = PoolState.IDLE, PoolState.COOLING, PoolState.OVERLOAD
AUTO = ("auto", 300, -1)  # defaultAutoBurstCfg: policy, cfsQuotaBurstPercent, cfsQuotaBurstPeriodSeconds

# TestCPUBurst_applyCFSQuotaBurst: (subcase, (policy, cfsQuotaBurstPercent, period s), node
# state, pod quota, [(container limit cores or 0, its quota, last throttle ratio)], want pod
# quota, want container quotas). Container usage is 1.5 cores where upstream gives one.
# Upstream writes wants as int64(2 * 1.2 * float64(period)): Go folds the constant 2 * 1.2
# exactly (2.4) before the run-time product, so the folded constant is written here.
CFS = [
    ("scale-reset-for-burst-config-disabled-on-idle-state", ("cpuBurstOnly", 300, -1), IDLE, 4 * P, [(2, 4 * P, 0.5)], 2 * P, [2 * P]),
    ("scale-remain-for-throttled-pod-on-cooling-state", AUTO, COOLING, 4 * P, [(2, 4 * P, 0.5)], 4 * P, [4 * P]),
    ("scale-down-to-base-for-throttled-pod-on-overload-state", AUTO, OVERLOAD, int(2.02 * P), [(2, int(2.02 * P), 0.5)], 2 * P, [2 * P]),
    ("scale-down-for-throttled-pod-on-overload-state", AUTO, OVERLOAD, 4 * P, [(2, 4 * P, 0.5)], int(3.2 * P), [int(3.2 * P)]),
    (
        "scale-down-because-burst-period-config-zero-on-idle-state",
        ("auto", 300, 0),
        IDLE,
        4 * P,
        [(2, 4 * P, 0.5)],
        int(3.2 * P),
        [int(3.2 * P)],
    ),
    ("scale-reset-because-burst-percent-config-illegal-on-idle-state", ("auto", 90, -1), IDLE, 4 * P, [(2, 4 * P, 0.5)], 2 * P, [2 * P]),
    ("scale-remain-because-not-throttled-on-idle-state", AUTO, IDLE, int(5.8 * P), [(2, int(5.8 * P), 0.0)], int(5.8 * P), [int(5.8 * P)]),
    ("scale-up-limit-by-ceil-on-idle-state", AUTO, IDLE, int(5.8 * P), [(2, int(5.8 * P), 0.5)], 6 * P, [6 * P]),
    ("scale-up-from-base-on-idle-state", AUTO, IDLE, 2 * P, [(2, 2 * P, 0.5)], int(2.4 * P), [int(2.4 * P)]),
    (
        "scale-up-two-container-from-base-on-idle-state",
        AUTO,
        IDLE,
        5 * P,
        [(2, 2 * P, 0.5), (3, 3 * P, 0.5)],
        int(6.0 * P),
        [int(2.4 * P), int(3.6 * P)],
    ),
    (
        "scale-up-one-container-in-unlimited-pod-from-base-on-idle-state",
        AUTO,
        IDLE,
        -1,
        [(2, 2 * P, 0.5), (0, -1, 0.5)],
        -1,
        [int(2.4 * P), -1],
    ),
]


@pytest.mark.parametrize(
    ("cfg", "state", "pod", "containers", "want_pod", "want"), [case(F, "TestCPUBurst_applyCFSQuotaBurst", *row) for row in CFS]
)
def test_apply_cfs_quota_burst(
    cfg: tuple[str, int, int], state: PoolState, pod: int, containers: list[tuple[int, int, float]], want_pod: int, want: list[int]
) -> None:
    policy, percent, period = cfg
    quotas = []
    for limit, current, throttled in containers:
        # cfsBurstAllowedByLimiter: a fresh limiter (tokens start at 0 here; upstream draws
        # them in [0, capacity/2) — every case's outcome is the same for any draw), one
        # reconcile second, usage 1.5 cores of the limit
        allowed = Limiter(period, percent).allow(int(1.5 / limit * 100) if limit else 100, 1.0) if limit else True
        quotas.append(ContainerQuota(limit * P, current, throttled, allowed))
    assert apply_cfs_quota_burst(policy, percent, quotas, pod, state) == (want_pod, want)


# TestCPUBurst_applyCPUBurst: (subcase, policy, cpuBurstPercent, container limits, want
# container cfs_burst_us, want pod's = their sum)
STATIC = [
    ("apply-by-default-burst-config", "auto", 1000, [5, 3], [5 * 10 * P, 3 * 10 * P], (5 + 3) * 10 * P),
    ("apply-by-specified-burst-config", "auto", 500, [5, 3], [5 * 5 * P, 3 * 5 * P], (5 + 3) * 5 * P),
    ("apply-by-disabled-burst-config", "cfsQuotaBurstOnly", 500, [5, 3], [0, 0], 0),
    ("apply-by-unlimited-container", "auto", 1000, [0, 0], [0, 0], 0),
]


@pytest.mark.parametrize(
    ("policy", "percent", "limits", "want", "want_pod"), [case(F, "TestCPUBurst_applyCPUBurst", *row) for row in STATIC]
)
def test_apply_cpu_burst(policy: str, percent: int, limits: list[int], want: list[int], want_pod: int) -> None:
    got = [container_static_burst_us(policy, limit, percent) for limit in limits]
    assert (got, sum(got)) == (want, want_pod)


# Test_burstLimiter_Allow: (subcase, period s, max scale percent, initial token ratio of
# capacity, seconds since the last update, usage percent, want allowed, want tokens)
LIMITER = [
    ("consume-enough-token-with-full-init", 100, 150, 1.0, 10, 150, True, 4500),
    ("consume-not-enough-token-with-part-init", 100, 150, 0.01, 10, 200, False, -950),
    ("consume-not-enough-token-to-bottom-with-part-init", 10, 150, 0.01, 10, 200, False, -500),
    ("accumulate-token-with-part-init", 100, 150, 0.1, 10, 40, True, 1100),
    ("accumulate-token-to-ceil-with-part-init", 100, 150, 0.9, 10, 40, True, 5000),
]


@pytest.mark.parametrize(
    ("period", "percent", "ratio", "dt", "usage", "allowed", "tokens"), [case(F, "Test_burstLimiter_Allow", *row) for row in LIMITER]
)
def test_burst_limiter(period: int, percent: int, ratio: float, dt: int, usage: int, allowed: bool, tokens: int) -> None:
    lim = Limiter(period, percent)
    lim.tokens = int(lim.capacity * ratio)
    assert lim.allow(usage, dt) is allowed
    assert lim.tokens == tokens


# TestCPUBurst_getNodeStateForBurst on the tests' 16-CPU node, threshold 50%: (subcase,
# logical CPUs or None, node usage or None, [(QoS, request cores, usage)], want)
STATE = [
    ("get-unknown-status-because-of-nil-node-metric", 16, None, [], PoolState.UNKNOWN),
    ("get-unknown-status-because-of-lack-node-info", None, 6.0, [], PoolState.UNKNOWN),
    ("get-idle-status-with-lsr-pod", 16, 10.0, [("LSR", 8.0, 7.0), ("LS", 1.0, 0.2)], IDLE),
    ("get-overload-status-with-lsr-pod", 16, 10.0, [("LSR", 8.0, 5.0), ("LS", 3.0, 3.0)], OVERLOAD),
    ("get-cooling-status-with-lsr-pod", 16, 10.0, [("LSR", 8.0, 6.25), ("LS", 2.0, 1.0)], COOLING),
]


@pytest.mark.parametrize(("ncpus", "used", "pods", "want"), [case(F, "TestCPUBurst_getNodeStateForBurst", *row) for row in STATE])
def test_node_state(ncpus: int | None, used: float | None, pods: list[tuple[str, float, float]], want: PoolState) -> None:
    assert node_state(ncpus, used, pods, 50) is want
