"""Wake-to-run delay histograms ("scheduling delay", BCC's runqlat), one definition for the
simulator's counts (core_rs/model/src/stats.rs `runqlat_bucket`) and the host's (replay's
tracer): bucket index = the bit length of the delay in whole µs — 0 under 1 µs, k for
[2^(k-1), 2^k) µs — and the last of BUCKETS open-ended."""

from __future__ import annotations

import math
from collections.abc import Sequence

BUCKETS = 24


def bucket(us: float) -> int:
    """The bucket of a delay of `us` microseconds."""
    return min(int(us).bit_length(), BUCKETS - 1)


def lower_us(k: int) -> float:
    return 0.0 if k == 0 else float(2 ** (k - 1))


def upper_us(k: int) -> float:
    return math.inf if k >= BUCKETS - 1 else float(2**k)


def percentile(hist: Sequence[int], q: float) -> float:
    """The q-quantile (0 < q ≤ 1) as the upper bound of the bucket that holds it (the lower
    bound for the open-ended last bucket); NaN for an empty histogram."""
    total = sum(hist)
    if total == 0:
        return math.nan
    rank = q * total
    seen = 0
    for k, n in enumerate(hist):
        seen += n
        if seen >= rank and n:
            return upper_us(k) if k < BUCKETS - 1 else lower_us(k)
    return lower_us(len(hist) - 1)
