"""Shared pieces of the Koordinator conformance tables: a case's id names the upstream
test it was ported from ("<upstream file>::<TestName>/<subcase>", as `go test -run` names
it), and a case upstream expects but we deliberately do not follow is marked with the
reason (strict xfail: it must keep failing, so the list in docs/conformance.md stays true)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.cgroup import Cpu


def case(upstream: str, test: str, sub: str, *values: Any, not_followed: str | None = None) -> Any:
    """One ported upstream case as a pytest param."""
    marks = [pytest.mark.xfail(strict=True, reason=not_followed)] if not_followed else []
    sub = f"/{sub}" if sub else ""  # a test without subtests is its name alone
    return pytest.param(*values, id=f"{upstream}::{test}{sub}", marks=marks)


def build_topology(sockets: int, nodes_per_socket: int, cores_per_node: int, cpus_per_core: int) -> list[Cpu]:
    """koord-scheduler's `buildCPUTopologyForTest`: CPU ids, core ids and NUMA node ids all
    count up globally; the threads of a core are adjacent ids."""
    out = []
    cpu = core = node = 0
    for s in range(sockets):
        for _ in range(nodes_per_socket):
            for _ in range(cores_per_node):
                for _ in range(cpus_per_core):
                    out.append(Cpu(cpu, core, s, node))
                    cpu += 1
                core += 1
            node += 1
    return out


def cpuset(text: str) -> set[int]:
    """A Linux cpuset list ("0-5,16-23") as a set, as upstream's cpuset.MustParse."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
