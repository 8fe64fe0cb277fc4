"""Hardware performance counters of a cgroup, as `perf stat -G <cgroup>` counts them (the
perf_event controller's cgroup mode: every task of the subtree, cumulative). The seam's
`Node.perf_counters(cgroup)` gives cycles, instructions and cache-misses (LLC misses); a core
that also counts the references (`cache-references`, LLC accesses) lets rubik's miss ratios be
computed as rubik computes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PerfCounters:
    """Cumulative counts; a policy takes differences between two reads."""

    cycles: int = 0
    instructions: int = 0
    cache_misses: int = 0
    # None where the counter source does not count it
    cache_references: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, int]) -> PerfCounters:
        refs = d.get("cache-references")
        return cls(
            int(d.get("cycles", 0)), int(d.get("instructions", 0)), int(d.get("cache-misses", 0)), None if refs is None else int(refs)
        )

    def __sub__(self, other: PerfCounters) -> PerfCounters:
        refs = None if self.cache_references is None or other.cache_references is None else self.cache_references - other.cache_references
        return PerfCounters(
            self.cycles - other.cycles, self.instructions - other.instructions, self.cache_misses - other.cache_misses, refs
        )

    def cpi(self) -> float | None:
        """Cycles per instruction; None with no instruction counted (rubik's collectCPI
        drops such a sample)."""
        return self.cycles / self.instructions if self.instructions else None
