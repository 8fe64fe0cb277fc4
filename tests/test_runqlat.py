"""replay.runqlat: wake-to-run latency from the kernel's sched tracepoints.

Pure tests feed lines recorded from this host's trace_pipe (Linux 6.18, a trace instance on
the mono clock, 2026-11-25, a cargo build running) and check latencies worked by hand from
their timestamps. The host test runs a sleeper beside `stress --cpu 2` (on one CPU) and checks what the
mechanism promises: the sleeper's wakeups are seen, the histogram adds up, and nothing is
left behind (no instance, no holder).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from host_replay import unavailable

from replay import runqlat
from replay.compare import queue_metrics
from replay.runqlat import Accumulator, CgroupResolver, RunqLat
from sim import liveness
from sim.errors import HostError
from sim.runqlat import BUCKETS, bucket, percentile, upper_us

# Recorded (the first line: CPU 1's ring buffer of 4 KiB overflowed). Comms with a space
# ("opt cgu.04") or a dash ("scheduler-1dd5d") are the kernel's own.
RECORDED = """\
CPU:1 [LOST 1023 EVENTS]
      opt cgu.04-12267   [001] d..2. 61571.450994: sched_switch: prev_comm=opt cgu.04 prev_pid=12267 prev_prio=120 prev_state=R ==> next_comm=coordinator next_pid=12223 next_prio=120
     coordinator-12223   [001] d..3. 61571.451013: sched_wakeup: comm=rustc pid=12193 prio=120 target_cpu=001
     coordinator-12223   [001] d..2. 61571.451017: sched_switch: prev_comm=coordinator prev_pid=12223 prev_prio=120 prev_state=S ==> next_comm=cargo next_pid=12268 next_prio=120
           cargo-12268   [001] d..2. 61571.451063: sched_switch: prev_comm=cargo prev_pid=12268 prev_prio=120 prev_state=S ==> next_comm=rustc next_pid=12193 next_prio=120
 scheduler-1dd5d-12110   [000] d.s4. 61571.452034: sched_wakeup: comm=rcu_preempt pid=15 prio=120 target_cpu=001
           rustc-12193   [001] d..2. 61571.452090: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
     rcu_preempt-15      [001] d..2. 61571.452095: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=rustc next_pid=12193 next_prio=120
           rustc-12193   [001] dNh3. 61571.455821: sched_wakeup: comm=memfd:sealed-91 pid=14653 prio=120 target_cpu=001
           rustc-12193   [001] d..2. 61571.455835: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=memfd:sealed-91 next_pid=14653 next_prio=120
 memfd:sealed-91-14653   [001] d..2. 61571.455864: sched_switch: prev_comm=memfd:sealed-91 prev_pid=14653 prev_prio=120 prev_state=S ==> next_comm=clippy-driver next_pid=12269 next_prio=120
 scheduler-1dd5d-12110   [000] d.s4. 61571.460037: sched_wakeup: comm=rcu_preempt pid=15 prio=120 target_cpu=001
   clippy-driver-12269   [001] d..2. 61571.460092: sched_switch: prev_comm=clippy-driver prev_pid=12269 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
     rcu_preempt-15      [001] d..2. 61571.460097: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=opt cgu.04 next_pid=12267 next_prio=120
      opt cgu.04-12267   [001] d..3. 61571.460108: sched_wakeup: comm=coordinator pid=12223 prio=120 target_cpu=001
      opt cgu.04-12267   [001] d..2. 61571.460406: sched_switch: prev_comm=opt cgu.04 prev_pid=12267 prev_prio=120 prev_state=X ==> next_comm=coordinator next_pid=12223 next_prio=120
     coordinator-12223   [001] d..2. 61571.460412: sched_switch: prev_comm=coordinator prev_pid=12223 prev_prio=120 prev_state=S ==> next_comm=rustc next_pid=12193 next_prio=120
           rustc-12193   [001] dNs3. 61571.464083: sched_wakeup: comm=ksoftirqd/1 pid=22 prio=120 target_cpu=001
           rustc-12193   [001] d..2. 61571.464085: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=ksoftirqd/1 next_pid=22 next_prio=120
     ksoftirqd/1-22      [001] d..2. 61571.464120: sched_switch: prev_comm=ksoftirqd/1 prev_pid=22 prev_prio=120 prev_state=S ==> next_comm=clippy-driver next_pid=12269 next_prio=120
 scheduler-1dd5d-12110   [000] d.s4. 61571.468033: sched_wakeup: comm=rcu_preempt pid=15 prio=120 target_cpu=001
   clippy-driver-12269   [001] d..2. 61571.468087: sched_switch: prev_comm=clippy-driver prev_pid=12269 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
     rcu_preempt-15      [001] d..2. 61571.468093: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=rustc next_pid=12193 next_prio=120
           rustc-12193   [001] d..2. 61571.472074: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=clippy-driver next_pid=12269 next_prio=120
   clippy-driver-12269   [001] dN.2. 61571.473759: sched_wakeup_new: comm=clippy-driver pid=12270 prio=120 target_cpu=001
   clippy-driver-12269   [001] d..2. 61571.473766: sched_switch: prev_comm=clippy-driver prev_pid=12269 prev_prio=120 prev_state=S ==> next_comm=clippy-driver next_pid=12270 next_prio=120
           rustc-12270   [001] d..2. 61571.474042: sched_wakeup_new: comm=rustc pid=12271 prio=120 target_cpu=000
           rustc-12270   [001] dNh3. 61571.475019: sched_wakeup: comm=memfd:sealed-91 pid=10361 prio=120 target_cpu=001
           rustc-12270   [001] d..2. 61571.475035: sched_switch: prev_comm=rustc prev_pid=12270 prev_prio=120 prev_state=R ==> next_comm=memfd:sealed-91 next_pid=10361 next_prio=120
 memfd:sealed-91-10361   [001] d..2. 61571.475062: sched_switch: prev_comm=memfd:sealed-91 prev_pid=10361 prev_prio=120 prev_state=S ==> next_comm=rustc next_pid=12193 next_prio=120
 scheduler-1dd5d-12110   [000] dNs4. 61571.476039: sched_wakeup: comm=rcu_preempt pid=15 prio=120 target_cpu=001
 scheduler-1dd5d-12110   [000] d..2. 61571.476042: sched_switch: prev_comm=scheduler-1dd5d prev_pid=12110 prev_prio=120 prev_state=R ==> next_comm=rustc next_pid=12271 next_prio=120
           rustc-12193   [001] d..2. 61571.476070: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
     rcu_preempt-15      [001] d..2. 61571.476074: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=rustc next_pid=12270 next_prio=120
           rustc-12271   [000] d..2. 61571.476224: sched_switch: prev_comm=rustc prev_pid=12271 prev_prio=120 prev_state=S ==> next_comm=scheduler-1dd5d next_pid=12110 next_prio=120
           rustc-12270   [001] d..2. 61571.477464: sched_switch: prev_comm=rustc prev_pid=12270 prev_prio=120 prev_state=D ==> next_comm=rustc next_pid=12193 next_prio=120
           rustc-12193   [001] d.s4. 61571.477565: sched_wakeup: comm=rustc pid=12270 prio=120 target_cpu=001
           rustc-12193   [001] dNh3. 61571.480042: sched_wakeup: comm=memfd:sealed-91 pid=16175 prio=120 target_cpu=001
           rustc-12193   [001] d..2. 61571.480073: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=memfd:sealed-91 next_pid=16175 next_prio=120
 memfd:sealed-91-16175   [001] d..2. 61571.480099: sched_switch: prev_comm=memfd:sealed-91 prev_pid=16175 prev_prio=120 prev_state=S ==> next_comm=rustc next_pid=12270 next_prio=120
           rustc-12270   [001] dNs4. 61571.484054: sched_wakeup: comm=rcu_preempt pid=15 prio=120 target_cpu=001
           rustc-12270   [001] d..2. 61571.484056: sched_switch: prev_comm=rustc prev_pid=12270 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
     rcu_preempt-15      [001] d..2. 61571.484061: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=rustc next_pid=12193 next_prio=120
           rustc-12193   [001] dN.3. 61571.486799: sched_wakeup: comm=coordinator pid=12223 prio=120 target_cpu=001
           rustc-12193   [001] d..2. 61571.486800: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=coordinator next_pid=12223 next_prio=120
     coordinator-12223   [001] d..2. 61571.486856: sched_wakeup_new: comm=coordinator pid=12272 prio=120 target_cpu=000
     coordinator-12223   [001] d..2. 61571.486862: sched_switch: prev_comm=coordinator prev_pid=12223 prev_prio=120 prev_state=S ==> next_comm=rustc next_pid=12270 next_prio=120
"""

# hand-worked from the timestamps above (µs): wakeup → the sched_switch whose next_pid is the wakee
RCU = {15}
RUSTC = {12193, 12270, 12271}


def groups(tid: int) -> str | None:
    return "rcu" if tid in RCU else "rustc" if tid in RUSTC else None


def feed(lines: str, resolver=groups) -> Accumulator:
    acc = Accumulator(resolver)
    for line in lines.splitlines():
        acc.feed(line)
    return acc


def test_buckets_are_runqlats():
    # bucket k holds [2^(k-1), 2^k - 1] µs (BCC's "2 -> 3", "4 -> 7"), 0 µs apart, last open
    assert [bucket(us) for us in (0, 1, 2, 3, 4, 7, 8, 50, 1023, 1024)] == [0, 1, 2, 2, 3, 3, 4, 6, 10, 11]
    assert bucket(2**22 - 1) == 22 and bucket(2**22) == BUCKETS - 1 and bucket(10**12) == BUCKETS - 1
    assert upper_us(0) == 1 and upper_us(6) == 64 and upper_us(BUCKETS - 1) == math.inf


def test_percentiles_are_bucket_upper_edges():
    hist = [0] * BUCKETS
    hist[2], hist[5], hist[6] = 1, 1, 3  # 2-3 µs, 16-31 µs, 3 × 32-63 µs
    # rank ceil(q·5): q=0.2 → 1st (bucket 2), 0.4 → 2nd (bucket 5), 0.5 → 3rd (bucket 6)
    assert (percentile(hist, 0.2), percentile(hist, 0.4), percentile(hist, 0.5)) == (4, 32, 64)
    assert percentile(hist, 0.99) == 64
    assert math.isnan(percentile([0] * BUCKETS, 0.5))


def test_recorded_trace():
    acc = feed(RECORDED)
    assert acc.unparsed == 0
    figs = acc.figures()
    assert sorted(figs) == ["rcu", "rustc"]
    rcu = figs["rcu"]
    # rcu_preempt (pid 15) woken 5 times onto CPU 1 while it ran someone else, switched in
    # 56 (452034 → 452090), 55, 54, 31 (476039 → 476070, across CPUs) and 2 µs later
    want = [0] * BUCKETS
    want[6], want[5], want[2] = 3, 1, 1
    assert rcu.hist == want and rcu.busy_hist == want
    assert (rcu.count, rcu.busy_count) == (5, 5)
    assert (rcu.p50_us, rcu.p90_us, rcu.p99_us) == (64, 64, 64)
    rustc = figs["rustc"]
    # 12193: 50 µs (451013 → 451063), CPU 1 busy; 12270 new (wakeup_new 473759 → 473766):
    # 7 µs, busy; 12271 new onto CPU 0, where no switch had been seen since the loss (not
    # busy): 2000 µs (474042 → 476042); 12270 again: 2534 µs (477565 → 480099), busy
    want = [0] * BUCKETS
    want[6], want[11], want[12], want[3] = 1, 1, 1, 1
    assert rustc.hist == want
    busy = list(want)
    busy[11] = 0
    assert rustc.busy_hist == busy
    assert (rustc.count, rustc.busy_count) == (4, 3)
    assert rustc.p50_us == 64 and rustc.p99_us == 4096
    assert rcu.lost == rustc.lost == 1023
    # coordinator 12223 is in no group: its wakeups (298 µs, 1 µs) are counted nowhere


def test_recorded_trace_run_segments():
    """Run segments and preempted waits of rustc (12193, 12270 on CPU 1; 12271 on CPU 0), worked
    from the timestamps: a segment runs from the switch that ran the thread to the switch
    that took it off, a preempted wait from that switch (prev_state R) to the next that ran it."""
    rustc = feed(RECORDED).figures()["rustc"]
    # preempted (R) segments: 12193 1027 (451063 → 452090), 3740, 3673, 3981, 1008 (475062 →
    # 476070), 2609, 2739; 12270 1269 (473766 → 475035), 3957 (480099 → 484056)
    preempted = [0] * BUCKETS
    preempted[10], preempted[11], preempted[12] = 1, 2, 6
    assert rustc.preempted_hist == preempted
    # blocked: 12270 in D after 1390 µs (476074 → 477464); 12271 in S after 182 µs on CPU 0
    # (the first switch seen there since the loss ran it, so its start is known)
    blocked = [0] * BUCKETS
    blocked[11], blocked[8] = 1, 1
    assert rustc.blocked_hist == blocked
    # waits after preemption: 5 (452090 → 452095), 4577, 4008, 2988, 1039, 1394, 3988, 2806;
    # 12193's last (486800) has not run again by the end and counts nowhere
    waits = [0] * BUCKETS
    waits[3], waits[11], waits[12], waits[13] = 1, 2, 4, 1
    assert rustc.preempted_wait_hist == waits
    # and none of it reaches the wakeups' histogram
    assert rustc.count == 4


def test_a_segment_across_a_loss_is_not_counted():
    acc = feed(
        "a-1 [000] d..2. 1.000000: sched_switch: prev_comm=x prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=a next_pid=1 next_prio=120\n"
        "CPU:0 [LOST 5 EVENTS]\n"
        "a-1 [000] d..2. 1.003000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=R ==> next_comm=x next_pid=9 next_prio=120\n"
        "x-9 [000] d..2. 1.004000: sched_switch: prev_comm=x prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=a next_pid=1 next_prio=120\n"
        "a-1 [000] d..2. 1.006000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=R+ ==> next_comm=x next_pid=9 next_prio=120\n",
        resolver=lambda tid: "a" if tid == 1 else None,
    )
    a = acc.figures()["a"]
    # the first segment spans the loss (its start forgotten); the second is 2000 µs, R+ is runnable
    assert sum(a.preempted_hist) == 1 and a.preempted_hist[bucket(2000)] == 1
    # the wait 1.003 → 1.004 is counted (the switch out came after the loss)
    assert sum(a.preempted_wait_hist) == 1 and a.preempted_wait_hist[bucket(1000)] == 1
    assert acc.pending == {}


def test_every_switch_out_asleep_is_a_sleep_even_without_the_runs_start():
    # as this host traces it (6.18, recorded): the switch from the idle task to the woken
    # thread is missing, so its runs have no start and no segment — but each switch out asleep
    # is a voluntary switch of the group's, counted; the switch out runnable (R) is not one
    acc = feed(
        "python-13769 [001] d..2. 1.000000: sched_switch: prev_comm=python prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n"
        "<idle>-0 [001] dNh4. 1.002000: sched_wakeup: comm=python pid=7 prio=120 target_cpu=001\n"
        "python-13769 [001] d..2. 1.002030: sched_switch: prev_comm=python prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n"
        "<idle>-0 [001] dNh4. 1.004000: sched_wakeup: comm=python pid=7 prio=120 target_cpu=001\n"
        "python-13769 [001] d..2. 1.004030: sched_switch: prev_comm=python prev_pid=7 prev_prio=120 prev_state=D ==> next_comm=x next_pid=9 next_prio=120\n"
        "x-9 [001] d..2. 1.005000: sched_switch: prev_comm=x prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=python next_pid=7 next_prio=120\n"
        "python-13769 [001] d..2. 1.006000: sched_switch: prev_comm=python prev_pid=7 prev_prio=120 prev_state=R ==> next_comm=x next_pid=9 next_prio=120\n",
        resolver=lambda tid: "svc" if tid == 7 else None,
    )
    got = acc.figures()["svc"]
    assert got.sleeps == 3
    assert sum(got.blocked_hist) == 0 and sum(got.preempted_hist) == 1  # only the run from 1.005 had a start


QUEUES = [
    "a-9 [000] d..2. 1.000000: sched_switch: prev_comm=x prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=a next_pid=1 next_prio=120",
    "a-1 [000] dN.2. 1.001000: sched_wakeup: comm=a pid=2 prio=120 target_cpu=000",
    "a-1 [000] d..2. 1.002000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=R ==> next_comm=a next_pid=2 next_prio=120",
    "a-2 [000] d..2. 1.003000: sched_switch: prev_comm=a prev_pid=2 prev_prio=120 prev_state=S ==> next_comm=a next_pid=1 next_prio=120",
    "a-1 [000] d..3. 1.004000: sched_wakeup: comm=a pid=3 prio=120 target_cpu=001",
    "<idle>-0 [001] d..2. 1.005000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=3 next_prio=120",
    "a-1 [000] d..2. 1.006000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
    "<idle>-0 [000] d..2. 1.007000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=3 next_prio=120",
    "a-3 [000] d..2. 1.010000: sched_switch: prev_comm=a prev_pid=3 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
]


def test_a_groups_queue_on_each_cpu_is_counted_from_wakeups_switches_and_sleeps():
    # hand-worked (µs from 1.000000): CPU 0 holds 1 (0-1000), 1 and the woken 2 (1000-3000),
    # 1 alone once 2 sleeps (3000-6000), none (6000-7000), then 3, which woke onto CPU 1 at
    # 4000 and was moved to CPU 0 at 7000 (seen at its switch in there), until it sleeps at
    # 10000; CPU 1 holds 3 from 4000 to 7000. The window is the first event to the last.
    acc = Accumulator(lambda tid: "a" if tid in (1, 2, 3) else None, ncpus=2)
    for line in QUEUES:
        acc.feed(line)
    got = acc.figures()["a"].runnable_us
    assert got is not None and [row[:3] for row in got] == [[1000, 7000, 2000], [7000, 3000, 0]]
    assert all(sum(row) == 10000 for row in got)
    m = queue_metrics("a", got)
    assert m["a queue empty on a CPU (share)"] == pytest.approx(8000 / 20000)
    assert m["a runnable on a CPU (mean)"] == pytest.approx((10000 + 2 * 2000) / 20000)
    assert m["a runnable on a CPU (sd)"] == pytest.approx(math.sqrt((8000 * 0.7**2 + 10000 * 0.3**2 + 2000 * 1.3**2) / 20000))


def test_the_queue_counts_start_afresh_at_the_warm_ups_end_and_after_a_loss():
    acc = Accumulator(lambda tid: "a" if tid in (1, 2, 3) else None, ncpus=2)
    for line in QUEUES[:5]:
        acc.feed(line)
    acc.queues.clear(1_005_000)  # the mark: 1 on CPU 0 and 3 on CPU 1 are runnable then
    for line in QUEUES[5:]:
        acc.feed(line)
    assert [row[:2] for row in acc.figures()["a"].runnable_us] == [[1000, 4000], [3000, 2000]]
    # a loss ends every count: what the lost events did is unknown, the counts start from 0
    acc = Accumulator(lambda tid: "a" if tid in (1, 2, 3) else None, ncpus=2)
    for line in QUEUES[:3]:
        acc.feed(line)
    acc.feed("CPU:1 [LOST 3 EVENTS]")
    for line in QUEUES[3:]:
        acc.feed(line)
    # CPU 0: 1 (0-1000), 2 (1000-2000), forgotten at the loss (2000) — though 1 was still
    # runnable — until 1 is seen switched in at 3000; the rest as above
    assert [row[:3] for row in acc.figures()["a"].runnable_us] == [[2000, 7000, 1000], [7000, 3000, 0]]


def test_the_other_tenants_bursts_run_from_a_wakeup_to_a_sleep():
    # threads outside the groups: 9 woken onto idle CPU 0 (its switch from the idle task not
    # traced, as on this host) and asleep 3 ms later; 11 runs 2 ms, is preempted by our 7, and
    # runs 3 ms more before it sleeps (one burst of 5 ms); 12 runs 1 ms and is preempted, still
    # under way at the end; 20 sleeps with neither a wakeup nor a switch-in seen (left out)
    acc = feed(
        "<idle>-0 [000] dNh4. 1.000000: sched_wakeup: comm=x pid=9 prio=120 target_cpu=000\n"
        "x-9 [000] d..2. 1.003000: sched_switch: prev_comm=x prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120\n"
        "python-7 [001] d..2. 1.010000: sched_switch: prev_comm=python prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=y next_pid=11 next_prio=120\n"
        "y-11 [001] dN.2. 1.011900: sched_wakeup: comm=python pid=7 prio=120 target_cpu=001\n"
        "y-11 [001] d..2. 1.012000: sched_switch: prev_comm=y prev_pid=11 prev_prio=120 prev_state=R ==> next_comm=python next_pid=7 next_prio=120\n"
        "python-7 [001] d..2. 1.013000: sched_switch: prev_comm=python prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=y next_pid=11 next_prio=120\n"
        "y-11 [001] d..2. 1.016000: sched_switch: prev_comm=y prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=z next_pid=12 next_prio=120\n"
        "z-12 [001] d..2. 1.017000: sched_switch: prev_comm=z prev_pid=12 prev_prio=120 prev_state=R ==> next_comm=w next_pid=13 next_prio=120\n"
        "q-20 [000] d..2. 1.030000: sched_switch: prev_comm=q prev_pid=20 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120\n",
        resolver=lambda tid: "svc" if tid == 7 else None,
    )
    assert acc.others.bursts == [3000, 5000] and acc.others.run == {12: 1000}
    # CPU-weighted: (3² + 5² + 1²) / (3 + 5 + 1) ms
    assert acc.others.burst_s() == pytest.approx(35 / 9 * 1e-3)
    assert acc.figures()["svc"].sleeps == 2  # ours are counted as before
    acc.others.clear()  # the warm-up's end: what came before is forgotten
    assert acc.others.burst_s() is None


# bash forks sh (16750), which forks `sleep 0.01` (16751), which exits (recorded as above,
# lines 8-12 and 14 of other tasks; `sh -c 'sleep 0.01; true'`)
FORKS = """\
            bash-16739   [000] ..... 61902.506954: sched_process_fork: comm=bash pid=16739 child_comm=bash child_pid=16750
            bash-16739   [000] d..2. 61902.506957: sched_wakeup_new: comm=bash pid=16750 prio=120 target_cpu=000
            bash-16739   [000] d..2. 61902.507011: sched_switch: prev_comm=bash prev_pid=16739 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=16750 next_prio=120
              sh-16750   [000] ..... 61902.507930: sched_process_fork: comm=sh pid=16750 child_comm=sh child_pid=16751
              sh-16750   [000] dN.2. 61902.507933: sched_wakeup_new: comm=sh pid=16751 prio=120 target_cpu=000
              sh-16750   [000] d..2. 61902.507936: sched_switch: prev_comm=sh prev_pid=16750 prev_prio=120 prev_state=D ==> next_comm=sh next_pid=16751 next_prio=120
           sleep-16751   [000] d..5. 61902.507959: sched_wakeup: comm=sh pid=16750 prio=120 target_cpu=000
          python-15331   [001] d..2. 61902.508033: sched_switch: prev_comm=python prev_pid=15331 prev_prio=120 prev_state=R ==> next_comm=python next_pid=15923 next_prio=120
          python-15923   [001] dN.4. 61902.508411: sched_wakeup: comm=kworker/1:0H pid=16642 prio=100 target_cpu=001
          python-15923   [001] d..2. 61902.508413: sched_switch: prev_comm=python prev_pid=15923 prev_prio=120 prev_state=D ==> next_comm=kworker/1:0H next_pid=16642 next_prio=100
    kworker/1:0H-16642   [001] d..2. 61902.508467: sched_switch: prev_comm=kworker/1:0H prev_pid=16642 prev_prio=100 prev_state=I ==> next_comm=python next_pid=15331 next_prio=120
          python-15331   [001] d.s4. 61902.508593: sched_wakeup: comm=python pid=15923 prio=120 target_cpu=001
           sleep-16751   [000] d..2. 61902.508755: sched_switch: prev_comm=sleep prev_pid=16751 prev_prio=120 prev_state=S ==> next_comm=sh next_pid=16750 next_prio=120
              sh-16750   [000] d..2. 61902.508761: sched_switch: prev_comm=sh prev_pid=16750 prev_prio=120 prev_state=S ==> next_comm=rustc next_pid=16729 next_prio=120
           rustc-16729   [000] dNh3. 61902.518847: sched_wakeup: comm=sleep pid=16751 prio=120 target_cpu=000
           rustc-16729   [000] d..2. 61902.518858: sched_switch: prev_comm=rustc prev_pid=16729 prev_prio=120 prev_state=R ==> next_comm=sleep next_pid=16751 next_prio=120
           sleep-16751   [000] dN.5. 61902.518968: sched_wakeup: comm=sh pid=16750 prio=120 target_cpu=000
           sleep-16751   [000] d..2. 61902.518973: sched_switch: prev_comm=sleep prev_pid=16751 prev_prio=120 prev_state=Z ==> next_comm=sh next_pid=16750 next_prio=120
              sh-16750   [000] dN.6. 61902.519044: sched_wakeup: comm=bash pid=16739 prio=120 target_cpu=000
              sh-16750   [000] d..2. 61902.519046: sched_switch: prev_comm=sh prev_pid=16750 prev_prio=120 prev_state=Z ==> next_comm=bash next_pid=16739 next_prio=120
"""


def test_a_forked_child_is_its_parents_group_even_if_the_resolver_never_saw_it():
    acc = feed(FORKS, resolver=lambda tid: "shell" if tid == 16750 else None)
    got = acc.figures()["shell"]
    # sh: wakeup_new 506957 → 507011 (54 µs), woken 507959 → 508755 (796), 518968 → 518973 (5);
    # its child sleep, known only from sched_process_fork: 507933 → 507936 (3), 518847 → 518858 (11)
    want = [0] * BUCKETS
    for us in (54, 796, 5, 3, 11):
        want[bucket(us)] += 1
    assert got.hist == want and got.count == 5
    assert acc.forked == {16751: "shell"}  # bash (16739) is in no group: 16750 inherits nothing


def test_lost_events_forget_pending_wakeups():
    lines = RECORDED.splitlines()
    wake, switch = lines[2], lines[4]  # rustc 12193 woken at 451013, run at 451063
    acc = feed("\n".join([wake, "CPU:1 [LOST 3 EVENTS]", switch]))
    assert acc.figures() == {} and acc.lost == 3
    acc = feed("\n".join([wake, switch]))
    assert acc.figures()["rustc"].count == 1


def test_a_wakeup_of_a_running_task_is_dropped_when_it_switches_out():
    # ttwu of a task still on its CPU is traced too; its next switch-in is not a wakeup's
    wake = "     coordinator-12223   [001] d..3. 61571.451013: sched_wakeup: comm=rustc pid=12193 prio=120 target_cpu=001"
    out = "           rustc-12193   [001] d..2. 61571.452090: sched_switch: prev_comm=rustc prev_pid=12193 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120"
    back = "     rcu_preempt-15      [001] d..2. 61571.452095: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=rustc next_pid=12193 next_prio=120"
    figs = feed("\n".join([wake, out, back])).figures()
    assert figs["rustc"].count == 0
    # the switch out is runnable: the 5 µs until it runs again is a preempted wait
    assert sum(figs["rustc"].preempted_wait_hist) == 1 and figs["rustc"].preempted_wait_hist[bucket(5)] == 1


def test_comm_with_spaces_and_pid_like_text():
    line = "      opt cgu.04-12267   [001] d..3. 61571.460108: sched_wakeup: comm=opt pid=1 x pid=12193 prio=120 target_cpu=001"
    run = "      opt cgu.04-12267   [001] d..2. 61571.460406: sched_switch: prev_comm=opt cgu.04 prev_pid=12267 prev_prio=120 prev_state=X ==> next_comm=a next_pid=9 b next_pid=12193 next_prio=120"
    figs = feed(line + "\n" + run).figures()
    assert figs["rustc"].count == 1 and figs["rustc"].hist[bucket(298)] == 1


def test_garbage_is_counted_not_raised():
    acc = feed("   x-1 [001] d..2. 1.000001: sched_switch: nonsense\nunrelated line\n")
    assert acc.unparsed == 1 and acc.figures() == {}


def test_cgroup_resolver_reads_the_groups_thread_lists(tmp_path):
    online, pod, offline = tmp_path / "online", tmp_path / "online" / "pod", tmp_path / "offline"
    for d, tasks in ((online, "1\n"), (pod, "2\n3\n"), (offline, "")):
        d.mkdir(parents=True)
        (d / "tasks").write_text(tasks)
    (online / "inner").mkdir()
    (online / "inner" / "cgroup.threads").write_text("4\n")  # v2's name for the list
    now = [0.0]
    r = CgroupResolver({"online": online, "pod": pod, "offline": offline}, clock=lambda: now[0])
    # innermost wins (pod is beneath online); a cgroup beneath a group (inner) is the group's
    assert [r(t) for t in (1, 2, 3, 4, 5)] == ["online", "pod", "pod", "online", None]
    assert r.reads == 1  # a miss right after a read does not read again
    (offline / "tasks").write_text("5\n")  # joined after its fork
    now[0] = CgroupResolver.REFRESH_MISS_S
    assert r(5) == "offline" and r.reads == 2
    (offline / "tasks").write_text("")
    (pod / "tasks").write_text("5\n")  # moved: a hit is read again only after REFRESH_S
    now[0] += CgroupResolver.REFRESH_MISS_S
    assert r(5) == "offline"
    now[0] += CgroupResolver.REFRESH_S
    assert r(5) == "pod"
    offline.joinpath("tasks").unlink()
    offline.rmdir()
    now[0] += CgroupResolver.REFRESH_S
    assert r(1) == "online"  # a group removed meanwhile is simply empty


def test_instance_names():
    assert runqlat._instance_owner("colosim-123-0") == 123
    assert runqlat._instance_owner("colosim-abc-0") is None and runqlat._instance_owner("other-1-0") is None


# --- on this host ------------------------------------------------------------------------------


def _host_reason() -> str | None:
    missing = [tool for tool in ("stress", "taskset") if shutil.which(tool) is None]
    return unavailable() or runqlat.available() or (f"no {', '.join(missing)}" if missing else None)


HOST_REASON = _host_reason()
HOST = pytest.mark.skipif(HOST_REASON is not None, reason=f"host replay unavailable: {HOST_REASON}")


def instances_now() -> list[str]:
    """The trace instances as a fresh private mount of tracefs shows them."""
    if (runqlat.HOST_TRACEFS / "instances").is_dir():
        return sorted(p.name for p in (runqlat.HOST_TRACEFS / "instances").iterdir())
    script = f"{runqlat.MOUNT_TRACEFS} && ls {runqlat.HOST_TRACEFS}/instances"
    out = subprocess.run([*runqlat.PRIVATE_SHELL, script], capture_output=True, text=True, check=True)
    return sorted(out.stdout.split())


SLEEPS = 300


@contextlib.contextmanager
def locked_session():
    """A replay Session, once another replay on this host (another test run) has finished:
    two would measure each other, and Session refuses the second."""
    from replay.session import Session

    deadline = time.monotonic() + 600
    while True:
        try:
            s = Session(log=lambda _: None).__enter__()
            break
        except HostError as err:
            if "another replay is running" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(2)
    try:
        yield s
    finally:
        s.__exit__(None, None, None)


def groups_of(s, *names: str) -> CgroupResolver:
    """The session's cgroups `names`, made, and a resolver of their threads."""
    s.backend.create(list(names))
    key = s.backend.keys_for("cpu")
    return CgroupResolver({g: s.backend.dir(key, g) for g in names})


@HOST
def test_sleeper_beside_stress_on_the_host():
    with locked_session() as s:
        resolver = groups_of(s, "sleeper", "hog")
        with RunqLat(resolver) as rq:
            # both hogs and the sleeper on one CPU: that CPU is never idle, so every wakeup of
            # the sleeper finds it running another task (a hog, or whatever preempted one)
            cpu = str(min(os.sched_getaffinity(0)))
            s.spawn(["taskset", "-c", cpu, "stress", "--cpu", "2"], cgroup="hog")
            time.sleep(0.3)
            sleeps = f"import time\nfor _ in range({SLEEPS}): time.sleep(0.002)"
            sleeper = s.spawn(["taskset", "-c", cpu, sys.executable, "-c", sleeps], cgroup="sleeper")
            assert sleeper.wait(timeout=60) == 0
            name, root = rq.name, rq.root
        figs = rq.result()
    assert rq.unparsed == 0
    got = figs["sleeper"]
    # every sleep ends in one wakeup of its thread: all of them seen (≥ 80%: a lost-events gap
    # may forget some), and not many more (its fork's wakeup_new is in our cgroup, not its own)
    assert 0.8 * SLEEPS <= got.count <= SLEEPS + 20, got
    assert sum(got.hist) == got.count and sum(got.busy_hist) == got.busy_count <= got.count
    assert got.hist[BUCKETS - 1] == 0 and math.isfinite(got.p99_us)
    # the hogs keep the sleeper's CPU running a task: (nearly) every wakeup lands on a busy CPU
    assert got.busy_count >= 0.95 * got.count, got
    # and after the block: the instance is gone, and so is the holder with its namespace
    assert name not in instances_now()
    assert root is not None
    if str(root).startswith("/proc/"):
        holder = int(root.parts[2])
        assert liveness.start_time(holder) is None


@HOST
def test_hogs_pinned_to_one_cpu_are_counted_runnable_there_host():
    # three CPU hogs pinned to one CPU never sleep: from the mark on, all three are runnable on
    # that CPU the whole time (whatever else runs there: a hog it preempts is still runnable),
    # and the group has none on any other CPU
    with locked_session() as s:
        resolver = groups_of(s, "hog")
        cpu = min(os.sched_getaffinity(0))
        with RunqLat(resolver) as rq:
            s.spawn(["taskset", "-c", str(cpu), "stress", "--cpu", "3"], cgroup="hog")
            time.sleep(0.5)
            rq.mark()
            time.sleep(2.0)
        got = rq.result()["hog"].runnable_us
    assert got is not None and len(got) == os.cpu_count()
    window = sum(got[cpu])
    assert window > 1.5e6, got  # µs: the 2 s after the mark, less the trace's end
    assert got[cpu][3] >= 0.95 * window, got[cpu]
    for other, row in enumerate(got):
        if other != cpu:
            assert row[0] >= 0.99 * sum(row), (other, row)


@HOST
def test_a_capped_trace_stops_itself_beyond_what_it_may_keep_host():
    # a sleeper waking 500 times a second fills a page of events every few ms: a cap of one byte
    # stops the trace at its first page and says why; the default cap lets it run to the end,
    # every sleep counted as a blocked run
    with locked_session() as s:
        s.backend.create(["sleeper"])
        key = s.backend.keys_for("cpu")
        got = {}
        for cap in (1, runqlat.MAX_TRACE_BYTES):
            resolver = CgroupResolver({"sleeper": s.backend.dir(key, "sleeper")})
            with RunqLat(resolver, max_bytes=cap) as rq:
                sleeps = f"import time\nfor _ in range({SLEEPS * 4}): time.sleep(0.002)"
                sleeper = s.spawn([sys.executable, "-c", sleeps], cgroup="sleeper")
                assert sleeper.wait(timeout=60) == 0
            got[cap] = (rq.abandoned, rq.result().get("sleeper"))
    why, figs = got[1]
    assert why is not None and "raw trace kept" in why and "stopped" in why
    # stopped early: far fewer of the sleeps seen than were made
    assert figs is None or figs.sleeps < SLEEPS * 4 * 0.8
    why, figs = got[runqlat.MAX_TRACE_BYTES]
    assert why is None and figs is not None
    # every sleep a switch out asleep, counted whether or not the run's start was traced
    assert 0.8 * SLEEPS * 4 <= figs.sleeps <= SLEEPS * 4 + 20


class Recording(Accumulator):
    """An Accumulator that also keeps the events of its groups' threads, in the order fed."""

    def __init__(self, resolver) -> None:
        super().__init__(resolver)
        self.log: list[tuple] = []

    def wakeup(self, now: int, tid: int, target: int) -> None:
        if self._group(tid) is not None:
            self.log.append((now, "wakeup", tid, target))
        super().wakeup(now, tid, target)

    def switch(self, cpu: int, now: int, prev: int, nxt: int, runnable: bool = False) -> None:
        if self._group(prev) is not None or self._group(nxt) is not None:
            self.log.append((now, "switch", cpu, prev, nxt, runnable))
        super().switch(cpu, now, prev, nxt, runnable)


def by_cpu_or_thread(event: tuple) -> tuple:
    """A switch by its CPU, a wakeup by the thread woken: the orders two traces must agree on."""
    return ("cpu", event[2]) if event[1] == "switch" else ("tid", event[2])


@HOST
def test_the_raw_pages_say_what_a_second_instances_text_says_host():
    # One workload traced twice at once: RunqLat's raw pages, and a second instance's trace_pipe
    # (the kernel's own text formatting) parsed line by line. Every event of the two groups falls
    # inside both traces (their processes start after both and end before either stops), so
    # both hold the same events, with the same fields, in the same order on each CPU. Not the
    # same times to the µs: each instance's buffer reads the clock as it writes (1-5 µs apart).
    with locked_session() as s:
        resolver = groups_of(s, "sleeper", "hog")
        lines: list[str] = []
        with runqlat.tracefs() as root:
            inst = root / "instances" / f"{runqlat.INSTANCE_PREFIX}{os.getpid()}-text"
            inst.mkdir()
            stop = threading.Event()
            try:
                (inst / "tracing_on").write_text("0")
                (inst / "buffer_size_kb").write_text("8192")
                (inst / "trace_clock").write_text("mono")
                for e in runqlat.EVENTS:
                    (inst / "events" / "sched" / e / "enable").write_text("1")
                fd = os.open(inst / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)

                def read_text() -> None:
                    rest = b""
                    while True:
                        stopping = stop.is_set()
                        while True:
                            try:
                                chunk = os.read(fd, 1 << 16)
                            except BlockingIOError:
                                break
                            if not chunk:
                                break
                            got = (rest + chunk).split(b"\n")
                            rest = got.pop()
                            lines.extend(g.decode(errors="replace") for g in got)
                        if stopping:
                            return
                        stop.wait(0.05)

                reader = threading.Thread(target=read_text, daemon=True)
                reader.start()
                (inst / "tracing_on").write_text("1")
                with RunqLat(resolver) as rq:
                    rq.acc = recorded = Recording(resolver)
                    time.sleep(0.2)
                    cpu = str(min(os.sched_getaffinity(0)))
                    hog = s.spawn(["taskset", "-c", cpu, "stress", "--cpu", "2", "--timeout", "2"], cgroup="hog")
                    sleeps = f"import time\nfor _ in range({SLEEPS}): time.sleep(0.002)"
                    sleeper = s.spawn(["taskset", "-c", cpu, sys.executable, "-c", sleeps], cgroup="sleeper")
                    assert sleeper.wait(timeout=60) == 0
                    assert hog.wait(timeout=60) == 0
                    time.sleep(0.2)
                    raw = rq.result()
                (inst / "tracing_on").write_text("0")
                stop.set()
                reader.join(timeout=30)
                os.close(fd)
            finally:
                stop.set()
                runqlat._quiet(inst)
                inst.rmdir()
    text = Recording(resolver)
    for line in lines:
        text.feed(line)
    assert rq.unparsed == 0 and text.unparsed == 0
    if text.lost or any(f.lost for f in raw.values()):
        pytest.skip("the host lost trace events: the two traces cannot be compared event for event")
    assert set(raw) == {"sleeper", "hog"}
    got, want = recorded.log, text.log
    assert len(got) == len(want) > 2 * SLEEPS
    # Each CPU's buffer holds its events in the order they happened there, in both instances;
    # between CPUs the merge goes by each instance's own clock reads, and two unrelated events
    # on two CPUs a µs apart may come in either order (a clean-clone CI beside stress saw it).
    # So: every CPU's switches in the same order, every thread's wakeups in the same order.
    for key in {by_cpu_or_thread(e) for e in want}:
        mine = [e for e in got if by_cpu_or_thread(e) == key]
        theirs = [e for e in want if by_cpu_or_thread(e) == key]
        assert [e[1:] for e in mine] == [e[1:] for e in theirs], key
        assert max(abs(a[0] - b[0]) for a, b in zip(mine, theirs, strict=True)) <= 100, key
    for name, f in raw.items():
        g = text.figures()[name]
        counts = (f.count, f.sleeps, sum(f.preempted_hist), sum(f.blocked_hist))
        assert counts == (g.count, g.sleeps, sum(g.preempted_hist), sum(g.blocked_hist)), name
        # "busy" also reads what a CPU last ran, which the later of the two traces may not have
        # seen yet for a CPU that had not switched since it began (301 against 302 beside stress)
        assert abs(f.busy_count - g.busy_count) <= 3, name
    assert 0.8 * SLEEPS <= raw["sleeper"].count <= SLEEPS + 20


@HOST
def test_stale_instances_of_dead_processes_are_removed_host():
    code = (
        "import sys, time\n"
        "from replay.runqlat import RunqLat\n"
        "rq = RunqLat(lambda tid: None).__enter__()\n"
        "print(rq.name, rq.root, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert child.stdout is not None
        name, root = child.stdout.readline().split()
        assert name in instances_now()
    finally:
        child.send_signal(signal.SIGKILL)  # no cleanup runs
        child.wait()
    if root.startswith("/proc/"):  # the holder sees its pipe close and goes, namespace and all
        holder = int(root.split("/")[2])
        for _ in range(50):
            if liveness.start_time(holder) is None:
                break
            time.sleep(0.1)
        assert liveness.start_time(holder) is None
    # a global kernel object: still there until --cleanup's remove_stale_instances
    assert name in instances_now()
    mine = runqlat.RunqLat(lambda tid: None)  # a live owner's instance is left alone
    with mine:
        proc = subprocess.run([sys.executable, "-m", "sim", "replay", "--cleanup"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"removed trace instance {name}" in proc.stdout + proc.stderr
        assert mine.name not in proc.stdout + proc.stderr
        assert mine.name in instances_now() and name not in instances_now()


@HOST
def test_sigterm_cleans_up_host():
    code = (
        "import time\n"
        "from replay.runqlat import RunqLat\n"
        "with RunqLat(lambda tid: None) as rq:\n"
        "    print(rq.name, rq.root, flush=True)\n"
        "    time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    name, root = child.stdout.readline().split()
    assert name in instances_now()
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=30)
    # the with block unwound: no instance, no holder (SIGTERM ends the process, after cleanup)
    assert name not in instances_now()
    if root.startswith("/proc/"):
        assert liveness.start_time(int(root.split("/")[2])) is None
