"""One knob table (policies.cgroup.Knob): every view of a cgroup file's range — the scenario's
[cgroups] fields, replay's checks, the kubelet's shares clamp, the core's validation —
agrees with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from annotated_types import Ge, Le

from policies.cgroup import MEMORY_KNOBS, NET_KNOBS, PRESSURE_KNOBS, ROOT_KNOBS, Knob, KnobWrite
from policies.pods import MAX_SHARES, MIN_SHARES
from replay.cgroupfs import REPLAY_CONTROLLERS, check_value
from sim.errors import ScenarioError, WriteRefused
from sim.scenario import Cgroup, Scenario

ROOT = Path(__file__).resolve().parent.parent
INT_KNOBS = [k for k in Knob if not k.values.text]


def edges(k: Knob) -> tuple[list[int], list[int]]:
    """Values the table accepts and refuses, at the edges of its range."""
    v = k.values
    if v.only is not None:
        return list(v.only), [min(v.only) - 1, max(v.only) + 1]
    ok = [x for x in (v.lo, v.hi, v.none) if x is not None]
    bad = [x for x in (None if v.lo is None else v.lo - 1, None if v.hi is None else v.hi + 1) if x is not None and x != v.none]
    return ok, bad


def test_the_table_is_whole():
    for k in Knob:
        assert k.v1 and k.controller and (k.values.text or k.values.only or k.values.lo is not None)
        assert Knob.named(k.v1) is k
    assert PRESSURE_KNOBS == {Knob.CPU_PRESSURE, Knob.MEMORY_PRESSURE}
    assert ROOT_KNOBS and all(k.values.text for k in ROOT_KNOBS | PRESSURE_KNOBS)
    assert Knob.MEMORY_LIMIT in MEMORY_KNOBS and Knob.NET_CLS_CLASSID in NET_KNOBS


@pytest.mark.parametrize("knob", [k for k in INT_KNOBS if k.v1 in {f.alias for f in Cgroup.model_fields.values()}], ids=lambda k: k.v1)
def test_the_scenario_takes_the_tables_range(knob):
    field = next(f for f in Cgroup.model_fields.values() if f.alias == knob.v1)
    if knob in MEMORY_KNOBS and knob.values.only is None:
        return  # a size: its parser checks it ("512Mi", "max")
    bounds = {type(m).__name__.lower(): getattr(m, type(m).__name__.lower()) for m in field.metadata if isinstance(m, Ge | Le)}
    assert bounds == knob.values.bounds()
    ok, bad = edges(knob)
    for value in ok:
        Cgroup.model_validate({knob.v1: value})
    for value in bad:
        with pytest.raises(ValueError):
            Cgroup.model_validate({knob.v1: value})


@pytest.mark.parametrize("knob", [k for k in INT_KNOBS if k.controller in REPLAY_CONTROLLERS and not k.read_only], ids=lambda k: k.v1)
def test_replay_checks_the_tables_range(knob):
    ok, bad = edges(knob)
    for value in ok:
        check_value(KnobWrite("a", knob, value))
    for value in bad:
        with pytest.raises(WriteRefused, match="out of the kernel's range"):
            check_value(KnobWrite("a", knob, value))


def test_the_kubelet_clamps_shares_to_the_table():
    assert (MIN_SHARES, MAX_SHARES) == (Knob.CPU_SHARES.values.lo, Knob.CPU_SHARES.values.hi)


def test_the_shares_range_is_written_once():
    # in the Python tree; the core's own (core_rs/model/src/spec.rs) is checked below
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for d in ("sim", "policies", "replay", "traces")
        for p in (ROOT / d).rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\b262_?144\b", line)
    ]
    assert [h.split(":")[0] for h in hits] == ["policies/cgroup.py"], hits


CORE_NODE = """
[scenario]
name = "knobs"
duration = "1s"

[node]
cores_per_socket = 2
memory = "8Gi"
disk = {}
network = { egress = "1Gbit" }

[kernel]
alinux_memcg = true
openeuler_memcg = true

[cgroups.a]
"""


@pytest.mark.parametrize("knob", [k for k in INT_KNOBS if not k.root_only and k is not Knob.CGROUP_KILL], ids=lambda k: k.v1)
def test_the_core_takes_the_tables_range(knob):
    pytest.importorskip("sim._core")
    from sim.environment import NodeEnvironment

    ok, bad = edges(knob)
    for value in ok:
        env = NodeEnvironment(Scenario.from_toml(CORE_NODE).core_spec())
        env.node.write("a", knob.v1, value)
    for value in bad:
        env = NodeEnvironment(Scenario.from_toml(CORE_NODE).core_spec())
        with pytest.raises((ValueError, ScenarioError)):
            env.node.write("a", knob.v1, value)
