"""The agents' own configuration files (policies/formats): Koordinator's NodeSLO and
slo-controller-config ConfigMap, rubik's config.json.

Truth: the upstream examples in tests/data/formats (koordinator.sh docs, rubik docs) read
against the defaults of koordinator's pkg/util/sloconfig/nodeslo_config.go and
colocation_config.go and rubik's services' NewConfig; the ranges of their `validate:` tags
and Validate functions; and, for the round trip, `colosim run` under the TOML policy that
`colosim tune` writes against the same run under each file written beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.formats import nodeslo, rubik_config
from sim.cli import main
from sim.errors import ScenarioError
from sim.scenario import policy_file, read_document
from tests.test_tune import TINY, load

DATA = Path(__file__).parent / "data" / "formats"
TEMPLATE = DATA / "slo-controller-config-template.yaml"


def read(path: Path) -> dict[str, Any]:
    return policy_file(path)["policy"]


def enabled(table: dict[str, Any]) -> dict[str, Any]:
    """A table with its disabled memory QoS classes left out (they write nothing, whether
    the class is absent or written with enable false)."""
    out = dict(table)
    out["memory_qos"] = {c: v for c, v in (table.get("memory_qos") or {}).items() if v.get("enable")}
    return out


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- upstream examples -------------------------------------------------------------------


def test_nodeslo_from_the_docs_with_koordlets_defaults():
    p = read(DATA / "nodeslo-quickstart.yaml")
    # what the NodeSLO says
    assert p["name"] == "koordinator" and p["cpu_suppress_policy"] == "cpuset"
    assert p["cpu_suppress_threshold_percent"] == 60 and p["memory_evict_threshold_percent"] == 60
    # what it leaves out: DefaultCPUBurstConfig (none, 1000, 300, -1), sharePoolThresholdPercent 50
    assert (p["cpu_burst_policy"], p["cpu_burst_percent"], p["cfs_quota_burst_percent"], p["cfs_quota_burst_period_seconds"]) == (
        "none",
        1000,
        300,
        -1,
    )
    assert p["share_pool_threshold_percent"] == 50
    # DefaultMemoryQOS: classes off; wmarkRatio 95 / wmarkScalePermill 20, the system class 0 / 50
    assert not any(c["enable"] for c in p["memory_qos"].values())
    assert (p["memory_qos"]["LS"]["wmark_ratio"], p["memory_qos"]["LS"]["wmark_scale_permill"]) == (95, 20)
    assert (p["memory_qos"]["SYSTEM"]["wmark_ratio"], p["memory_qos"]["SYSTEM"]["wmark_scale_permill"]) == (0, 50)
    # BECPUEvict is off until both satisfaction percents are set
    assert p["cpu_evict_be_satisfaction_lower_percent"] == 0 and p["cpu_evict_be_satisfaction_upper_percent"] == 0


def test_the_configmap_template_from_the_docs(tmp_path):
    text = TEMPLATE.read_text()
    # verbatim, the template's system-config is not JSON (no comma after clusterStrategy)
    with pytest.raises(ScenarioError, match=r"data\.system-config: not JSON: Expecting ',' delimiter \(line 7 column 3 of the value\)"):
        read(TEMPLATE)
    text = text.replace('"memcgReapBackGround": 0\n      }\n', '"memcgReapBackGround": 0\n      },\n')
    # as shipped, the thresholds are off (enable false), which the koordinator policy cannot be
    with pytest.raises(ScenarioError, match=r"data\.resource-threshold-config\.clusterStrategy\.enable: must be true"):
        read(write(tmp_path, "a.yaml", text))
    text = text.replace('"clusterStrategy": {\n        "enable": false,', '"clusterStrategy": {\n        "enable": true,')
    p = read(write(tmp_path, "b.yaml", text))
    assert p["cpu_suppress_threshold_percent"] == 65 and p["memory_evict_threshold_percent"] == 70
    assert p["memory_evict_lower_percent"] == 65
    assert (
        p["cpu_evict_be_satisfaction_upper_percent"],
        p["cpu_evict_be_satisfaction_lower_percent"],
        p["cpu_evict_be_usage_threshold_percent"],
    ) == (90, 60, 90)
    assert (p["cpu_reclaim_threshold_percent"], p["memory_reclaim_threshold_percent"]) == (60, 65)
    # the cluster strategy, not the anolis nodes' (cfsQuotaBurstPercent 400, wmarkRatio 90)
    assert p["cfs_quota_burst_percent"] == 300 and p["memory_qos"]["BE"]["wmark_ratio"] == 95
    assert p["memory_qos"]["BE"]["wmark_scale_permill"] == 20 and p["memory_qos"]["BE"]["enable"] is False


def test_a_configmap_with_burst_only_names_the_missing_threshold_switch(tmp_path):
    path = DATA / "slo-controller-config-cpu-burst.yaml"
    with pytest.raises(ScenarioError, match=r"data\.resource-threshold-config\.clusterStrategy\.enable: must be true"):
        read(path)
    doc = yaml.safe_load(path.read_text())
    doc["data"]["resource-threshold-config"] = '{"clusterStrategy": {"enable": true}}'
    p = read(write(tmp_path, "c.yaml", yaml.safe_dump(doc)))
    assert p["cpu_burst_policy"] == "auto" and p["cpu_burst_percent"] == 1000 and p["cpu_suppress_threshold_percent"] == 65


def test_rubik_config_from_the_docs():
    p = read(DATA / "rubik-config.json")
    assert p["name"] == "rubik"
    # quotaTurbo: highWaterMark 50 given, alarmWaterMark 80 and syncInterval 100 ms by default
    assert (p["high_water_mark"], p["alarm_water_mark"], p["sync_interval"]) == (50, 80, 0.1)
    # preemption of cpu, memory and net, with net's bandwidths in MB
    assert p["net"] is True and (p["net_waterline_mb"], p["net_low_mb"], p["net_high_mb"]) == (20, 10, 100)
    # ioCost is enabled: the one device's linear model
    assert p["io_cost"] == dict.fromkeys(("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"), 10_000_000)
    # dynMemory and psi are not enabled; quotaTurbo and ioLimit are (their pods: the scenario's)
    assert p["dyn_memory"] is None and p["psi"] is None and "quota_turbo" not in p and "io_limit" not in p
    # psi's defaults (NewConfig: interval 10 s, avg10threshold 5.0)
    assert (p["psi_interval"], p["psi_avg10_threshold"]) == (10, 5.0)


def test_rubik_keys_match_case_insensitively_as_go_does(tmp_path):
    doc = {
        "agent": {"enabledFeatures": ["preemption", "psi"]},
        "preemption": {"resource": ["cpu"]},
        "PSI": {"Interval": 20, "avg10Threshold": 12.5, "resource": ["memory"]},
    }
    p = read(write(tmp_path, "rubik.json", json.dumps(doc)))
    assert (p["psi_interval"], p["psi_avg10_threshold"], p["psi"]) == (20, 12.5, {"resource": ["memory"]})


# --- errors: one line naming the field -----------------------------------------------------

NODESLO = "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeSLO\nspec:\n  resourceUsedThresholdWithBE:\n    enable: true\n"
RUBIK = {"agent": {"enabledFeatures": ["preemption", "quotaTurbo"]}, "preemption": {"resource": ["cpu"]}}


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "n.yaml",
            NODESLO + "  cpuBurstStrategy:\n    cpuBurstPercnt: 300\n",
            "spec.cpuBurstStrategy.cpuBurstPercnt: unknown field (known here: policy, cpuBurstPercent,",
        ),
        (
            "n.yaml",
            NODESLO + "  cpuBurstStrategy:\n    cpuBurstPercent: lots\n",
            "spec.cpuBurstStrategy.cpuBurstPercent: must be an integer (got 'lots')",
        ),
        # validate:"omitempty,min=100"
        (
            "n.yaml",
            NODESLO + "  cpuBurstStrategy:\n    cfsQuotaBurstPercent: 50\n",
            "spec.cpuBurstStrategy.cfsQuotaBurstPercent: must be in [100, inf] (got 50)",
        ),
        # upstream takes [0, 100]; koordlet's BECPUEvict runs only with lower <= 60
        (
            "n.yaml",
            NODESLO + "    cpuEvictBESatisfactionLowerPercent: 70\n    cpuEvictBESatisfactionUpperPercent: 80\n",
            "spec.resourceUsedThresholdWithBE.cpuEvictBESatisfactionLowerPercent: colosim models [0, 60] of it (got 70)",
        ),
        (
            "n.yaml",
            NODESLO + "    cpuSuppressPolicy: quota\n",
            "spec.resourceUsedThresholdWithBE.cpuSuppressPolicy: must be one of cpuset, cfsQuota (got 'quota')",
        ),
        (
            "n.yaml",
            NODESLO + "  resourceQOSStrategy:\n    lsClass:\n      memoryQOS:\n        enable: yes please\n",
            "lsClass.memoryQOS.enable: must be true or false",
        ),
        (
            "n.yaml",
            NODESLO.replace("v1alpha1", "v1beta1"),
            "apiVersion: a NodeSLO is slo.koordinator.sh/v1alpha1 (got 'slo.koordinator.sh/v1beta1')",
        ),
        ("n.yaml", NODESLO + "  cpuBurst: {}\n", "spec.cpuBurst: unknown field (known here: resourceUsedThresholdWithBE,"),
        ("n.yaml", NODESLO + "  cpuBurstStrategy: [\n", "not YAML: "),
        (
            "c.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slo-controller-config\ndata:\n"
            '  resource-threshold-config: \'{"clusterStrategy": {"enable": true}}\'\n'
            '  resource-qos-config: \'{"clusterStrategy": {"beClass": {"memoryQOS": {"wmarkScalePermill": 0}}}}\'\n',
            "data.resource-qos-config.clusterStrategy.beClass.memoryQOS.wmarkScalePermill: must be in [1, 1000] (got 0)",
        ),
        (
            "c.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slo-controller-config\ndata:\n  cpu-burst: '{}'\n",
            "data.cpu-burst: unknown key of slo-controller-config (known: resource-threshold-config,",
        ),
        (
            "c.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
            "metadata.name: the Koordinator ConfigMap is slo-controller-config (got 'other')",
        ),
        ("r.json", json.dumps({**RUBIK, "quotaTurbp": {}}), "quotaTurbp: unknown field (known here: agent, preemption, quotaTurbo, psi,"),
        # Validate: alarmWaterMark > highWaterMark; syncInterval in [100, 10000] ms
        ("r.json", json.dumps({**RUBIK, "quotaTurbo": {"highWaterMark": 85}}), "quotaTurbo.highWaterMark: must be below alarmWaterMark"),
        ("r.json", json.dumps({**RUBIK, "quotaTurbo": {"syncInterval": 50}}), "quotaTurbo.syncInterval: must be in [100, 10000] (got 50)"),
        (
            "r.json",
            json.dumps({**RUBIK, "agent": {"enabledFeatures": ["preemption", "turbo"]}}),
            "agent.enabledFeatures: must be one of preemption,",
        ),
        ("r.json", json.dumps({**RUBIK, "agent": {"enabledFeatures": ["quotaTurbo"]}}), 'agent.enabledFeatures: must list "preemption"'),
        (
            "r.json",
            json.dumps({**RUBIK, "agent": {"enabledFeatures": ["preemption", "psi"]}, "psi": {"resource": ["cpu"], "avg10threshold": 2}}),
            "psi.avg10threshold: must be in [5, 100] (got 2)",
        ),
        ("r.json", json.dumps({**RUBIK, "preemption": {"resource": ["cpu", "net"]}}), "preemption.net.waterline: required with net"),
        ("r.json", '{"agent": {', "not JSON: "),
    ],
)
def test_bad_fields_are_one_line_naming_the_path(tmp_path, capsys, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(ScenarioError) as err:
        read(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    # the CLI prints it as one line
    scenario = write(tmp_path, "tiny.toml", TINY.split("[tune]")[0])
    assert main(["run", str(scenario), "--policy", str(path), "--no-progress"]) == 2
    printed = capsys.readouterr().err
    assert message in printed and printed.count("\n") == 1


# --- the round trip: tune writes, --policy reads, run measures the same -------------------


def results(tmp_path: Path, scenario: Path, policy: Path, name: str) -> dict[str, Any]:
    out = tmp_path / name
    assert main(["run", str(scenario), "--policy", str(policy), "--out", str(out), "--no-progress"]) == 0
    return json.loads((out / "results.json").read_text())["runs"]


def test_koordinator_round_trip_through_tune(tmp_path, capsys):
    scenario = write(
        tmp_path,
        "tiny.toml",
        TINY.split("[tune]")[0]
        + "[tune]\nparams = { cpu_suppress_threshold_percent = [30, 100], cpu_burst_percent = [100, 2000], "
        + 'share_pool_threshold_percent = [10, 90] }\nslo = ["web.p99 <= 3 * solo"]\ntrials = 5\n',
    )
    out = tmp_path / "out"
    assert main(["tune", str(scenario), "--out", str(out), "--no-progress"]) == 0
    toml = out / "tuned_policy.toml"
    files = [out / "nodeslo-patch.yaml", out / "slo-controller-config.yaml"]
    assert toml.is_file() and all(f.is_file() for f in files)
    best = {k: v for k, v in read_document(toml)["policy"].items()}
    study = load(out)
    tuned = max((t for t in study.trials if all(v <= 0 for v in t.constraints.values())), key=lambda t: t.values[0]).params
    # the tuned thresholds are in the files, under their upstream names
    patch = yaml.safe_load(files[0].read_text())
    assert patch["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == tuned["cpu_suppress_threshold_percent"]
    assert patch["spec"]["cpuBurstStrategy"]["cpuBurstPercent"] == tuned["cpu_burst_percent"]
    cm = yaml.safe_load(files[1].read_text())
    burst = json.loads(cm["data"]["cpu-burst-config"])["clusterStrategy"]
    assert burst["sharePoolThresholdPercent"] == tuned["share_pool_threshold_percent"]
    # read back: the policy the TOML runs (its defaults spelt out)
    want = enabled(nodeslo.canonical(nodeslo.effective(best)))
    for f in files:
        got = enabled(read(f))
        assert {k: v for k, v in got.items() if k != "name"} == {k: want[k] for k in got if k != "name"}, f.name
        assert {"cpu_suppress_threshold_percent", "cpu_burst_percent", "share_pool_threshold_percent"} <= set(got)
    # and runs the same
    capsys.readouterr()
    base = results(tmp_path, scenario, toml, "toml")
    for f in files:
        assert results(tmp_path, scenario, f, f.stem) == base, f.name


RUBIK_SCENARIO = TINY.replace('[policy]\nname = "koordinator"', '[policy]\nname = "rubik"\nquota_turbo = ["kubepods/pod-online"]').split(
    "[tune]"
)[0]


def test_rubik_round_trip_through_tune(tmp_path, capsys):
    scenario = write(
        tmp_path,
        "rubik.toml",
        RUBIK_SCENARIO + "[tune]\nparams = { high_water_mark = [20, 70], elevate_limit = [0.5, 5] }\n"
        'slo = ["web.p99 <= 3 * solo"]\ntrials = 5\n',
    )
    out = tmp_path / "out"
    assert main(["tune", str(scenario), "--out", str(out), "--no-progress"]) == 0
    toml, file = out / "tuned_policy.toml", out / "rubik-config.json"
    best = read_document(toml)["policy"]
    doc = json.loads(file.read_text())
    assert doc["quotaTurbo"]["highWaterMark"] == best["high_water_mark"]
    assert doc["agent"]["enabledFeatures"] == ["preemption", "quotaTurbo"]
    got = read(file)
    want = rubik_config.effective(best)
    # what the file does not carry (which pods are under quotaTurbo) stays the scenario's
    assert {k: v for k, v in got.items() if k != "name"} == {k: want[k] for k in got if k != "name"}
    assert got["elevate_limit"] == best["elevate_limit"]
    capsys.readouterr()
    assert results(tmp_path, scenario, file, "json") == results(tmp_path, scenario, toml, "toml")


def test_a_rubik_config_with_every_modelled_feature_round_trips(tmp_path):
    table = {
        "name": "rubik",
        "high_water_mark": 40,
        "alarm_water_mark": 90,
        "sync_interval": 0.25,
        "psi": {"resource": ["cpu", "memory"]},
        "psi_interval": 15,
        "psi_avg10_threshold": 7.5,
        "dyn_memory": "fssr",
        "net": True,
        "net_waterline_mb": 50,
        "net_low_mb": 10,
        "net_high_mb": 200,
        "io_cost": dict.fromkeys(("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"), 1000),
        "cpu_evict": {"interval": 2, "windows": 6, "threshold": 70, "cooldown": 30},
        "memory_evict": {"interval": 1, "threshold": 85, "cooldown": 4},
    }
    path = write(tmp_path, "r.json", json.dumps(rubik_config.config_json(table)))
    got = read(path)
    want = rubik_config.effective(table)
    assert {k: v for k, v in got.items() if k != "name"} == {k: want[k] for k in got if k != "name"}
    assert json.loads(path.read_text())["preemption"] == {
        "resource": ["cpu", "net"],
        "net": {"waterline": 50, "bandwidthLow": 10, "bandwidthHigh": 200},
    }
    assert json.loads(path.read_text())["cpuevict"]["windows"] == 6 and got["memory_evict"]["threshold"] == 85


def test_rubik_eviction_sections_are_validated_as_rubik_does(tmp_path):
    """cpuevict's windows must be a multiple of its interval (services/eviction/cpu/config.go);
    memoryevict needs a threshold; a section whose feature is not enabled is off."""
    base = {"agent": {"enabledFeatures": ["preemption", "cpuevict"]}, "preemption": {"resource": ["cpu"]}}
    bad = write(tmp_path, "c.json", json.dumps({**base, "cpuevict": {"interval": 2, "windows": 3}}))
    with pytest.raises(ScenarioError, match=r"cpuevict\.windows: windows 3 must be an integral multiple of interval 2"):
        read(bad)
    ok = read(write(tmp_path, "d.json", json.dumps({**base, "cpuEvict": {"Threshold": 50}})))
    assert ok["cpu_evict"] == {"threshold": 50} and ok["memory_evict"] is None


def test_a_koordinator_table_with_memory_qos_and_blkio_round_trips(tmp_path):
    table = {
        "name": "koordinator",
        "besteffort": "be",
        "cpu_suppress_policy": "cfsQuota",
        "memory_qos": {"LSR": {"enable": True, "min_limit_percent": 100, "wmark_ratio": 90, "wmark_scale_permill": 30}},
        "memory_qos_be_throttling_percent": 80,
        "cpu_evict_be_satisfaction_lower_percent": 40,
        "cpu_evict_be_satisfaction_upper_percent": 70,
        "blkio_qos": True,
        "blkio_be_read_iops": 500,
        "blkio_be_io_weight_percent": 20,
    }
    want = enabled(nodeslo.canonical(nodeslo.effective(table)))
    from policies.formats import write_files

    for f in write_files(table, tmp_path):
        got = enabled(read(f))
        assert {k: v for k, v in got.items() if k != "name"} == {k: want[k] for k in got if k != "name"}, f.name
        assert got["memory_qos"]["BE"]["throttling_percent"] == 80 and got["memory_qos_be_throttling_percent"] == 0


def test_rubiks_daemonset_manifest_gives_its_config_json():
    # the shipped manifests: ClusterRole, ..., the rubik-config ConfigMap, the DaemonSet
    p = read(DATA / "rubik-daemonset.yaml")
    # its config.json enables preemption of cpu only: every other feature is off
    assert p["name"] == "rubik" and p["net"] is False and p["quota_turbo"] == [] and p["psi"] is None and p["dyn_memory"] is None
    assert (p["high_water_mark"], p["alarm_water_mark"]) == (60, 80)


def test_a_file_without_extension_is_told_by_content(tmp_path):
    nodeslo_text = (DATA / "nodeslo-quickstart.yaml").read_text()
    assert read(write(tmp_path, "nodeslo", nodeslo_text))["cpu_suppress_threshold_percent"] == 60
    assert read(write(tmp_path, "rubik", (DATA / "rubik-config.json").read_text()))["high_water_mark"] == 50
    assert read(write(tmp_path, "tuned", '[policy]\nname = "rubik"\nhigh_water_mark = 42\n')) == {"name": "rubik", "high_water_mark": 42}


def test_the_evictors_thresholds_round_trip_and_unset_ones_stay_out(tmp_path):
    """CPUEvict / *AllocatableEvict / MemoryEvict thresholds have no upstream default: those
    set are written under resourceUsedThresholdWithBE by their upstream names and read back;
    those unset (-1) are left out, so koordlet keeps them nil."""
    table = {
        "name": "koordinator",
        "besteffort": "be",
        "cpu_evict_threshold_percent": 85,
        "evict_enabled_priority_threshold": 7999,
        "memory_allocatable_evict_threshold_percent": 80,
        "memory_allocatable_evict_lower_percent": 70,
        "allocatable_evict_priority_threshold": 5999,
        "cpu_evict_policy": "evictByAllocatable",
    }
    spec = nodeslo.write_spec(table)["resourceUsedThresholdWithBE"]
    assert spec["cpuEvictPolicy"] == "evictByAllocatable"
    assert (spec["cpuEvictThresholdPercent"], spec["evictEnabledPriorityThreshold"], spec["allocatableEvictPriorityThreshold"]) == (
        85,
        7999,
        5999,
    )
    assert "cpuEvictLowerPercent" not in spec and "cpuAllocatableEvictThresholdPercent" not in spec
    from policies.formats import write_files

    for f in write_files(table, tmp_path):
        got = read(f)
        assert {k: got[k] for k in table if k not in ("name", "besteffort")} == {
            k: v for k, v in table.items() if k not in ("name", "besteffort")
        }
        assert "cpu_evict_lower_percent" not in got and "cpu_allocatable_evict_threshold_percent" not in got  # the policy keeps -1


def test_the_mid_tier_thresholds_round_trip_through_the_configmap(tmp_path):
    """midCPUThresholdPercent / midMemoryThresholdPercent / midUnallocatedPercent are the
    ColocationStrategy's (slo-controller-config's colocation-config), not the NodeSLO's."""
    from policies.formats import CONFIGMAP_FILE, write_files

    table = {"name": "koordinator", "besteffort": "be", "mid_cpu_threshold_percent": 60, "mid_unallocated_percent": 30}
    (configmap,) = [f for f in write_files(table, tmp_path) if f.name == CONFIGMAP_FILE]
    colocation = json.loads(yaml.safe_load(configmap.read_text())["data"]["colocation-config"])
    assert (colocation["midCPUThresholdPercent"], colocation["midUnallocatedPercent"]) == (60, 30)
    got = read(configmap)
    assert (got["mid_cpu_threshold_percent"], got["mid_unallocated_percent"], got["mid_memory_threshold_percent"]) == (60, 30, 100)
