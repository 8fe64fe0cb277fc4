"""rubik's PSI interference eviction (rubik.md §4.2): configuration, the victim choice, and on
a node: an online service throttled by memory.high shows memory pressure and rubik evicts the
offline pod using the most memory."""

from __future__ import annotations

import pytest

from policies import PolicyError, build_policy
from policies.psi_evict import parse, pick, some_avg10
from sim.runner import run_scenario
from sim.scenario import Scenario


def test_config_and_choice():
    assert parse({"resource": ["memory", "cpu"]}, "policy.psi") == ("memory", "cpu")
    for table, message in [
        ({"resource": ["io"]}, "policy.psi.resource: a non-empty list of cpu, memory"),
        ({"resource": ["cpu"], "interval": 5}, "policy.psi.interval: unknown field"),
    ]:
        with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse(table, "policy.psi")
    assert some_avg10("some avg10=12.50 avg60=1.00 avg300=0.00 total=9\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n") == 12.5
    # the largest user; a tie goes to the later (more recently started) pod
    assert pick("memory", ["a", "b", "c"], {"a": 5.0, "b": 9.0, "c": 1.0}) == "b"
    assert pick("cpu", ["a", "b"], {"a": 3.0, "b": 3.0}) == "b"
    with pytest.raises(PolicyError, match="policy.psi"):
        build_policy({"name": "rubik", "psi": {"resource": []}})
    # the interval and threshold are parameters, in rubik's ranges
    with pytest.raises(PolicyError, match=r"policy.psi_interval: must be in \[10, 30\]"):
        build_policy({"name": "rubik", "psi_interval": 5})
    with pytest.raises(PolicyError, match=r"policy.psi_avg10_threshold: must be in \[5, 100\]"):
        build_policy({"name": "rubik", "psi_avg10_threshold": 1.0})


NODE = """
[scenario]
name = "psi"
duration = "40s"
seed = 1

[node]
cores_per_socket = 4
memory = "4Gi"

[cgroups.online]
"memory.high" = "200Mi"
[cgroups.off1]
[cgroups.off2]

[workloads.web]
kind = "memory_hog"
cgroup = "online"
bytes = "300Mi"
chunk = "256Ki"
mode = "churn"

[workloads.big]
kind = "memory_hog"
cgroup = "off1"
bytes = "1Gi"
mode = "keep"

[workloads.small]
kind = "memory_hog"
cgroup = "off2"
bytes = "100Mi"
mode = "keep"

[policy]
name = "rubik"
offline = ["off1", "off2"]
online = ["online"]
psi = { resource = ["memory"] }
"""


def test_memory_pressure_of_an_online_pod_evicts_the_biggest_offline_pod():
    r = run_scenario(Scenario.from_toml(NODE), progress=False).runs["psi"]
    ev = [d for d in r.decisions if d["what"].startswith("PSI eviction")]
    # one per resource per tick: off1 at the first tick with pressure (10 s), then off2
    assert [d["writes"][0]["cgroup"] for d in ev] == ["off1", "off2"]
    assert ev[0]["t_s"] == pytest.approx(10.0, abs=0.2) and ev[0]["inputs"]["avg10"] > 5.0
    assert r.cgroups["off1"].memory["current"] == 0 and r.cgroups["online"].memory["psi_some_ns"] > 0
    # without psi configured nothing is evicted
    r = run_scenario(Scenario.from_toml(NODE.replace('psi = { resource = ["memory"] }\n', "")), progress=False).runs["psi"]
    assert not any(d["what"].startswith("PSI eviction") for d in r.decisions)
