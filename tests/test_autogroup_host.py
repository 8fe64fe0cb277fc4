"""Autogroup on this host's kernel against the model: busy loops in the root cpu cgroup (where
this test's processes are; nothing is created or written), pinned to one CPU. Two sessions —
1 loop in one, 4 loops in the other — split the CPU 1:1 when kernel.sched_autogroup_enabled=1
(two autogroups of weight 1024; the other tenants' groups take their part, but the two
sessions' ratio is theirs to keep); in one session the loops are five equal tasks: 1:4.
The simulator, given the host's autogroup setting, must predict the same ratios."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from host_replay import children

from replay.host_kernel import read_host_kernel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

WARM_S, MEASURE_S = 0.5, 3.0
# a shell that starts n busy-loop subshells and waits
LOOPS = "for i in $(seq {n}); do (while :; do :; done) & done; wait"


def in_root_cpu_cgroup() -> bool:
    """This process's cpu cgroup is the root (v1: the cpu controller's line; v2: "0::")."""
    lines = [line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines()]
    cpu = [path for _, controllers, path in lines if "cpu" in controllers.split(",")]
    unified = [path for hid, controllers, path in lines if hid == "0" and controllers == ""]
    return (cpu or unified or ["?"])[0] == "/"


def loops(n: int, cpu: int, new_session: bool) -> subprocess.Popen:
    """A shell that starts n busy-loop subshells on `cpu` and waits."""
    return subprocess.Popen(
        ["sh", "-c", LOOPS.format(n=n)], start_new_session=new_session, preexec_fn=lambda: os.sched_setaffinity(0, {cpu})
    )


def run_ns(pids: list[int]) -> int:
    return sum(int(Path(f"/proc/{p}/schedstat").read_text().split()[0]) for p in pids)


def ratio(one_session_each: bool, cpu: int) -> float:
    """CPU of the 1-loop group over the 4-loop group's."""
    if one_session_each:
        procs = [loops(1, cpu, True), loops(4, cpu, True)]
    else:
        # one new session whose leader starts both groups
        leader = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import subprocess, sys; [subprocess.Popen(['sh', '-c', s]) for s in sys.argv[1:]]; import time; time.sleep(60)",
                LOOPS.format(n=1),
                LOOPS.format(n=4),
            ],
            start_new_session=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        )
        time.sleep(0.3)
        procs = [leader]
    try:
        time.sleep(WARM_S)
        if one_session_each:
            groups = [children(p.pid) for p in procs]
        else:
            shells = children(procs[0].pid)
            groups = [children(s) for s in shells]
            groups.sort(key=len)
        assert [len(g) for g in groups] == [1, 4], groups
        before = [run_ns(g) for g in groups]
        time.sleep(MEASURE_S)
        after = [run_ns(g) for g in groups]
        return (after[0] - before[0]) / (after[1] - before[1])
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def predicted(autogroup: bool, one_session_each: bool) -> float:
    import json

    from sim._core import Node
    from sim.scenario import Scenario

    sessions = {} if one_session_each else {"session": "s"}
    sc = Scenario.from_document(
        {
            "scenario": {"name": "ag", "duration": "11s"},
            "node": {"cores_per_socket": 1},
            "kernel": {"autogroup": autogroup, "scheduler": read_host_kernel().scheduler.value},
            "workloads": {
                "one": {"kind": "hog", "cgroup": "/", "threads": 1, **sessions},
                "four": {"kind": "hog", "cgroup": "/", "threads": 4, **sessions},
            },
        }
    )
    node = Node(json.dumps(sc.core_spec()))
    node.run_until(1_000_000_000)
    before = node.workload_usage("one"), node.workload_usage("four")
    node.run_until(11_000_000_000)
    return (node.workload_usage("one") - before[0]) / (node.workload_usage("four") - before[1])


@pytest.mark.parametrize("one_session_each", [True, False], ids=["two sessions", "one session"])
def test_sessions_split_as_the_model_says(one_session_each: bool, outside_session) -> None:
    if not in_root_cpu_cgroup():
        pytest.skip("this process is not in the root cpu cgroup: autogroups do not apply to it")
    hk = read_host_kernel()
    cpu = max(os.sched_getaffinity(0))
    got = ratio(one_session_each, cpu)
    want = predicted(hk.autogroup.value, one_session_each)
    # by hand: 1:1 for two autogroups, 1:4 for five tasks of one group
    assert want == pytest.approx(1.0 if hk.autogroup.value and one_session_each else 0.25, rel=0.02)
    assert got == pytest.approx(want, rel=0.15), f"host {got:.3f}, model {want:.3f} (autogroup {hk.autogroup.value})"
