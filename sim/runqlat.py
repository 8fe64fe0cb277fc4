"""Wake-to-run delay histograms ("scheduling delay", BCC's runqlat), one definition for the
simulator's counts (core_rs/model/src/stats.rs `runqlat_bucket`) and the host's (replay's
tracer): bucket index = the bit length of the delay in whole µs — 0 under 1 µs, k for
[2^(k-1), 2^k) µs — and the last of BUCKETS open-ended."""

from __future__ import annotations

import math
from collections.abc import Sequence

BUCKETS = 24


def bucket(us: float) -> int:
    """The bucket of a delay of `us` microseconds (whole µs count, as runqlat's bpf_log2l)."""
    return min(max(int(us), 0).bit_length(), BUCKETS - 1)


def lower_us(k: int) -> float:
    """The inclusive lower edge of bucket k in µs."""
    return 0.0 if k == 0 else float(2 ** (k - 1))


def upper_us(k: int) -> float:
    """The exclusive upper edge of bucket k in µs (inf for the open-ended last one)."""
    return math.inf if k >= BUCKETS - 1 else float(2**k)


def percentile(hist: Sequence[int], q: float) -> float:
    """The q-quantile (0 < q ≤ 1) as the upper edge of the bucket holding the ceil(q·count)-th
    smallest delay: the delay is below it and at least half of it (a log2 histogram knows no
    better); inf when that is the open-ended bucket, NaN for an empty histogram."""
    count = sum(hist)
    if count == 0:
        return math.nan
    rank = max(1, math.ceil(q * count))
    seen = 0
    for k, n in enumerate(hist):
        seen += n
        if seen >= rank:
            return upper_us(k)
    return upper_us(len(hist) - 1)
