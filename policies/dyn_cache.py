"""rubik's dynCache (../shared/reference/rubik.md §4.6; rubik `pkg/services/dyncache`): the
level → resctrl schemata arithmetic and the dynamic controller's steps. The rubik policy
writes the groups and assigns the offline pods through the seam's resctrl actions
(policies/resctrl.py); the dynamic level follows the online pods' perf counters.

Five resctrl groups `rubik_{max,high,middle,low,dynamic}`; each gets, for every NUMA node,
`L3:<n>=<mask>` with floor(ways × pct / 100) ways (at least 1) as a contiguous low mask of the
L3 cbm_mask's width, and `MB:<n>=<pct>`. Offline pods go to the group their annotation
`volcano.sh/cache-limit` names, or by default `max` (static mode) / `dynamic`. The dynamic
group starts at the low percentages; every adjustInterval, if an online pod's cache-miss or
LLC-miss percentage reaches maxMiss (20) both percentages drop by 50, else if every online
pod is below minMiss (10) both rise by 5, clamped to [low, high].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policies.perf import PerfCounters
from policies.policy import PolicyError

LEVELS = ("low", "middle", "high", "max", "dynamic")
MODES = ("static", "dynamic")
PREFIX = "rubik_"
HOST_PIDNS_INODE = "4026531836"  # the initial pid namespace's inode (PROC_PID_INIT_INO)
STEP_MORE, STEP_LESS = 5, -50  # startDynamic
MAX_MISS, MIN_MISS = 20, 10
PERCENT = (10, 100)  # minPercent, maxPercent
INTERVAL_MS = (10, 10_000)  # adjustInterval and perfDuration ranges (ms)
INT32_MAX = 2**31 - 1  # strconv.ParseInt(…, 16/2, 32)


class DynCacheError(ValueError):
    """What rubik's dynCache initialisation returns as an error."""


@dataclass(frozen=True)
class Levels:
    """MultiLvlPercent: the low / mid / high percentages."""

    low: int
    mid: int
    high: int


@dataclass(frozen=True)
class Config:
    """dynCache's configuration (its defaults are rubik's)."""

    default_limit_mode: str = "static"
    adjust_interval: int = 1000  # ms
    perf_duration: int = 1000  # ms
    l3: Levels = Levels(20, 30, 50)
    mb: Levels = Levels(10, 30, 50)


def validate(c: Config, where: str = "dyn_cache") -> Config:
    """Config.Validate, in upstream's order; the message names the field and its range."""
    if c.default_limit_mode not in MODES:
        raise PolicyError(f"{where}.default_limit_mode: invalid cache limit mode {c.default_limit_mode!r}, should be static or dynamic")
    lo, hi = INTERVAL_MS
    if not lo <= c.adjust_interval <= hi:
        raise PolicyError(f"{where}.adjust_interval: adjust interval {c.adjust_interval} out of range [{lo},{hi}] (ms)")
    if not lo <= c.perf_duration <= hi:
        raise PolicyError(f"{where}.perf_duration: perf duration {c.perf_duration} out of range [{lo},{hi}] (ms)")
    for name, lv in (("l3_percent", c.l3), ("mem_band_percent", c.mb)):
        for v in (lv.low, lv.mid, lv.high):
            if not PERCENT[0] <= v <= PERCENT[1]:
                raise PolicyError(f"{where}.{name}: cache limit percentage {v} out of range [{PERCENT[0]},{PERCENT[1]}]")
    for name, lv in (("l3_percent", c.l3), ("mem_band_percent", c.mb)):
        if not lv.low <= lv.mid <= lv.high:
            raise PolicyError(f"{where}.{name}: does not satisfy low <= mid <= high ({lv.low}, {lv.mid}, {lv.high})")
    return c


def check_host(pidns_link: str | None, resctrl_mounted: bool, schemata_present: bool) -> None:
    """initCacheLimitDir's prerequisites: rubik shares the host's pid namespace (the link
    /proc/self/ns/pid, None if it is not a link, reads pid:[4026531836]), and resctrl is
    mounted with a schemata file."""
    if pidns_link is None:
        raise DynCacheError("failed to get pid namespace inode: not a link")
    if pidns_link.strip("pid:[]") != HOST_PIDNS_INODE:  # strings.Trim(ns, "pid:[]")
        raise DynCacheError(f"not share pid ns with host ({pidns_link})")
    if not resctrl_mounted:
        raise DynCacheError("resctrl path does not exist, does not support cache limit")
    if not schemata_present:
        raise DynCacheError("resctrl schemata file does not exist, is resctrl mounted?")


def cbm_ways(cbm_mask: str) -> int:
    """getBinaryMask: the number of cache ways, the bit length of info/L3/cbm_mask (hex)."""
    text = cbm_mask.strip()
    try:
        value = int(text, 16)
    except ValueError:
        raise DynCacheError(f"failed to transfer L3 mask value {cbm_mask!r} to decimal format") from None
    if not 0 <= value <= INT32_MAX or text.startswith(("-", "+")):
        raise DynCacheError(f"L3 mask value {cbm_mask!r} out of range")
    return value.bit_length() if value else 1  # FormatInt(0, 2) is "0", one digit


def l3_mask(ways: int, percent: int) -> str:
    """calcLimitedCacheValue: floor(ways × percent / 100) ways, at least 1, as a contiguous low
    mask in hex. (Upstream builds the mask as a decimal number of 1s and parses it in base 2:
    from 20 ways on that number overflows int64, so its result is garbage there; this returns
    the mask it means.)"""
    n = max(ways * percent // 100, 1)
    return format((1 << n) - 1, "x")


def schemata(l3_percent: int, mb_percent: int, numa: int, ways: int) -> str:
    """writeResctrlSchemata: one L3 and one MB line, an entry per NUMA node."""
    mask = l3_mask(ways, l3_percent)
    l3 = ";".join(f"{i}={mask}" for i in range(numa))
    mb = ";".join(f"{i}={mb_percent}" for i in range(numa))
    return f"L3:{l3}\nMB:{mb}\n"


def groups(c: Config, numa: int, cbm_mask: str, dynamic: tuple[int, int] | None = None) -> dict[str, str]:
    """initCacheLimitDir: every rubik_<level> group's schemata (the dynamic group at `dynamic`,
    (l3 %, mb %), starting at the low percentages)."""
    ways = cbm_ways(cbm_mask)
    dyn = dynamic or (c.l3.low, c.mb.low)
    pcts = {"dynamic": dyn, "low": (c.l3.low, c.mb.low), "middle": (c.l3.mid, c.mb.mid), "high": (c.l3.high, c.mb.high), "max": (100, 100)}
    return {PREFIX + lv: schemata(l3, mb, numa, ways) for lv, (l3, mb) in pcts.items()}


def level(annotation: str | None, default_mode: str) -> str:
    """syncLevel: the pod's `volcano.sh/cache-limit`, or max (static mode) / dynamic."""
    lv = annotation or ("max" if default_mode == "static" else "dynamic")
    if lv not in LEVELS:
        raise DynCacheError(f"invalid cache limit level {lv!r} (known: {', '.join(LEVELS)})")
    return lv


def placement(annotation: str | None, default_mode: str, procs: Sequence[Sequence[str]] | None) -> tuple[str, list[str]]:
    """syncCacheLimit for one offline pod: the resctrl tasks file and the PIDs written to it
    (each container's cgroup.procs; `procs` None = the pod's cgroup is gone: nothing)."""
    group = PREFIX + level(annotation, default_mode)
    pids = [p for container in procs or () for p in container]
    return f"{group}/tasks", pids


def miss_percent(misses: int, references: int) -> int:
    """getPodCacheMiss: int(100 × misses / (1 + references))."""
    return int(100.0 * misses / (1.0 + references))


def next_dynamic(
    current: tuple[int, int], c: Config, online: Sequence[tuple[int, int]], max_miss: int = MAX_MISS, min_miss: int = MIN_MISS
) -> tuple[int, int]:
    """startDynamic + flush: the dynamic group's next (l3 %, mb %) from the online pods'
    (cache-miss %, LLC-miss %), in order: the first pod at or over max_miss lowers both by 50;
    otherwise, if none reaches min_miss, both rise by 5; each clamped to [low, high]."""
    step = STEP_MORE
    for cache, llc in online:
        if cache >= max_miss or llc >= max_miss:
            step = STEP_LESS
            break
        if cache >= min_miss or llc >= min_miss:
            step = 0
    if step == 0:
        return current

    def clamp(v: int, lv: Levels) -> int:
        return min(max(v + step, lv.low), lv.high)

    return clamp(current[0], c.l3), clamp(current[1], c.mb)


def parse(table: Mapping[str, object] | None, where: str) -> Config | None:
    """`dyn_cache = { default_limit_mode = "static", adjust_interval = 1000, perf_duration =
    1000, l3_percent = { low, mid, high }, mem_band_percent = { low, mid, high } }`."""
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: must be a table")
    known = {"default_limit_mode", "adjust_interval", "perf_duration", "l3_percent", "mem_band_percent"}
    extra = sorted(set(table) - known)
    if extra:
        raise PolicyError(f"{where}.{extra[0]}: unknown (known: {', '.join(sorted(known))})")
    d = Config()

    def lv(key: str, default: Levels) -> Levels:
        t = table.get(key, {})
        if not isinstance(t, Mapping) or set(t) - {"low", "mid", "high"}:
            raise PolicyError(f"{where}.{key}: must be a table of low, mid, high (%)")
        vals = {k: t.get(k, getattr(default, k)) for k in ("low", "mid", "high")}
        for k, v in vals.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise PolicyError(f"{where}.{key}.{k}: must be an integer percentage (got {v!r})")
        return Levels(**vals)

    ms = {}
    for key in ("adjust_interval", "perf_duration"):
        v = table.get(key, getattr(d, key))
        if isinstance(v, bool) or not isinstance(v, int):
            raise PolicyError(f"{where}.{key}: must be an integer (ms) (got {v!r})")
        ms[key] = v
    mode = table.get("default_limit_mode", d.default_limit_mode)
    cfg = Config(str(mode), ms["adjust_interval"], ms["perf_duration"], lv("l3_percent", d.l3), lv("mem_band_percent", d.mb))
    return validate(cfg, where)


def perf_miss(d: PerfCounters) -> tuple[int, int]:
    """getPodCacheMiss on one perf window: (cache-miss %, LLC-miss %). The seam counts one
    miss event (LLC misses) and, where the core counts them, its references, so both
    percents are int(100 × misses / (1 + references)); without references the read fails
    and rubik takes (0, 0), as it does when perf.CgroupStat errs."""
    if d.cache_references is None:
        return 0, 0
    m = miss_percent(d.cache_misses, d.cache_references)
    return m, m


@dataclass
class Dynamic:
    """startDynamic's loop for the `rubik_dynamic` group: every adjust_interval after the last
    round ended, each online pod's counters over perf_duration (here all pods over the same
    window, where rubik samples them one after another), then one step of next_dynamic."""

    c: Config
    current: tuple[int, int]
    start: float = 0.0  # when the next window opens (s)
    before: dict[str, PerfCounters] | None = None

    def step(
        self, now: float, perf: Mapping[str, PerfCounters], max_miss: int = MAX_MISS, min_miss: int = MIN_MISS
    ) -> tuple[int, int] | None:
        """The new (l3 %, mb %) when a round ends and changes them, else None."""
        if self.before is None:
            if now + 1e-9 >= self.start:
                self.before, self.start = dict(perf), now
            return None
        if now + 1e-9 < self.start + self.c.perf_duration / 1000:
            return None
        misses = [perf_miss(perf[cg] - self.before[cg]) for cg in sorted(perf)]
        self.before, self.start = None, now + self.c.adjust_interval / 1000
        nxt = next_dynamic(self.current, self.c, misses, max_miss, min_miss)
        if nxt == self.current:
            return None  # flush: unchanged percents are not rewritten
        self.current = nxt
        return nxt
