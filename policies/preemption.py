"""rubik's preemption service (../shared/reference/rubik.md §4.8; rubik
`pkg/services/preemption/preemption.go`): which pods are offline and what rubik writes for
them.

A pod is offline when its annotation *or* its label `volcano.sh/preemptable` is "true" (the
code ORs them, whatever its comment says about the annotation taking precedence). For each
configured resource rubik writes the offline level to the pod cgroup and to each of its
containers: cpu → cpu.qos_level = -1, memory → memory.qos_level = -1, net → net_cls.classid
= 4294967295 (uint32 -1, oncn-bwm's offline class). Online pods get no writes. A pod may go
online → offline while it runs, never back (the kernel refuses -1 → 0 too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies.file_write import FileWrite
from policies.policy import PolicyError

PREEMPTABLE = "volcano.sh/preemptable"
OFFLINE_POD = {PREEMPTABLE: "true"}  # the annotation of a pod the scenario calls offline
OFFLINE, ONLINE = -1, 0
# resource → (file, the value for offline, the value for online)
FILES = {
    "cpu": ("cpu.qos_level", "-1", "0"),
    "memory": ("memory.qos_level", "-1", "0"),
    "net": ("net_cls.classid", "4294967295", "0"),
}


class PreemptionError(ValueError):
    """What rubik's AddPod / UpdatePod return as an error."""


@dataclass(frozen=True)
class PodInfo:
    """What the service reads of a pod: its cgroup, its containers' cgroups, its annotations
    and labels."""

    cgroup: str
    containers: tuple[str, ...] = ()
    annotations: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None

    @property
    def offline(self) -> bool:
        """PodInfo.Offline: annotation or label `volcano.sh/preemptable` == "true"."""
        anno = (self.annotations or {}).get(PREEMPTABLE, "")
        label = (self.labels or {}).get(PREEMPTABLE, "")
        return anno == "true" or label == "true"


def qos_level(pod: PodInfo | None) -> int:
    """getQoSLevel: -1 for an offline pod, 0 otherwise (no pod counts as online)."""
    return OFFLINE if pod is not None and pod.offline else ONLINE


def validate(resources: Iterable[str], where: str = "preemption.resource") -> tuple[str, ...]:
    """PreemptionConfig.Validate: a non-empty list of cpu, memory, net."""
    res = tuple(resources)
    if not res:
        raise PolicyError(f"{where}: empty resource preemption configuration (one or more of {', '.join(FILES)})")
    for r in res:
        if r not in FILES:
            raise PolicyError(f"{where}: does not support setting the {r!r} subsystem (known: {', '.join(FILES)})")
    return res


def set_qos_level(pod: PodInfo | None, resources: Iterable[str]) -> list[FileWrite]:
    """SetQoSLevel: an offline pod's level on the pod and every container, per resource; an
    online pod gets nothing."""
    if pod is None:
        raise PreemptionError("empty pod info")
    if qos_level(pod) == ONLINE:
        return []
    out = []
    for r in resources:
        file, offline, _ = FILES[r]
        out += [FileWrite(cg, file, offline) for cg in (pod.cgroup, *pod.containers)]
    return out


def expected(pod: PodInfo, resources: Iterable[str]) -> list[FileWrite]:
    """validateConfig: the value every file of the pod should hold for its level."""
    i = 1 if qos_level(pod) == OFFLINE else 2
    return [FileWrite(cg, FILES[r][0], FILES[r][i]) for r in resources for cg in (pod.cgroup, *pod.containers)]


def add_pod(pod: PodInfo | None, resources: Iterable[str]) -> list[FileWrite]:
    """AddPod: set the level (validateConfig then finds the files as set)."""
    return set_qos_level(pod, tuple(resources))


def update_pod(old: PodInfo, new: PodInfo, files: Mapping[tuple[str, str], str], resources: Iterable[str]) -> list[FileWrite]:
    """UpdatePod: same level → nothing; offline → online is refused; online → offline writes
    the offline level unless `files` (cgroup, file) → current text already hold it."""
    res = tuple(resources)
    before, after = qos_level(old), qos_level(new)
    if before == after:
        return []
    if after > before:
        raise PreemptionError(f"{new.cgroup}: does not support pod qos level setting from low to high")
    if all(files.get((q.cgroup, q.file)) == q.value for q in expected(new, res)):
        return []
    return set_qos_level(new, res)
