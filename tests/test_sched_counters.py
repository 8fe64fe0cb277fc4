"""The core's per-cgroup scheduler counters — run time, run-queue wait, switches, migrations —
against hand-worked cases (the probe measures the same figures on the host: replay/probe.py)."""

from __future__ import annotations

import json

import pytest

_core = pytest.importorskip("sim._core")

SECOND = 1_000_000_000


def node(ncpus: int, kernel: dict, cgroups: list[dict], workloads: list[dict]):
    spec = {"topology": {"cores_per_socket": ncpus}, "kernel": kernel, "cgroups": cgroups, "workloads": workloads}
    return _core.Node(json.dumps(spec))


def two_hogs_one_cpu(kernel: dict):
    n = node(
        1,
        kernel,
        [{"name": "a"}, {"name": "b"}],
        [{"kind": "hog", "name": "ha", "cgroup": "a", "threads": 1}, {"kind": "hog", "name": "hb", "cgroup": "b", "threads": 1}],
    )
    n.run_until(SECOND)
    return n.cgroup_stats("a"), n.cgroup_stats("b")


# The effective slice: a slice ends at the first scheduler tick *past* it (check_preempt_tick
# and EEVDF's update_deadline compare with '>', at ticks). CFS, 1 CPU: sched_latency 6 ms,
# two equal groups -> 3 ms, ends at the 4th tick of 1 ms (HZ=1000) or the 1st of 4 ms
# (HZ=250): 4 ms either way. EEVDF: base_slice 0.70 ms -> one tick: 1 ms at HZ=1000, 4 ms
# at HZ=250.
@pytest.mark.parametrize(
    "scheduler,hz,slice_ms",
    [("cfs", 250, 4), ("cfs", 1000, 4), ("eevdf", 250, 4), ("eevdf", 1000, 1)],
)
def test_two_hogs_on_one_cpu_wait_for_each_other_and_switch_once_a_slice(scheduler, hz, slice_ms):
    a, b = two_hogs_one_cpu({"scheduler": scheduler, "hz": hz})
    # each runs half the second and waits while the other runs
    assert a["usage_ns"] == pytest.approx(SECOND / 2, rel=0.01)
    assert a["wait_ns"] == pytest.approx(b["usage_ns"], rel=0.01)
    assert b["wait_ns"] == pytest.approx(a["usage_ns"], rel=0.01)
    # one switch per slice on the CPU, alternating: each task is switched out every other
    # slice; nothing moves on one CPU
    switches_per_s = 1000 / slice_ms
    assert a["nr_switches"] + b["nr_switches"] == pytest.approx(switches_per_s, abs=1)
    assert a["nr_switches"] == pytest.approx(switches_per_s / 2, abs=1)
    assert a["nr_migrations"] == b["nr_migrations"] == 0


def test_one_hog_per_cpu_never_waits_switches_or_moves():
    # fork placement puts each on its own CPU (__set_task_cpu: not a migration)
    n = node(2, {}, [{"name": "a"}], [{"kind": "hog", "name": "h", "cgroup": "a", "threads": 2}])
    n.run_until(SECOND)
    st = n.cgroup_stats("a")
    assert st["usage_ns"] == 2 * SECOND
    assert (st["wait_ns"], st["nr_switches"], st["nr_migrations"]) == (0, 0, 0)


def test_a_cpuset_change_migrates_each_task_once():
    n = node(2, {}, [{"name": "a", "cpuset.cpus": "0"}], [{"kind": "hog", "name": "h", "cgroup": "a", "threads": 2}])
    n.run_until(SECOND)
    assert n.cgroup_stats("a")["nr_migrations"] == 0
    n.write("a", "cpuset.cpus", "1")
    n.run_until(2 * SECOND)
    st = n.cgroup_stats("a")
    assert st["nr_migrations"] == 2
    # hierarchical, as wait and switches are: the root sums its children
    assert n.cgroup_stats("")["nr_migrations"] == 2


def bucket_of_us(us: int) -> int:
    from sim.runqlat import bucket

    return bucket(us)


@pytest.mark.parametrize("scheduler,hz,slice_ms", [("cfs", 250, 4), ("eevdf", 1000, 1)])
def test_two_hogs_run_segments_end_preempted_each_a_slice_long(scheduler, hz, slice_ms):
    """Run segments as sched_switch delimits them: every run of a hog beside a hog ends with it
    still runnable, after one effective slice (above), and it then waits the other's slice."""
    n = node(
        1,
        {"scheduler": scheduler, "hz": hz},
        [{"name": "a"}, {"name": "b"}],
        [{"kind": "hog", "name": "ha", "cgroup": "a", "threads": 1}, {"kind": "hog", "name": "hb", "cgroup": "b", "threads": 1}],
    )
    n.run_until(SECOND // 10)
    n.reset_stats()  # the segment under way at the reset began before it: counted whole
    n.run_until(SECOND)
    seg = n.run_segments("a")
    switches = n.cgroup_stats("a")["nr_switches"]
    k = bucket_of_us(slice_ms * 1000)
    assert sum(seg["blocked"]) == 0
    assert sum(seg["preempted"]) == switches and seg["preempted"][k] >= switches - 1
    assert sum(seg["preempted_wait"]) >= switches - 1 and seg["preempted_wait"][k] >= switches - 2
    assert n.runqlat("a") == [0] * 24  # nobody woke


def test_a_service_alone_runs_each_request_in_one_segment_that_ends_asleep():
    """A closed loop of one client, 2 ms of CPU per request, alone on its CPU: one run per
    request, ending blocked at 2 ms; no preemption, no wait."""
    n = node(
        1,
        {"scheduler": "eevdf", "hz": 1000},
        [{"name": "a"}],
        [
            {
                "kind": "closed_loop",
                "name": "s",
                "cgroup": "a",
                "clients": 1,
                "service": {"dist": "constant", "value_ns": 2_000_000},
                "think": {"dist": "constant", "value_ns": 1_000_000},
            }
        ],
    )
    n.run_until(SECOND)
    seg = n.run_segments("a")
    # a request every 3 ms: 333 runs of 2 ms, each in bucket [1024, 2048) µs (2000 has 11 bits)
    assert sum(seg["preempted"]) == 0 and sum(seg["preempted_wait"]) == 0
    assert seg["blocked"][bucket_of_us(2000)] == sum(seg["blocked"])
    assert sum(seg["blocked"]) == pytest.approx(SECOND / 3_000_000, abs=2)
