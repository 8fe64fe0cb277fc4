"""The simulator's wake-to-run delay histograms (`CgroupResult.runqlat`, BCC runqlat's log2 µs
buckets, sim/runqlat.py), checked against what the scheduler's arithmetic promises.

One CPU, HZ 1000, base_slice 0.7 ms (tests/test_custom_slice.py works it): a light service
waking beside a hog in a sibling cgroup either preempts at once or waits for the next tick,
so a wakeup waits less than a tick (1 ms), or — behind V by its lag — rarely one more; alone, on an idle CPU, it never waits (the model has no
idle-exit latency). Every wakeup is counted once: the worker wakes for each request that
finds it idle.
"""

from __future__ import annotations

from pathlib import Path

import beside_hog
import pytest

from sim import runqlat
from sim.results import RunResult

pytest.importorskip("sim._core")


def run(tmp_path: Path, hog: bool) -> RunResult:
    kernel = 'version = "6.18"\nhz = 1000'
    enabled = f"enabled = {'true' if hog else 'false'}"
    path = beside_hog.write(
        tmp_path, name="runqlat", duration="10s", cpus=1, kernel=kernel, rate=200, service="50us", hogs=1, hog_extra=enabled
    )
    return beside_hog.run(path)


def test_buckets_are_runqlats() -> None:
    assert [runqlat.bucket(us) for us in (0, 0.9, 1, 1.99, 2, 3, 4, 1023, 1024)] == [0, 0, 1, 1, 2, 2, 3, 10, 11]
    assert runqlat.bucket(1e12) == runqlat.BUCKETS - 1
    hist = [0] * runqlat.BUCKETS
    hist[3], hist[10] = 98, 2  # 98 in [4, 8) µs, 2 in [512, 1024) µs
    assert runqlat.percentile(hist, 0.5) == 8
    assert runqlat.percentile(hist, 0.98) == 8
    assert runqlat.percentile(hist, 0.99) == 1024


def test_a_service_beside_a_hog_never_waits_a_tick_and_every_wakeup_is_counted(tmp_path: Path) -> None:
    r = run(tmp_path, hog=True)
    hist = r.cgroups["ls"].runqlat
    assert hist is not None and len(hist) == runqlat.BUCKETS
    completed = r.services["web"].completed
    assert 0.97 * completed <= sum(hist) <= completed + 1
    # at most the next tick (a waker behind V by its lag may miss one more): none reaches
    # 2048 µs, and next to none 1024 µs
    assert sum(hist[12:]) == 0
    assert sum(hist[11:]) <= 0.005 * sum(hist)
    assert sum(hist[9:]) >= 0.02 * sum(hist), "some wakeups do wait for the tick"
    # the service's tail is its wait plus its 50 µs: the histogram's P99 bounds it
    assert runqlat.percentile(hist, 0.99) >= r.services["web"].p99_s * 1e6 - 50


def test_alone_on_an_idle_cpu_no_wakeup_waits(tmp_path: Path) -> None:
    r = run(tmp_path, hog=False)
    hist = r.cgroups["ls"].runqlat
    assert hist is not None and hist[0] == sum(hist)
    assert 0.97 * r.services["web"].completed <= sum(hist) <= r.services["web"].completed + 1
