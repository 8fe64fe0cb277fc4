"""A workload kind is one unit: its role, its results, what replay runs for it and the [node]
table it needs are declared once on its class, and the tuner, replay, the scenario checks and
the core agree with the declaration."""

from __future__ import annotations

import textwrap
from typing import get_args

import pytest

from sim.scenario import KINDS, HostProgram, Scenario

EVERY_KIND = textwrap.dedent(
    """
    [scenario]
    name = "kinds"
    duration = "1s"

    [node]
    cores_per_socket = 4
    memory = "8Gi"
    disk = {}
    network = { egress = "1Gbit" }

    [cgroups.online]
    [cgroups.offline]

    [workloads.hog]
    kind = "hog"
    cgroup = "offline"
    threads = 1

    [workloads.closed_loop]
    kind = "closed_loop"
    cgroup = "online"
    clients = 1
    service = "1ms"

    [workloads.open_loop]
    kind = "open_loop"
    cgroup = "online"
    rate = 10
    workers = 1
    service = "1ms"

    [workloads.bursty]
    kind = "bursty"
    cgroup = "online"
    every = "100ms"
    length = "1ms"

    [workloads.memory_hog]
    kind = "memory_hog"
    cgroup = "offline"
    bytes = "1Mi"

    [workloads.file_server]
    kind = "file_server"
    cgroup = "online"
    clients = 1
    service = "1ms"
    working_set = "1Mi"
    file_size = "64Ki"

    [workloads.cache_writer]
    kind = "cache_writer"
    cgroup = "offline"

    [workloads.analytics]
    kind = "analytics"
    cgroup = "offline"
    working_set = "1Mi"
    work = "1ms"

    [workloads.duty]
    kind = "duty"
    cgroup = "offline"
    max_threads = 1

    [workloads.dd]
    kind = "dd"
    cgroup = "offline"

    [workloads.database]
    kind = "database"
    cgroup = "online"
    clients = 1
    service = "1ms"

    [workloads.iperf]
    kind = "iperf"
    cgroup = "offline"
    """
)


def every_kind() -> Scenario:
    return Scenario.from_toml(EVERY_KIND)


def test_the_scenario_has_every_kind():
    assert {w.kind for w in every_kind().workloads.values()} == set(KINDS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_declares_what_it_is(kind):
    cls = KINDS[kind]
    # role and requests have no default: each kind says them itself
    assert "role" in vars(cls) and cls.role in ("service", "batch")
    assert "requests" in vars(cls) and isinstance(cls.requests, bool)
    assert cls.role != "service" or cls.requests, "a service has requests"
    programs = get_args(HostProgram.model_fields["program"].annotation)
    assert "builtin" in cls.host_programs and set(cls.host_programs) <= set(programs)
    assert isinstance(cls.replays, bool)
    assert cls.needs in (None, "memory", "disk", "network")
    # declarations are class facts, not fields a scenario could set
    assert not {"role", "requests", "host_programs", "replays", "needs"} & set(cls.model_fields)


def test_the_core_keeps_requests_for_the_kinds_that_declare_them():
    pytest.importorskip("sim._core")
    from sim.environment import NodeEnvironment

    scenario = every_kind()
    env = NodeEnvironment(scenario.core_spec())
    assert set(env.node.service_names()) == {n for n, w in scenario.workloads.items() if w.requests}


def test_the_tuner_splits_by_role():
    from sim.tuning.evaluate import default_batch, services_of

    scenario = every_kind()
    assert services_of(scenario) == [n for n, w in scenario.workloads.items() if KINDS[w.kind].role == "service"]
    assert default_batch(scenario) == [n for n, w in scenario.workloads.items() if KINDS[w.kind].role == "batch"]
    assert "dd" in default_batch(scenario) and "database" in services_of(scenario)


def test_replay_measures_the_services_and_runs_only_what_replays():
    from replay.workloads import HostWorkload
    from sim.errors import HostError

    scenario = every_kind()
    spec = {w["name"]: w for w in scenario.core_spec()["workloads"]}
    for name, w in scenario.workloads.items():
        hw = HostWorkload(name, w, spec[name], f"workloads.{name}")
        assert hw.is_service == (w.role == "service")
        if not w.replays:
            with pytest.raises(HostError, match="replay"):
                hw.check()


def test_replay_compares_only_services():
    from types import SimpleNamespace

    from replay.compare import metrics

    scenario = every_kind()
    svc = SimpleNamespace(qps=1.0, p50_s=1.0, p90_s=1.0, p99_s=1.0)
    run = SimpleNamespace(
        services={n: svc for n, w in scenario.workloads.items() if w.requests},
        cgroups={},
        measured_s=0,
        others_cpu_share=None,
        replay_cpu_share=None,
    )
    compared = {key.removesuffix(" QPS") for key in metrics(run, scenario) if key.endswith(" QPS")}  # type: ignore[arg-type]
    assert compared == {n for n, w in scenario.workloads.items() if w.role == "service"}
    assert "dd" not in compared and "analytics" not in compared


def test_the_node_tables_kinds_need():
    from sim.errors import ScenarioError

    for kind, cls in KINDS.items():
        if cls.needs is None:
            continue
        table = {"memory": 'memory = "8Gi"\n', "disk": "disk = {}\n", "network": 'network = { egress = "1Gbit" }\n'}[cls.needs]
        text = EVERY_KIND.replace(table, "")
        with pytest.raises(ScenarioError, match=rf"workloads\.{kind}\.kind: an? \w+ workload needs the node's"):
            Scenario.from_toml(text)
