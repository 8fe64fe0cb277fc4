"""koordlet's eviction features as the tasks of one round (../shared/reference/koordinator.md
§4; qosmanager plugins cpuevict/cpu_evict.go and memoryevict/memory_evict.go at a7a1b76,
`buildEvictTask`): the CPU evictor runs BECPUEvict → CPUAllocatableEvict → CPUEvict, the
memory evictor BEMemoryEvict → MemoryAllocatableEvict → MemoryEvict, each a koordlet feature
gate (all off by default). A feature whose NodeSLO thresholds are invalid is skipped with
upstream's reason; one with nothing to release adds no task. `policies.evict_round` then
takes the victims.

Pure functions: the node's usage and allocatable, the pods with their last usage sample, the
thresholds in, the round's tasks out. BECPUEvict's release comes from its window
(`policies.cpu_evict.to_release`), computed by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from policies import cpu_evict as ce
from policies import memory_evict as me
from policies.evict_round import REQUEST, USED, Task, Victim, release_by_allocatable
from policies.pods import Pod, PriorityClass, QoSClass

CPU_FEATURES = ("BECPUEvict", "CPUAllocatableEvict", "CPUEvict")
MEMORY_FEATURES = ("BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict")
FEATURES = CPU_FEATURES + MEMORY_FEATURES
REASON = "trigger by koordlet feature "  # EvictReasonPrefix
# apiext.ReverseResourceNameMap: the extended resources whose pods an allocatable task may take
RESOURCE_CLASS = {
    "batch-cpu": PriorityClass.BATCH,
    "batch-memory": PriorityClass.BATCH,
    "mid-cpu": PriorityClass.MID,
    "mid-memory": PriorityClass.MID,
}


@dataclass(frozen=True)
class Thresholds:
    """The NodeSLO's resourceUsedThresholdWithBE fields the evictors read (None: unset)."""

    memory_evict_threshold_percent: int | None = None
    memory_evict_lower_percent: int | None = None
    memory_allocatable_evict_threshold_percent: int | None = None
    memory_allocatable_evict_lower_percent: int | None = None
    cpu_evict_threshold_percent: int | None = None
    cpu_evict_lower_percent: int | None = None
    cpu_allocatable_evict_threshold_percent: int | None = None
    cpu_allocatable_evict_lower_percent: int | None = None
    cpu_evict_be_satisfaction_lower_percent: int | None = None
    cpu_evict_be_satisfaction_upper_percent: int | None = None
    evict_enabled_priority_threshold: int | None = None
    allocatable_evict_priority_threshold: int | None = None


@dataclass(frozen=True)
class PodState:
    """A pod as the evictors see it: its last CPU (millicores) and memory (bytes, no page
    cache) samples (None: no metric) and its phase."""

    pod: Pod
    cpu_used: float | None = None
    memory_used: float | None = None
    phase: str = "Running"


def config_error(feature: str, t: Thresholds | None) -> str | None:
    """Why the feature's configuration is invalid (`generateConfigCheck`,
    `isSatisfactionConfigValid`, `isUsedThresholdConfigValid`,
    `isAllocatableThresholdConfigValid`), None when it is valid."""
    if feature not in FEATURES:
        return f"unknown feature: {feature}"
    if t is None:
        return "ResourceThresholdStrategy not config" if "Allocatable" in feature else "resourceThresholdStrategy not config"
    if feature in ("BEMemoryEvict", "MemoryEvict"):
        return me.used_threshold_config_error(
            feature, t.memory_evict_threshold_percent, t.memory_evict_lower_percent, t.evict_enabled_priority_threshold
        )
    if feature == "MemoryAllocatableEvict":
        return ce.allocatable_config_error(
            t.memory_allocatable_evict_threshold_percent,
            t.memory_allocatable_evict_lower_percent,
            t.allocatable_evict_priority_threshold,
            "Memory",
        )
    if feature == "CPUAllocatableEvict":
        return ce.allocatable_config_error(
            t.cpu_allocatable_evict_threshold_percent, t.cpu_allocatable_evict_lower_percent, t.allocatable_evict_priority_threshold
        )
    if feature == "CPUEvict":
        return ce.used_threshold_config_error(t.cpu_evict_threshold_percent, t.cpu_evict_lower_percent, t.evict_enabled_priority_threshold)
    return ce.satisfaction_config_error(t.cpu_evict_be_satisfaction_lower_percent, t.cpu_evict_be_satisfaction_upper_percent)


def victim(s: PodState, memory_scale: float = 1.0) -> Victim:
    """`PodEvictInfo`: MilliCPUUsed is int64(cores × 1000), MemoryUsed int64(bytes × scale)."""
    p = s.pod
    return Victim(
        p.cgroup,
        p.name,
        float(int(s.cpu_used or 0.0)),
        float(int((s.memory_used or 0.0) * memory_scale)),
        p.request_resources(),
        p.priority.label,
        p,
    )


def _by_priority(states: Sequence[PodState], threshold: int, amount: str, metric: str, memory_scale: float = 1.0) -> list[Victim]:
    """`getPodEvictInfoAndSortByPriority`: active, eviction-enabled pods at or below the
    priority threshold that have a metric, in policies.memory_evict.eviction_order's order
    with `amount` ("used" or "request" of `metric`, "cpu" or "memory") descending last."""
    with_metric = [s for s in states if (s.cpu_used if metric == "cpu" else s.memory_used) is not None]
    victims = {s.pod.cgroup: victim(s, memory_scale) for s in with_metric}

    def how_much(v: Victim) -> float:
        if amount == "used":
            return v.cpu_used if metric == "cpu" else v.memory_used
        return sum(q for r, q in v.requests.items() if r.endswith(metric))

    pods = [
        me.EvictablePod(
            s.pod.cgroup,
            s.pod.priority_value,
            how_much(victims[s.pod.cgroup]),
            s.phase,
            s.pod.eviction_enabled,
            s.pod.priority_label,
            s.pod.eviction_priority,
        )
        for s in with_metric
    ]
    return [victims[p.name] for p in me.eviction_order(pods, threshold)]


def allocatable_task(
    feature: str,
    metric: str,
    states: Sequence[PodState],
    allocatable: Mapping[str, float | None],
    threshold: int,
    lower: int,
    priority_threshold: int,
) -> Task | None:
    """CPUAllocatableEvict / MemoryAllocatableEvict: the requests of the pods at or below the
    priority threshold, per the resource each requests by its priority class, against the
    node's allocatable of that resource."""
    requested: dict[str, float] = {}
    for s in states:
        if s.pod.priority_value > priority_threshold:
            continue
        for r, q in s.pod.request_resources().items():
            if r.endswith(metric):
                requested[r] = requested.get(r, 0) + q
    release = release_by_allocatable(requested, allocatable, threshold, lower, ratio_first=metric == "memory")
    if not release:
        return None
    classes = {RESOURCE_CLASS[r] for r in release if r in RESOURCE_CLASS}

    def gives(v: Victim) -> dict[str, float]:
        if v.pod is None or v.pod.priority not in classes:
            return {}
        return {r: q for r, q in v.requests.items() if r.endswith(metric)}

    return Task(REASON + feature, REQUEST, release, _by_priority(states, priority_threshold, "request", metric), gives)


def _allocatable(t: Thresholds, metric: str, states: Sequence[PodState], allocatable: Mapping[str, float | None]) -> Task | None:
    """The allocatable task of the CPU or memory evictor with its NodeSLO thresholds
    (validated before: set)."""
    threshold, lower = (
        (t.cpu_allocatable_evict_threshold_percent, t.cpu_allocatable_evict_lower_percent)
        if metric == "cpu"
        else (t.memory_allocatable_evict_threshold_percent, t.memory_allocatable_evict_lower_percent)
    )
    assert threshold is not None and lower is not None and t.allocatable_evict_priority_threshold is not None
    feature = "CPUAllocatableEvict" if metric == "cpu" else "MemoryAllocatableEvict"
    return allocatable_task(feature, metric, states, allocatable, threshold, lower, t.allocatable_evict_priority_threshold)


def cpu_tasks(
    features: Sequence[str],
    t: Thresholds,
    states: Sequence[PodState],
    capacity_milli: int,
    node_used_cores: float,
    allocatable: Mapping[str, float | None],
    be_release_milli: int = 0,
) -> tuple[list[Task], dict[str, str]]:
    """The CPU evictor's tasks in upstream's order, and the features skipped for an invalid
    configuration with the reason. `node_used_cores` is the window average (CPUEvict);
    `be_release_milli` BECPUEvict's release from its window."""

    def build(feature: str) -> Task | None:
        if feature == "BECPUEvict":
            return _be_cpu_task(states, be_release_milli) if be_release_milli > 0 else None
        if feature == "CPUAllocatableEvict":
            return _allocatable(t, "cpu", states, allocatable)
        assert t.cpu_evict_threshold_percent is not None and t.evict_enabled_priority_threshold is not None
        release = ce.release_by_used_threshold(capacity_milli, node_used_cores, t.cpu_evict_threshold_percent, t.cpu_evict_lower_percent)
        if release <= 0:
            return None
        victims = _by_priority(states, t.evict_enabled_priority_threshold, "used", "cpu")
        return Task(REASON + feature, USED, {"cpu": release}, victims, lambda v: {"cpu": v.cpu_used})

    return _tasks(CPU_FEATURES, features, t, build)


def _tasks(
    order: Sequence[str], features: Sequence[str], t: Thresholds, build: Callable[[str], Task | None]
) -> tuple[list[Task], dict[str, str]]:
    """`buildEvictTask` for each enabled feature in the evictor's order: a feature with an
    invalid configuration is skipped (with the reason), one with nothing to release adds
    no task."""
    tasks: list[Task] = []
    skipped: dict[str, str] = {}
    for feature in order:
        if feature not in features:
            continue
        why = config_error(feature, t)
        if why:
            skipped[feature] = why
            continue
        task = build(feature)
        if task is not None:
            tasks.append(task)
    return tasks, skipped


def _be_cpu_task(states: Sequence[PodState], release: int) -> Task:
    """BECPUEvict: BE pods by spec.priority, then used / batch-cpu request descending; each
    gives back its batch-cpu request."""
    be = [s for s in states if s.pod.qos is QoSClass.BE]
    cands = [ce.Candidate(s.pod.cgroup, s.pod.priority_value, float(int(s.cpu_used or 0.0)), s.pod.cpu_request) for s in be]
    order = {c.name: i for i, c in enumerate(ce.victims(cands, math.inf))}
    victims = sorted((victim(s) for s in be), key=lambda v: order[v.name])
    return Task(REASON + "BECPUEvict", REQUEST, {"batch-cpu": release}, victims, lambda v: {"batch-cpu": v.pod.cpu_request if v.pod else 0})


def memory_tasks(
    features: Sequence[str],
    t: Thresholds,
    states: Sequence[PodState],
    capacity: int,
    node_used: int,
    allocatable: Mapping[str, float | None],
) -> tuple[list[Task], dict[str, str]]:
    """The memory evictor's tasks in upstream's order, and the skipped features with the
    reason. `node_used` is the last sample of MemTotal − MemAvailable (bytes)."""
    if capacity <= 0:
        return [], {}

    def build(feature: str) -> Task | None:
        if feature == "MemoryAllocatableEvict":
            return _allocatable(t, "memory", states, allocatable)
        assert t.memory_evict_threshold_percent is not None
        lower = t.memory_evict_lower_percent
        release = me.to_release(capacity, capacity - node_used, t.memory_evict_threshold_percent, lower if lower is not None else 0)
        if release <= 0:
            return None
        if feature == "BEMemoryEvict":
            victims = _be_memory_victims(states)
        else:
            assert t.evict_enabled_priority_threshold is not None
            # upstream's candidate builder multiplies the pod's memory by 1000 (copied from
            # the CPU code; koordinator.md §4.4): followed
            victims = _by_priority(states, t.evict_enabled_priority_threshold, "used", "memory", memory_scale=1000)
        return Task(REASON + feature, USED, {"memory": release}, victims, lambda v: {"memory": v.memory_used})

    return _tasks(MEMORY_FEATURES, features, t, build)


def _be_memory_victims(states: Sequence[PodState]) -> list[Victim]:
    """BEMemoryEvict's order (`getSortedBEPodInfos`, policies.memory_evict.victims)."""
    be = [s for s in states if s.pod.qos is QoSClass.BE]
    cands = [me.Candidate(s.pod.cgroup, s.pod.name, s.pod.priority_value, int(s.memory_used or 0)) for s in be]
    order = {c.name: i for i, c in enumerate(me.victims(cands, math.inf))}
    return sorted((victim(s) for s in be), key=lambda v: order[v.name])
