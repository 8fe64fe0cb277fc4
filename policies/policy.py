"""`Policy`: a node agent that looks at the node every `interval` and writes cgroup knobs.

A policy's decision is a pure function of what it observes (and of the state it keeps, such
as rubik's usage window): `tick(obs)` returns `Decision`s, each carrying the knob writes and
the inputs that produced it, so a run has an exact, readable record of why batch work lost or
gained CPU at a given moment. The runner (`PolicyRunner`) observes through a backend, applies
the writes, records the decisions; in the simulator it is a plain SimPy process.
"""

from __future__ import annotations

import abc
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from policies.cgroup import Backend, CgroupStats, Cpu, Knob, KnobWrite, NodeStats
from policies.perf import PerfCounters
from policies.pods import Pod
from policies.resctrl import ResctrlAction, ResctrlInfo, ResctrlWrite


class PolicyError(ValueError):
    """Bad policy configuration; the message names the field."""


@dataclass(frozen=True)
class Param:
    """A tunable parameter: its range and the real system's default (the search space)."""

    name: str
    low: float
    high: float
    default: float
    integer: bool = False
    doc: str = ""

    def check(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PolicyError(f"{where}.{self.name}: must be a number (got {value!r})")
        if self.integer and value != int(value):
            raise PolicyError(f"{where}.{self.name}: must be an integer (got {value!r})")
        if not self.low <= value <= self.high:
            raise PolicyError(f"{where}.{self.name}: must be in [{self.low:g}, {self.high:g}] (got {value!r})")
        return value


def cgroup_names(value: Any, where: str) -> list[str]:
    """A configuration entry naming cgroups: one name or a list of names."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(f"{where}: must be a list of cgroup names")
    return list(value)


def known_table(value: Any, known: Iterable[str], where: str, must: str, unknown: str) -> Mapping[str, Any]:
    """A configuration table whose keys must be among `known`: the first unknown key is named
    with `unknown` (what the known keys are); a non-table is refused with `must`."""
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: must be {must}")
    extra = sorted(set(value) - set(known))
    if extra:
        raise PolicyError(f"{where}.{extra[0]}: unknown ({unknown})")
    return value


@dataclass(frozen=True)
class Observation:
    """What a policy sees at one tick: the time, the node, and for each cgroup it watches its
    cumulative stats and the current value of the knobs it asked for."""

    now: float
    node: NodeStats
    cgroups: Mapping[str, CgroupStats]
    knobs: Mapping[tuple[str, Knob], int | str]
    cpus: tuple[Cpu, ...] = ()
    # the perf counters of the cgroups `Policy.perf_watch` names, and resctrl's info/ (when
    # `Policy.uses_resctrl`)
    perf: Mapping[str, PerfCounters] = field(default_factory=dict)
    resctrl: ResctrlInfo | None = None

    def knob(self, cgroup: str, knob: Knob) -> int | str:
        return self.knobs[(cgroup, knob)]


@dataclass(frozen=True)
class Decision:
    """One decision: when, what (in words, with the numbers that led to it), which writes."""

    t: float
    policy: str
    what: str
    writes: tuple[KnobWrite, ...] = ()
    inputs: Mapping[str, float] = field(default_factory=dict)
    # resctrl writes and task assignments (policies/resctrl.py), applied after `writes`
    resctrl: tuple[ResctrlAction, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {
            "t_s": self.t,
            "policy": self.policy,
            "what": self.what,
            "writes": [{"cgroup": w.cgroup, "knob": w.knob.v1, "value": w.value} for w in self.writes],
            "inputs": dict(self.inputs),
        }
        if self.resctrl:
            out["resctrl"] = [
                {"group": a.group, "schemata": a.schemata} if isinstance(a, ResctrlWrite) else {"group": a.group, "cgroup": a.cgroup}
                for a in self.resctrl
            ]
        return out

    def __str__(self) -> str:
        return f"t={self.t:.2f}s {self.policy}: {self.what}"


class Policy(abc.ABC):
    """Base class: declares its parameters; subclasses implement `watch`, `attach`, `tick`."""

    name: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    # the parameters `colosim tune` searches unless told otherwise: the thresholds an
    # operator really sets (the rest keep their defaults)
    tuned: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Mapping[str, Any] | None = None, where: str = "policy") -> None:
        config = dict(config or {})
        self.where = where
        known = {p.name: p for p in self.params}
        self.values: dict[str, float] = {p.name: p.default for p in self.params}
        for key, value in config.items():
            if key not in known:
                raise PolicyError(f"{where}.{key}: unknown parameter of {self.name} (known: {', '.join(known) or 'none'})")
            self.values[key] = known[key].check(value, where)

        self.pods: tuple[Pod, ...] = ()

    @classmethod
    def search_space(cls) -> tuple[Param, ...]:
        return cls.params

    def use_pods(self, pods: tuple[Pod, ...]) -> None:
        """The node's pods, before `attach`: a policy takes from them what its configuration
        leaves out (which cgroups are best-effort, online, bound to CPUs)."""
        self.pods = pods

    @property
    @abc.abstractmethod
    def interval(self) -> float:
        """Seconds between ticks."""

    def watch(self) -> Iterable[tuple[str, Knob]]:
        """(cgroup, knob) pairs whose values `tick` needs to see."""
        return ()

    def watched_cgroups(self) -> Iterable[str]:
        return {cg for cg, _ in self.watch()}

    def perf_watch(self) -> Iterable[str]:
        """Cgroups whose perf counters `tick` needs (Observation.perf)."""
        return ()

    def uses_resctrl(self) -> bool:
        """Whether the policy reads resctrl's info/ (Observation.resctrl) and writes groups."""
        return False

    def attach(self, obs: Observation) -> list[Decision]:
        """Called once at the start: the initial writes."""
        return []

    @abc.abstractmethod
    def tick(self, obs: Observation) -> list[Decision]:
        """Called every `interval`."""


class PolicyRunner:
    """Observe → decide → write, every interval, through a backend; keeps the decision log."""

    def __init__(self, policy: Policy, backend: Backend) -> None:
        self.policy = policy
        self.backend = backend
        self.decisions: list[Decision] = []
        self._cpus: tuple[Cpu, ...] | None = None
        self._resctrl: ResctrlInfo | None = None

    def observe(self) -> Observation:
        b = self.backend
        watched = list(self.policy.watch())
        cgroups = {cg: b.stats(cg) for cg in sorted({cg for cg, _ in watched} | set(self.policy.watched_cgroups()))}
        knobs = {(cg, k): b.read(cg, k) for cg, k in watched}
        if self._cpus is None:
            self._cpus = tuple(b.cpus())
        if self._resctrl is None and self.policy.uses_resctrl():
            # a backend without resctrl refuses here, once, before the policy starts
            self._resctrl = b.resctrl_info()
        perf = {cg: b.perf_counters(cg) for cg in sorted(set(self.policy.perf_watch()))}
        return Observation(b.now(), b.node(), cgroups, knobs, self._cpus, perf, self._resctrl)

    def apply(self, decisions: list[Decision]) -> None:
        """Write each decision's knobs in order. A write the kernel refuses (EINVAL: e.g. a
        burst above the quota) does not stop the agent — koordlet and rubik log it and go
        on — so it is recorded as a decision of its own."""
        for d in decisions:
            self.decisions.append(d)
            for w in (*d.writes, *d.resctrl):
                try:
                    if isinstance(w, KnobWrite):
                        self.backend.write(w)
                    else:
                        self.backend.resctrl(w)
                except (ValueError, KeyError) as err:
                    reason = err.args[0] if err.args else str(err)
                    self.decisions.append(Decision(d.t, d.policy, f"write refused: {w}: {reason}", (), {}))

    def process(self, env) -> Generator[Any, Any, None]:
        """The SimPy process: attach now, then tick every interval."""
        self.apply(self.policy.attach(self.observe()))
        while True:
            yield env.timeout(self.policy.interval)
            self.apply(self.policy.tick(self.observe()))
