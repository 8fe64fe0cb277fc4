"""rubik's node watermark eviction services, `cpuevict` and `memoryevict`
(../shared/reference/rubik.md §4.3; rubik `pkg/services/eviction/{common,cpu,memory}`).

cpuevict: every `interval` s a /proc/stat sample joins a window; samples at least `windows`
+ 1 s old are dropped first; the node's utilisation is quotaTurbo's busy/total formula from
the window's oldest to its newest sample (fewer than two: no decision). At or above
`threshold` % the offline pod using the most CPU is evicted. memoryevict: every `interval` s,
used % = (MemTotal − MemFree − Buffers − Cached − SReclaimable) / MemTotal × 100 (gopsutil's
formula); at or above `threshold` % the offline pod using the most memory is evicted.

Both share the controller's cool-down as the code has it: after *every* check whose evictor
returns without error — over the threshold or not, offline pods or none — further checks are
blocked for `cooldown` s (only a failed eviction skips it), so the decision period is about
max(interval, cooldown). The CPU sampler keeps sampling while blocked. Offline here is the
annotation `volcano.sh/preemptable: "true"` only (common/manager.go's `priority`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from policies.cgroup import NodeStats, utilisation
from policies.policy import PolicyError

INTERVAL = (1, 3600)  # s
WINDOWS = (1, 3600)  # s
THRESHOLD = (1, 99)  # %
COOLDOWN_MIN = 1
CPU_DEFAULTS = {"interval": 1, "windows": 0, "threshold": 60, "cooldown": 20}  # windows 0: 2 × interval
MEMORY_DEFAULTS = {"interval": 1, "threshold": 0, "cooldown": 4}  # threshold 0: not set, refused
EPS = 1e-6  # s: a tick due at t runs at t, whatever float sums of the policy interval say


@dataclass(frozen=True)
class EvictConfig:
    interval: int  # s
    threshold: int  # %
    cooldown: int  # s
    windows: int = 0  # s, cpuevict only


def _ints(table: object, defaults: Mapping[str, int], where: str) -> dict[str, int]:
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: must be a table of {', '.join(defaults)}")
    extra = sorted(set(table) - set(defaults))
    if extra:
        raise PolicyError(f"{where}.{extra[0]}: unknown (known: {', '.join(defaults)})")
    out = {}
    for k, d in defaults.items():
        v = table.get(k, d)
        if isinstance(v, bool) or not isinstance(v, int):
            raise PolicyError(f"{where}.{k}: must be an integer (got {v!r})")
        out[k] = v
    return out


def _check(v: int, lo: float, hi: float, name: str, where: str, unit: str) -> None:
    if not lo <= v <= hi:
        raise PolicyError(f"{where}.{name}: {name} should be in the range [{lo:g}, {hi:g}] {unit} (got {v})")


def cpu_config(table: object, where: str = "cpu_evict") -> EvictConfig:
    """cpu/config.go: windows 0 means 2 × interval; interval and windows in [1, 3600] s,
    windows a multiple of interval, threshold in [1, 99] %, cooldown >= 1 s."""
    t = _ints(table, CPU_DEFAULTS, where)
    if t["windows"] == 0:
        t["windows"] = 2 * t["interval"]
    _check(t["interval"], *INTERVAL, "interval", where, "s")
    _check(t["windows"], *WINDOWS, "windows", where, "s")
    if t["windows"] % t["interval"]:
        raise PolicyError(f"{where}.windows: windows {t['windows']} must be an integral multiple of interval {t['interval']}")
    _check(t["threshold"], *THRESHOLD, "threshold", where, "%")
    _check(t["cooldown"], COOLDOWN_MIN, math.inf, "cooldown", where, "s")
    return EvictConfig(t["interval"], t["threshold"], t["cooldown"], t["windows"])


def memory_config(table: object, where: str = "memory_evict") -> EvictConfig:
    """memory/config.go: interval in [1, 3600] s, threshold required and in [1, 99] %,
    cooldown >= 1 s."""
    t = _ints(table, MEMORY_DEFAULTS, where)
    _check(t["interval"], *INTERVAL, "interval", where, "s")
    if t["threshold"] == 0:
        raise PolicyError(f"{where}.threshold: required (memoryevict has no default threshold), in [1, 99] %")
    _check(t["threshold"], *THRESHOLD, "threshold", where, "%")
    _check(t["cooldown"], COOLDOWN_MIN, math.inf, "cooldown", where, "s")
    return EvictConfig(t["interval"], t["threshold"], t["cooldown"])


def mem_used_percent(total: int, free: int, buffers: int = 0, cached: int = 0, sreclaimable: int = 0) -> float:
    """gopsutil v2.21.11 VirtualMemory().UsedPercent on Linux."""
    if total <= 0:
        return 0.0
    return (total - free - buffers - (cached + sreclaimable)) / total * 100


@dataclass
class CpuWindow:
    """cpu.go's sample window: (time s, /proc/stat) pairs."""

    windows: int
    samples: list[tuple[float, NodeStats]] = field(default_factory=list)

    def collect(self, now: float, node: NodeStats) -> None:
        """purgeExpiredRecords, then append: samples younger than windows + 1 s stay (and
        everything after the first of them)."""
        keep = next((i for i, (t, _) in enumerate(self.samples) if now - t < self.windows + 1), len(self.samples))
        self.samples = [*self.samples[keep:], (now, node)]

    def util(self) -> float:
        """averageUsage: from the oldest to the newest sample; -1 with fewer than two."""
        if len(self.samples) < 2:
            return -1.0
        return utilisation(self.samples[0][1], self.samples[-1][1])


@dataclass
class Cooldown:
    """The controller's block: after a check, no check until `cooldown` s later. (rubik
    sleeps cooldown s in a goroutine while wait.Until's next tick slides later by the tick's
    own run time, so the tick landing exactly `cooldown` s after a check runs.)"""

    until: float = -math.inf

    def ready(self, now: float) -> bool:
        return now + EPS >= self.until

    def start(self, now: float, cooldown: int) -> None:
        self.until = now + cooldown
