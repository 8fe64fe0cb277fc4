"""The two fixed policies: `none` (plain fair sharing by requests, as the kubelet sets
cpu.shares) and `static` (best-effort cgroups made cpu.idle = 1 or cpu.qos_level = -1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.cgroup import Knob, KnobWrite
from policies.policy import Decision, Observation, Policy, PolicyError, cgroup_names


class NoIsolation(Policy):
    """`none`: each listed cgroup gets cpu.shares = CPU request (cores) × 1024, at least 2
    (kubelet: shares = milliCPU × 1024 / 1000, MIN_SHARES = 2); nothing else."""

    name = "none"

    def __init__(self, config: Mapping[str, Any] | None = None, where: str = "policy") -> None:
        config = dict(config or {})
        requests = config.pop("requests", {})
        if not isinstance(requests, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in requests.values()
        ):
            raise PolicyError(f"{where}.requests: must map cgroup names to CPU requests in cores (>= 0)")
        self.requests = dict(requests)
        super().__init__(config, where)

    @property
    def interval(self) -> float:
        return 3600.0  # nothing to do after attaching

    def attach(self, obs: Observation) -> list[Decision]:
        return [
            Decision(obs.now, self.name, f"{cg}: request {cores:g} CPUs → cpu.shares {shares}", (KnobWrite(cg, Knob.CPU_SHARES, shares),))
            for cg, cores in self.requests.items()
            if (shares := max(2, round(cores * 1024)))
        ]

    def tick(self, obs: Observation) -> list[Decision]:
        return []


class Static(Policy):
    """`static`: best-effort cgroups become SCHED_IDLE groups (`mode = "idle"`, cpu.idle = 1,
    upstream) or openEuler offline groups (`mode = "qos_level"`, cpu.qos_level = -1)."""

    name = "static"
    MODES = {"idle": (Knob.CPU_IDLE, 1), "qos_level": (Knob.CPU_QOS_LEVEL, -1)}

    def __init__(self, config: Mapping[str, Any] | None = None, where: str = "policy") -> None:
        config = dict(config or {})
        self.be = cgroup_names(config.pop("be", []), f"{where}.be")
        mode = config.pop("mode", "idle")
        if mode not in self.MODES:
            raise PolicyError(f'{where}.mode: must be "idle" or "qos_level" (got {mode!r})')
        self.mode = mode
        super().__init__(config, where)

    def use_pods(self, pods) -> None:
        super().use_pods(pods)
        # with pods and no `be` list: the BE pods (koord QoS BE or Kubernetes BestEffort)
        self.be = self.be or [p.cgroup for p in pods if p.is_be]

    @property
    def interval(self) -> float:
        return 3600.0

    def attach(self, obs: Observation) -> list[Decision]:
        knob, value = self.MODES[self.mode]
        return [Decision(obs.now, self.name, f"{cg} is best-effort: {knob.v1} = {value}", (KnobWrite(cg, knob, value),)) for cg in self.be]

    def tick(self, obs: Observation) -> list[Decision]:
        return []
