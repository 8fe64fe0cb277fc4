"""A stand-in for `sim._core.Node`'s resctrl and perf-counter methods (the seam of issue 20,
/work/prompts/seam20.md), so the agents' side is tested before the core has them. It keeps
what the kernel keeps — groups, their schemata (a partial write keeps the other domains), a
CLOSID limit, which cgroup's tasks are in which group — and counters the test sets by hand.
It is not a cache model: occupancy and bandwidth readings are whatever the test says.

The validation it applies is policies/resctrl.py's (the kernel's rules, tested against
hand-worked cases in tests/test_resctrl.py), so tests that use this fake check wiring, not
validation.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from policies.resctrl import ResctrlInfo, Schemata

INFO = {
    "cbm_mask": "7ff",
    "min_cbm_bits": 1,
    "num_closids": 16,
    "bandwidth_gran": 10,
    "min_bandwidth": 10,
    "l3_domains": [0, 1],
    "llc_bytes": 32 << 20,
}


class FakeResctrlNode:
    """`ncpus` CPUs over `numa` nodes (one socket each); cgroups with a fixed CPU usage each; resctrl and perf counters."""

    def __init__(self, cgroups: list[str], info: dict[str, Any] | None = None, ncpus: int = 4, numa: int = 2) -> None:
        self.numa = numa
        self.info_dict = dict(info or INFO)
        self.info = ResctrlInfo.from_dict(self.info_dict)
        self.ncpus = ncpus
        self.t_ns = 0
        self.cgroups = ["", *cgroups]
        self.usage: dict[str, int] = dict.fromkeys(self.cgroups, 0)
        self.knobs: dict[tuple[str, str], int | str] = {}
        self.groups: dict[str, Schemata] = {"": self.info.default()}
        self.assigned: dict[str, str] = {}  # cgroup → group
        self.perf: dict[str, dict[str, int]] = {}
        self.calls: list[tuple[str, ...]] = []

    # -- what SimBackend reads
    def now(self) -> int:
        return self.t_ns

    def cgroup_stats(self, cgroup: str) -> dict[str, int]:
        if cgroup not in self.usage:
            raise KeyError(f'no cgroup named "{cgroup}"')
        zero = dict.fromkeys(("nr_periods", "nr_throttled", "throttled_time", "nr_bursts", "burst_time", "psi_some_ns", "nr_running"), 0)
        return {"usage_ns": self.usage[cgroup], **zero}

    def cpu_topology(self) -> list[tuple[int, int, int]]:
        return [(i, i * self.numa // self.ncpus, i * self.numa // self.ncpus) for i in range(self.ncpus)]

    def memory_stats(self) -> None:
        return None

    def read(self, cgroup: str, knob: str) -> int | str:
        return self.knobs.get((cgroup, knob), -1 if knob == "cpu.cfs_quota_us" else 100_000)

    def write(self, cgroup: str, knob: str, value: int | str) -> None:
        self.calls.append(("write", cgroup, knob, str(value)))
        self.knobs[(cgroup, knob)] = value

    # -- the seam's resctrl methods
    def resctrl_info(self) -> dict[str, Any]:
        return dict(self.info_dict)

    def resctrl_write(self, group: str, schemata: str) -> None:
        self.calls.append(("resctrl_write", group, schemata))
        where = f"resctrl group {group or '/'!r}"
        new = Schemata.parse(schemata, where).validated(self.info, where)
        if group not in self.groups and len(self.groups) >= self.info.num_closids:
            raise ValueError(f"{where}: no free CLOSID (num_closids {self.info.num_closids})")
        self.groups[group] = new.over(self.groups.get(group, self.info.default()))

    def resctrl_read_schemata(self, group: str) -> str:
        return self.groups[group].format(self.info)

    def resctrl_assign(self, group: str, cgroup: str) -> None:
        self.calls.append(("resctrl_assign", group, cgroup))
        if group not in self.groups:
            raise KeyError(f"no resctrl group named {group!r}")
        self.assigned[cgroup] = group

    def resctrl_remove(self, group: str) -> None:
        del self.groups[group]
        self.assigned = {cg: g for cg, g in self.assigned.items() if g != group}

    def resctrl_groups(self) -> list[str]:
        return sorted(self.groups)

    def perf_counters(self, cgroup: str) -> dict[str, int]:
        return dict(self.perf.get(cgroup, {"cycles": 0, "instructions": 0, "cache-misses": 0}))


def fake_env(node: FakeResctrlNode) -> Any:
    """What SimBackend needs of a NodeEnvironment: the node and SimPy's clock (seconds)."""
    return SimpleNamespace(node=node, now=node.t_ns / 1e9)


def backend(node: FakeResctrlNode) -> Any:
    from policies.cgroup import SimBackend

    b = SimBackend(fake_env(node))
    b.now = lambda: node.t_ns / 1e9  # type: ignore[method-assign]
    return b
