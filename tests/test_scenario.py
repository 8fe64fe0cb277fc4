"""The scenario schema: every bad input is a ScenarioError naming the field by its path."""

from __future__ import annotations

import json
import textwrap

import pytest

from sim.duration import format_duration, parse_duration
from sim.overrides import format_path, parse_assignment, parse_path
from sim.scenario import Scenario, ScenarioError, load_scenario

BASE = textwrap.dedent(
    """
    [scenario]
    name = "t"
    duration = "10s"
    warmup = "1s"

    [cgroups.online]
    [cgroups.offline]
    "cpu.shares" = 2

    [workloads.web]
    kind = "open_loop"
    cgroup = "online"
    rate = 100
    workers = 4
    service = { dist = "exponential", mean = "1ms" }

    [workloads.stress]
    kind = "hog"
    cgroup = "offline"
    threads = 2
    """
)


def scenario(text: str = BASE, overrides=()) -> Scenario:
    return Scenario.from_toml(text, overrides=overrides)


def error(text: str, overrides=()) -> str:
    with pytest.raises(ScenarioError) as info:
        scenario(text, overrides)
    return str(info.value)


# --- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("48ms", 48_000_000),
        ("2.5s", 2_500_000_000),
        (30, 30_000_000_000),
        (0.1, 100_000_000),
        ("100us", 100_000),
        ("7ns", 7),
        ("1m", 60_000_000_000),
        ("0s", 0),
        ("3", 3_000_000_000),
    ],
)
def test_durations_parse_to_ns(text, ns):
    assert parse_duration(text) == ns


@pytest.mark.parametrize("bad", ["-1s", "5h", "abc", True, None, float("nan"), -2, "1.2.3s"])
def test_bad_durations_are_value_errors(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_duration_round_trips():
    for ns in (0, 7, 100_000, 48_000_000, 2_500_000_000, 90_000_000_000):
        assert parse_duration(format_duration(ns)) == ns


def test_durations_in_the_document_are_ns():
    s = scenario()
    assert s.scenario.duration == 10_000_000_000
    assert s.scenario.sample_interval == 100_000_000  # default
    assert s.core_spec()["workloads"][0]["service"] == {"dist": "exponential", "mean_ns": 1_000_000}


# --- the core spec -----------------------------------------------------------------------


def test_core_spec_shape():
    spec = scenario().core_spec(seed=9)
    assert spec["seed"] == 9
    assert spec["topology"] == {
        "sockets": 1,
        "numa_nodes_per_socket": 1,
        "cores_per_socket": 8,
        "threads_per_core": 1,
        "smt_speed": 0.6,
        "numa_remote_speed": 0.75,
        "siblings": None,
    }
    assert spec["kernel"]["scheduler"] == "cfs" and spec["kernel"]["hz"] == 250
    assert spec["kernel"]["sched_latency_ns"] is None
    no_quota = {
        "cpu.cfs_quota_us": -1,
        "cpu.cfs_period_us": 100_000,
        "cpu.cfs_burst_us": 0,
        "cpuset.cpus": None,
        "cpuset.mems": None,
        # no memory limits, no protection
        "memory.limit_in_bytes": -1,
        "memory.high": -1,
        "memory.low": 0,
        "memory.min": 0,
        "memory.oom.group": 0,
        # default IO weights, no IO or network limits, not marked offline
        "blkio.weight": 100,
        "blkio.cost.weight": 100,
        "blkio.throttle.read_bps_device": 0,
        "blkio.throttle.write_bps_device": 0,
        "blkio.throttle.read_iops_device": 0,
        "blkio.throttle.write_iops_device": 0,
        "net_cls.classid": 0,
        "net.egress_bps": 0,
    }
    assert spec["cgroups"] == [
        {"name": "online", "parent": "", "cpu.shares": 1024, "cpu.idle": 0, "cpu.qos_level": 0} | no_quota,
        {"name": "offline", "parent": "", "cpu.shares": 2, "cpu.idle": 0, "cpu.qos_level": 0} | no_quota,
    ]
    assert spec["workloads"] == [
        {
            "kind": "open_loop",
            "name": "web",
            "cgroup": "online",
            "rate_per_s": 100.0,
            "workers": 4,
            "backlog": 4096,
            "service": {"dist": "exponential", "mean_ns": 1_000_000},
            "start_ns": 0,
        },
        {"kind": "hog", "name": "stress", "cgroup": "offline", "threads": 2, "start_ns": 0},
    ]
    assert spec["sample_interval_ns"] == 100_000_000
    assert spec["memory"] is None  # no [node] memory: not modelled
    assert scenario().core_spec()["seed"] == 1  # the scenario's own seed by default


def test_distributions_convert_to_ns_fields():
    text = (
        BASE.replace(
            'service = { dist = "exponential", mean = "1ms" }',
            'service = { dist = "empirical", edges = ["1ms", "2ms", 0.005], weights = [1, 3] }',
        )
        .replace('kind = "open_loop"', 'kind = "closed_loop"')
        .replace(
            "rate = 100\nworkers = 4",
            'clients = 3\nfanout = "ncpus"\nthink = { dist = "lognormal", mean = "5ms", sigma = 0.5 }',
        )
    )
    text += "\n[node]\ncores_per_socket = 4\nthreads_per_core = 2\n"
    web = scenario(text).core_spec()["workloads"][0]
    assert web["fanout"] == 8  # "ncpus": 1 socket x 4 cores x 2 threads
    assert web["think"] == {"dist": "lognormal", "mean_ns": 5_000_000, "sigma": 0.5}
    assert web["service"] == {
        "dist": "empirical",
        "edges_ns": [1_000_000, 2_000_000, 5_000_000],
        "weights": [1.0, 3.0],
    }


def test_bare_duration_is_a_constant_distribution():
    text = BASE.replace('service = { dist = "exponential", mean = "1ms" }', 'service = "2ms"')
    assert scenario(text).core_spec()["workloads"][0]["service"] == {
        "dist": "constant",
        "value_ns": 2_000_000,
    }


def test_closed_loop_defaults():
    text = BASE.replace('kind = "open_loop"', 'kind = "closed_loop"').replace("rate = 100\nworkers = 4", "clients = 2")
    web = scenario(text).core_spec()["workloads"][0]
    assert web["fanout"] == 1
    assert web["think"] == {"dist": "constant", "value_ns": 0}


def test_disabled_workloads_are_left_out():
    text = BASE.replace("threads = 2", "threads = 2\nenabled = false")
    assert [w["name"] for w in scenario(text).core_spec()["workloads"]] == ["web"]


def test_cgroup_paths_name_their_parent_and_come_after_it():
    text = BASE + textwrap.dedent(
        """
        [cgroups."kubepods/besteffort"]
        "cpu.idle" = 1
        [cgroups.kubepods]
        "cpu.shares" = 4096
        """
    )
    cgroups = scenario(text).core_spec()["cgroups"]
    names = [c["name"] for c in cgroups]
    assert names.index("kubepods") < names.index("kubepods/besteffort")
    child = cgroups[names.index("kubepods/besteffort")]
    assert child["parent"] == "kubepods" and child["cpu.idle"] == 1


def test_cgroup_parent_must_be_declared():
    message = error(BASE + '[cgroups."kubepods/besteffort"]\n')
    assert 'cgroups."kubepods/besteffort"' in message and '"kubepods"' in message


def test_nested_cgroup_table_hints_at_the_quoted_path():
    message = error(BASE + "[cgroups.kubepods.besteffort]\n")
    assert 'cgroups."kubepods/besteffort"' in message


# --- errors name the field -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("rate = 100", "rate = -5", "workloads.web.rate: must be > 0 (got -5)"),
        ("rate = 100", "rate = 0", "workloads.web.rate: must be > 0 (got 0)"),
        ("rate = 100", "rtae = 100", "workloads.web.rtae: unknown field"),
        ("workers = 4", "workers = 0", "workloads.web.workers: must be >= 1 (got 0)"),
        (
            'cgroup = "online"',
            'cgroup = "foo"',
            'workloads.web.cgroup: no cgroup named "foo" (declared: online, offline; "/" is the root cgroup)',
        ),
        ('"cpu.shares" = 2', '"cpu.shares" = 1', 'cgroups.offline."cpu.shares": must be >= 2'),
        (
            '"cpu.shares" = 2',
            '"cpu.qos_level" = 1',
            'cgroups.offline."cpu.qos_level": must be -1 or 0',
        ),
        ('"cpu.shares" = 2', '"cpu.idle" = 2', 'cgroups.offline."cpu.idle": must be 0 or 1'),
        ('"cpu.shares" = 2', '"cpu.idle" = true', 'cgroups.offline."cpu.idle": must be an integer'),
        ('"cpu.shares" = 2', '"cpu.wieght" = 2', 'cgroups.offline."cpu.wieght": unknown field'),
        ('kind = "hog"', 'kind = "hogs"', "workloads.stress.kind: must be"),
        ('kind = "hog"\n', "", "workloads.stress.kind: required field missing"),
        ("threads = 2", "threads = 2.5", "workloads.stress.threads: must be an integer"),
        (
            "threads = 2",
            'threads = 2\nenabled = "no"',
            "workloads.stress.enabled: must be true or false",
        ),
        ('dist = "exponential"', 'dist = "gauss"', "workloads.web.service.dist: must be"),
        ('mean = "1ms"', 'mean = "-1ms"', "workloads.web.service.mean: must be a duration >= 0"),
        ('mean = "1ms"', "mean = 0", "workloads.web.service.mean: must be > 0"),
        ('mean = "1ms"', 'mean = "1ms", sigma = 1', "workloads.web.service.sigma: unknown field"),
        ('mean = "1ms"', 'mean = "1 fortnight"', "workloads.web.service.mean: unknown unit"),
        ('duration = "10s"', "", "scenario.duration: required field missing"),
        ('warmup = "1s"', 'warmup = "10s"', "scenario.warmup: must be less than scenario.duration"),
        ('name = "t"', 'name = ""', "scenario.name: must not be empty"),
        ("[cgroups.online]", "[cgroup.online]", "cgroup: unknown field"),
        ("rate = 100", "rate = inf", "workloads.web.rate: must be a finite number"),
        (
            '"cpu.shares" = 2',
            '"cpu.cfs_quota_us" = 500',
            'cgroups.offline."cpu.cfs_quota_us": must be -1 (no limit) or >= 1000',
        ),
        (
            '"cpu.shares" = 2',
            '"cpu.cfs_quota_us" = 50000\n"cpu.cfs_burst_us" = 60000',
            'cgroups.offline."cpu.cfs_burst_us": must not exceed cpu.cfs_quota_us',
        ),
        (
            '"cpu.shares" = 2',
            '"cpu.cfs_period_us" = 2000000',
            'cgroups.offline."cpu.cfs_period_us": must be <= 1000000',
        ),
        ('kind = "hog"', 'kind = "bursty"', "workloads.stress.every: required field missing"),
    ],
)
def test_bad_fields_name_their_path(old, new, expected):
    assert old in BASE
    assert expected in error(BASE.replace(old, new, 1))


def test_zero_cpus():
    assert "node.cores_per_socket: must be >= 1 (got 0)" in error(BASE + "[node]\ncores_per_socket = 0\n")
    assert "node.sockets: must be >= 1" in error(BASE + "[node]\nsockets = 0\n")
    assert "node.threads_per_core: must be >= 1" in error(BASE + "[node]\nthreads_per_core = 0\n")


def test_fanout_must_be_positive_or_ncpus():
    text = BASE.replace('kind = "open_loop"', 'kind = "closed_loop"').replace("rate = 100\nworkers = 4", 'clients = 2\nfanout = "all"')
    assert 'workloads.web.fanout: must be an integer >= 1 or "ncpus"' in error(text)


def test_empirical_needs_one_more_edge_than_weights():
    text = BASE.replace(
        '{ dist = "exponential", mean = "1ms" }',
        '{ dist = "empirical", edges = ["1ms", "2ms"], weights = [1, 2] }',
    )
    assert "workloads.web.service.edges: must have one more item than weights" in error(text)


def test_typo_suggests_the_field():
    assert 'did you mean "rate"' in error(BASE.replace("rate = 100", "rtae = 100"))


def test_malformed_toml_names_the_line():
    message = error(BASE.replace("rate = 100", "rate = = 100"))
    line = BASE.splitlines().index("rate = 100") + 1
    assert message.startswith(f"scenario.toml line {line}: ")


def test_errors_are_one_line():
    text = BASE.replace("rate = 100", "rate = -1").replace("threads = 2", "threads = 0")
    message = error(text)
    assert "\n" not in message
    assert "workloads.web.rate" in message and "workloads.stress.threads" in message


def test_scenario_error_is_a_value_error():
    assert issubclass(ScenarioError, ValueError)


# --- dotted paths and overrides ----------------------------------------------------------


def test_paths_follow_toml_dotted_keys():
    assert parse_path('cgroups.offline."cpu.qos_level"') == ("cgroups", "offline", "cpu.qos_level")
    assert parse_path("cgroups.'a/b'.x") == ("cgroups", "a/b", "x")
    assert format_path(("cgroups", "a/b", "cpu.shares")) == 'cgroups."a/b"."cpu.shares"'
    assert format_path(("runs", 2, "name")) == "runs[2].name"
    for path in [("workloads", "web", "rate"), ("cgroups", "offline", "cpu.qos_level")]:
        assert parse_path(format_path(path)) == path


def test_set_values_are_toml_or_strings():
    assert parse_assignment("workloads.stress.threads=4") == (("workloads", "stress", "threads"), 4)
    assert parse_assignment("workloads.stress.enabled=false")[1] is False
    assert parse_assignment("workloads.web.service=48ms")[1] == "48ms"
    assert parse_assignment('cgroups.offline."cpu.qos_level"=-1') == (
        ("cgroups", "offline", "cpu.qos_level"),
        -1,
    )
    assert parse_assignment('workloads.web.service={dist="constant", value="1ms"}')[1] == {
        "dist": "constant",
        "value": "1ms",
    }


def test_cli_overrides_apply():
    s = scenario(
        overrides=[
            "workloads.web.rate=250",
            'cgroups.offline."cpu.qos_level"=-1',
            "kernel.hz=1000",  # [kernel] is not in the file: a top-level table is created
            "workloads.web.service=3ms",
        ]
    )
    assert s.workloads["web"].rate == 250
    assert s.cgroups["offline"].cpu_qos_level == -1
    assert s.kernel.hz == 1000
    assert s.core_spec()["workloads"][0]["service"] == {"dist": "constant", "value_ns": 3_000_000}


def test_overrides_as_a_mapping():
    s = scenario(overrides={"workloads.stress.threads": 7})
    assert s.workloads["stress"].threads == 7


def test_override_replaces_a_distribution_of_another_kind():
    s = scenario(overrides=['workloads.web.service={dist="lognormal", mean="2ms", sigma=0.3}'])
    assert s.core_spec()["workloads"][0]["service"]["dist"] == "lognormal"


def test_override_merges_into_a_table_of_the_same_kind():
    s = scenario(overrides=['workloads.web.service={mean="2ms"}'])
    assert s.core_spec()["workloads"][0]["service"] == {"dist": "exponential", "mean_ns": 2_000_000}


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("workloads.wbe.rate=1", '--set workloads.wbe.rate: workloads has no "wbe"'),
        ("workloads.web.rate.x=1", "--set workloads.web.rate.x: workloads.web.rate is not a table"),
        ("a..b=1", "--set a..b: not a dotted key"),
        ("noequals", "--set 'noequals': expected key=value"),
        ("=1", "missing key"),
        ("runs.x=1", "runs cannot be overridden"),
        ("workloads.web.rate=-1", "workloads.web.rate: must be > 0 (got -1)"),
        ("workloads.web.rtae=1", "workloads.web.rtae: unknown field"),
    ],
)
def test_bad_overrides(override, expected):
    assert expected in error(BASE, [override])


# --- runs --------------------------------------------------------------------------------

RUNS = BASE + textwrap.dedent(
    """
    [[runs]]
    name = "alone"
    set = { "workloads.stress.enabled" = false }

    [[runs]]
    name = "together"
    baseline = true

    [[runs]]
    name = "qos"
    set = { 'cgroups.offline."cpu.qos_level"' = -1, workloads.stress.threads = 5 }
    """
)


def test_runs_apply_their_set():
    s = scenario(RUNS)
    variants = {v.name: v for v in s.variants()}
    assert list(variants) == ["alone", "together", "qos"]
    assert [w["name"] for w in variants["alone"].scenario.core_spec()["workloads"]] == ["web"]
    qos = variants["qos"].scenario
    assert qos.cgroups["offline"].cpu_qos_level == -1
    assert qos.workloads["stress"].threads == 5  # nested-table form of a dotted key
    assert variants["together"].scenario.cgroups["offline"].cpu_qos_level == 0
    assert s.baseline == "together"


def test_first_run_is_the_default_baseline():
    s = scenario(RUNS.replace("baseline = true\n", ""))
    assert s.baseline == "alone"
    assert [v.baseline for v in s.variants()] == [True, False, False]


def test_without_runs_there_is_one_run_named_after_the_scenario():
    variants = scenario().variants()
    assert [(v.name, v.baseline) for v in variants] == [("t", True)]
    assert variants[0].scenario.core_spec() == scenario().core_spec()


def test_cli_overrides_apply_to_every_run_and_win():
    s = scenario(RUNS, ["workloads.stress.threads=9"])
    assert {v.name: v.scenario.workloads["stress"].threads for v in s.variants()} == {
        "alone": 9,
        "together": 9,
        "qos": 9,
    }


@pytest.mark.parametrize(
    ("set_line", "expected"),
    [
        ('set = { "workloads.strss.enabled" = false }', 'workloads has no "strss"'),
        (
            'set = { "workloads.stress.enabeld" = false }',
            'runs[0] "alone": workloads.stress.enabeld: unknown field',
        ),
        ('set = { "workloads.stress.threads" = 0 }', "workloads.stress.threads: must be >= 1"),
        ('set = { "workloads..x" = 1 }', "workloads..x: not a dotted key"),
        ('set = { "scenario.duration" = 3 }', "a run cannot change [scenario]"),
    ],
)
def test_bad_run_sets(set_line, expected):
    text = RUNS.replace('set = { "workloads.stress.enabled" = false }', set_line)
    message = error(text)
    assert expected in message
    assert message.startswith('runs[0] "alone"')


def test_run_names_unique_and_one_baseline():
    assert 'runs[1].name: duplicate run name "alone"' in error(RUNS.replace('name = "together"', 'name = "alone"'))
    assert "runs[2].baseline: only one run can be the baseline" in error(RUNS.replace('name = "qos"', 'name = "qos"\nbaseline = true'))


# --- files and the example experiment ----------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(tmp_path / "nope.toml")


def test_malformed_file_names_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[scenario\n")
    with pytest.raises(ScenarioError, match=r"bad\.toml line 1: "):
        load_scenario(path)


def test_clickhouse_stress_experiment(root):
    s = load_scenario(root / "experiments" / "clickhouse_stress.toml")
    assert s.name == "clickhouse_stress"
    assert (s.duration_s, s.warmup_s, s.ncpus) == (300.0, 2.0, 8)
    names = [v.name for v in s.variants()]
    assert names == [
        "ClickHouse (baseline)",
        "ClickHouse + stress (no isolation)",
        "ClickHouse + stress (offline cpu.qos_level=-1)",
        "ClickHouse + stress (offline cpu.idle=1)",
    ]
    assert s.baseline == "ClickHouse (baseline)"
    specs = {v.name: v.scenario.core_spec() for v in s.variants()}
    for spec in specs.values():
        assert [(c["name"], c["parent"], c["cpu.shares"]) for c in spec["cgroups"]] == [
            ("online", "", 1024),
            ("offline", "", 1024),
        ]
        clickhouse = spec["workloads"][0]
        assert clickhouse == {
            "kind": "closed_loop",
            "name": "clickhouse",
            "cgroup": "online",
            "clients": 10,
            "fanout": 8,
            "think": {"dist": "constant", "value_ns": 0},
            "service": {"dist": "lognormal", "mean_ns": 48_000_000, "sigma": 0.4},
            "start_ns": 0,
        }
    assert [w["name"] for w in specs["ClickHouse (baseline)"]["workloads"]] == ["clickhouse"]
    stress = specs["ClickHouse + stress (no isolation)"]["workloads"][1]
    assert stress == {
        "kind": "hog",
        "name": "stress",
        "cgroup": "offline",
        "threads": 10,
        "start_ns": 0,
    }

    def offline(run):
        return specs[run]["cgroups"][1]

    assert offline("ClickHouse + stress (no isolation)")["cpu.qos_level"] == 0
    assert offline("ClickHouse + stress (offline cpu.qos_level=-1)")["cpu.qos_level"] == -1
    assert offline("ClickHouse + stress (offline cpu.idle=1)")["cpu.idle"] == 1
    assert offline("ClickHouse + stress (offline cpu.idle=1)")["cpu.qos_level"] == 0


def test_cpu2_knobs_reach_the_core_spec():
    text = BASE.replace('"cpu.shares" = 2', '"cpu.cfs_quota_us" = 200000\n"cpu.cfs_burst_us" = 100000\n"cpuset.cpus" = "2-3"')
    text += '\n[kernel]\nscheduler = "eevdf"\nbase_slice = "3ms"\nsmt_expeller = true\n'
    spec = scenario(text).core_spec()
    offline = spec["cgroups"][1]
    assert (offline["cpu.cfs_quota_us"], offline["cpu.cfs_burst_us"], offline["cpuset.cpus"]) == (200_000, 100_000, "2-3")
    assert spec["kernel"]["scheduler"] == "eevdf"
    assert spec["kernel"]["base_slice_ns"] == 3_000_000 and spec["kernel"]["smt_expeller"] is True


def test_bursty_workload_converts_to_ns():
    text = BASE.replace(
        'kind = "hog"\ncgroup = "offline"\nthreads = 2',
        'kind = "bursty"\ncgroup = "offline"\nevery = "30s"\nlength = "200ms"',
    )
    (_, bursty) = scenario(text).core_spec()["workloads"]
    assert bursty == {
        "kind": "bursty",
        "name": "stress",
        "cgroup": "offline",
        "steady_threads": 1,
        "burst_threads": 2,
        "every_ns": 30_000_000_000,
        "length_ns": 200_000_000,
        "start_ns": 0,
    }


# --- [kernel] cfs_period_phase ---------------------------------------------------------------


@pytest.mark.parametrize(("value", "ns"), [('"random"', None), ('"0ms"', 0), ('"30ms"', 30_000_000), ("0.25", 250_000_000)])
def test_cfs_period_phase_is_random_or_a_duration(value, ns):
    sc = scenario(BASE + f"\n[kernel]\ncfs_period_phase = {value}\n")
    assert sc.kernel.cfs_period_phase == ns
    assert sc.core_spec()["kernel"]["cfs_period_phase_ns"] == ns


def test_cfs_period_phase_defaults_to_random():
    assert scenario().core_spec()["kernel"]["cfs_period_phase_ns"] is None


@pytest.mark.parametrize("bad", ['"1s"', '"-5ms"', '"rand"', "true", '"2h"'])
def test_a_bad_cfs_period_phase_is_one_message_naming_it(bad):
    msg = error(BASE + f"\n[kernel]\ncfs_period_phase = {bad}\n")
    assert msg.startswith("kernel.cfs_period_phase: ") and '"random"' in msg and "\n" not in msg, msg


# --- [kernel] version and sched_features (which EEVDF the core runs) -------------------------


def test_kernel_version_and_sched_features_reach_the_core():
    sc = scenario(
        BASE + '\n[kernel]\nscheduler = "eevdf"\nversion = "6.18.44"\nsched_features = {DELAY_DEQUEUE = false, NEXT_BUDDY = false}\n'
    )
    k = sc.core_spec()["kernel"]
    assert k["version"] == "6.18.44"
    assert k["sched_features"] == {"DELAY_DEQUEUE": False, "NEXT_BUDDY": False}
    assert scenario().core_spec()["kernel"]["version"] is None  # the core's default: 6.6


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('version = "6.x"', "kernel.version: "),
        ('version = "linux-6.18"', "kernel.version: "),
        ("sched_features = {DELAY_DEQUE = false}", "kernel.sched_features.DELAY_DEQUE: "),
    ],
)
def test_bad_kernel_version_or_feature_names_its_field(line, field):
    msg = error(BASE + f"\n[kernel]\n{line}\n")
    assert msg.startswith(field) and "\n" not in msg, msg


def test_the_core_names_an_unknown_feature_itself():
    # The same check when a document skips the schema (core JSON): one line naming the field.
    from sim._core import Node

    spec = scenario().core_spec(seed=1)
    spec["kernel"]["sched_features"] = {"PICK_BUDY": True}
    with pytest.raises(ValueError, match=r"^kernel\.sched_features\.PICK_BUDY: is not a scheduler feature"):
        Node(json.dumps(spec))


@pytest.mark.parametrize("bad", ["6.10", "6", "6.18e0"])
def test_a_kernel_version_written_as_a_number_is_refused_with_its_quoting(bad):
    """6.10 as a TOML float is 6.1: the release must be text, and the message shows how."""
    msg = error(BASE + f"\n[kernel]\nversion = {bad}\n")
    assert msg.startswith("kernel.version: must be a quoted kernel release") and "\n" not in msg, msg
    assert scenario(BASE + '\n[kernel]\nversion = "6.10"\n').kernel.version == "6.10"


def test_group_shares_reach_the_core_and_default_to_instant():
    sc = scenario(BASE + '\n[kernel]\nscheduler = "eevdf"\ngroup_shares = "pelt"\n')
    assert sc.core_spec()["kernel"]["group_shares"] == "pelt"
    assert scenario().core_spec()["kernel"]["group_shares"] == "instant"  # every result before PELT


def test_a_bad_group_shares_is_one_message_naming_it():
    msg = error(BASE + '\n[kernel]\ngroup_shares = "pelt-ish"\n')
    assert msg.startswith("kernel.group_shares: ") and '"pelt"' in msg and "\n" not in msg, msg
    from sim._core import Node

    spec = scenario().core_spec(seed=1)
    spec["kernel"]["group_shares"] = "pelt-ish"
    with pytest.raises(ValueError, match=r"group_shares|pelt-ish") as e:
        Node(json.dumps(spec))
    assert "\n" not in str(e.value), e.value
