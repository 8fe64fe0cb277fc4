"""rubik's quotaTurbo service at start (quotaturbo.go PreStart → recoverOnePodQuota) in a
simulation: a pod whose CPU quota an earlier run left raised gets its limit × period back
before quotaTurbo takes its container, which then starts from the recovered quota."""

from __future__ import annotations

from sim.runner import run_scenario
from sim.scenario import Scenario

NODE = """
[scenario]
name = "qt"
duration = "2s"
seed = 1

[node]
cores_per_socket = 4

[pods.web]
qos = "LS"
cpu_request = 1
cpu_limit = 1
memory_request = "1Gi"
memory_limit = "1Gi"

[pods.batch]
qos = "BE"

[cgroups."kubepods/pod-web"]
"cpu.cfs_quota_us" = 300000

[workloads.web]
kind = "hog"
pod = "web"
threads = 2

[workloads.b]
kind = "hog"
pod = "batch"
threads = 2

[policy]
name = "rubik"
quota_turbo = ["kubepods/pod-web"]
"""


def run(doc: str):
    return run_scenario(Scenario.from_toml(doc), progress=False).runs["qt"]


def test_prestart_recovers_a_raised_pod_quota_to_its_limit():
    r = run(NODE)
    (d,) = [d for d in r.decisions if d["what"].startswith("quotaTurbo PreStart")]
    # recoverOnePodQuota's order: the pod to -1, its container (here the pod's own cgroup) to
    # int(1 CPU × 100000 µs), then the pod to the sum of its containers'
    assert d["t_s"] == 0.0 and [w["value"] for w in d["writes"]] == [-1, 100_000, 100_000]
    # from then on the pod runs under 1 CPU, not the 3 it was left with (2 hog threads)
    assert r.cgroups["kubepods/pod-web"].nr_throttled > 0


def test_a_fresh_node_needs_no_recovery():
    r = run(NODE.replace('[cgroups."kubepods/pod-web"]\n"cpu.cfs_quota_us" = 300000\n', ""))
    assert not any(d["what"].startswith("quotaTurbo PreStart") for d in r.decisions)
