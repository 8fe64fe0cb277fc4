"""resctrl (Intel RDT / AMD PQoS) as a policy sees it: the `schemata` text of a group, the
node's `info/` directory, and the two actions a policy returns beside its `KnobWrite`s —
`ResctrlWrite` (a group's schemata) and `ResctrlAssign` (a cgroup subtree's tasks into a group).

The kernel's rules are followed as arch/x86/kernel/cpu/resctrl/ctrlmondata.c applies them on a
write to `schemata`:

* a line is `<resource>:<id>=<value>;<id>=<value>…`; a line may name only some domains (the
  others keep their value), an unknown resource or domain is refused;
* an L3 value is a capacity bitmask (CBM) in hex (`cbm_validate`): not above `info/L3/cbm_mask`,
  its 1-bits contiguous, at least `info/L3/min_cbm_bits` of them (so never 0 on Intel);
* an MB value is a percentage (`bw_validate`): within [`info/MB/min_bandwidth`, 100], and
  rounded UP to a multiple of `info/MB/bandwidth_gran` (roundup(bw, bw_gran));
* the file prints every resource with every domain, CBMs zero-padded to the mask's hex width
  (`show_doms`: "%0*x").

Tasks join a group by writing their PIDs to its `tasks` file; a task is in one group at a time
(the last write wins), and a group's removal sends its tasks back to the root group. Agents
(koordlet's resctrl reconcile, rubik's dynCache) write each pod's container PIDs every
interval; here `ResctrlAssign` names the cgroup and covers its tasks present and future.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

RESOURCES = ("L3", "MB")
MB_MAX = 100  # the MB resource's default_ctrl on Intel: 100 % (no throttling)
# what replay says on a host without resctrl (this one): the kernel needs the CPU feature and
# the filesystem mounted before any group can exist
NO_RESCTRL = (
    "resctrl (cache and memory-bandwidth allocation) needs Intel RDT / AMD PQoS and `mount -t resctrl resctrl "
    "/sys/fs/resctrl`; this host has no /sys/fs/resctrl/info, so replay cannot apply the policy's resctrl "
    "writes — the simulator models them (colosim run)"
)


class SchemataError(ValueError):
    """A schemata the kernel would refuse (EINVAL, with its last_cmd_status message)."""


@dataclass(frozen=True)
class ResctrlInfo:
    """/sys/fs/resctrl/info as the seam reports it (`Node.resctrl_info()`)."""

    cbm_mask: str = "7ff"
    min_cbm_bits: int = 1
    num_closids: int = 16
    bandwidth_gran: int = 10
    min_bandwidth: int = 10
    l3_domains: tuple[int, ...] = (0,)
    llc_bytes: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResctrlInfo:
        return cls(
            cbm_mask=str(d["cbm_mask"]),
            min_cbm_bits=int(d["min_cbm_bits"]),
            num_closids=int(d["num_closids"]),
            bandwidth_gran=int(d["bandwidth_gran"]),
            min_bandwidth=int(d["min_bandwidth"]),
            l3_domains=tuple(int(i) for i in d["l3_domains"]),
            llc_bytes=int(d.get("llc_bytes", 0)),
        )

    @property
    def full_mask(self) -> int:
        return int(self.cbm_mask, 16)

    @property
    def ways(self) -> int:
        """cbm_len: the number of cache ways, the bit length of cbm_mask."""
        return self.full_mask.bit_length()

    def default(self) -> Schemata:
        """The root group's schemata (and a new group's): all ways, MB 100, every domain."""
        return Schemata({d: self.full_mask for d in self.l3_domains}, dict.fromkeys(self.l3_domains, MB_MAX))


def check_cbm(value: int, info: ResctrlInfo, where: str = "L3") -> int:
    """cbm_validate: within cbm_mask, contiguous 1-bits, at least min_cbm_bits of them."""
    if (info.min_cbm_bits > 0 and value == 0) or value > info.full_mask:
        raise SchemataError(f"{where}: mask {value:x} out of range (cbm_mask {info.cbm_mask}, at least {info.min_cbm_bits} bit)")
    if value:
        low = (value & -value).bit_length() - 1  # find_first_bit
        run = value >> low
        if run & (run + 1):  # a 0 between 1-bits: find_next_bit after the first zero bit
            raise SchemataError(f"{where}: the mask {value:x} has non-consecutive 1-bits")
        if run.bit_length() < info.min_cbm_bits:
            raise SchemataError(f"{where}: need at least {info.min_cbm_bits} bits in the mask (got {value:x})")
    return value


def check_mb(value: int, info: ResctrlInfo, where: str = "MB") -> int:
    """bw_validate: within [min_bandwidth, 100], then rounded up to bandwidth_gran."""
    if not info.min_bandwidth <= value <= MB_MAX:
        raise SchemataError(f"{where}: MB value {value} out of range [{info.min_bandwidth},{MB_MAX}]")
    gran = info.bandwidth_gran
    return -(-value // gran) * gran


@dataclass(frozen=True)
class Schemata:
    """One group's schemata: each L3 domain's CBM and MB percent (a partial write names only
    some of them)."""

    l3: Mapping[int, int] = field(default_factory=dict)
    mb: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, where: str = "schemata") -> Schemata:
        """The file's text → masks and percents, syntax only (values unchecked): blank lines
        and leading spaces are ignored, a trailing ';' too (as the kernel's strsep leaves an
        empty token)."""
        out: dict[str, dict[int, int]] = {"L3": {}, "MB": {}}
        for raw in text.splitlines():
            line = raw.strip()
            if not line:
                continue
            name, colon, rest = line.partition(":")
            name = name.strip()
            if not colon:
                raise SchemataError(f"{where}: line {line!r}: missing ':'")
            if name not in out:
                raise SchemataError(f"{where}: unknown or unsupported resource name {name!r} (known: {', '.join(RESOURCES)})")
            for tok in filter(None, (t.strip() for t in rest.split(";"))):
                dom, eq, val = tok.partition("=")
                if not eq or not dom.strip().isdigit():
                    raise SchemataError(f"{where}: {name}: {tok!r}: missing '=' or non-numeric domain")
                d = int(dom)
                if d in out[name]:
                    raise SchemataError(f"{where}: {name}: duplicate domain {d}")
                try:
                    out[name][d] = int(val.strip(), 16 if name == "L3" else 10)
                except ValueError:
                    kind = "non-hex character in the mask" if name == "L3" else "invalid MB value"
                    raise SchemataError(f"{where}: {name}:{d}: {kind} {val.strip()!r}") from None
        return cls(out["L3"], out["MB"])

    def validated(self, info: ResctrlInfo, where: str = "schemata") -> Schemata:
        """The values the kernel would store: each domain known, each CBM valid, each MB
        rounded up to the bandwidth granularity."""
        for name, values in (("L3", self.l3), ("MB", self.mb)):
            for d in values:
                if d not in info.l3_domains:
                    raise SchemataError(f"{where}: {name}: unknown domain {d} (domains: {', '.join(map(str, info.l3_domains))})")
        l3 = {d: check_cbm(v, info, f"{where}: L3:{d}") for d, v in self.l3.items()}
        mb = {d: check_mb(v, info, f"{where}: MB:{d}") for d, v in self.mb.items()}
        return Schemata(l3, mb)

    def over(self, base: Schemata) -> Schemata:
        """This (partial) write applied over a group's current schemata."""
        return Schemata({**base.l3, **self.l3}, {**base.mb, **self.mb})

    def format(self, info: ResctrlInfo | None = None) -> str:
        """The text: with `info`, as the kernel prints it (CBMs zero-padded to cbm_mask's hex
        width, domains in order); without, the shortest form a write takes."""
        width = len(format(info.full_mask, "x")) if info else 0
        lines = []
        if self.l3:
            lines.append("L3:" + ";".join(f"{d}={v:0{width}x}" for d, v in sorted(self.l3.items())))
        if self.mb:
            lines.append("MB:" + ";".join(f"{d}={v}" for d, v in sorted(self.mb.items())))
        return "\n".join(lines)


@dataclass(frozen=True)
class ResctrlWrite:
    """Write `schemata` to /sys/fs/resctrl/<group>/schemata (mkdir the group first if it is
    absent; "" is the root group)."""

    group: str
    schemata: str

    def __str__(self) -> str:
        return f"resctrl {self.group or '/'}/schemata = {self.schemata.strip()!r}"


@dataclass(frozen=True)
class ResctrlAssign:
    """Every task of `cgroup`'s subtree, present and future, into resctrl `group`'s tasks."""

    group: str
    cgroup: str

    def __str__(self) -> str:
        return f"resctrl {self.group or '/'}/tasks ← {self.cgroup}'s tasks"


ResctrlAction = ResctrlWrite | ResctrlAssign


def apply(node: Any, action: ResctrlAction) -> None:
    """One action on a node that has the seam's resctrl methods (`sim._core.Node`)."""
    if isinstance(action, ResctrlWrite):
        node.resctrl_write(action.group, action.schemata)
    else:
        node.resctrl_assign(action.group, action.cgroup)
