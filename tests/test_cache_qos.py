"""The agents' cache QoS through the real core (issue 20): experiments/cache_qos.toml and a
static CAT mask, checked against what the hardware promises (a group holds no more of the LLC
than its ways) and the direction the mechanism must move the service."""

from __future__ import annotations

import tomllib
from pathlib import Path

from sim import NodeEnvironment, load_scenario
from sim.runner import run_scenario
from sim.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent
OFFLINE = "kubepods/burstable/pod-offline"
ONLINE = "kubepods/pod-online"


def _seed003(resctrl: dict | None) -> NodeEnvironment:
    doc = tomllib.loads((ROOT / "experiments/koordinator_cpu_curve.toml").read_text())
    doc.pop("runs")
    if resctrl is not None:
        doc["resctrl"] = resctrl
    return NodeEnvironment(Scenario.from_document(doc).core_spec())


def test_a_cat_mask_bounds_the_groups_occupancy_and_gives_the_service_back_its_cache():
    """Seed 003's node (20 ways of 30 MB per socket) with the offline pod confined to ways
    0-5 (koordlet's BE default, 0-30 %): on every socket its occupancy is at most 6/20 of the
    LLC (CAT's promise), and the online pod retires more instructions in the same CPU time."""
    plain = _seed003(None)
    cat = _seed003({"BE": {"schemata": "L3:0=3f;1=3f", "cgroups": [OFFLINE]}})
    for env in (plain, cat):
        env.run(until=3.0)
    llc = cat.node.resctrl_info()["llc_bytes"]
    assert isinstance(llc, int)
    for dom in cat.node.resctrl_mon("BE").values():
        assert dom["llc_occupancy"] <= llc * 6 // 20
    assert max(d["llc_occupancy"] for d in cat.node.resctrl_mon("BE").values()) > 0
    # without the mask the offline job holds more than its 6 ways somewhere
    assert max(d["llc_occupancy"] for d in plain.node.resctrl_mon("").values()) > llc * 6 // 20
    ipc = {name: env.node.perf_counters(ONLINE) for name, env in (("plain", plain), ("cat", cat))}
    per_cycle = {k: v["instructions"] / v["cycles"] for k, v in ipc.items()}
    assert per_cycle["cat"] > 1.02 * per_cycle["plain"]


def test_koordinator_resctrl_qos_restores_part_of_the_service():
    """experiments/cache_qos.toml at 30 offline cores: koordlet's resctrl QoS (BE in 30 % of
    the ways) on top of CPU suppress serves more than CPU suppress alone, and both more than
    plain colocation; the alone run is the ceiling."""
    sc = load_scenario(ROOT / "experiments/cache_qos.toml", ["scenario.duration=8s"])
    r = run_scenario(sc, progress=False)
    q = {name: run.services["wrk"].qps for name, run in r.runs.items()}
    assert q["plain colocation, 30c"] < q["Koordinator, 30c"] < q["Koordinator + resctrl QoS, 30c"]
    assert q["Koordinator + resctrl QoS, 30c"] > 1.03 * q["Koordinator, 30c"]
    assert q["Koordinator + resctrl QoS, 30c"] <= q["alone"] * 1.02
    # the policy wrote koordlet's BE mask (ways [0, ceil(20 * 0.3)) = 0x3f) on both domains
    resctrl = [a for run in [r.runs["Koordinator + resctrl QoS, 30c"]] for d in run.decisions for a in d.get("resctrl", [])]
    assert {"group": "BE", "schemata": "L3:0=3f;1=3f;\n"} in resctrl


def test_rubik_dyncache_writes_its_level_through_the_seam():
    """rubik's dynCache puts the offline pod in its level's group ("rubik_low") and writes
    the level's schemata through the seam into the core."""
    level = "low"
    sc = load_scenario(ROOT / "experiments/cache_qos.toml", ["scenario.duration=3s"])
    r = run_scenario(sc, progress=False)
    run = r.runs[f"rubik dynCache {level}, 10c"]
    groups = {a["group"] for d in run.decisions for a in d.get("resctrl", [])}
    assert f"rubik_{level}" in groups
