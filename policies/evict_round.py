"""One round of koordlet's evictions (qosmanager plugins/util/evict.go `KillAndEvictPods`;
../shared/reference/koordinator.md §4.1), shared by the CPU evictor (BECPUEvict →
CPUAllocatableEvict → CPUEvict) and the memory evictor (BEMemoryEvict →
MemoryAllocatableEvict → MemoryEvict).

Each enabled feature that finds something to release is a `Task`: what it must release
(per resource: cpu, memory, batch-cpu, mid-cpu …) measured by one target type — pods'
requests or pods' usage —, its victims in its own order, and how much of the target one
victim gives back. The tasks run in order; what any victim gives back accumulates per target
type across the round, so a later task starts with what earlier ones freed and takes more
victims only while its own amounts are not yet covered. A pod is taken once; what it gives
back is the largest any task measures for it per resource (`mergeResourceListByMax`), summed
over the tasks' target types. A pod evicted in an earlier round but still present counts as
released without a new eviction. The round is "newly evicted" (the evictor's cool-down
restarts) only if some pod was taken now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.pods import Pod

REQUEST = "podResourceRequest"  # ReleaseTargetTypeResourceRequest
USED = "podUsed"  # ReleaseTargetTypeResourceUsed

Amounts = dict[str, float]


@dataclass(frozen=True)
class Victim:
    """`PodEvictInfo`: one pod as a task listed it. The amounts are as that task measured
    them (MemoryEvict's list carries its memory used ×1000, upstream's quirk, §4.4)."""

    name: str  # the pod's cgroup
    label: str  # the pod's name
    cpu_used: float = 0.0  # millicores (MilliCPUUsed)
    memory_used: float = 0.0  # bytes (MemoryUsed)
    # the pod's CPU and memory request by its priority class's resource
    # (GetRequestTypeAndValueFromPod: batch → batch-cpu/batch-memory, mid → mid-cpu/mid-memory,
    # others → cpu/memory)
    requests: Mapping[str, float] = field(default_factory=dict)
    priority_class: str = ""  # koord-batch, koord-mid, koord-prod, koord-free
    pod: Pod | None = None


@dataclass(frozen=True)
class Task:
    """`EvictTaskInfo`."""

    reason: str  # "trigger by koordlet feature <Feature>"
    target: str  # REQUEST or USED
    to_release: Mapping[str, float]
    victims: Sequence[Victim]
    # GetPodResourceFunc: what one victim gives back towards this task's target
    gives: Callable[[Victim], Mapping[str, float]]


def remaining(want: Mapping[str, float], got: Mapping[str, float]) -> Amounts:
    """`subReleaseListNoNegative`: what is still to release, resources already covered left out."""
    return {r: q - got.get(r, 0) for r, q in want.items() if q > got.get(r, 0)}


@dataclass
class Round:
    """What `KillAndEvictPods` returns: the pods taken now (in order), what each target type
    got back, and each task's reason with the pods it took."""

    evicted: list[Victim] = field(default_factory=list)
    released: dict[str, Amounts] = field(default_factory=dict)
    by_task: list[tuple[str, list[Victim]]] = field(default_factory=list)

    def done(self, task: Task) -> bool:
        return task_check(task, self.released)[0]


def task_check(task: Task | None, released: Mapping[str, Mapping[str, float]] | None) -> tuple[bool, Amounts | None]:
    """`EvictTaskCheck`: whether the task's amounts are covered by what its target type got
    back, and if not what is left."""
    if task is None or not task.to_release:
        return True, None
    left = remaining(task.to_release, (released or {}).get(task.target, {}))
    return (False, left) if left else (True, None)


def kill_and_evict(tasks: Iterable[Task], still_present: frozenset[str] = frozenset()) -> Round:
    """Run the round. `still_present`: pods evicted in earlier rounds that still exist
    (`IsPodEvicted`); they count as released, not as new evictions."""
    tasks = [t for t in tasks if t.to_release]
    out = Round()
    measures = [(t.target, t.gives) for t in tasks if any(q > 0 for q in t.to_release.values())]
    for target, _ in measures:
        out.released.setdefault(target, {})

    def give_back(v: Victim) -> None:
        merged: dict[str, Amounts] = {}
        for target, gives in measures:
            m = merged.setdefault(target, {})
            for r, q in gives(v).items():
                m[r] = max(m.get(r, 0), q)  # mergeResourceListByMax (0 for a missing one)
        for target, m in merged.items():
            acc = out.released.setdefault(target, {})
            for r, q in m.items():
                acc[r] = acc.get(r, 0) + q

    taken: set[str] = set()
    for t in tasks:
        took: list[Victim] = []
        out.by_task.append((t.reason, took))
        if out.done(t):
            continue
        for v in t.victims:
            if v.name in taken:
                continue
            taken.add(v.name)
            if v.name not in still_present:
                out.evicted.append(v)
                took.append(v)
            give_back(v)
            if out.done(t):
                break
    return out


def release_by_allocatable(
    requested: Mapping[str, float], allocatable: Mapping[str, float | None], threshold: int, lower: int, ratio_first: bool = False
) -> dict[str, int]:
    """CPUAllocatableEvict / MemoryAllocatableEvict per resource (cpu, batch-cpu, mid-cpu;
    memory, batch-memory, mid-memory): once what the pods at or below the priority threshold
    request passes threshold% of the node's allocatable, release down to lower%; all of it
    when the node advertises none (or 0). The CPU copy computes int(requested − lower/100 ×
    allocatable), the memory copy int((requested/allocatable − lower/100) × allocatable)
    (`ratio_first`): the float rounding differs. A negative threshold releases nothing."""
    out: dict[str, int] = {}
    if threshold < 0:
        return out
    for res, req in requested.items():
        alloc = allocatable.get(res)
        if not alloc:
            out[res] = int(req)
        elif req / alloc > threshold / 100:
            out[res] = int((req / alloc - lower / 100) * alloc) if ratio_first else int(req - lower / 100 * alloc)
    return out
