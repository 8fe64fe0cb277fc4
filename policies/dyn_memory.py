"""rubik's dynMemory, policy "fssr" — fast suppression, slow recovery
(../shared/reference/rubik.md §3.1, pkg/services/dynmemory/fssr.go).

Every 5 s rubik reads MemFree (not MemAvailable). Below 10% of MemTotal free it lowers the
offline pods' memory.high by 10% of total at once (not below 30%); above 20% free for 13
ticks in a row (65 s) it raises it by 1% (not above 80%, where it starts). Every offline pod
gets the same absolute value. Integer arithmetic, as rubik's.
"""

from __future__ import annotations

from dataclasses import dataclass

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
