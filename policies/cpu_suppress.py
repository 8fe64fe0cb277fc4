"""Koordinator's CPU suppress (koordlet qosmanager plugin `cpusuppress`;
../shared/reference/koordinator.md §1): every second, how much CPU best-effort pods may use is

    suppress = capacity × cpuSuppressThresholdPercent − LS pods' usage − system usage

(system usage = node usage − pods' usage, at least the node's reservation), and it is enforced
either by shrinking the BE cpuset (`cpuset` policy: ceil(suppress) CPUs, at least 2, growing by
at most 10% of the CPUs per round, picked HT-pair-first across NUMA/socket buckets) or by the
besteffort QoS directory's CFS quota (`cfsQuota` policy: at least 2000 µs, moves smaller than 1%
of capacity ignored, growth at most 10% of capacity per round). These functions are pure and
tested against hand-worked cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from policies.cgroup import Cpu

BE_MIN_CPUSET_CORES = 2  # beMinCPUSetCores
BE_MIN_QUOTA_US = 2000  # beMinQuota
CFS_PERIOD_US = 100_000


def suppress_milli(
    capacity_cpus: int,
    threshold_percent: float,
    ls_used: float,
    node_used: float,
    pods_used: float,
    reserved: float = 0.0,
    min_percent: float | None = None,
) -> int:
    """`calculateBESuppressCPU`: the millicores BE may use (may be negative before a minimum)."""
    system_used = max(node_used - pods_used, 0.0)
    system_used = max(system_used, reserved)
    capacity_milli = capacity_cpus * 1000
    milli = int(capacity_milli * threshold_percent // 100) - int(ls_used * 1000) - int(system_used * 1000)
    if min_percent is not None:
        milli = max(milli, int(capacity_milli * min_percent // 100))
    return milli


def cpuset_size(milli: int, old_size: int, nprocs: int) -> int:
    """`adjustByCPUSet` step 2: ceil(suppress) CPUs, at least 2; scale-up limited to
    ceil(10% of processors) per round, scale-down not limited."""
    cpus = max(math.ceil(milli / 1000), BE_MIN_CPUSET_CORES)
    step = math.ceil(0.1 * nprocs)
    if cpus - old_size > step:
        cpus = old_size + step
    return cpus


def pick_cpus(pool: Sequence[Cpu], need: int) -> list[int]:
    """`calculateBESuppressCPUSetPolicy`: CPUs for BE from `pool`, HT sibling pairs first,
    round-robin over (NUMA node, socket) buckets; empty if the pool is too small."""
    if len(pool) < need:
        return []
    n = len(pool)
    buckets: dict[int, list[Cpu]] = {}
    for c in pool:
        buckets.setdefault((c.node + n) * (c.socket + 1), []).append(c)
    ordered = [sorted(b, key=lambda c: (c.core, c.cpu)) for b in buckets.values()]
    ordered.sort(key=lambda b: (-len(b), b[0].cpu))
    used: set[int] = set()
    out: list[int] = []
    i = 0
    # Pair phase: round-robin, one HT sibling pair per bucket, while two or more CPUs are
    # needed; a whole round (checked at bucket 0) that picks nothing ends it. As in Go's
    # `for ; ; i = (i+1) % len` loop, the index advances past the bucket of the last pair
    # before the need is tested, so the single phase starts at the *next* bucket.
    before = -1
    while need > 1:
        if i == 0:
            if before == need:
                break
            before = need
        b = ordered[i]
        for a, c in zip(b, b[1:], strict=False):
            if a.cpu not in used and a.core == c.core:
                used.update((a.cpu, c.cpu))
                out += [a.cpu, c.cpu]
                need -= 2
                break
        i = (i + 1) % len(ordered)
    # Single phase: the first unused CPU of each bucket, round-robin from where the pair
    # phase stopped; a whole round from that start picking nothing ends it.
    before, start = -1, i
    while need > 0:
        if i == start:
            if before == need:
                break
            before = need
        free = [c for c in ordered[i] if c.cpu not in used]
        if free:
            used.add(free[0].cpu)
            out.append(free[0].cpu)
            need -= 1
        i = (i + 1) % len(ordered)
    return out


def cfs_quota(milli: int, current: int, capacity_cpus: int) -> int:
    """`adjustByCfsQuota`: the besteffort directory's next cpu.cfs_quota_us."""
    new = max(milli * CFS_PERIOD_US // 1000, BE_MIN_QUOTA_US)
    min_delta = capacity_cpus * CFS_PERIOD_US * 0.01
    if abs(new - current) < min_delta and new != BE_MIN_QUOTA_US:
        return current
    max_inc = capacity_cpus * CFS_PERIOD_US * 0.1
    if new - current > max_inc and current != -1:
        new = current + int(max_inc)
    return new


def be_cpuset(
    cpus: Sequence[Cpu],
    size: int,
    lsr: AbstractSet[int] = frozenset(),
    lse: AbstractSet[int] = frozenset(),
    reserved: AbstractSet[int] = frozenset(),
) -> list[int]:
    """`adjustByCPUSet` steps 1 and 3: candidates are all CPUs but the reserved ones; those
    bound to LSR pods form the LSR pool, the rest (minus LSE pods' CPUs) the LS pool; BE gets
    floor(size × |LSR| / (|LSR| + |LS|)) CPUs from the LSR pool and the rest from the LS
    pool, each picked by `pick_cpus` (a pool too small gives nothing)."""
    pool_lsr = [c for c in cpus if c.cpu not in reserved and c.cpu in lsr]
    pool_ls = [c for c in cpus if c.cpu not in reserved and c.cpu not in lsr and c.cpu not in lse]
    total = len(pool_lsr) + len(pool_ls)
    if total == 0:
        return []  # koordlet divides by zero here; nothing to give BE
    lsr_n = size * len(pool_lsr) // total
    return pick_cpus(pool_lsr, lsr_n) + pick_cpus(pool_ls, size - lsr_n)
