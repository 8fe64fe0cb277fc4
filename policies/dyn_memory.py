"""rubik's dynMemory: policy "fssr" — fast suppression, slow recovery
(../shared/reference/rubik.md §3.1, pkg/services/dynmemory/fssr.go) — and rubik 1.0's
"dynlevel" strategy (§3.2, rubik v1.0.0 pkg/memory/{dynlevel,status}.go).

Every 5 s rubik reads MemFree (not MemAvailable). Below 10% of MemTotal free it lowers the
offline pods' memory.high by 10% of total at once (not below 30%); above 20% free for 13
ticks in a row (65 s) it raises it by 1% (not above 80%, where it starts). Every offline pod
gets the same absolute value. Integer arithmetic, as rubik's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from policies.file_write import FileWrite

FSSR_INTERVAL_S = 5.0  # fssrInterval
RICH_TICKS = 12  # count < 12: count one more rich tick; the 13th raises
HIGH_ASYNC_RATIO = 80  # written with memory.high (commit 526bd12; the doc's flowchart says 10)


@dataclass
class Fssr:
    total: int  # MemTotal, bytes
    high: int  # the offline pods' memory.high
    reserved: int
    count: int = 0

    @classmethod
    def start(cls, total: int) -> Fssr:
        """memHigh = total × 8/10, reserved = total/10 (the design doc's 10 GiB cap is not in
        the code, so not here either)."""
        return cls(total=total, high=total * 8 // 10, reserved=total // 10)

    def step(self, free: int) -> int | None:
        """One tick with MemFree = `free`: the new memory.high to write, or None."""
        t = self.total
        if free > 2 * self.reserved:
            if self.count < RICH_TICKS:
                self.count += 1
                return None
            new = min(self.high + t // 100, t * 8 // 10)
        elif free < self.reserved:
            if self.high - t // 10 <= 0:
                return None  # rubik stops here without writing or resetting the count
            new = max(self.high - t // 10, t * 3 // 10)
        else:
            self.count = 0
            return None
        self.count = 0
        if new == self.high:
            return None
        self.high = new
        return new


# --- dynlevel (rubik v1.0.0): pressure levels from MemFree / MemTotal, checked every
# checkInterval (5 s by default) ---
LOW_PRESSURE, MID_PRESSURE, HIGH_PRESSURE, CRITICAL_PRESSURE = 0.3, 0.15, 0.1, 0.05  # free/total
RELIEVE_MAX_CNT = 5  # relieve intervals before the limits are lifted
EXTRA_FREE = 0.02  # a limited container gets its usage + 2% of MemFree
RELIEVE_RATIO = 0.1  # each relieve interval raises a limit by 10%
MAX_SYS_MEM_LIMIT = 9223372036854771712  # "no limit" as memcg shows it (PAGE_COUNTER_MAX pages)


class Pressure(enum.IntEnum):
    """status.go's levelInt, in its order."""

    NORMAL = 0
    RELIEVE = 1
    LOW = 2
    MID = 3
    HIGH = 4
    CRITICAL = 5


def level_in_pressure(free_fraction: float) -> Pressure:
    """getLevelInPressure: <= 5% free critical, <= 10% high, <= 15% mid, else low."""
    if free_fraction <= CRITICAL_PRESSURE:
        return Pressure.CRITICAL
    if free_fraction <= HIGH_PRESSURE:
        return Pressure.HIGH
    if free_fraction <= MID_PRESSURE:
        return Pressure.MID
    return Pressure.LOW


@dataclass
class DynLevel:
    """The dynlevel state machine (status.go) and what each level writes (dynlevel.go)."""

    level: Pressure = Pressure.NORMAL
    relieve_cnt: int = 0

    def set(self, level: Pressure) -> None:
        self.level = level
        self.relieve_cnt = 0

    def transition(self, free_fraction: float) -> None:
        """transitionStatus: above 30% free a pressure level turns to relieve, and relieve to
        normal once it has run RELIEVE_MAX_CNT intervals; otherwise the pressure level."""
        if free_fraction > LOW_PRESSURE:
            if self.level in (Pressure.LOW, Pressure.MID, Pressure.HIGH, Pressure.CRITICAL):
                self.set(Pressure.RELIEVE)
            elif self.level == Pressure.RELIEVE and self.relieve_cnt == RELIEVE_MAX_CNT:
                self.set(Pressure.NORMAL)
            return
        self.level = level_in_pressure(free_fraction)

    def reclaim(self, free: int, usage: Mapping[str, int], limits: Mapping[str, int]) -> list[FileWrite]:
        """reclaim: the writes of this interval for the offline containers (`usage`: their
        memory.usage_in_bytes; `limits`: their memory.limit_in_bytes). low: a soft limit of
        usage + 2% of free; mid: force_empty; high: a hard limit of usage + 2% of free;
        critical: drop_caches, then the hard limit; relieve: each limit × 1.1, and on the
        RELIEVE_MAX_CNT-th interval both limits lifted."""
        extra = int(free * EXTRA_FREE)
        if self.level == Pressure.NORMAL:
            return []
        if self.level == Pressure.RELIEVE:
            self.relieve_cnt += 1
            if self.relieve_cnt == RELIEVE_MAX_CNT:
                top = str(MAX_SYS_MEM_LIMIT)
                return [
                    w
                    for cg in usage
                    for w in (FileWrite(cg, "memory.limit_in_bytes", top), FileWrite(cg, "memory.soft_limit_in_bytes", top))
                ]
            # int64(float64(limit) * 1.1): past int64 it goes negative and rubik leaves it
            return [
                FileWrite(cg, "memory.limit_in_bytes", str(v)) for cg in usage if 0 <= (v := int(limits[cg] * (1 + RELIEVE_RATIO))) < 2**63
            ]
        if self.level == Pressure.LOW:
            return [FileWrite(cg, "memory.soft_limit_in_bytes", str(u + extra)) for cg, u in usage.items()]
        if self.level == Pressure.MID:
            return [FileWrite(cg, "memory.force_empty", "0") for cg in usage]
        hard = [FileWrite(cg, "memory.limit_in_bytes", str(u + extra)) for cg, u in usage.items()]
        if self.level == Pressure.CRITICAL:
            return [FileWrite("", "drop_caches", "3"), *hard]
        return hard
