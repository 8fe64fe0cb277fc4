"""rubik's cpuevict and memoryevict services. Upstream pkg/services/eviction has no unit
tests, so nothing is ported; these check the code's rules (rubik.md §4.3, read from
cpu/{config,cpu}.go, memory/{config,memory}.go, common/manager.go) by hand, and on a node."""

from __future__ import annotations

import pytest

from policies import watermark_evict as we
from policies.cgroup import NodeStats
from policies.policy import PolicyError
from sim.runner import run_scenario
from sim.scenario import Scenario


def test_cpu_config_by_hand():
    c = we.cpu_config({})
    assert (c.interval, c.windows, c.threshold, c.cooldown) == (1, 2, 60, 20)  # windows 0 → 2 × interval
    assert we.cpu_config({"interval": 5}).windows == 10
    for table, msg in [
        ({"interval": 0}, r"interval should be in the range \[1, 3600\]"),
        ({"interval": 2, "windows": 3}, "integral multiple of interval 2"),
        ({"threshold": 100}, r"threshold should be in the range \[1, 99\]"),
        ({"cooldown": 0}, "cooldown"),
        ({"windows": 3601}, "windows"),
        ({"period": 1}, "cpu_evict.period: unknown"),
    ]:
        with pytest.raises(PolicyError, match=msg):
            we.cpu_config(table)


def test_memory_config_by_hand():
    with pytest.raises(PolicyError, match="threshold: required"):
        we.memory_config({})
    c = we.memory_config({"threshold": 80})
    assert (c.interval, c.threshold, c.cooldown) == (1, 80, 4)
    with pytest.raises(PolicyError, match=r"\[1, 99\]"):
        we.memory_config({"threshold": 100})


def test_used_percent_is_gopsutils():
    # 16 GiB total, 2 GiB free, 1 GiB buffers, 3 GiB cached, 1 GiB SReclaimable: 9/16 used
    g = 2**30
    assert we.mem_used_percent(16 * g, 2 * g, g, 3 * g, g) == 56.25


def node(busy_s: float, total_s: float) -> NodeStats:
    return NodeStats(4, int(busy_s * 1e9), int(total_s * 1e9))


def test_cpu_window_by_hand():
    w = we.CpuWindow(windows=2)
    w.collect(0.0, node(0, 0))
    assert w.util() == -1.0  # one sample: no decision
    w.collect(1.0, node(2, 4))
    w.collect(2.0, node(5, 8))
    assert w.util() == pytest.approx(62.5)  # (5 − 0) / (8 − 0)
    w.collect(3.0, node(5, 12))  # the t=0 sample is windows + 1 = 3 s old: dropped
    assert [t for t, _ in w.samples] == [1.0, 2.0, 3.0]
    assert w.util() == pytest.approx(100 * 3 / 8)
    w.collect(10.0, node(6, 40))  # everything older than 3 s goes
    assert [t for t, _ in w.samples] == [10.0] and w.util() == -1.0


def test_cooldown_by_hand():
    c = we.Cooldown()
    assert c.ready(0.0)
    c.start(0.0, 20)
    assert not c.ready(19.9) and c.ready(20.0)


NODE = """
[scenario]
name = "evict"
duration = "30s"
seed = 1

[node]
cores_per_socket = 4

[cgroups.online]
[cgroups.off1]
[cgroups.off2]

[workloads.web]
kind = "hog"
cgroup = "online"
threads = 1

[workloads.big]
kind = "hog"
cgroup = "off1"
threads = 2

[workloads.small]
kind = "hog"
cgroup = "off2"
threads = 1

[policy]
name = "rubik"
offline = ["off1", "off2"]
online = ["online"]
cpu_evict = { threshold = 60 }
"""


def test_cpuevict_on_a_busy_node():
    """The node is 100% busy from the start. The first check (one sample) cannot decide but
    still starts the 20 s cool-down, so the offline pod using the most CPU goes at the
    check 20 s later, and only it."""
    r = run_scenario(Scenario.from_toml(NODE), progress=False).runs["evict"]
    ev = [d for d in r.decisions if d["what"].startswith("cpuevict")]
    assert len(ev) == 1 and ev[0]["writes"][0]["cgroup"] == "off1"
    assert 20.0 <= ev[0]["t_s"] < 20.5 and ev[0]["inputs"]["util"] >= 60
