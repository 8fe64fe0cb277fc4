"""[pods.NAME], [kubelet] and [scheduler]: pods as Koordinator and the kubelet see them."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from policies.cpu_bind import DEFAULT_CPU_BIND_POLICY, DEFAULT_NUMA_STRATEGY
from policies.pods import KubeQoS, Pod, PriorityClass, QoSClass, cpu_milli, kube_qos, kubelet_cgroup, memory_bytes
from sim.scenario.base import FieldError, FieldErrors, Table

CpuQuantity = Annotated[int, BeforeValidator(cpu_milli)]
MemoryQuantity = Annotated[int, BeforeValidator(memory_bytes)]


class PodTable(Table):
    """[pods.name]: a pod as Koordinator and the kubelet see it. CPU as Kubernetes writes it
    (2, 0.5, "500m"), memory as "16000Mi"; for a BE pod these are its batch-cpu/batch-memory.
    Without `cgroup` the pod gets the kubelet's cgroup (kubepods/[burstable|besteffort/]pod-name)."""

    qos: Literal["SYSTEM", "LSE", "LSR", "LS", "BE"] | None = None  # koordinator.sh/qosClass
    priority_class: Literal["koord-prod", "koord-mid", "koord-batch", "koord-free"] | None = None
    priority: int | None = Field(default=None, ge=0)  # spec.priority
    cpu_request: CpuQuantity = 0
    cpu_limit: CpuQuantity | None = None
    memory_request: MemoryQuantity = 0
    memory_limit: MemoryQuantity | None = None
    cgroup: str | None = None
    # koord-scheduler binds LSR/LSE koord-prod pods to CPUs (scheduling.koordinator.sh/resource-spec)
    cpu_bind_policy: Literal["Default", "FullPCPUs", "SpreadByPCPUs"] | None = None
    # koordlet's CPUEvict / MemoryEvict / *AllocatableEvict candidates (koordinator.md §4.3):
    # label koordinator.sh/eviction-enabled, annotation koordinator.sh/eviction-priority (lower
    # goes first; an int32, as the annotation's text), label koordinator.sh/priority
    eviction_enabled: bool = False
    eviction_priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    priority_label: int | None = None

    @model_validator(mode="after")
    def _check(self) -> PodTable:
        errors: list[FieldError] = []
        if self.cpu_limit is not None and self.cpu_limit < self.cpu_request:
            errors.append((("cpu_limit",), f"must be >= cpu_request ({self.cpu_request}m) (got {self.cpu_limit}m)"))
        if self.memory_limit is not None and self.memory_limit < self.memory_request:
            errors.append((("memory_limit",), "must be >= memory_request"))
        if errors:
            raise FieldErrors(errors)
        return self

    def pod(self, name: str) -> Pod:
        raw = kube_qos(self.cpu_request, self.cpu_limit, self.memory_request, self.memory_limit)
        # GetPodQoSClassWithDefault: Guaranteed → LSR, Burstable → LS, BestEffort → BE
        default = {KubeQoS.GUARANTEED: QoSClass.LSR, KubeQoS.BURSTABLE: QoSClass.LS, KubeQoS.BESTEFFORT: QoSClass.BE}[raw]
        qos = QoSClass(self.qos) if self.qos else default
        if self.priority_class:
            klass = PriorityClass.named(self.priority_class)
        elif self.priority is not None:
            klass = next((p for p in PriorityClass if p.low <= self.priority <= p.high), PriorityClass.for_qos(qos))
        else:
            klass = PriorityClass.for_qos(qos)
        value = self.priority if self.priority is not None else klass.default
        pod = Pod(
            name=name,
            qos=qos,
            priority=klass,
            priority_value=value,
            cpu_request=self.cpu_request,
            cpu_limit=self.cpu_limit,
            memory_request=self.memory_request,
            memory_limit=self.memory_limit,
            cgroup=self.cgroup or "",
            bind_policy=self.cpu_bind_policy,
            eviction_enabled=self.eviction_enabled,
            eviction_priority=None if self.eviction_priority is None else str(self.eviction_priority),
            priority_label=self.priority_label,
        )
        return pod if self.cgroup else replace(pod, cgroup=kubelet_cgroup(name, pod.kube_qos))


class Kubelet(Table):
    """[kubelet]: the node's reservation (kube-reserved + system-reserved CPU): allocatable =
    capacity − reserved_cpu; kubepods' cpu.shares follow the allocatable CPU."""

    reserved_cpu: CpuQuantity = 0


class Scheduler(Table):
    """[scheduler]: koord-scheduler's NUMA resource plugin (koordinator.md §6.1)."""

    numa_allocate_strategy: Literal["MostAllocated", "LeastAllocated", "DistributeEvenly"] = DEFAULT_NUMA_STRATEGY
    default_cpu_bind_policy: Literal["FullPCPUs", "SpreadByPCPUs"] = DEFAULT_CPU_BIND_POLICY
