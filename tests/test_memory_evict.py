"""Koordinator's BEMemoryEvict (koordinator.md §4.4): the release by hand, the victims'
order, and on a node: a BE memory hog killed when node memory passes the threshold."""

from __future__ import annotations

from policies.memory_evict import Candidate, to_release, victims
from sim.runner import run_scenario
from sim.scenario import Scenario

GI = 2**30
MI = 2**20


def test_release_by_hand():
    # 100 GiB, 80% used, threshold 70, lower 68: release 12% of capacity
    assert to_release(100 * GI, 20 * GI, 70, 0) == 100 * GI * 12 // 100
    assert to_release(100 * GI, 20 * GI, 70, 50) == 100 * GI * 30 // 100
    # integer percent: 69.9% is 69, below the threshold
    assert to_release(1000, 301, 70, 0) == 0
    assert to_release(1000, 300, 70, 0) == 1000 * 2 // 100


def test_victims_in_koordlets_order():
    c = [
        Candidate("a", "a", 5000, 1 * GI),
        Candidate("b", "b", 3000, 1 * MI),
        Candidate("c", "c", 5000, 3 * GI),
        Candidate("z0", "z0", 1000, 0),
        Candidate("y0", "y0", 1000, 0),
    ]
    # priority ascending first, then used descending; zero usage last, higher name first
    order = [v.name for v in victims(c, 100 * GI)]
    assert order == ["b", "c", "a", "z0", "y0"]
    assert [v.name for v in victims(c, 2 * GI)] == ["b", "c"]


NODE = """
[scenario]
name = "me"
duration = "20s"
seed = 1

[node]
cores_per_socket = 4
memory = "4Gi"

[pods.web]
qos = "LS"
cpu_request = 1
memory_request = "2Gi"

[pods.big]
qos = "BE"
priority = 5000
[pods.small]
qos = "BE"
priority = 5000

[workloads.web]
kind = "memory_hog"
pod = "web"
bytes = "1536Mi"
mode = "keep"
start = "5s"

[workloads.big]
kind = "memory_hog"
pod = "big"
bytes = "1Gi"
mode = "keep"

[workloads.small]
kind = "memory_hog"
pod = "small"
bytes = "600Mi"
mode = "keep"

[policy]
name = "koordinator"
memory_evict = true
"""


def test_the_biggest_be_pod_goes_when_memory_passes_the_threshold():
    r = run_scenario(Scenario.from_toml(NODE), progress=False).runs["me"]
    ev = [d for d in r.decisions if d["what"].startswith("BE memory evict")]
    # 1.5 + 1 + 0.6 GiB of 4 GiB = 77% ≥ 70%: release (77 − 68)% = 0.36 GiB; the 1 GiB pod covers it
    assert len(ev) == 1 and "big" in ev[0]["what"] and "small" not in ev[0]["what"]
    assert ev[0]["writes"] == [{"cgroup": "kubepods/besteffort/pod-big", "knob": "cgroup.kill", "value": 1}]
    assert ev[0]["inputs"]["usage_percent"] >= 70
    assert r.cgroups["kubepods/besteffort/pod-big"].memory["current"] == 0
    assert r.cgroups["kubepods/besteffort/pod-small"].memory["current"] == 600 * MI
    # off unless configured (koordlet's default)
    r = run_scenario(Scenario.from_toml(NODE.replace("memory_evict = true\n", "")), progress=False).runs["me"]
    assert not any(d["what"].startswith("BE memory evict") for d in r.decisions)
