"""What a load generator prints of a service's latencies: the percentiles a user reads off
wrk or redis-benchmark are not the percentiles of the requests' latencies, and a prediction
judged against them must report the same way (docs/replay.md, "What wrk prints is not its requests' latencies").

- "exact": nearest-rank percentiles of every request's latency (the simulator's own, and
  the per-request records of pgbench -l and colosim-load).
- "wrk": wrk 4 corrects its latency histogram for coordinated omission before it prints
  it (wrk.c `main` → stats.c `stats_correct`): with `expected` = runtime_us /
  (complete / connections) — a connection's mean cycle, integer µs —, every recorded
  latency n ≥ 2·expected adds one phantom sample at each of n − expected, n − 2·expected,
  … while that is still above expected. `stats_percentile` then takes rank
  round(p/100 · count + 0.5) over the corrected histogram (1 µs bins). A few stalls of many
  cycles add many phantoms: wrk's P90 and P99 can exceed what Little's law allows the
  real requests (the host's nginx beside a SCHED_IDLE hog printed a P90 of 2.2 ms at
  42,300 requests/s on 10 connections, whose mean latency cannot pass 236 µs).
- "redis-benchmark": replay runs it with -l and -n REDIS_BATCH and reads one CSV line per
  batch; each percentile is the mean over whole batches of that batch's percentile
  (replay.workloads.parse_redis_csv), so one slow batch weighs a whole batch's tail.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

import numpy as np

Report = Literal["exact", "wrk", "redis-benchmark"]

# the requests of one redis-benchmark -l line (-n with -l): ~0.3 s at ~150k GET/s, ~1 s at
# the fidelity suite's ~46k
REDIS_BATCH = 50_000


def nearest_rank(sorted_values: np.ndarray, p: float) -> float:
    """The p-th percentile by nearest rank: the smallest value with at least p% of the values
    at or below it.  Exact, no interpolation; NaN when there are no values."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    # Fraction: 99.9 / 100 * 1000 must be 999, not 999.0000000000001 rounded up to 1000.
    rank = max(1, math.ceil(Fraction(str(p)) * n / 100))
    return float(sorted_values[rank - 1])


def wrk_interval_us(runtime_us: int, requests: int, connections: int) -> int:
    """wrk's `interval`: runtime_us / (complete / connections), both divisions integer; 0
    when fewer requests completed than there are connections (wrk corrects nothing then)."""
    per_connection = requests // connections if connections > 0 else 0
    return runtime_us // per_connection if per_connection > 0 else 0


def wrk_histogram(latencies_s: np.ndarray, expected_us: int) -> np.ndarray:
    """wrk's latency histogram (counts per whole µs, index = µs) after `stats_correct` with
    `expected_us`. A latency L ≥ 2e (e = expected_us) adds K = (L − e − 1) // e phantoms, at
    L − e, L − 2e, …, L − K·e (each still > e); summed per bin by a stride-e cumulative sum
    of +1 at L − e and −1 at L − (K + 1)·e, the first step past the last phantom."""
    # whole µs as wrk's time_us() differences are (the epsilon keeps 200e-6 s at 200 µs)
    us = np.floor(np.asarray(latencies_s, dtype=np.float64) * 1e6 + 1e-6).astype(np.int64)
    if len(us) == 0:
        return np.zeros(0, dtype=np.int64)
    hist = np.bincount(us).astype(np.int64)
    e = expected_us
    if e <= 0:
        return hist
    long = us[us >= 2 * e]
    if len(long) == 0:
        return hist
    k = (long - e - 1) // e
    steps = np.zeros(len(hist) + e, dtype=np.int64)
    np.add.at(steps, long - e, 1)
    np.add.at(steps, long - (k + 1) * e, -1)
    rows = -(-len(steps) // e)
    strided = np.zeros(rows * e, dtype=np.int64)
    strided[: len(steps)] = steps
    # phantoms at m: the steps at m, m + e, m + 2e, … (a reverse cumulative sum down each
    # residue class mod e)
    phantoms = np.flip(np.cumsum(np.flip(strided.reshape(rows, e), axis=0), axis=0), axis=0).reshape(-1)
    return hist + phantoms[: len(hist)]


def wrk_percentile(hist: np.ndarray, p: float) -> float:
    """`stats_percentile`: the first µs bin whose running count reaches
    round(p/100 · count + 0.5), in seconds (NaN for an empty histogram)."""
    count = int(hist.sum())
    if count == 0:
        return math.nan
    rank = int(np.floor(p / 100 * count + 0.5 + 0.5))  # C's round() of a positive value
    i = int(np.searchsorted(np.cumsum(hist), max(rank, 1)))
    return min(i, len(hist) - 1) / 1e6


def batch_mean_percentile(latencies_s: np.ndarray, p: float, batch: int = REDIS_BATCH) -> float:
    """The mean over the whole batches of `batch` requests (in completion order) of each
    batch's nearest-rank percentile; all the requests as one batch when none is whole (a
    shortened calibration run)."""
    lat = np.asarray(latencies_s, dtype=np.float64)
    whole = len(lat) // batch
    if whole == 0:
        return nearest_rank(np.sort(lat), p)
    chunks = np.sort(lat[: whole * batch].reshape(whole, batch), axis=1)
    return float(np.mean([nearest_rank(c, p) for c in chunks]))
