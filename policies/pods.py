"""Pods as the node agents see them, and the cgroups the kubelet makes for them.

A pod has a Koordinator QoS class (label `koordinator.sh/qosClass`), a priority class
(koord-prod/mid/batch/free), CPU and memory requests and limits, and one cgroup. The kubelet
(cgroupfs driver) puts it under its Kubernetes QoS class:

    kubepods/pod-<name>               Guaranteed (requests = limits, CPU and memory)
    kubepods/burstable/pod-<name>     Burstable
    kubepods/besteffort/pod-<name>    BestEffort (no requests; Koordinator BE pods, whose
                                      requests are the extended resources kubernetes.io/batch-*)

with cpu.shares = MilliCPUToShares(request) and cpu.cfs_quota_us = MilliCPUToQuota(limit)
(koordinator.md §0.2; for BE pods koordlet's batchresource hook does the same with batch-cpu,
§8). One container per pod: the pod's cgroup stands for its container too.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from policies.cgroup import Knob, format_cpus

CFS_PERIOD_US = 100_000
# cpu.shares' range, from the knob table
_SHARES = Knob.CPU_SHARES.values
assert _SHARES.lo is not None and _SHARES.hi is not None
MIN_SHARES, MAX_SHARES = _SHARES.lo, _SHARES.hi
KUBEPODS = "kubepods"
BURSTABLE = "kubepods/burstable"
BESTEFFORT = "kubepods/besteffort"


class QoSClass(enum.Enum):
    """koordinator.sh/qosClass (apis/extension/qos.go)."""

    SYSTEM = "SYSTEM"
    LSE = "LSE"  # latency-sensitive exclusive: its CPUs are shared with nobody, not even BE
    LSR = "LSR"  # latency-sensitive reserved: bound CPUs, which BE may still use
    LS = "LS"
    BE = "BE"


class KubeQoS(enum.Enum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


class PriorityClass(enum.Enum):
    """(name, lowest, highest, default value): apis/extension/priority.go, koordinator.md §0.1."""

    PROD = ("koord-prod", 9000, 9999, 9500)
    MID = ("koord-mid", 7000, 7999, 7500)
    BATCH = ("koord-batch", 5000, 5999, 5500)
    FREE = ("koord-free", 3000, 3999, 3500)

    def __init__(self, label: str, low: int, high: int, default: int) -> None:
        self.label = label
        self.low = low
        self.high = high
        self.default = default

    @classmethod
    def named(cls, label: str) -> PriorityClass:
        for p in cls:
            if p.label == label:
                return p
        raise ValueError(f"unknown priority class {label!r} (known: {', '.join(p.label for p in cls)})")

    @classmethod
    def for_qos(cls, qos: QoSClass) -> PriorityClass:
        """With neither label nor priority the class follows QoS: BE → batch, others → prod."""
        return cls.BATCH if qos is QoSClass.BE else cls.PROD


def kube_qos(cpu_request: int, cpu_limit: int | None, memory_request: int, memory_limit: int | None) -> KubeQoS:
    """The Kubernetes QoS class from requests and limits (one container)."""
    if not cpu_request and cpu_limit is None and not memory_request and memory_limit is None:
        return KubeQoS.BESTEFFORT
    if cpu_limit is not None and memory_limit is not None and cpu_request in (0, cpu_limit) and memory_request in (0, memory_limit):
        # a request left out defaults to the limit
        return KubeQoS.GUARANTEED
    return KubeQoS.BURSTABLE


def milli_cpu_to_shares(milli: int) -> int:
    """`MilliCPUToShares`: m × 1024 / 1000, clamped to cpu.shares' range; a non-positive request → 2."""
    if milli <= 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli * 1024 // 1000))


def milli_cpu_to_quota(milli: int | None) -> int:
    """`MilliCPUToQuota`: m × 100000 / 1000, -1 without a limit (or ≤ 0), at least 1000 µs."""
    if milli is None:
        return -1
    quota = milli * CFS_PERIOD_US // 1000
    if quota <= 0:
        return -1
    return max(quota, 1000)


@dataclass(frozen=True)
class Pod:
    """One pod on the node. CPU in millicores, memory in bytes; for a BE pod the requests
    and limits are its batch-cpu / batch-memory."""

    name: str
    qos: QoSClass
    priority: PriorityClass
    priority_value: int
    cpu_request: int
    cpu_limit: int | None
    memory_request: int
    memory_limit: int | None
    cgroup: str
    cpuset: tuple[int, ...] = ()  # CPUs the scheduler bound it to (LSR/LSE), else ()
    bind_policy: str | None = None
    # what koordlet's CPUEvict / MemoryEvict / *AllocatableEvict read of the pod (§4.3):
    # label koordinator.sh/eviction-enabled ("true"), annotation koordinator.sh/eviction-priority
    # (text: an int32, anything else counts as 0), label koordinator.sh/priority (default: the
    # pod's priority value)
    eviction_enabled: bool = False
    eviction_priority: str | None = None
    priority_label: int | None = None

    @property
    def kube_qos(self) -> KubeQoS:
        if self.qos is QoSClass.BE:
            return KubeQoS.BESTEFFORT
        return kube_qos(self.cpu_request, self.cpu_limit, self.memory_request, self.memory_limit)

    @property
    def is_be(self) -> bool:
        """`NonBEPodFilter`: BE if its koord QoS is BE or its Kubernetes QoS is BestEffort."""
        return self.qos is QoSClass.BE or self.kube_qos is KubeQoS.BESTEFFORT

    def request_resources(self) -> dict[str, int]:
        """`GetRequestTypeAndValueFromPod` for CPU (millicores) and memory (bytes): a
        koord-batch pod requests batch-cpu / batch-memory, a koord-mid pod mid-cpu /
        mid-memory, the others cpu / memory (a BE pod's own cpu/memory requests are 0: what
        it asks for is its batch-* resources)."""
        cpu, memory = self.cpu_request, self.memory_request
        if self.priority is PriorityClass.BATCH:
            return {"batch-cpu": cpu, "batch-memory": memory}
        if self.priority is PriorityClass.MID:
            return {"mid-cpu": cpu, "mid-memory": memory}
        if self.is_be:
            cpu = memory = 0
        return {"cpu": cpu, "memory": memory}

    @property
    def is_hp(self) -> bool:
        """ "High priority" in the batch calculation: neither batch nor free."""
        return self.priority not in (PriorityClass.BATCH, PriorityClass.FREE)

    @property
    def cpu_burstable(self) -> bool:
        """`IsPodCPUBurstable`: not LSR, LSE or BE."""
        return self.qos not in (QoSClass.LSR, QoSClass.LSE, QoSClass.BE)


def kubelet_cgroup(name: str, qos: KubeQoS) -> str:
    parent = {KubeQoS.GUARANTEED: KUBEPODS, KubeQoS.BURSTABLE: BURSTABLE, KubeQoS.BESTEFFORT: BESTEFFORT}[qos]
    return f"{parent}/pod-{name}"


def share_pools(all_cpus: Iterable[int], pods: Iterable[Pod]) -> tuple[list[int], list[int]]:
    """`calCPUSharePools` (koordinator.md §6.4): the LS pool is every CPU no pod is bound to;
    the BE pool leaves out only LSE pods' CPUs (BE may share LSR CPUs)."""
    cpus = sorted(all_cpus)
    pods = list(pods)
    bound = {c for p in pods for c in p.cpuset}
    exclusive = {c for p in pods if p.qos is QoSClass.LSE for c in p.cpuset}
    return [c for c in cpus if c not in bound], [c for c in cpus if c not in exclusive]


def kubelet_knobs(pods: Iterable[Pod], ncpus: int, reserved_milli: int = 0) -> dict[str, dict[str, int | str]]:
    """The cgroups the kubelet (and koordlet's cpuset and batchresource hooks) give `pods`,
    as {path: {v1 file: value}}, parents first. Pods with a cgroup of their own choosing
    (outside kubepods) are left to the scenario.

    kubepods: shares of the node's allocatable CPU; kubepods/burstable: shares of the sum of
    burstable requests; kubepods/besteffort: 2 shares (kubelet's QoS container manager).
    A pod bound to CPUs (LSR/LSE) gets them as its cpuset and no CFS quota (koordlet's cpuset
    hook, issue #489); with any bound pod, the others' cpusets are their share pools (LS pods:
    the LS pool; kubepods/besteffort: the BE pool, which CPU suppress starts from)."""
    pods = list(pods)
    ours = [p for p in pods if p.cgroup.startswith(KUBEPODS + "/")]
    burstable = sum(p.cpu_request for p in ours if p.kube_qos is KubeQoS.BURSTABLE)
    out: dict[str, dict[str, int | str]] = {
        KUBEPODS: {"cpu.shares": milli_cpu_to_shares(ncpus * 1000 - reserved_milli)},
        BURSTABLE: {"cpu.shares": milli_cpu_to_shares(burstable)},
        BESTEFFORT: {"cpu.shares": MIN_SHARES},
    }
    ls_pool, be_pool = share_pools(range(ncpus), pods)
    any_bound = any(p.cpuset for p in pods)
    if any_bound:
        # kubepods/burstable keeps every CPU: a bound pod may be Burstable (an LSR pod with
        # no memory limit) and its cpuset must lie within its parent's; the LS pool is set
        # on each LS pod below, as koordlet's cpuset hook does per container.
        out[BESTEFFORT]["cpuset.cpus"] = format_cpus(be_pool)
    for p in ours:
        knobs: dict[str, int | str] = {
            "cpu.shares": milli_cpu_to_shares(p.cpu_request),
            "cpu.cfs_quota_us": milli_cpu_to_quota(p.cpu_limit),
        }
        if p.cpuset:
            knobs["cpuset.cpus"] = format_cpus(p.cpuset)
            knobs["cpu.cfs_quota_us"] = -1
        elif any_bound and not p.is_be:
            knobs["cpuset.cpus"] = format_cpus(ls_pool)
        out[p.cgroup] = knobs
    return out


# --- Kubernetes resource quantities ------------------------------------------------------

_MEMORY_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def cpu_milli(value: object) -> int:
    """A CPU quantity as Kubernetes writes it — 2, 2.5, "2", "500m" — in millicores."""
    if isinstance(value, bool):
        raise ValueError(f'must be a CPU quantity like 2, 0.5 or "500m" (got {value!r})')
    if isinstance(value, int | float):
        milli = value * 1000
    elif isinstance(value, str) and value.endswith("m"):
        milli = _number(value[:-1], value)
    elif isinstance(value, str):
        milli = _number(value, value) * 1000
    else:
        raise ValueError(f'must be a CPU quantity like 2, 0.5 or "500m" (got {value!r})')
    if milli < 0 or milli != milli or milli == float("inf"):
        raise ValueError(f"must be >= 0 (got {value!r})")
    if milli != int(milli):
        raise ValueError(f"must be a whole number of millicores (got {value!r})")
    return int(milli)


# The most bytes a quantity may say: the kernel's counters are 64-bit signed (8 EiB).
MAX_BYTES = 2**63 - 1


def memory_bytes(value: object) -> int:
    """A memory quantity — bytes, or "16000Mi", "4Gi", "500M" — in bytes."""
    n: float | int | None = None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        n = value
    elif isinstance(value, str):
        for suffix, scale in sorted(_MEMORY_SUFFIXES.items(), key=lambda kv: -len(kv[0])):
            if value.endswith(suffix):
                n = _number(value[: -len(suffix)], value) * scale
                break
        else:
            if value.isdigit():
                n = int(value)
    if n is not None and n > MAX_BYTES:
        raise ValueError(f"must be at most {MAX_BYTES} bytes (8 EiB) (got {value!r})")
    if n is not None and n >= 0 and n == int(n):
        return int(n)
    raise ValueError(f'must be a memory quantity like "16000Mi", "4Gi" or a number of bytes (got {value!r})')


def _number(text: str, whole: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"not a quantity: {whole!r}") from None
