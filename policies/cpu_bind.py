"""koord-scheduler's CPU bind policies (plugin nodenumaresource, the CPU accumulator's
`takeCPUs`; ../shared/reference/koordinator.md §6): which logical CPUs an LSR/LSE pod is
bound to when it is placed.

The search goes, as upstream's `takeCPUs` does:

* FullPCPUs (or one thread per core):
  1. need ≤ CPUs per NUMA node: the first node (by strategy) whose *fully free* physical cores
     hold `need` CPUs — first skipping nodes held exclusively at NUMANodeLevel, then not;
  2. need ≤ CPUs per socket: the first socket whose fully free cores hold `need` CPUs;
  3. whole free cores across sockets: every socket whose fully free cores fit into what is
     still needed, largest first; then, if a whole core is still needed, single cores from the
     remaining sockets, smallest first;
* SpreadByPCPUs: the first NUMA node, else socket, with enough free CPUs (one thread per core
  when skipping exclusively held units, then all), taken in `spreadCPUs` order;
* finally, for both: every free CPU core by core — sockets already holding chosen CPUs
  first, then by socket and node free score (strategy), fewer free threads on the core,
  socket id, core id — spread, taken one at a time until satisfied.

NUMA strategy: MostAllocated packs (ascending free score), anything else spreads (descending;
DistributeEvenly is LeastAllocated to the accumulator, §6.1). Exclusive policies PCPULevel /
NUMANodeLevel skip the cores / NUMA nodes another pod holds exclusively at that level.
Reference counts (`maxRefCount` > 1, CPU sharing) are not modelled. Pure functions, checked
against koord-scheduler's own cpu_accumulator_test.go cases (tests/conformance/).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from policies.cgroup import Cpu

BIND_POLICIES = ("Default", "FullPCPUs", "SpreadByPCPUs")
NUMA_STRATEGIES = ("MostAllocated", "LeastAllocated", "DistributeEvenly")
EXCLUSIVE_POLICIES = ("None", "PCPULevel", "NUMANodeLevel")
DEFAULT_CPU_BIND_POLICY: Final = "FullPCPUs"  # defaultCPUBindPolicy
DEFAULT_NUMA_STRATEGY: Final = "LeastAllocated"  # NUMAScoringStrategy default

CoreKey = tuple[int, int]  # (socket, core): a physical core


class BindError(ValueError):
    """The pod does not fit (not enough free CPUs)."""


def take_cpus(
    topology: Sequence[Cpu],
    taken: Iterable[int],
    need: int,
    policy: str = DEFAULT_CPU_BIND_POLICY,
    strategy: str = DEFAULT_NUMA_STRATEGY,
    exclusive_policy: str = "None",
    taken_exclusive: Mapping[int, str] | None = None,
) -> list[int]:
    """The CPUs a pod needing `need` CPUs is bound to, in the order they are taken.

    `taken_exclusive` maps an already taken CPU to the exclusive policy its pod holds it with
    ("PCPULevel" or "NUMANodeLevel"); `exclusive_policy` is the new pod's."""
    if policy == "Default":
        policy = DEFAULT_CPU_BIND_POLICY
    if policy not in BIND_POLICIES:
        raise ValueError(f"unknown CPU bind policy {policy!r} (known: {', '.join(BIND_POLICIES)})")
    if strategy not in NUMA_STRATEGIES:
        raise ValueError(f"unknown NUMA allocate strategy {strategy!r} (known: {', '.join(NUMA_STRATEGIES)})")
    if exclusive_policy not in EXCLUSIVE_POLICIES:
        raise ValueError(f"unknown CPU exclusive policy {exclusive_policy!r} (known: {', '.join(EXCLUSIVE_POLICIES)})")
    acc = _Accumulator(topology, set(taken), need, strategy, exclusive_policy, taken_exclusive or {})
    if acc.need < 1:
        return []
    if acc.need > len(acc.free):
        raise BindError(f"needs {need} CPUs, {len(acc.free)} free")
    full = policy == "FullPCPUs"
    if full or acc.per_core == 1:
        if acc.full_cores_path():
            return acc.result
    elif acc.spread_path():
        return acc.result
    for filter_exclusive in (True, False):
        for c in acc.spread(acc.free_cpus(filter_exclusive)):
            if acc.need >= 1:
                acc.take([c])
            if acc.need < 1:
                return acc.result
    raise BindError(f"needs {need} CPUs, found only {len(acc.result)} to take")


class _Accumulator:
    """`cpuAccumulator`: the free CPUs, what is still needed, what is taken."""

    def __init__(
        self, topology: Sequence[Cpu], taken: set[int], need: int, strategy: str, exclusive_policy: str, taken_exclusive: Mapping[int, str]
    ) -> None:
        self.by_id = {c.cpu: c for c in topology}
        self.free = {c.cpu: c for c in topology if c.cpu not in taken}
        cores = {(c.socket, c.core) for c in topology}
        self.per_core = len(topology) // max(len(cores), 1)
        self.per_node = len(topology) // max(len({c.node for c in topology}), 1)
        self.per_socket = len(topology) // max(len({c.socket for c in topology}), 1)
        self.need = need
        self.pack = strategy == "MostAllocated"
        self.exclusive_policy = exclusive_policy
        self.excl_cores = {_core(self.by_id[c]) for c, p in taken_exclusive.items() if p == "PCPULevel"}
        self.excl_nodes = {self.by_id[c].node for c, p in taken_exclusive.items() if p == "NUMANodeLevel"}
        self.result: list[int] = []

    def take(self, cpus: Sequence[int]) -> None:
        for cpu in cpus:
            c = self.free.pop(cpu)
            self.result.append(cpu)
            if self.exclusive_policy == "PCPULevel":
                self.excl_cores.add(_core(c))
            elif self.exclusive_policy == "NUMANodeLevel":
                self.excl_nodes.add(c.node)
        self.need -= len(cpus)

    def _score_key(self, free_score: int) -> int:
        """MostAllocated: fewer free CPUs first; otherwise more."""
        return free_score if self.pack else -free_score

    def _excl_core(self, c: Cpu) -> bool:
        return self.exclusive_policy == "PCPULevel" and _core(c) in self.excl_cores

    def _excl_node(self, c: Cpu) -> bool:
        return self.exclusive_policy == "NUMANodeLevel" and c.node in self.excl_nodes

    def _cores(self, cpus: Iterable[Cpu], full_only: bool) -> dict[CoreKey, list[int]]:
        cores: dict[CoreKey, list[int]] = {}
        for c in cpus:
            cores.setdefault(_core(c), []).append(c.cpu)
        return {k: sorted(v) for k, v in cores.items() if not full_only or len(v) == self.per_core}

    def _cores_by_unit(self, level: str, cpus: Iterable[Cpu], full_only: bool) -> dict[int, list[int]]:
        """`freeCoresIn{Node,Socket}`: per unit, its free cores (fully free only when asked),
        more free threads first then core id, each core's CPUs ascending."""
        cores = self._cores(cpus, full_only)
        units: dict[int, list[CoreKey]] = {}
        for k, ids in cores.items():
            units.setdefault(getattr(self.by_id[ids[0]], level), []).append(k)
        return {u: [cpu for k in sorted(ks, key=lambda k: (-len(cores[k]), k)) for cpu in cores[k]] for u, ks in units.items()}

    def _free_cores_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        cpus = [c for c in self.free.values() if not (filter_exclusive and self._excl_node(c))]
        socket_score = _count(c.socket for c in cpus)
        per_node = self._cores_by_unit("node", cpus, True)
        order = sorted(
            per_node, key=lambda n: (self._score_key(len(per_node[n])), self._score_key(socket_score[self.by_id[per_node[n][0]].socket]), n)
        )
        return [per_node[n] for n in order]

    def _free_cores_in_socket(self) -> list[list[int]]:
        per_socket = self._cores_by_unit("socket", self.free.values(), True)
        order = sorted(per_socket, key=lambda s: (self._score_key(len(per_socket[s])), s))
        return [per_socket[s] for s in order]

    def full_cores_path(self) -> bool:
        """The FullPCPUs steps 1–3; True when satisfied."""
        if self.need <= self.per_node:
            for filter_exclusive in (True, False):
                for cpus in self._free_cores_in_node(filter_exclusive):
                    if len(cpus) >= self.need:
                        self.take(cpus[: self.need])
                        return True
        if self.need <= self.per_socket:
            for cpus in self._free_cores_in_socket():
                if len(cpus) >= self.need:
                    self.take(cpus[: self.need])
                    return True
        # Whole free cores across sockets, the socket with most of them first (a stable sort,
        # as Go's insertion sort is for these few elements).
        unsatisfied = []
        for cpus in sorted(self._free_cores_in_socket(), key=len, reverse=True):
            if self.need < len(cpus):
                unsatisfied.append(cpus)
                continue
            self.take(cpus)
            if self.need < 1:
                return True
        if self.need >= self.per_core:
            for cpus in sorted(unsatisfied, key=len):
                for i in range(0, len(cpus), self.per_core):
                    self.take(cpus[i : i + self.per_core])
                    if self.need < 1:
                        return True
                    if self.need < self.per_core:
                        break
        return False

    def _free_cpus_in(self, level: str, filter_exclusive: bool) -> list[list[int]]:
        """`freeCPUsIn{Node,Socket}`: per unit its free CPUs ascending (one per core when
        filtering exclusively held ones), ordered by free score (node: then socket's), id."""
        if level == "node":
            cpus = [c for c in self.free.values() if not (filter_exclusive and (self._excl_core(c) or self._excl_node(c)))]
        else:
            cpus = [c for c in self.free.values() if not (filter_exclusive and self._excl_core(c))]
        node_score = _count(c.node for c in cpus)
        socket_score = _count(c.socket for c in cpus)
        units: dict[int, list[int]] = {}
        for c in sorted(cpus, key=lambda c: c.cpu):
            units.setdefault(getattr(c, level), []).append(c.cpu)
        if filter_exclusive:
            units = {u: self._one_per_core(ids) for u, ids in units.items()}
        if level == "node":

            def key(u: int) -> tuple[int, ...]:
                return (self._score_key(node_score[u]), self._score_key(socket_score[self.by_id[units[u][0]].socket]), u)
        else:

            def key(u: int) -> tuple[int, ...]:
                return (self._score_key(len(units[u])), u)

        return [units[u] for u in sorted(units, key=key)]

    def _one_per_core(self, cpus: list[int]) -> list[int]:
        """`extractCPU`: the first CPU of each core."""
        seen: set[CoreKey] = set()
        out = []
        for cpu in cpus:
            k = _core(self.by_id[cpu])
            if k not in seen:
                seen.add(k)
                out.append(cpu)
        return out

    def spread_path(self) -> bool:
        """SpreadByPCPUs within one NUMA node, else one socket; True when satisfied."""
        for level, limit in (("node", self.per_node), ("socket", self.per_socket)):
            if self.need > limit:
                continue
            for filter_exclusive in (True, False):
                for cpus in self._free_cpus_in(level, filter_exclusive):
                    if len(cpus) >= self.need:
                        self.take(self.spread(cpus)[: self.need])
                        return True
        return False

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """`freeCPUs`: all free CPUs core by core, sockets already holding chosen CPUs first."""
        cpus = [c for c in self.free.values() if not (filter_exclusive and (self._excl_core(c) or self._excl_node(c)))]
        node_score = _count(c.node for c in cpus)
        socket_score = _count(c.socket for c in cpus)
        colo = _count(self.by_id[c].socket for c in self.result)
        cores = self._cores(cpus, False)

        def key(k: CoreKey) -> tuple[int, ...]:
            c = self.by_id[cores[k][0]]
            return (
                -colo.get(c.socket, 0),
                self._score_key(socket_score[c.socket]),
                self._score_key(node_score[c.node]),
                len(cores[k]),
                c.socket,
                k[1],
            )

        return [cpu for k in sorted(cores, key=key) for cpu in cores[k]]

    def spread(self, cpus: list[int]) -> list[int]:
        """`spreadCPUs`: the first CPU of each core in list order, then the second, …"""
        if len(cpus) <= self.per_core:
            return cpus
        out: list[int] = []
        rest = list(cpus)
        while rest:
            seen: set[CoreKey] = set()
            later = []
            for cpu in rest:
                k = _core(self.by_id[cpu])
                if k in seen:
                    later.append(cpu)
                else:
                    seen.add(k)
                    out.append(cpu)
            rest = later
        return out


def _core(c: Cpu) -> CoreKey:
    return (c.socket, c.core)


def _count(keys: Iterable[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for k in keys:
        out[k] = out.get(k, 0) + 1
    return out
