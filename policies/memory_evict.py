"""koordlet's BEMemoryEvict (../shared/reference/koordinator.md §4.4): every second, node
memory usage = MemTotal − MemAvailable; at or above memoryEvictThresholdPercent (70) it
kills BE pods until `capacity × (usage% − lower) / 100` of their used memory (no page cache)
is released, lower = memoryEvictLowerPercent or threshold − 2; then a 4 s cool-down. Victims:
BE pods by priority ascending, then used memory descending; pods using nothing last (higher
name first among them)."""

from __future__ import annotations

from dataclasses import dataclass

from policies import evict_round

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


def victims(candidates: list[Candidate], release: float) -> list[Candidate]:
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


# --- MemoryEvict / CPUEvict / *AllocatableEvict victims over all priorities (§4.3–4.4) ------

INT32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class EvictablePod:
    """A pod as `getPodEvictInfoAndSortByPriority` sees it. `amount` is what it is ordered by
    last (memory or CPU used, or its request for the allocatable evictors)."""

    name: str
    priority: int  # spec.priority
    amount: float
    phase: str = "Running"
    evict_enabled: bool = True  # label koordinator.sh/eviction-enabled = "true"
    label_priority: int | None = None  # label koordinator.sh/priority (default: spec.priority)
    eviction_priority: str | None = None  # annotation koordinator.sh/eviction-priority


def eviction_priority(text: str | None) -> int:
    """The annotation as an int32; missing or not an int32 → 0."""
    try:
        v = int(text) if text is not None else 0
    except ValueError:
        return 0
    return v if INT32[0] <= v <= INT32[1] else 0


def eviction_order(pods: list[EvictablePod], priority_threshold: int) -> list[EvictablePod]:
    """Candidates Running or Pending, labelled eviction-enabled, at or below the priority
    threshold; ordered by the eviction-priority annotation, spec.priority, the priority
    label (ascending each), then `amount` descending."""
    keep = [p for p in pods if p.phase in ("Running", "Pending") and p.evict_enabled and p.priority <= priority_threshold]

    def key(p: EvictablePod) -> tuple[int, int, int, float]:
        label = p.label_priority if p.label_priority is not None else p.priority
        return (eviction_priority(p.eviction_priority), p.priority, label, -p.amount)

    return sorted(keep, key=key)


# --- MemoryEvict / MemoryAllocatableEvict (memoryevict/memory_evict.go at a7a1b76) ---------


def used_threshold_config_error(feature: str, threshold: int | None, lower: int | None, priority_threshold: int | None) -> str | None:
    """`generateConfigCheck` of BEMemoryEvict and MemoryEvict: a threshold ≥ 0, the lower
    percent (threshold − 2 when unset) below it; MemoryEvict also needs the
    eviction-enabled priority threshold."""
    if threshold is None:
        return "threshold percent is nil"
    if threshold < 0:
        return f"threshold percent({threshold}) should equal or greater than 0"
    low = lower if lower is not None else threshold - 2
    if low >= threshold:
        return f"lower percent({low}) should less than threshold percent({threshold})"
    if feature == "MemoryEvict" and priority_threshold is None:
        return "EvictEnabledPriorityThreshold not config"
    return None


def release_by_allocatable(requested: dict[str, int], allocatable: dict[str, int | None], threshold: int, lower: int) -> dict[str, int]:
    """MemoryAllocatableEvict per resource (memory, batch-memory, mid-memory): computed on
    the ratio first, as upstream's memory copy does (policies.evict_round)."""
    return evict_round.release_by_allocatable(requested, allocatable, threshold, lower, ratio_first=True)
