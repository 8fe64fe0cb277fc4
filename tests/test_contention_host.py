"""The shared-hardware experiment on this host (replay/contention_host.py): nginx + wrk beside
`stress --cpu 1`, alone, in the shared and split arrangements, 3 interleaved rounds of 4 s.

What the mechanisms promise, and nothing about an idle machine:
- cpuset.cpus confines: in the split arrangement the service's cgroup never runs on CPU 1 and
  the antagonist's never on CPU 0 (cpuacct.usage_percpu, which sees the antagonist's CPU on
  CPU 1), while in the shared one the service's cgroup may use either (its per-CPU figures add
  up to its CPU);
- the pure-CPU control: `stress --cpu` (a sqrt loop in registers) on the other CPU shares no
  CPU time and no cache footprint to speak of with the service, so it does not make the
  service's requests per CPU-second worse than alone (median over rounds at least 0.8).

Why only a lower bound: a clean-clone CI beside `stress --cpu 1` saw 1.04/1.40/1.31 (stop 36),
while the same cases beside the same stress here gave 0.98/0.99/0.99 (2026-12-07). The likely
cause is the host's own load pushed onto CPU 0 by the antagonist pinned to CPU 1, where nginx
and wrk then run in time slices and batch more requests per epoll pass, which is cheaper per
request. Whatever its cause, more work per CPU-second is not interference; a shared-hardware
channel (an SMT sibling, a shared cache or memory bus) could only lower it."""

from __future__ import annotations

import statistics

import pytest
from host_replay import unavailable

from replay.contention_host import NONE, Case, measure, ratios

REASON = unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"host replay unavailable: {REASON}")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    case_list = [Case("nginx", a, arr) for arr in ("shared", "split") for a in (NONE, "cpu")]
    return measure(case_list, reps=3, seconds=4.0, seed=7, say=lambda m: None, wait_s=600)


def test_split_cpusets_confine_each_side_to_its_cpu(rows):
    split = [r for r in rows if r["case"].endswith("/split")]
    assert len(split) == 6
    if not split[0]["service_percpu"]:
        pytest.skip("no per-CPU usage on this host (cgroup v2 has no cpuacct.usage_percpu)")
    for r in split:
        assert r["service_cpu"] > 0.02, r  # it ran (the test can tell)
        assert r["service_percpu"][1] <= 0.01 * r["service_cpu"] + 1e-3, r
        if "antagonist_percpu" in r:
            assert r["antagonist_cpu"] > 0.02, r
            assert r["antagonist_percpu"][0] <= 0.01 * r["antagonist_cpu"] + 1e-3, r
            # the per-CPU figures see CPU 1: the antagonist's CPU there is all of its CPU
            assert r["antagonist_percpu"][1] == pytest.approx(r["antagonist_cpu"], rel=0.02, abs=1e-3), r
    # unconfined, the service may run on either CPU, and the per-CPU figures add up to its
    # CPU. Whether it uses both is the kernel's choice: beside CI's `stress --cpu 1` nginx and
    # wrk stayed on one CPU in all six shared rounds (2026-12-07), so that is not asserted.
    for r in (r for r in rows if r["case"].endswith("/shared")):
        assert sum(r["service_percpu"]) == pytest.approx(r["service_cpu"], rel=0.02, abs=1e-3), r


def test_pure_cpu_antagonist_on_the_other_cpu_leaves_work_per_cpu_second(rows):
    r = ratios(rows)["nginx/cpu/split"]["service_per_cpu"]
    assert len(r) == 3
    assert statistics.median(r) >= 0.8, r
