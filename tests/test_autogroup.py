"""[kernel] autogroup through the scenario layer: root-cgroup workloads (cgroup = "/") in
session groups of weight 1024 beside the root's cgroups (kernel/sched/autogroup.c), the
autogroups hidden from the reported cgroups, their CPU reported as the root's.

Hand-worked on one CPU: a session (1 hog) beside cgroup c (cpu.shares 1024, 4 hogs) is two
entities of 1024 at the root → 1:1; without autogroup the hog is a task of 1024 beside c's
entity of 1024 → also 1:1, so the contrast case puts 2 hogs in the root: 2:1 off, 1:1 on."""

from __future__ import annotations

import pytest

from sim.errors import ScenarioError
from sim.runner import run_scenario
from sim.scenario import Scenario


def scenario(autogroup: bool, root_threads: int, **extra) -> Scenario:
    return Scenario.from_document(
        {
            "scenario": {"name": "ag", "duration": "6s", "warmup": "1s"},
            "node": {"cores_per_socket": 1},
            "kernel": {"autogroup": autogroup},
            "cgroups": {"c": {"cpu.shares": 1024}},
            "workloads": {
                "mine": {"kind": "hog", "cgroup": "/", "threads": root_threads, **extra},
                "inc": {"kind": "hog", "cgroup": "c", "threads": 4},
            },
        }
    )


def root_and_c(autogroup: bool, root_threads: int) -> tuple[float, float, list[str]]:
    run = next(iter(run_scenario(scenario(autogroup, root_threads), progress=False).runs.values()))
    busy = run.cpu_busy_s.sum(axis=0)
    names = run.cgroup_names
    return float(busy[names.index("")]), float(busy[names.index("c")]), names


@pytest.mark.parametrize(("autogroup", "want"), [(True, 1.0), (False, 2.0)])
def test_a_root_session_beside_a_cgroup_of_1024(autogroup: bool, want: float) -> None:
    root, c, names = root_and_c(autogroup, 2)
    assert names == ["", "c"], "autogroups are not reported"
    assert root / c == pytest.approx(want, rel=0.03)
    assert root + c == pytest.approx(5.0, rel=1e-9), "one CPU, 5 s measured, never idle"


def test_a_session_names_workloads_of_the_root_only() -> None:
    with pytest.raises(ScenarioError, match=r"workloads\.inc\.session.*root cgroup"):
        Scenario.from_document(
            {
                "scenario": {"name": "ag", "duration": "1s"},
                "cgroups": {"c": {}},
                "workloads": {"inc": {"kind": "hog", "cgroup": "c", "threads": 1, "session": "s"}},
            }
        )


def test_sessions_reach_the_core() -> None:
    spec = scenario(True, 1, session="login").core_spec()
    assert spec["kernel"]["autogroup"] is True
    assert spec["kernel"]["autogroup_sessions"] == {"mine": "login"}
    assert [w["cgroup"] for w in spec["workloads"]] == ["", "c"]


def test_workloads_sharing_a_session_through_the_scenario() -> None:
    # One CPU: "one" (1 hog) and "four" (4 hogs) share session s, "solo" (1 hog) is its own:
    # s and solo get 1/2 each; inside s five equal tasks, so one 1/10 and four 4/10.
    import json

    from sim._core import Node

    sc = Scenario.from_document(
        {
            "scenario": {"name": "ag", "duration": "11s"},
            "node": {"cores_per_socket": 1},
            "kernel": {"autogroup": True},
            "workloads": {
                "one": {"kind": "hog", "cgroup": "/", "threads": 1, "session": "s"},
                "four": {"kind": "hog", "cgroup": "/", "threads": 4, "session": "s"},
                "solo": {"kind": "hog", "cgroup": "/", "threads": 1},
            },
        }
    )
    node = Node(json.dumps(sc.core_spec()))
    node.run_until(1_000_000_000)
    before = {w: node.workload_usage(w) for w in ("one", "four", "solo")}
    node.run_until(11_000_000_000)
    got = {w: (node.workload_usage(w) - before[w]) / 10e9 for w in before}
    assert got == pytest.approx({"one": 0.1, "four": 0.4, "solo": 0.5}, rel=0.03)
    assert node.cgroup_names() == [""]
    with pytest.raises(KeyError, match="no workload"):
        node.workload_usage("nope")


def test_replay_refuses_a_root_workload_before_anything_runs() -> None:
    from replay.cgroupfs import HostError
    from replay.compare import precheck

    with pytest.raises(HostError, match=r'workloads\.mine\.cgroup = "/": replay runs workloads only beneath its own cgroup'):
        precheck(scenario(True, 1).variants())
