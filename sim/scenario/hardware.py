"""Shared hardware: [node] ghz, [node.llc], [node.memory_bandwidth], a workload's
[workloads.X.contention] profile and the [resctrl.<group>] groups set up before the run.
The model they feed is core_rs/model/src/contention.rs (docs/model.md, "Shared hardware")."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sim.scenario.base import FieldError, Table, show

MIB = 1 << 20


class Llc(Table):
    """[node.llc]: the last-level cache of each socket (one resctrl L3 domain)."""

    size_mb: float | None = Field(default=None, gt=0, allow_inf_nan=False)  # default: 1.375 MiB a core
    ways: int = Field(default=11, ge=1, le=32)  # = the bits of CAT's cbm_mask
    min_cbm_bits: int = Field(default=1, ge=0, le=32)
    num_closids: int = Field(default=16, ge=1, le=4096)

    def core_spec(self) -> dict[str, Any]:
        return {
            "size_bytes": None if self.size_mb is None else round(self.size_mb * MIB),
            "ways": self.ways,
            "min_cbm_bits": self.min_cbm_bits,
            "num_closids": self.num_closids,
        }


class MemoryBandwidth(Table):
    """[node.memory_bandwidth]: each socket's DRAM bandwidth and its loaded latency
    L0 (1 + queue_factor u / (1 - u)), u capped at max_utilisation."""

    peak_gbps: float = Field(default=100.0, gt=0, allow_inf_nan=False)  # GB/s (1e9 bytes)
    idle_latency_ns: float = Field(default=90.0, gt=0, allow_inf_nan=False)
    queue_factor: float = Field(default=0.25, ge=0, allow_inf_nan=False)
    max_utilisation: float = Field(default=0.95, gt=0, lt=1, allow_inf_nan=False)

    def core_spec(self) -> dict[str, Any]:
        return {
            "peak_bytes_per_s": self.peak_gbps * 1e9,
            "idle_latency_ns": self.idle_latency_ns,
            "queue_factor": self.queue_factor,
            "max_utilisation": self.max_utilisation,
        }


class Contention(Table):
    """[workloads.X.contention]: how the workload's threads use the LLC and memory.
    CPI = cpi_base + llc_apki/1000 x m(c) x memory latency x GHz / mlp, with the miss ratio
    m(c) = (1 + c / footprint)^-miss_exponent of the LLC bytes c a thread holds."""

    cpi_base: float = Field(default=1.0, gt=0, allow_inf_nan=False)  # cycles/instruction, all LLC hits
    llc_apki: float = Field(ge=0, allow_inf_nan=False)  # LLC accesses per 1000 instructions
    footprint_mb: float = Field(gt=0, allow_inf_nan=False)  # F of m(c)
    miss_exponent: float = Field(default=1.0, gt=0, le=2, allow_inf_nan=False)
    mlp: float = Field(default=1.0, gt=0, allow_inf_nan=False)  # misses overlapped
    # added to an SMT sibling's base CPI while both run; default 1/smt_speed - 1
    core_pressure: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    def core_spec(self) -> dict[str, Any]:
        return {
            "cpi_base": self.cpi_base,
            "llc_apki": self.llc_apki,
            "footprint_bytes": self.footprint_mb * MIB,
            "miss_exponent": self.miss_exponent,
            "mlp": self.mlp,
            "core_pressure": self.core_pressure,
        }


class ResctrlGroup(Table):
    """[resctrl.<group>]: a resctrl group made before the run; its schemata as the kernel's
    file takes it ("L3:0=7;1=7\\nMB:0=30;1=30"; checked by the core with the kernel's rules)
    and the cgroups whose tasks join it."""

    schemata: str = ""
    cgroups: list[str] = []


def resctrl_errors(groups: dict[str, ResctrlGroup], cgroups: set[str]) -> list[FieldError]:
    """Group names must be directory names; the cgroups named must be declared."""
    errors: list[FieldError] = []
    for name, group in groups.items():
        if not name or "/" in name or name in (".", "..", "info"):
            errors.append((("resctrl", name), "a resctrl group name is one directory name (not empty, no '/', not info)"))
        for i, cg in enumerate(group.cgroups):
            if cg not in cgroups:
                errors.append((("resctrl", name, "cgroups", i), f"no cgroup named {show(cg)}"))
    return errors


def hardware_spec(node: Any, profiles: dict[str, Contention], groups: dict[str, ResctrlGroup]) -> dict[str, Any]:
    """The core spec's "hardware" document."""
    return {
        "ghz": node.ghz,
        "llc": node.llc.core_spec(),
        "memory_bandwidth": node.memory_bandwidth.core_spec(),
        "profiles": {name: p.core_spec() for name, p in profiles.items()},
        "resctrl": [
            {"name": name, "schemata": g.schemata, "cgroups": ["" if c == "/" else c for c in g.cgroups]} for name, g in groups.items()
        ],
    }
