"""What this host's scheduler is, read (never written) from the kernel, each value with where
it came from: the release (uname), HZ, the EEVDF base slice, the sched features, the
preemption mode and kernel.sched_autogroup_enabled.

Sources, best first:
  * debugfs: /sys/kernel/debug/sched/{base_slice_ns,features,preempt}, or sched/debug's
    `sysctl_sched_base_slice` and `sysctl_sched_features` (a bitmask, decoded with the running
    version's kernel/sched/features.h order) where lockdown lets only that file be read.
    Replay never mounts debugfs: where it is not mounted these are left to the next source.
  * the kernel's build config: /boot/config-$(uname -r), else /proc/config.gz (CONFIG_HZ,
    the CONFIG_PREEMPT_* choice).
  * measured: HZ as the rate jiffies advance in /proc/timer_list (USER_HZ, getconf CLK_TCK,
    is always 100 on x86 and is not the kernel's HZ).
  * the release's defaults: features.h's defaults, the base slice of fair.c
    (kernel-and-anchors.md, EEVDF).

`kernel_overrides` turns a reading into the scenario's `[kernel]` overrides (only the fields
the user left out, only the fields the schema has); `colosim host-kernel` prints both.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from replay.cgroupfs import HostError

T = TypeVar("T", covariant=True)  # a Sourced[int] is a Sourced[int | None]: frozen, read-only

# CONFIG_HZ's choices (kernel/Kconfig.hz): a measured rate is snapped to the nearest.
HZ_CHOICES = (100, 250, 300, 1000)
# How long jiffies are watched when HZ has to be measured: at 100 Hz, 25 ticks (±1 of them
# late under NO_HZ is 4%, far from the 17% between 250 and 300).
HZ_MEASURE_S = 0.25
# EEVDF's default base slice before scaling (kernel/sched/fair.c `sysctl_sched_base_slice`):
# 0.75 ms from 6.6, 0.70 ms since commit 2ae891b82695 (6.15, backported to 6.12-stable);
# kernel-and-anchors.md, EEVDF.
BASE_SLICE_NS = ((6, 15), 700_000, 750_000)
BASE_SLICE_BACKPORTED = (6, 12)

# kernel/sched/features.h of each version, in order (bit i of sysctl_sched_features is the
# i-th SCHED_FEAT), with its default. 6.18: as released plus NI_RANDOM, which 6.18-stable
# took with "sched/fair: Proportional newidle balance"; RT_PUSH_IPI is there (HAVE_RT_PUSH_IPI
# on SMP) and off without PREEMPT_RT. This host's sched/debug showed 99674079, exactly these
# defaults (docs/replay.md, "Features").
FEATURES: dict[str, tuple[tuple[str, bool], ...]] = {
    "6.18": (
        ("PLACE_LAG", True),
        ("PLACE_DEADLINE_INITIAL", True),
        ("PLACE_REL_DEADLINE", True),
        ("RUN_TO_PARITY", True),
        ("PREEMPT_SHORT", True),
        ("NEXT_BUDDY", False),
        ("PICK_BUDDY", True),
        ("CACHE_HOT_BUDDY", True),
        ("DELAY_DEQUEUE", True),
        ("DELAY_ZERO", True),
        ("WAKEUP_PREEMPTION", True),
        ("HRTICK", False),
        ("HRTICK_DL", False),
        ("NONTASK_CAPACITY", True),
        ("TTWU_QUEUE", True),
        ("SIS_UTIL", True),
        ("WARN_DOUBLE_CLOCK", False),
        ("RT_PUSH_IPI", False),
        ("RT_RUNTIME_SHARE", False),
        ("LB_MIN", False),
        ("ATTACH_AGE_LOAD", True),
        ("WA_IDLE", True),
        ("WA_WEIGHT", True),
        ("WA_BIAS", True),
        ("UTIL_EST", True),
        ("LATENCY_WARN", False),
        ("NI_RANDOM", True),
    ),
}

# The preemption models (kernel/Kconfig.preempt) as /sys/kernel/debug/sched/preempt names them.
PREEMPT_CONFIG = (
    ("CONFIG_PREEMPT_NONE", "none"),
    ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
    ("CONFIG_PREEMPT_LAZY", "lazy"),
    ("CONFIG_PREEMPT", "full"),
)


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A value and where it came from ("debugfs ...", "config ...", "measured ...",
    "default for release X", a /proc file)."""

    value: T
    source: str


@dataclass(frozen=True)
class HostKernel:
    release: Sourced[str]
    version: Sourced[str]  # "6.18": MAJOR.MINOR
    scheduler: Sourced[str]  # "cfs" | "eevdf"
    hz: Sourced[int | None]  # None: unknown (no config, no timer_list)
    base_slice_ns: Sourced[int | None]  # None: CFS, or a version whose default is not known
    sched_features: Sourced[dict[str, bool] | None]
    preempt: Sourced[str]  # "none" | "voluntary" | "full" | "lazy" | "rt" | "unknown"
    autogroup: Sourced[bool]

    def rows(self) -> list[tuple[str, str, str]]:
        """(setting, value, source) for the table."""

        def show(v: Any) -> str:
            if isinstance(v, dict):
                return f"{sum(v.values())} of {len(v)} on (below)"
            return "unknown" if v is None else str(v)

        return [(name, show(s.value), s.source) for name, s in self.items()]

    def items(self) -> list[tuple[str, Sourced[Any]]]:
        return [(name, getattr(self, name)) for name in self.__dataclass_fields__]

    def as_dict(self) -> dict[str, dict[str, Any]]:
        """For comparison.json: each setting's value and source."""
        return {name: {"value": s.value, "source": s.source} for name, s in self.items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Mapping[str, Any]]) -> HostKernel:
        return cls(**{name: Sourced(d[name]["value"], d[name]["source"]) for name in cls.__dataclass_fields__})

    def summary(self) -> str:
        """One line for a replay's log."""
        parts = [f"Linux {self.release.value} ({self.scheduler.value})", f"HZ {self.hz.value or 'unknown'} ({self.hz.source})"]
        if self.base_slice_ns.value is not None:
            parts.append(f"base_slice {self.base_slice_ns.value / 1e6:g} ms ({self.base_slice_ns.source})")
        parts.append(f"preempt {self.preempt.value} ({self.preempt.source})")
        parts.append(f"autogroup {'on' if self.autogroup.value else 'off'} ({self.autogroup.source})")
        features = "unknown" if self.sched_features.value is None else f"{sum(self.sched_features.value.values())} on"
        parts.append(f"sched features {features} ({self.sched_features.source})")
        return "host kernel: " + ", ".join(parts)


# --- parsers: text in, values out (tests feed them hand-made text) ---------------------------


def parse_version(release: str) -> tuple[int, int]:
    major, minor = release_numbers(release).split(".")[:2]
    return int(major), int(minor)


def release_numbers(release: str) -> str:
    """The release's numbers ("6.18.44" of "6.18.44-fc-v669"): the fair class changed within stable series (the core's
    `[kernel] version` tells 6.18.44's reweight_entity from 6.18.45's, sched_features.rs)."""
    m = re.match(r"\d+\.\d+(\.\d+)?", release)
    if m is None:
        raise HostError(f"kernel release {release!r}: not MAJOR.MINOR...")
    return m[0]


def scheduler_of(version: tuple[int, int]) -> str:
    """EEVDF replaced CFS's pick in Linux 6.6 (kernel-and-anchors.md, EEVDF)."""
    return "eevdf" if version >= (6, 6) else "cfs"


def parse_config(text: str) -> dict[str, str]:
    """A kernel .config: CONFIG_X=value lines (quotes kept off strings); `# CONFIG_X is not
    set` lines are left out, as the build leaves them undefined."""
    out = {}
    for line in text.splitlines():
        key, eq, value = line.strip().partition("=")
        if eq and key.startswith("CONFIG_"):
            out[key] = value.strip('"')
    return out


def hz_from_config(config: Mapping[str, str]) -> int | None:
    value = config.get("CONFIG_HZ")
    return int(value) if value and value.isdigit() else None


def parse_timer_list_jiffies(text: str) -> int:
    """/proc/timer_list's global `jiffies: N` (the first; every tick device repeats it)."""
    m = re.search(r"^jiffies: (\d+)$", text, re.M)
    if m is None:
        raise ValueError("no 'jiffies:' line in /proc/timer_list")
    return int(m[1])


def snap_hz(rate: float) -> int:
    """A measured tick rate as the CONFIG_HZ it must be (the nearest on a log scale)."""
    return min(HZ_CHOICES, key=lambda hz: abs(math.log(rate / hz)))


def parse_features(text: str) -> dict[str, bool]:
    """/sys/kernel/debug/sched/features: "PLACE_LAG NO_NEXT_BUDDY ..." (NO_ = off)."""
    return {name.removeprefix("NO_"): not name.startswith("NO_") for name in text.split()}


def parse_sched_debug(text: str) -> dict[str, str]:
    """sched/debug's `sysctl_sched` block: ".sysctl_sched_features : 99674079" → value text."""
    return dict(re.findall(r"^\s*\.(sysctl_sched_\w+)\s*:\s*(\S+)", text, re.M))


def decode_features(mask: int, order: Iterable[tuple[str, bool]]) -> dict[str, bool]:
    """sysctl_sched_features: bit i is features.h's i-th SCHED_FEAT (kernel/sched/debug.c
    prints it as an integer; `sched_feat_names` are in the same order)."""
    names = [name for name, _ in order]
    if mask >> len(names):
        raise ValueError(f"sysctl_sched_features {mask} has bits beyond this version's {len(names)} features")
    return {name: bool(mask >> i & 1) for i, name in enumerate(names)}


def ms_text_to_ns(text: str) -> int:
    """sched/debug prints durations as ms with 6 decimals (SPLIT_NS): "2.800000" → 2800000."""
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000 + int((frac + "000000")[:6])


def parse_preempt(text: str) -> str:
    """/sys/kernel/debug/sched/preempt: "(none) voluntary full lazy": the one in parentheses."""
    m = re.search(r"\((\w+)\)", text)
    if m is None:
        raise ValueError(f"no mode in parentheses in {text.strip()!r}")
    return m[1]


def preempt_from_uname(version: str) -> str | None:
    """`uname -v` names the build's model: PREEMPT_RT, PREEMPT_DYNAMIC (chosen at boot),
    PREEMPT_LAZY, PREEMPT (full); nothing for none/voluntary (init/Makefile's UTS_VERSION)."""
    words = set(version.split())
    for word, mode in (("PREEMPT_RT", "rt"), ("PREEMPT_DYNAMIC", "dynamic"), ("PREEMPT_LAZY", "lazy"), ("PREEMPT", "full")):
        if word in words:
            return mode
    return None


def preempt_from_config(config: Mapping[str, str]) -> str | None:
    for key, mode in PREEMPT_CONFIG:
        if config.get(key) == "y":
            return mode
    return None


def default_base_slice(version: tuple[int, int], ncpus: int) -> int | None:
    """fair.c's default, scaled by 1 + ilog2(min(ncpus, 8)) (SCHED_TUNABLESCALING_LOG,
    `update_sysctl`); None for CFS (no base slice)."""
    if version < (6, 6):
        return None
    since, new, old = BASE_SLICE_NS
    base = new if version >= since or version == BASE_SLICE_BACKPORTED else old
    return base * (1 + (min(ncpus, 8).bit_length() - 1))


# --- reading the host ------------------------------------------------------------------------


def read_optional(path: Path) -> str | None:
    """A file's text, or None when it is absent or unreadable (debugfs unmounted, lockdown)."""
    try:
        if path.suffix == ".gz":
            return gzip.decompress(path.read_bytes()).decode()
        return path.read_text()
    except (OSError, EOFError, UnicodeDecodeError):
        return None


def _decoded(mask: str | None, order: tuple[tuple[str, bool], ...] | None) -> dict[str, bool] | None:
    """sched/debug's bitmask decoded, or None where there is none, no order to decode it in,
    or a bit beyond the order (a feature a stable or vendor build added)."""
    if mask is None or order is None or not mask.isdigit():
        return None
    try:
        return decode_features(int(mask), order)
    except ValueError:
        return None


@dataclass(frozen=True)
class Paths:
    """Where the kernel shows each thing; a test points `root` at a made-up tree."""

    root: Path = Path("/")

    def __truediv__(self, rel: str) -> Path:
        return self.root / rel


def measure_hz(
    read: Callable[[], str | None], clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Any] = time.sleep
) -> Sourced[int] | None:
    """HZ from jiffies counted over HZ_MEASURE_S of the monotonic clock."""
    first = read()
    if first is None:
        return None
    t0, j0 = clock(), parse_timer_list_jiffies(first)
    sleep(HZ_MEASURE_S)
    second = read()
    if second is None:
        return None
    t1, j1 = clock(), parse_timer_list_jiffies(second)
    rate = (j1 - j0) / (t1 - t0)
    if rate <= 0:
        return None
    return Sourced(snap_hz(rate), f"measured (jiffies in /proc/timer_list at {rate:.0f}/s)")


def read_host_kernel(
    paths: Paths = Paths(),
    uname: os.uname_result | None = None,
    ncpus: int | None = None,
    measure: Callable[[Callable[[], str | None]], Sourced[int] | None] = measure_hz,
) -> HostKernel:
    """This host's scheduler settings, each with its source. Reads only."""
    un = uname or os.uname()
    ncpus = ncpus or os.cpu_count() or 1
    version = parse_version(un.release)
    vtext = f"{version[0]}.{version[1]}"
    release_default = f"default for release {vtext}"

    config, config_src = {}, ""
    for rel in (f"boot/config-{un.release}", "proc/config.gz"):
        text = read_optional(paths / rel)
        if text is not None:
            config, config_src = parse_config(text), f"config /{rel}"
            break

    debugfs = paths / "sys/kernel/debug/sched"
    debug = parse_sched_debug(read_optional(debugfs / "debug") or "")

    # HZ: unknown leaves the scenario's own (or its default) in the prediction, and says so
    hz: Sourced[int | None] | None = None
    if (value := hz_from_config(config)) is not None:
        hz = Sourced(value, f"{config_src} (CONFIG_HZ)")
    else:
        hz = measure(lambda: read_optional(paths / "proc/timer_list"))
    if hz is None:
        hz = Sourced(None, "unknown: no kernel config (/boot/config-*, /proc/config.gz), /proc/timer_list unreadable")

    # base slice (EEVDF only)
    base: Sourced[int | None]
    if (text := read_optional(debugfs / "base_slice_ns")) is not None and text.strip().isdigit():
        base = Sourced(int(text), "debugfs sched/base_slice_ns")
    elif "sysctl_sched_base_slice" in debug and version >= (6, 6):
        base = Sourced(ms_text_to_ns(debug["sysctl_sched_base_slice"]), "debugfs sched/debug (sysctl_sched_base_slice)")
    else:
        value = default_base_slice(version, ncpus)
        base = Sourced(value, f"{release_default}, {ncpus} CPUs" if value is not None else "none: CFS")

    # features
    order = FEATURES.get(vtext)
    features: Sourced[dict[str, bool] | None]
    if (text := read_optional(debugfs / "features")) is not None:
        features = Sourced(parse_features(text), "debugfs sched/features")
    elif (decoded := _decoded(debug.get("sysctl_sched_features"), order)) is not None:
        features = Sourced(decoded, f"debugfs sched/debug (sysctl_sched_features {debug['sysctl_sched_features']}, {vtext}'s features.h)")
    elif order is not None:
        why = "debugfs not readable" if "sysctl_sched_features" not in debug else "sched/debug's bitmask does not fit its order"
        features = Sourced(dict(order), f"{release_default} (features.h; {why})")
    else:
        features = Sourced(None, f"unknown: debugfs not readable, no features.h order for {vtext}")

    # preemption model
    built = preempt_from_uname(un.version)
    preempt: Sourced[str]
    if (text := read_optional(debugfs / "preempt")) is not None and re.search(r"\(\w+\)", text):
        preempt = Sourced(parse_preempt(text), "debugfs sched/preempt")
    elif built == "dynamic":
        cmdline = re.search(r"(?:^|\s)preempt=(\w+)", read_optional(paths / "proc/cmdline") or "")
        chosen = preempt_from_config(config)
        if cmdline:
            preempt = Sourced(cmdline[1], "uname -v PREEMPT_DYNAMIC, preempt= on /proc/cmdline")
        elif chosen:
            preempt = Sourced(chosen, f"uname -v PREEMPT_DYNAMIC, boot default from {config_src}")
        else:
            preempt = Sourced("unknown", "uname -v PREEMPT_DYNAMIC; no config to tell the boot default")
    elif built is not None:
        preempt = Sourced(built, "uname -v")
    elif (chosen := preempt_from_config(config)) is not None:
        preempt = Sourced(chosen, config_src)
    else:
        preempt = Sourced("unknown", "uname -v names no PREEMPT model and no config")

    # autogroup: absent without CONFIG_SCHED_AUTOGROUP, which is then off
    ag = (read_optional(paths / "proc/sys/kernel/sched_autogroup_enabled") or "").strip()
    autogroup = (
        Sourced(ag == "1", "/proc/sys/kernel/sched_autogroup_enabled")
        if ag
        else Sourced(False, "no sched_autogroup_enabled (no CONFIG_SCHED_AUTOGROUP)")
    )

    return HostKernel(
        release=Sourced(un.release, "uname -r"),
        version=Sourced(vtext, "uname -r"),
        scheduler=Sourced(scheduler_of(version), f"release {vtext} (EEVDF since 6.6)"),
        hz=hz,
        base_slice_ns=base,
        sched_features=features,
        preempt=preempt,
        autogroup=autogroup,
    )


# The opt-in way to read debugfs where it is not mounted: in a private mount namespace of a
# child (unshare -m, private propagation), so the host's mounts never change. Never by default.
PRIVATE_DEBUGFS = 'mount -t debugfs none /sys/kernel/debug && exec "$0" -m sim host-kernel --json'


def read_in_private_debugfs() -> HostKernel:
    """This host's reading made by a child that mounted debugfs in its own mount namespace."""
    import json
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        raise HostError("--private-debugfs: needs unshare(1) (util-linux)")
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", PRIVATE_DEBUGFS, sys.executable]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise HostError(f"--private-debugfs: mounting debugfs in a private mount namespace failed (root needed): {why}")
    return HostKernel.from_dict(json.loads(proc.stdout))


@cache
def host_kernel() -> HostKernel:
    """This host's reading, once per process (HZ may take HZ_MEASURE_S to measure)."""
    return read_host_kernel()


# --- into the scenario -----------------------------------------------------------------------

# [kernel] fields always set from the host, whatever the scenario says: the host has no choice.
FORCED = frozenset({"scheduler"})


def schema_fields() -> set[str]:
    """The [kernel] fields the scenario schema takes (by their TOML names)."""
    from sim.scenario.node import Kernel

    return {f.alias or name for name, f in Kernel.model_fields.items()}


def kernel_overrides(hk: HostKernel, user_set: Iterable[str] = (), fields: set[str] | None = None) -> dict[str, Any]:
    """`--set`-style overrides ("kernel.hz": 250, ...) that describe this host in a scenario's
    [kernel]: every field the user's scenario left out (`user_set`: the names its [kernel]
    gives) and the schema has; `version` and `sched_features` only where the schema has them."""
    fields = schema_fields() if fields is None else fields
    mine: dict[str, Any] = {"scheduler": hk.scheduler.value, "autogroup": hk.autogroup.value, "version": release_numbers(hk.release.value)}
    if hk.hz.value is not None:
        mine["hz"] = hk.hz.value
    if hk.base_slice_ns.value is not None and hk.scheduler.value == "eevdf":
        mine["base_slice"] = f"{hk.base_slice_ns.value}ns"
    if hk.sched_features.value is not None:
        mine["sched_features"] = dict(hk.sched_features.value)
    user = set(user_set)
    return {f"kernel.{k}": v for k, v in mine.items() if k in fields and (k in FORCED or k not in user)}


def kernel_toml(overrides: Mapping[str, Any]) -> str:
    """The [kernel] table the overrides make, as TOML."""
    lines = ["[kernel]"]
    for key, value in overrides.items():
        name = key.removeprefix("kernel.")
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {str(v).lower()}" for k, v in value.items())
            lines.append(f"{name} = {{ {inner} }}")
        elif isinstance(value, bool):
            lines.append(f"{name} = {str(value).lower()}")
        elif isinstance(value, str):
            lines.append(f'{name} = "{value}"')
        else:
            lines.append(f"{name} = {value}")
    return "\n".join(lines)


def host_kernel_report(hk: HostKernel, fields: set[str] | None = None) -> str:
    """`colosim host-kernel`: the table of what was read and from where, and the [kernel] a
    replay's prediction would use (for a scenario that sets none of it)."""
    from sim.results import markdown

    overrides = kernel_overrides(hk, (), fields)
    fields = schema_fields() if fields is None else fields
    left_out = [k for k in ("version", "sched_features") if k not in fields]
    note = f"\n# not in this schema, so not passed: {', '.join(left_out)}" if left_out else ""
    table = markdown(["setting", "value", "source"], [list(r) for r in hk.rows()])
    if hk.sched_features.value is not None:
        table += "\n\nsched features: " + " ".join(k if on else f"NO_{k}" for k, on in hk.sched_features.value.items())
    return f"{table}\n\n# the [kernel] a replay predicts with (fields a scenario sets itself win, but scheduler){note}\n{kernel_toml(overrides)}"
