"""Koordinator's memory QoS (koordinator.md §3.2), by hand from the reference formulas, and
on a node: memory.min from the LS pod's request keeps a file server's page cache while a BE
writer fills the node."""

from __future__ import annotations

import pytest

from policies import PolicyError, build_policy
from policies.memory_qos import ClassConfig, cgroup_values, parse_classes, pod_values
from policies.pods import KubeQoS, Pod, PriorityClass, QoSClass
from sim.runner import run_scenario
from sim.scenario import Scenario

GI = 2**30
MI = 2**20


def pod(name, qos, req, lim, cgroup=None, cpu_req=1000, cpu_lim=1000):
    return Pod(name, qos, PriorityClass.PROD, 9000, cpu_req, cpu_lim, req, lim, cgroup or f"kubepods/burstable/pod-{name}")


def test_pod_values_by_hand():
    cfg = ClassConfig(enable=True, min_limit_percent=50, low_limit_percent=80, throttling_percent=80)
    v = pod_values(pod("a", QoSClass.LS, 4 * GI, 8 * GI), cfg, 64 * GI)
    assert v["memory.min"] == 2 * GI
    assert v["memory.low"] == 4 * GI * 80 // 100
    # high = floor((req + (limit − req) × 80/100) / page) × page
    assert v["memory.high"] == (4 * GI + 4 * GI * 80 // 100) // 4096 * 4096
    # low below min is raised to min; throttling 0 is no limit; no limit uses allocatable
    v = pod_values(pod("b", QoSClass.LS, 1 * GI, None), ClassConfig(True, 80, 20, 50), 16 * GI)
    assert v["memory.low"] == v["memory.min"] == 1 * GI * 80 // 100
    assert v["memory.high"] == (1 * GI + 15 * GI * 50 // 100) // 4096 * 4096
    assert pod_values(pod("c", QoSClass.LS, GI, 2 * GI), ClassConfig(True, 10, 10, 0), 16 * GI)["memory.high"] == -1
    # a class that is not enabled writes nothing (Koordinator's default for every class)
    assert pod_values(pod("d", QoSClass.LS, GI, 2 * GI), ClassConfig(), 16 * GI) == {}


def test_qos_directories_sum_their_pods():
    pods = (
        pod("g", QoSClass.LSR, 2 * GI, 2 * GI, "kubepods/pod-g"),
        pod("b1", QoSClass.LS, 1 * GI, 4 * GI),
        pod("b2", QoSClass.LS, 3 * GI, 4 * GI),
        pod("be", QoSClass.BE, 1 * GI, 2 * GI, "kubepods/besteffort/pod-be", 0, None),
    )
    assert pods[0].kube_qos is KubeQoS.GUARANTEED and pods[3].kube_qos is KubeQoS.BESTEFFORT
    classes = {
        "LSR": ClassConfig(True, 100, 100, 0),
        "LS": ClassConfig(True, 50, 100, 0),
        "BE": ClassConfig(True, 0, 50, 0, oom_kill_group=True),
    }
    out = cgroup_values(pods, classes, 64 * GI)
    assert out["kubepods/burstable"] == {"memory.min": 2 * GI, "memory.low": 4 * GI}
    assert out["kubepods/besteffort"] == {"memory.min": 0, "memory.low": GI // 2}
    assert out["kubepods"] == {"memory.min": 4 * GI, "memory.low": 6 * GI + GI // 2}
    assert list(out)[:3] == ["kubepods", "kubepods/burstable", "kubepods/besteffort"]  # parents first
    assert out["kubepods/besteffort/pod-be"]["memory.oom.group"] == 1
    # only LS enabled: the Guaranteed and BE pods contribute nothing, besteffort is not written
    out = cgroup_values(pods, {"LS": ClassConfig(True, 50, 0, 0)}, 64 * GI)
    assert out["kubepods"]["memory.min"] == 2 * GI and "kubepods/besteffort" not in out and "kubepods/pod-g" not in out


@pytest.mark.parametrize(
    "table, message",
    [
        ({"Gold": {}}, "memory_qos.Gold: unknown class"),
        ({"LS": {"min_limit_percent": 150}}, "memory_qos.LS.min_limit_percent: must be an integer percent in [0, 100]"),
        ({"LS": {"wmark": 1}}, "memory_qos.LS.wmark: unknown field"),
        ({"LS": {"enable": 1}}, "memory_qos.LS.enable: must be true or false"),
    ],
)
def test_bad_memory_qos_is_named(table, message):
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_classes(table, "policy.memory_qos")


NODE = """
[scenario]
name = "mq"
duration = "12s"
warmup = "4s"
seed = 1

[node]
cores_per_socket = 4
memory = "768Mi"

[pods.web]
qos = "LS"
cpu_request = 1
cpu_limit = 4
memory_request = "600Mi"
memory_limit = "900Mi"

[pods.batch]
qos = "BE"
memory_request = "100Mi"

[workloads.web]
kind = "file_server"
pod = "web"
clients = 2  # two CPUs left for the BE writer (besteffort's 2 shares would starve it)
service = "200us"
# cold: each 8 MiB file read about every 0.7 s, slower than the writer turns the inactive list
# over; its files went active in the warm-up, and the writer's stream keeps the node's
# inactive list low against them (inactive_is_low) until inactive ≈ active
think = "20ms"
working_set = "512Mi"
file_size = "8Mi"
disk_latency = "1ms"
disk_bandwidth = "1G"

[workloads.dd]
kind = "cache_writer"
pod = "batch"
start = "4s"

[policy]
name = "koordinator"
"""


def test_memory_min_from_the_request_keeps_the_servers_cache():
    off = run_scenario(Scenario.from_toml(NODE), progress=False).runs["mq"]
    on = run_scenario(
        Scenario.from_toml(
            NODE.replace('name = "koordinator"', 'name = "koordinator"\nmemory_qos = { LS = { enable = true, min_limit_percent = 100 } }')
        ),
        progress=False,
    ).runs["mq"]
    web = "kubepods/burstable/pod-web"
    assert any(d["what"].startswith(f"memory QoS {web}: memory.min {600 * MI}") for d in on.decisions)
    assert on.cgroups[web].memory["file"] == 512 * MI  # all protected: 512 MiB < min 600 MiB
    assert off.cgroups[web].memory["file"] < 400 * MI
    assert on.services["web"].mean_s * 5 < off.services["web"].mean_s


def test_koordinator_takes_memory_qos_in_its_table():
    with pytest.raises(PolicyError, match="policy.memory_qos.XL: unknown class"):
        build_policy({"name": "koordinator", "besteffort": "be", "memory_qos": {"XL": {}}})


def test_flat_memory_qos_parameters_are_the_same_as_the_table():
    """The tuner searches memory_qos_ls_min_limit_percent ...: it must act as the table does."""
    table = run_scenario(
        Scenario.from_toml(
            NODE.replace('name = "koordinator"', 'name = "koordinator"\nmemory_qos = { LS = { enable = true, min_limit_percent = 100 } }')
        ),
        progress=False,
    ).runs["mq"]
    flat = run_scenario(
        Scenario.from_toml(NODE.replace('name = "koordinator"', 'name = "koordinator"\nmemory_qos_ls_min_limit_percent = 100')),
        progress=False,
    ).runs["mq"]

    def qos(r):
        return [d["writes"] for d in r.decisions if d["what"].startswith("memory QoS")]

    assert qos(table) == qos(flat) and qos(flat)
    assert table.services["web"].mean_s == flat.services["web"].mean_s


WMARK_NODE = """
[scenario]
name = "wm"
duration = "1s"

[node]
cores_per_socket = 2
memory = "1Gi"

[kernel]
alinux_memcg = true

[pods.web]
qos = "LS"
memory_request = "100Mi"

[pods.batch]
qos = "BE"
memory_request = "100Mi"

[workloads.web]
kind = "hog"
pod = "web"
threads = 1

[workloads.dd]
kind = "hog"
pod = "batch"
threads = 1

[policy]
name = "koordinator"
memory_qos = { LS = { enable = true, wmark_min_adj = -25 }, BE = { enable = true, wmark_min_adj = 50 } }
"""


def test_koordinator_writes_each_classes_wmark_min_adj():
    """Koordinator's recommended memoryQOS (−25 for LS, 50 for BE) reaches the pods' cgroups
    through the seam; the core reads back the effective value (interfaces.rst: the largest
    on the way up, an ancestor's default 0 not counting)."""
    run = run_scenario(Scenario.from_toml(WMARK_NODE), progress=False).runs["wm"]
    shown = {d["what"].split(":")[0]: d["what"] for d in run.decisions if d["what"].startswith("memory QoS kubepods/")}
    assert "memory.wmark_min_adj -25" in shown["memory QoS kubepods/burstable/pod-web"]
    assert "memory.wmark_min_adj 50" in shown["memory QoS kubepods/besteffort/pod-batch"]


def test_the_core_keeps_wmark_min_adj_as_the_alibaba_kernel_does():
    pytest.importorskip("sim._core")
    from sim.environment import NodeEnvironment

    doc = WMARK_NODE.split("[policy]")[0] + '[cgroups.A]\n[cgroups."A/B"]\n[cgroups."A/B/E"]\n[cgroups.D]\n'
    env = NodeEnvironment(Scenario.from_toml(doc).core_spec())
    for cg, v in (("A", -10), ("A/B", -25), ("A/B/E", -25), ("D", 50)):
        env.node.write(cg, "memory.wmark_min_adj", v)
    assert [env.node.read(cg, "memory.wmark_min_adj") for cg in ("A", "A/B", "A/B/E", "D")] == [-10, -10, -10, 50]
    # interfaces.rst: "root memcg doesn't have this file"
    with pytest.raises(ValueError, match="root cgroup's knobs are not writable"):
        env.node.write("", "memory.wmark_min_adj", 50)
    with pytest.raises(ValueError, match=r"memory.wmark_min_adj must be in -25..=50 \(got 51\)"):
        env.node.write("D", "memory.wmark_min_adj", 51)
    plain = NodeEnvironment(Scenario.from_toml(doc.replace("alinux_memcg = true", "alinux_memcg = false")).core_spec())
    with pytest.raises(ValueError, match="Alibaba Cloud Linux memcg extension"):
        plain.node.write("D", "memory.wmark_min_adj", 50)
