"""The scenario file: what a user writes (TOML), validated, and turned into the core spec.

A scenario describes one node (topology, kernel knobs, cgroups, workloads) and, optionally,
several runs of it that differ by a few overrides (`[[runs]] set = {...}`).  Validation
happens here, before the core is touched, and every error names the field by its dotted path
(see `sim.overrides` for the quoting rule) and says why.

    scenario = load_scenario("experiments/clickhouse_stress.toml", ["kernel.hz=1000"])
    for variant in scenario.variants():
        spec = variant.scenario.core_spec(seed=1)    # the JSON document sim._core.Node takes

The package follows the document's tables: `distributions`, `workloads` (and the traces that
drive them), `node` (node and kernel), `cgroups`, `pods` (pods, kubelet, scheduler),
`document` (the scenario, its runs, reading files) and `messages` (validation errors in the
user's words); `base` is what they share.
"""

from sim.errors import ScenarioError
from sim.scenario.base import Duration, PositiveDuration, Rate, rate_bytes
from sim.scenario.cgroups import Cgroup
from sim.scenario.distributions import Constant, Distribution, Empirical, Exponential, Lognormal
from sim.scenario.document import (
    Meta,
    Run,
    Scenario,
    Variant,
    load_scenario,
    policy_file,
    read_document,
    trace_overrides,
)
from sim.scenario.node import Disk, Kernel, Network, Topology
from sim.scenario.pods import Kubelet, PodTable, Scheduler
from sim.scenario.workloads import (
    BATCH_KINDS,
    HOST_PROGRAMS,
    IO_KINDS,
    KINDS,
    MEMORY_KINDS,
    NET_KINDS,
    SEED_QUERY,
    SERVICE_KINDS,
    Analytics,
    Bursty,
    CacheWriter,
    ClosedLoop,
    Database,
    Dd,
    Duty,
    FileServer,
    Hog,
    HostProgram,
    Iperf,
    MemoryHog,
    OpenLoop,
    Role,
    TraceRef,
    Workload,
    trace_memory_series,
    trace_series,
)

__all__ = [
    "BATCH_KINDS",
    "HOST_PROGRAMS",
    "IO_KINDS",
    "KINDS",
    "MEMORY_KINDS",
    "NET_KINDS",
    "SEED_QUERY",
    "SERVICE_KINDS",
    "Analytics",
    "Bursty",
    "CacheWriter",
    "Cgroup",
    "ClosedLoop",
    "Constant",
    "Database",
    "Dd",
    "Disk",
    "Distribution",
    "Duration",
    "Duty",
    "Empirical",
    "Exponential",
    "FileServer",
    "Hog",
    "HostProgram",
    "Iperf",
    "Kernel",
    "Kubelet",
    "Lognormal",
    "MemoryHog",
    "Meta",
    "Network",
    "OpenLoop",
    "PodTable",
    "PositiveDuration",
    "Rate",
    "Role",
    "Run",
    "Scenario",
    "ScenarioError",
    "Scheduler",
    "Topology",
    "TraceRef",
    "Variant",
    "Workload",
    "load_scenario",
    "policy_file",
    "rate_bytes",
    "read_document",
    "trace_memory_series",
    "trace_overrides",
    "trace_series",
]
