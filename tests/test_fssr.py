"""rubik's dynMemory FSSR: the state machine against rubik.md §3.1 by hand, and on a node
whose online service needs memory the offline job holds (with swap to push it to)."""

from __future__ import annotations

import pytest

from policies.dyn_memory import Fssr
from sim.runner import run_scenario
from sim.scenario import Scenario

GI = 2**30


def test_fast_suppression_slow_recovery_by_hand():
    total = 100 * GI
    f = Fssr.start(total)
    assert (f.high, f.reserved) == (80 * GI, 10 * GI)
    # free < 10%: −10% of total a tick, floor 30%
    assert [f.step(5 * GI) for _ in range(6)] == [70 * GI, 60 * GI, 50 * GI, 40 * GI, 30 * GI, None]
    assert f.high == 30 * GI
    # the middle band (10%..20%, bounds included) resets the count and writes nothing
    f.count = 5
    assert f.step(15 * GI) is None and f.count == 0
    assert f.step(20 * GI) is None and f.step(10 * GI) is None
    # free > 20%: 12 ticks only count, the 13th raises by 1% of total
    assert [f.step(25 * GI) for _ in range(12)] == [None] * 12
    assert f.step(25 * GI) == 31 * GI and f.count == 0
    # ... and the next +1% takes 13 ticks again (65 s)
    assert [f.step(25 * GI) for _ in range(12)] == [None] * 12 and f.step(25 * GI) == 32 * GI
    # ceiling 80%
    f.high = 80 * GI
    f.count = 12
    assert f.step(25 * GI) is None and f.count == 0


def test_integer_arithmetic_as_rubik():
    f = Fssr.start(1000)
    assert (f.high, f.reserved) == (800, 100)
    assert f.step(99) == 700
    g = Fssr.start(7)  # 7 × 8/10 = 5, 7/10 = 0: total/10 = 0 → the "≤ 0" stop never triggers
    assert (g.high, g.reserved) == (5, 0)


NODE = """
[scenario]
name = "fssr"
duration = "40s"
seed = 1

[node]
cores_per_socket = 4
memory = "4Gi"
swap = "4Gi"

[cgroups.online]
[cgroups.offline]

[workloads.online]
kind = "memory_hog"
cgroup = "online"
bytes = "1Gi"
mode = "keep"
start = "12s"

[workloads.offline]
kind = "memory_hog"
cgroup = "offline"
bytes = "2800Mi"
mode = "keep"

[policy]
name = "rubik"
offline = ["offline"]
"""


def run(policy_extra: str):
    sc = Scenario.from_toml(NODE.replace('offline = ["offline"]', 'offline = ["offline"]\n' + policy_extra))
    return run_scenario(sc, progress=False).runs["fssr"]


def test_fssr_pushes_the_offline_job_back_when_memory_runs_short():
    plain = run("")
    fssr = run('dyn_memory = "fssr"')
    # rubik starts the offline cap at 80% of 4 GiB, then suppresses when MemFree < 10%
    writes = [d for d in fssr.decisions if "dynMemory fssr" in d["what"] and d["writes"] and d["writes"][0]["knob"] == "memory.high"]
    assert writes[0]["writes"][0] == {"cgroup": "offline", "knob": "memory.high", "value": 4 * GI * 8 // 10}
    assert any("suppress" in d["what"] for d in writes)
    off_plain, off_fssr = plain.cgroups["offline"].memory, fssr.cgroups["offline"].memory
    # the offline job's memory went to swap under its lowered memory.high ...
    assert off_fssr["swap"] > 0 and off_fssr["current"] < off_plain["current"]
    assert off_fssr["current"] <= min(d["writes"][0]["value"] for d in writes) + 2**20 * 64
    # ... and the node has free memory again, where without FSSR the kernel's own reclaim
    # keeps it at the watermarks
    assert fssr.node_memory["free"] > plain.node_memory["free"]
    assert plain.cgroups["online"].memory["current"] == fssr.cgroups["online"].memory["current"] == GI


def test_fssr_without_node_memory_says_so():
    sc = Scenario.from_toml(
        NODE.replace('memory = "4Gi"\nswap = "4Gi"\n', "")
        .replace('kind = "memory_hog"', 'kind = "hog"\nthreads = 1')
        .replace('bytes = "1Gi"\nmode = "keep"\n', "")
        .replace('bytes = "2800Mi"\nmode = "keep"\n', "")
        .replace('offline = ["offline"]', 'offline = ["offline"]\ndyn_memory = "fssr"')
    )
    r = run_scenario(sc, progress=False).runs["fssr"]
    assert any("the node's memory is unknown" in d["what"] for d in r.decisions)


def test_dyn_memory_policies_are_fssr_and_dynlevel():
    from policies import PolicyError, build_policy

    build_policy({"name": "rubik", "dyn_memory": "dynlevel"})  # rubik 1.0's strategy
    with pytest.raises(PolicyError, match='dyn_memory: "fssr" .* or "dynlevel"'):
        build_policy({"name": "rubik", "dyn_memory": "fast"})


def test_dynlevel_caps_the_offline_job_under_pressure():
    """rubik 1.0's dynlevel on the same node: when the online job's 1 GiB leaves MemFree at
    most 10% of total (high or critical), the offline job's hard limit becomes its usage + 2%
    of MemFree, and it is held there."""
    r = run('dyn_memory = "dynlevel"')
    caps = [d for d in r.decisions if "dynlevel" in d["what"] and any(w["knob"] == "memory.limit_in_bytes" for w in d["writes"])]
    assert caps and ("→ high" in caps[0]["what"] or "→ critical" in caps[0]["what"])
    cap = caps[0]["writes"][0]
    assert cap["cgroup"] == "offline" and cap["value"] < 2800 * 2**20 + 4 * GI // 50
    assert r.cgroups["offline"].memory["current"] <= min(w["writes"][0]["value"] for w in caps)


def test_memoryevict_when_the_online_job_grows():
    """rubik's memoryevict (policies/watermark_evict.py) on the same node: 2800 MiB of 4 GiB
    (68%) is below 80%; once the online job's 1 GiB arrives (12 s) the node is over it and the
    offline pod goes, at a check (every 4 s from the first at 0.1 s: the cool-down)."""
    r = run("memory_evict = { threshold = 80 }")
    ev = [d for d in r.decisions if d["what"].startswith("memoryevict")]
    assert len(ev) == 1 and ev[0]["writes"][0]["cgroup"] == "offline"
    assert ev[0]["t_s"] >= 12.0 and ev[0]["inputs"]["util"] >= 80
    assert round(ev[0]["t_s"] - 0.1, 6) % 4 == 0
