"""The scenario document: [scenario], [[runs]], the whole validated `Scenario` and its
variants, and reading scenario and policy files."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from policies.cpu_bind import BindError, take_cpus
from policies.pods import Pod, PriorityClass, QoSClass, kubelet_knobs
from sim.duration import format_duration
from sim.errors import ScenarioError
from sim.overrides import apply_override, format_path, normalize, parse_path
from sim.scenario.base import Duration, FieldError, FieldErrors, PositiveDuration, Table, show
from sim.scenario.cgroups import Cgroup
from sim.scenario.hardware import ResctrlGroup, hardware_spec, resctrl_errors
from sim.scenario.messages import toml_message, validate
from sim.scenario.node import Kernel, Topology
from sim.scenario.pods import Kubelet, PodTable, Scheduler
from sim.scenario.workloads import ROOT_CGROUP, Workload, check_trace


def _policy_targets(policy: Any) -> set[str]:
    """Every cgroup a policy's configuration names (so that a typo is caught here)."""
    names: set[str] = set()
    for attr in ("offline", "online", "turbo", "be", "ls"):
        names.update(getattr(policy, attr, []))
    if getattr(policy, "besteffort", None):
        names.add(policy.besteffort)
    for attr in ("burst", "requests"):
        names.update(getattr(policy, attr, {}))
    return names


class Meta(Table):
    """[scenario]: name, length of the run and what is measured."""

    name: str = Field(min_length=1)
    description: str = ""
    duration: PositiveDuration
    warmup: Duration = 0  # stats are reset at this time; only what follows is measured
    seed: int = Field(default=1, ge=0, lt=2**64)
    sample_interval: Duration = 100_000_000  # 0 = no time series

    @model_validator(mode="after")
    def _check(self) -> Meta:
        errors: list[FieldError] = []
        if "/" in self.name or self.name in (".", ".."):
            errors.append((("name",), f"must not contain '/' (got {show(self.name)})"))
        if self.warmup >= self.duration:
            errors.append(
                (
                    ("warmup",),
                    f"must be less than scenario.duration ({format_duration(self.duration)}) (got {format_duration(self.warmup)})",
                )
            )
        if errors:
            raise FieldErrors(errors)
        return self


class Run(Table):
    """[[runs]]: one run of the scenario, changed by `set` (dotted path -> value)."""

    name: str = Field(min_length=1)
    description: str = ""
    baseline: bool = False
    # where the run sits in a results grid (the seeds' tables: a row per policy, a column
    # per offline load); both or neither
    row: str = ""
    column: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict, alias="set")

    @model_validator(mode="after")
    def _check(self) -> Run:
        if bool(self.row) != bool(self.column):
            raise FieldErrors([(("column" if self.row else "row",), "give both row and column, or neither")])
        return self


@dataclass(frozen=True)
class Variant:
    """A run of the scenario: its name, whether it is the baseline, and the scenario as the
    run's overrides left it (with no runs of its own)."""

    name: str
    baseline: bool
    scenario: Scenario
    grid: tuple[str, str] | None = None  # (row, column) in the results grid


class Scenario(Table):
    scenario: Meta
    node: Topology = Field(default_factory=Topology)
    kernel: Kernel = Field(default_factory=Kernel)
    cgroups: dict[str, Cgroup] = {}
    pods: dict[str, PodTable] = {}
    kubelet: Kubelet = Field(default_factory=Kubelet)
    scheduler: Scheduler = Field(default_factory=Scheduler)
    workloads: dict[str, Workload] = {}
    # resctrl groups made before the run ([resctrl.<group>] schemata, cgroups)
    resctrl: dict[str, ResctrlGroup] = {}
    # the node agent ([policy] name = "none" | "static" | "rubik" and its configuration)
    policy: dict[str, Any] | None = None
    # `colosim tune`'s study ([tune]: policy, params, slo, objective, trials, seeds, batch);
    # validated by sim.tuning, ignored by run and replay
    tune: dict[str, Any] | None = None
    runs: list[Run] = []

    _variants: list[Variant] = PrivateAttr(default_factory=list)
    _pods: tuple[Pod, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        errors: list[FieldError] = []
        errors += self._place_pods()
        for path in self.cgroups:
            parent, _, leaf = path.rpartition("/")
            if not leaf or path.startswith("/") or "//" in path:
                errors.append((("cgroups", path), 'must be a path like "online" or "kubepods/besteffort"'))
            elif parent and parent not in self.cgroups:
                errors.append((("cgroups", path), f"parent cgroup {show(parent)} is not declared"))
        declared = ", ".join(self.cgroups) or "none"
        pod_cgroups = {p.name: p.cgroup for p in self._pods}
        for name, workload in self.workloads.items():
            if workload.pod is not None:
                if workload.pod not in pod_cgroups:
                    known = ", ".join(pod_cgroups) or "none"
                    errors.append((("workloads", name, "pod"), f"no pod named {show(workload.pod)} (declared: {known})"))
                    continue
                workload.cgroup = pod_cgroups[workload.pod]
            if workload.cgroup not in self.cgroups and workload.cgroup != ROOT_CGROUP:
                errors.append(
                    (
                        ("workloads", name, "cgroup"),
                        f'no cgroup named {show(workload.cgroup)} (declared: {declared}; "/" is the root cgroup)',
                    )
                )
        for name, workload in self.workloads.items():
            ref = getattr(workload, "trace", None)
            if ref is not None and workload.enabled:
                errors += check_trace(name, workload, ref)
            if workload.needs == "memory" and workload.enabled and self.node.memory is None:
                errors.append((("workloads", name, "kind"), 'a memory workload needs the node\'s memory: give [node] memory = "64Gi"'))
            if workload.needs == "disk" and workload.enabled and self.node.disk is None:
                errors.append(
                    (("workloads", name, "kind"), "an IO workload needs the node's disk: give [node.disk] (its defaults are a SATA SSD)")
                )
            if workload.needs == "network" and workload.enabled and self.node.network is None:
                errors.append(
                    (("workloads", name, "kind"), 'a network workload needs the node\'s link: give [node.network] egress = "10Gbit"')
                )
        errors += resctrl_errors(self.resctrl, set(self.cgroups) | {ROOT_CGROUP})
        if self.policy is not None:
            from policies import PolicyError

            try:
                policy = self.build_policy()
            except PolicyError as err:
                where, _, why = str(err).partition(": ")
                errors.append((tuple(where.split(".")), why))
            else:
                for cg in sorted(policy.watched_cgroups() | _policy_targets(policy)):
                    if cg not in self.cgroups:
                        errors.append((("policy",), f"names cgroup {show(cg)}, which is not declared ({declared})"))
        seen: set[str] = set()
        for i, run in enumerate(self.runs):
            if run.name in seen:
                errors.append((("runs", i, "name"), f"duplicate run name {show(run.name)}"))
            seen.add(run.name)
        baselines = [i for i, run in enumerate(self.runs) if run.baseline]
        for i in baselines[1:]:
            errors.append((("runs", i, "baseline"), "only one run can be the baseline"))
        if errors:
            raise FieldErrors(errors)
        return self

    def _place_pods(self) -> list[FieldError]:
        """Bind LSR/LSE pods to CPUs (koord-scheduler), then give every pod the kubelet's
        cgroups; a cgroup the scenario also declares keeps the fields it sets."""
        errors: list[FieldError] = []
        topology = self.node.cpus()
        taken: set[int] = set()
        pods: list[Pod] = []
        for name, table in self.pods.items():
            where = ("pods", name)
            if not name or "/" in name or name in (".", ".."):
                errors.append((where, "a pod name must not be empty or contain '/'"))
                continue
            pod = table.pod(name)
            if table.cpu_bind_policy is not None:
                need, rest = divmod(pod.cpu_request, 1000)
                why = None
                if pod.qos not in (QoSClass.LSR, QoSClass.LSE) or pod.priority is not PriorityClass.PROD:
                    why = f"only LSR and LSE pods of koord-prod are bound to CPUs (this one is {pod.qos.value}, {pod.priority.label})"
                elif need == 0 or rest:
                    why = f"a bound pod requests a whole number of CPUs (got cpu_request {pod.cpu_request}m)"
                if why is None:
                    policy = table.cpu_bind_policy
                    if policy == "Default":
                        policy = self.scheduler.default_cpu_bind_policy
                    try:
                        cpus = take_cpus(topology, taken, need, policy, self.scheduler.numa_allocate_strategy)
                    except BindError as err:
                        why = f"cannot bind: {err}"
                    else:
                        taken.update(cpus)
                        pod = replace(pod, cpuset=tuple(cpus))
                if why is not None:
                    errors.append((where + ("cpu_bind_policy",), why))
            if table.cgroup is not None and table.cgroup not in self.cgroups:
                errors.append(
                    (
                        where + ("cgroup",),
                        f"no cgroup named {show(table.cgroup)} (a pod needs a declared cgroup, or none for the kubelet's)",
                    )
                )
            pods.append(pod)
        self._pods = tuple(pods)
        if not pods:
            return errors
        layout = kubelet_knobs(pods, self.node.ncpus, self.kubelet.reserved_cpu)
        merged: dict[str, Cgroup] = {}
        for path, knobs in layout.items():
            mine = self.cgroups.get(path)
            if mine is not None:
                own = {Cgroup.model_fields[f].alias or f: getattr(mine, f) for f in mine.model_fields_set}
                knobs = {**knobs, **own}
            merged[path] = Cgroup.model_validate(knobs)
        self.cgroups = {**merged, **{k: v for k, v in self.cgroups.items() if k not in merged}}
        return errors

    def build_policy(self):
        """The node agent of [policy] (None without one), given the pods and the node's
        memory (Koordinator's batch-memory needs it)."""
        if self.policy is None:
            return None
        from policies import build_policy

        table = dict(self.policy)
        if table.get("name") == "koordinator" and self.node.memory and "node_memory" not in table:
            table["node_memory"] = self.node.memory
        return build_policy(table, pods=self._pods)

    def pod_list(self) -> tuple[Pod, ...]:
        """The pods, as the agents see them (bound CPUs included)."""
        return self._pods

    # -- convenient names for the [scenario] table

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @property
    def duration_s(self) -> float:
        return self.scenario.duration / 1e9

    @property
    def warmup_s(self) -> float:
        return self.scenario.warmup / 1e9

    @property
    def ncpus(self) -> int:
        return self.node.ncpus

    @property
    def baseline(self) -> str:
        """Name of the run the others are compared with (the first, unless one says so)."""
        return next(v.name for v in self.variants() if v.baseline)

    def variants(self) -> list[Variant]:
        """One variant per [[runs]] entry, or the scenario itself when there are none."""
        if not self._variants:
            self._variants = [Variant(self.name, True, self.model_copy(update={"runs": []}))]
        return list(self._variants)

    def core_spec(self, seed: int | None = None) -> dict[str, Any]:
        """The document `sim._core.Node` takes (see sim/_core.pyi); ignores [[runs]]."""
        ncpus = self.node.ncpus
        return {
            "seed": self.seed if seed is None else seed,
            "topology": self.node.core_spec(),
            "kernel": {
                **self.kernel.core_spec(),
                "autogroup_sessions": self._sessions(),
                "sched_runtime_ns": self._slices(),
                "cpu_clock_readers": sorted(name for name, w in self.workloads.items() if w.enabled and w.reads_cpu_clock),
            },
            "cgroups": [self.cgroups[path].core_spec(path) for path in self._cgroup_order()],
            "workloads": [_root_as_core(w.core_spec(name, ncpus)) for name, w in self.workloads.items() if w.enabled],
            "sample_interval_ns": self.scenario.sample_interval,
            "memory": None
            if self.node.memory is None
            else {
                "total_bytes": self.node.memory,
                "swap_bytes": self.node.swap,
                "reclaim_ns_per_page": self.kernel.reclaim_per_page,
                "watermark_scale_factor": self.kernel.watermark_scale_factor,
            },
            "disk": None if self.node.disk is None else self.node.disk.core_spec(),
            "network": None if self.node.network is None else self.node.network.core_spec(),
            "cpuidle": None if self.node.cpuidle is None else self.node.cpuidle.core_spec(),
            "remote_wakeup": None if self.node.remote_wakeup is None else self.node.remote_wakeup.core_spec(),
            "steal": None if self.node.steal is None else self.node.steal.core_spec(),
            "hardware": hardware_spec(
                self.node,
                {name: w.contention for name, w in self.workloads.items() if w.enabled and w.contention is not None},
                self.resctrl,
            ),
        }

    def _sessions(self) -> dict[str, str]:
        """[kernel] autogroup's sessions the workloads name (the core's autogroup_sessions)."""
        return {name: w.session for name, w in self.workloads.items() if w.enabled and w.session is not None}

    def _slices(self) -> dict[str, int]:
        """Custom EEVDF slices the workloads ask for (the core's kernel.sched_runtime_ns)."""
        return {name: w.sched_runtime_ns for name, w in self.workloads.items() if w.enabled and w.sched_runtime_ns is not None}

    def _cgroup_order(self) -> list[str]:
        # The core wants parents before children; otherwise keep the order of the file.
        order: list[str] = []
        for path in self.cgroups:
            chain = []
            while path and path not in order and path not in chain:
                chain.append(path)
                path = path.rpartition("/")[0]
            order.extend(reversed(chain))
        return order

    # -- construction

    @classmethod
    def from_document(
        cls,
        document: Mapping[str, Any],
        overrides: Iterable[str] | Mapping[str, Any] = (),
    ) -> Scenario:
        """Validate a parsed TOML document and every run; the first document that fails
        raises ScenarioError with all of its errors.  `overrides` (`key=value` strings or
        {path: value}) apply to every run and win over the runs' own `set`."""
        everywhere = normalize(overrides)
        for path, _ in everywhere:
            if path[0] == "runs":
                raise ScenarioError(f"--set {format_path(path)}: runs cannot be overridden")
        base = copy.deepcopy(dict(document))
        for path, value in everywhere:
            apply_override(base, path, value, where="--set ")
        scenario = validate(cls, base, where="")

        variants = []
        for i, run in enumerate(scenario.runs):
            where = f"runs[{i}] {show(run.name)}: set "
            doc = copy.deepcopy(dict(document))
            doc.pop("runs", None)
            for key, value in run.overrides.items():
                try:
                    path = parse_path(key)
                except ScenarioError as err:
                    raise ScenarioError(f"{where}{err}") from None
                if path[0] in ("scenario", "runs"):
                    raise ScenarioError(
                        f"{where}{format_path(path)}: a run cannot change [{path[0]}] (duration, warm-up and seed are shared by all runs)"
                    )
                apply_override(doc, path, value, where=where)
            for path, value in everywhere:
                apply_override(doc, path, value, where="--set ")
            variant = validate(cls, doc, where=f"runs[{i}] {show(run.name)}: ")
            variants.append(Variant(run.name, run.baseline, variant, (run.row, run.column) if run.row else None))
        if variants and not any(v.baseline for v in variants):
            first = variants[0]
            variants[0] = Variant(first.name, True, first.scenario, first.grid)
        scenario._variants = variants
        return scenario

    @classmethod
    def from_toml(
        cls,
        text: str,
        source: str = "scenario.toml",
        overrides: Iterable[str] | Mapping[str, Any] = (),
    ) -> Scenario:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ScenarioError(toml_message(source, err)) from None
        return cls.from_document(document, overrides)


def _read_text(path: str | Path) -> str:
    """A file's UTF-8 text; ScenarioError names what is wrong with the file."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a directory, not a scenario file") from None
    except OSError as err:
        raise ScenarioError(f"{path}: {err.strerror or err}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {err.start})") from None


def read_document(path: str | Path) -> dict[str, Any]:
    """A TOML file's document; ScenarioError names what is wrong with the file."""
    text = _read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(toml_message(str(path), err)) from None


def load_scenario(path: str | Path, overrides: Iterable[str] | Mapping[str, Any] = ()) -> Scenario:
    """Read and validate a scenario file; ScenarioError names what is wrong."""
    return Scenario.from_document(read_document(path), overrides)


def trace_overrides(document: Mapping[str, Any], file: str | Path) -> dict[str, Any]:
    """`--trace FILE`: the file every trace-driven workload of the document plays."""
    out = {}
    for name, w in (document.get("workloads") or {}).items():
        if isinstance(w, Mapping) and isinstance(w.get("trace"), Mapping):
            out[format_path(("workloads", name, "trace", "file"))] = str(file)
    if not out:
        raise ScenarioError(
            f"--trace {file}: no workload of the scenario follows a trace (give one a [workloads.NAME.trace] table with its entity)"
        )
    return out


def policy_file(path: str | Path) -> dict[str, Any]:
    """A policy configuration file as an override that replaces the policy in every run
    (`--policy FILE` of run and replay): what `colosim tune` writes (one `[policy]` table),
    or the agent's own file — a Koordinator NodeSLO or slo-controller-config ConfigMap, a
    rubik config.json (policies/formats), told apart by content."""
    from policies.formats import FormatError, is_agent_file, parse, read_policy

    text = _read_text(path)
    if is_agent_file(Path(path), text):
        try:
            return {"policy": read_policy(parse(text, Path(path)))}
        except FormatError as err:
            raise ScenarioError(f"{path}: {err}") from None
    document = read_document(path)
    extra = sorted(set(document) - {"policy"})
    if extra or not isinstance(document.get("policy"), dict):
        raise ScenarioError(
            f"{path}: a policy file holds one [policy] table and nothing else" + (f" (found {', '.join(extra)})" if extra else "")
        )
    return {"policy": document["policy"]}


def _root_as_core(spec: dict[str, Any]) -> dict[str, Any]:
    """A workload's core spec with the root cgroup ("/") as the core names it ("")."""
    return {**spec, "cgroup": ""} if spec["cgroup"] == ROOT_CGROUP else spec
