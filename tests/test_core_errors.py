"""Bad input that reaches the Rust core directly gives one clear Python exception naming the
problem — never a Rust panic (pyo3_runtime.PanicException) or a crash."""

from __future__ import annotations

import json

import pytest

core = pytest.importorskip("sim._core")


def spec(**over):
    s = {
        "topology": {"sockets": 1, "cores_per_socket": 2},
        "cgroups": [{"name": "online"}],
        "workloads": [
            {
                "kind": "open_loop",
                "name": "web",
                "cgroup": "online",
                "rate_per_s": 100.0,
                "workers": 2,
                "service": {"dist": "constant", "value_ns": 1000},
            },
        ],
    }
    s.update(over)
    return json.dumps(s)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("{not json", "core spec"),
        (spec(topology={"sockets": 1, "cores_per_socket": 0}), "topology.cores_per_socket"),
        (
            spec(
                workloads=[
                    {
                        "kind": "open_loop",
                        "name": "web",
                        "cgroup": "online",
                        "rate_per_s": -5.0,
                        "workers": 1,
                        "service": {"dist": "constant", "value_ns": 1},
                    }
                ]
            ),
            "rate_per_s",
        ),
        (spec(workloads=[{"kind": "hog", "name": "h", "cgroup": "nope", "threads": 1}]), 'no cgroup named "nope"'),
        (spec(cgroups=[{"name": "a", "cpu.shares": 1}]), "cpu.shares"),
        (spec(cgroups=[{"name": "a", "colour": 1}]), "colour"),
        (spec(topology={"sockets": 1, "cores_per_socket": 2, "threads_per_core": 2, "siblings": [[0, 1], [1, 3]]}), "siblings[1]"),
    ],
)
def test_bad_spec_is_a_value_error_naming_the_field(text, needle):
    with pytest.raises(ValueError) as err:
        core.Node(text)
    assert needle in str(err.value)


def test_bad_calls_are_clear_errors():
    n = core.Node(spec())
    n.run_until(1_000_000)
    with pytest.raises(ValueError, match="before now"):
        n.run_until(10)
    with pytest.raises(KeyError, match="no cgroup named"):
        n.write("ghost", "cpu.shares", 100)
    with pytest.raises(ValueError, match="unknown knob"):
        n.write("online", "cpu.weight", 100)
    with pytest.raises(ValueError, match="cpu.qos_level"):
        n.write("online", "cpu.qos_level", 3)
    with pytest.raises(KeyError, match="no service named"):
        n.service_latencies("nope")
    # The node is still usable after user errors.
    n.run_until(2_000_000)
    assert n.now() == 2_000_000


def test_knobs_are_written_as_their_files_take_them():
    n = core.Node(spec())
    n.write("online", "cpu.shares", 512)
    assert n.read("online", "cpu.shares") == 512
    n.write("online", "cpuset.cpus", "1")
    assert n.read("online", "cpuset.cpus") == "1"
    with pytest.raises(ValueError, match="cpuset.cpus"):
        n.write("online", "cpuset.cpus", "0-7")
    n.write("online", "cpuset.cpus", 0)  # like `echo 0 > cpuset.cpus`
    assert n.read("online", "cpuset.cpus") == "0"
    with pytest.raises(ValueError, match="not a bool"):
        n.write("online", "cpu.idle", True)
    n.write("online", "cpu.cfs_quota_us", 50_000)
    assert n.read("online", "cpu.cfs_quota_us") == 50_000
    with pytest.raises(ValueError, match="must not exceed cpu.cfs_quota_us"):
        n.write("online", "cpu.cfs_burst_us", 60_000)
