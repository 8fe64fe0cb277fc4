"""koord-scheduler's CPU bind policies (plugin nodenumaresource, `takeCPUs`;
../shared/reference/koordinator.md §6): which logical CPUs an LSR/LSE pod is bound to when it
is placed.

* FullPCPUs: whole physical cores (both SMT threads), packed into one NUMA node if it fits,
  else one socket, else across sockets.
* SpreadByPCPUs: one thread per physical core first, second threads only when needed.
* NUMA strategy: MostAllocated packs (fullest unit first), LeastAllocated spreads (emptiest
  first); DistributeEvenly is treated as LeastAllocated by the CPU accumulator (§6.1).

Pure functions of the topology and the CPUs already taken, tested against the reference's
worked examples (§6.3).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

from policies.cgroup import Cpu

BIND_POLICIES = ("Default", "FullPCPUs", "SpreadByPCPUs")
NUMA_STRATEGIES = ("MostAllocated", "LeastAllocated", "DistributeEvenly")
DEFAULT_CPU_BIND_POLICY: Final = "FullPCPUs"  # defaultCPUBindPolicy
DEFAULT_NUMA_STRATEGY: Final = "LeastAllocated"  # NUMAScoringStrategy default


class BindError(ValueError):
    """The pod does not fit (not enough free CPUs)."""


def take_cpus(
    topology: Sequence[Cpu],
    taken: Iterable[int],
    need: int,
    policy: str = DEFAULT_CPU_BIND_POLICY,
    strategy: str = DEFAULT_NUMA_STRATEGY,
) -> list[int]:
    """The CPUs a pod needing `need` CPUs is bound to, in the order they are taken."""
    if policy == "Default":
        policy = DEFAULT_CPU_BIND_POLICY
    if policy not in BIND_POLICIES:
        raise ValueError(f"unknown CPU bind policy {policy!r} (known: {', '.join(BIND_POLICIES)})")
    if strategy not in NUMA_STRATEGIES:
        raise ValueError(f"unknown NUMA allocate strategy {strategy!r} (known: {', '.join(NUMA_STRATEGIES)})")
    taken = set(taken)
    free = [c for c in topology if c.cpu not in taken]
    if need > len(free):
        raise BindError(f"needs {need} CPUs, {len(free)} free")
    if need <= 0:
        return []
    pack = strategy == "MostAllocated"
    threads = max(Counter((c.socket, c.core) for c in topology).values())
    nodes = {c.node for c in topology}
    sockets = {c.socket for c in topology}
    score = _scores(free)
    # The first level a pod of `need` CPUs fits in (a NUMA node, else a socket), with each
    # unit's socket; None when it needs more than a socket.
    levels = (
        ("node", len(topology) // len(nodes), nodes, {c.node: c.socket for c in topology}),
        ("socket", len(topology) // len(sockets), sockets, {s: s for s in sockets}),
    )
    fitting = next(((level, units, socket_of) for level, limit, units, socket_of in levels if need <= limit), None)
    ordered: list[int] = []
    if fitting is not None:
        level, units, socket_of = fitting
        sign = 1 if pack else -1  # ascending free score packs, descending spreads
        ordered = sorted(units, key=lambda u: (sign * score[level].get(u, 0), sign * score["socket"].get(socket_of[u], 0), u))
    if policy == "FullPCPUs" or threads == 1:
        full = _full_cores(topology, free)
        if fitting is None:
            return _across_sockets(full, free, need)
        for u in ordered:
            cpus = [c.cpu for core in _cores_of(full, level, u) for c in core]
            if len(cpus) >= need:
                return cpus[:need]
        return _fallback(free, need, whole_cores=True)  # no unit of that level has enough
    # SpreadByPCPUs: a unit offering one thread per core first, then any with enough threads
    free_cores = _group_cores(free)
    for one_per_core in (True, False):
        for u in ordered:
            # spreadCPUs keeps the CPUs' own order: cores by their first CPU id
            cores = sorted(_cores_of(free_cores, level, u), key=lambda g: g[0].cpu)
            cpus = _spread(cores)
            offered = [core[0].cpu for core in cores] if one_per_core else cpus
            if len(offered) >= need:
                return cpus[:need]
    return _fallback(free, need, whole_cores=False)


def _scores(free: Sequence[Cpu]) -> dict[str, dict[int, int]]:
    """Free score: the number of free CPUs in each NUMA node and socket."""
    out: dict[str, dict[int, int]] = {"node": {}, "socket": {}}
    for c in free:
        out["node"][c.node] = out["node"].get(c.node, 0) + 1
        out["socket"][c.socket] = out["socket"].get(c.socket, 0) + 1
    return out


def _group_cores(cpus: Iterable[Cpu]) -> list[list[Cpu]]:
    """CPUs grouped by physical core, cores with more free threads first, then by core id."""
    cores: dict[tuple[int, int], list[Cpu]] = {}
    for c in cpus:
        cores.setdefault((c.socket, c.core), []).append(c)
    groups = [sorted(g, key=lambda c: c.cpu) for g in cores.values()]
    return sorted(groups, key=lambda g: (-len(g), g[0].socket, g[0].core))


def _full_cores(topology: Sequence[Cpu], free: Sequence[Cpu]) -> list[list[Cpu]]:
    """The physical cores all of whose threads are free."""
    size: dict[tuple[int, int], int] = {}
    for c in topology:
        size[(c.socket, c.core)] = size.get((c.socket, c.core), 0) + 1
    return [g for g in _group_cores(free) if len(g) == size[(g[0].socket, g[0].core)]]


def _cores_of(cores: list[list[Cpu]], level: str, unit: int) -> list[list[Cpu]]:
    return [g for g in cores if getattr(g[0], level) == unit]


def _spread(cores: list[list[Cpu]]) -> list[int]:
    """`spreadCPUs`: the first thread of every core, then the second threads, and so on."""
    out: list[int] = []
    depth = max((len(g) for g in cores), default=0)
    for i in range(depth):
        out += [g[i].cpu for g in cores if i < len(g)]
    return out


def _across_sockets(full: list[list[Cpu]], free: Sequence[Cpu], need: int) -> list[int]:
    """More than a socket: whole sockets' full cores, largest first, while they fit; then
    physical cores from the remaining sockets, smallest socket first."""
    by_socket: dict[int, list[list[Cpu]]] = {}
    for g in full:
        by_socket.setdefault(g[0].socket, []).append(g)
    out: list[int] = []
    rest = []
    for s, cores in sorted(by_socket.items(), key=lambda kv: (-sum(map(len, kv[1])), kv[0])):
        cpus = [c.cpu for g in cores for c in g]
        if len(out) + len(cpus) <= need:
            out += cpus
        else:
            rest.append((s, cores))
    for _, cores in sorted(rest, key=lambda kv: (sum(map(len, kv[1])), kv[0])):
        for g in cores:
            for c in g:
                if len(out) < need:
                    out.append(c.cpu)
    if len(out) < need:
        chosen = set(out)
        out += _fallback([c for c in free if c.cpu not in chosen], need - len(out), whole_cores=True)
    return out


def _fallback(free: Sequence[Cpu], need: int, whole_cores: bool) -> list[int]:
    """The final fallback: core by core, preferring the socket that already holds chosen
    CPUs, then the socket and NUMA node with the most free CPUs, then cores with fewer free
    threads (filling holes), then socket and core id. FullPCPUs takes each core whole;
    SpreadByPCPUs spreads the ordered cores, one thread per core first."""
    score = _scores(free)
    cores = _group_cores(free)
    chosen_in: dict[int, int] = {}
    order: list[list[Cpu]] = []
    left = list(cores)
    while left:
        best = min(
            left,
            key=lambda g: (
                -chosen_in.get(g[0].socket, 0),
                -score["socket"][g[0].socket],
                -score["node"][g[0].node],
                len(g),
                g[0].socket,
                g[0].core,
            ),
        )
        left.remove(best)
        order.append(best)
        chosen_in[best[0].socket] = chosen_in.get(best[0].socket, 0) + len(best)
    cpus = [c.cpu for g in order for c in g] if whole_cores else _spread(order)
    return cpus[:need]
