"""wrk 4's correction for coordinated omission, transcribed from its C (src/wrk.c `main`,
src/stats.c `stats_correct`) as the reference the tests of sim/reported.py and
replay/shape_estimate.py hold their code to: with e = runtime_us / (requests / connections),
each bin n from 2e up adds its count to n - e, n - 2e, ... while that is above e (bins below n,
visited already, so nothing compounds)."""

from __future__ import annotations


def wrk_correct(data: dict[int, int], runtime_us: int, requests: int, connections: int) -> dict[int, int]:
    out = dict(data)
    expected = runtime_us // (requests // connections)
    for n in range(2 * expected, max(data) + 1):
        count = out.get(n, 0)
        m = n - expected
        while count and m > expected:
            out[m] = out.get(m, 0) + count
            m -= expected
    return out
