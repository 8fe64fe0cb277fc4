"""koordlet's BEMemoryEvict (../shared/reference/koordinator.md §4.4): every second, node
memory usage = MemTotal − MemAvailable; at or above memoryEvictThresholdPercent (70) it
kills BE pods until `capacity × (usage% − lower) / 100` of their used memory (no page cache)
is released, lower = memoryEvictLowerPercent or threshold − 2; then a 4 s cool-down. Victims:
BE pods by priority ascending, then used memory descending; pods using nothing last (higher
name first among them)."""

from __future__ import annotations

from dataclasses import dataclass

THRESHOLD_PERCENT = 70
COOL_DOWN_S = 4.0  # memoryEvictCoolTimeSeconds


@dataclass(frozen=True)
class Candidate:
    name: str  # its cgroup
    label: str  # the pod's name
    priority: int
    used: int  # bytes, page cache excluded


def to_release(total: int, available: int, threshold: int, lower: int) -> int:
    """Bytes of BE memory to release now (0: nothing to do). Integer percent, as koordlet."""
    if total <= 0:
        return 0
    usage = (total - available) * 100 // total
    if usage < threshold:
        return 0
    lower = lower if lower > 0 else threshold - 2
    return max(0, total * (usage - lower) // 100)


def victims(candidates: list[Candidate], release: int) -> list[Candidate]:
    """Take candidates in koordlet's order until their used memory covers `release`."""

    def key(c: Candidate):
        # zero-usage pods last, higher name first among them
        return (c.used == 0, c.priority, -c.used, tuple(-ord(ch) for ch in c.label) if c.used == 0 else ())

    out, got = [], 0
    for c in sorted(candidates, key=key):
        if got >= release:
            break
        out.append(c)
        got += c.used
    return out
