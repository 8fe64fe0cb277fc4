"""The host's cgroup filesystems behind the one seam: cgroup v1 (a hierarchy per controller)
and cgroup v2 (one unified hierarchy), detected from /proc/self/mountinfo.

A `HostBackend` implements the same `policies.cgroup.Backend` the simulator backend does, so
a policy object drives real cgroups unchanged. Policies speak v1 names and units; the v2
backend converts (cpu.shares → cpu.weight, cfs_quota_us + cfs_period_us → cpu.max,
cfs_burst_us → cpu.max.burst) with the kernel's arithmetic (policies.cgroup).

Safety (../shared/DESIGN.md, "replay"): a backend is rooted at a *run folder*,
`<own cgroup>/colosim-<run id>` in every hierarchy it uses, where "own cgroup" is what
/proc/self/cgroup names for this process. Every path it touches is checked to lie inside that
folder before anything is written; the folder's parent (our own cgroup) is only read.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from policies.cgroup import (
    BLKIO_KNOBS,
    MEMORY_KNOBS,
    NET_KNOBS,
    PAGE_COUNTER_MAX_BYTES,
    ROOT_KNOBS,
    CgroupStats,
    Cpu,
    Knob,
    KnobWrite,
    NodeStats,
    cpu_max,
    memory_limit_pages,
    memory_refusal,
    parse_cpu_max,
    parse_cpus,
    parse_memory_limit,
    shares_to_weight,
    weight_to_shares,
)
from policies.perf import PerfCounters
from policies.resctrl import NO_RESCTRL, ResctrlAction, ResctrlInfo
from sim.errors import HostError, ScenarioError, WriteRefused

# resctrl's info directory: present only where the kernel has RDT / PQoS and resctrl is mounted
RESCTRL_INFO = Path("/sys/fs/resctrl/info")
PERF_REFUSAL = (
    "replay does not read hardware perf counters (perf_event cgroup mode) yet; the policy's CPI / "
    "cache-miss readings come from the simulator only (colosim run)"
)


def resctrl_refusal(fs: Fs | None = None, info: Path = RESCTRL_INFO) -> str:
    """Why replay cannot apply resctrl here: the filesystem is absent (this host), or
    present but not driven by replay yet."""
    if not (fs or Fs()).exists(info):
        return NO_RESCTRL
    return f"{info.parent} is mounted, but replay does not drive resctrl groups yet; the simulator models them (colosim run)"


# The controllers replay needs in v1, each possibly co-mounted ("cpu,cpuacct"); blkio too
# when a scenario does IO, memory when it limits or measures memory.
V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset")
V1_CPUACCT = "cpuacct"  # where a v1 cgroup's CPU time is read
V1_IO = "blkio"
V1_MEMORY = "memory"
RUN_PREFIX = "colosim-"
USER_HZ_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class Fs:
    """The file operations a backend makes, in one place: the kernel's cgroupfs on a host,
    a fake kernel over a temporary directory in tests."""

    def read(self, path: Path) -> str:
        return path.read_text()

    def write(self, path: Path, text: str) -> None:
        # One write(2) of the whole value, as `echo value > file` does: cgroupfs parses a write
        # at a time, and refuses a bad value with EINVAL.
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def mkdir(self, path: Path) -> None:
        path.mkdir()

    def rmdir(self, path: Path) -> None:
        path.rmdir()

    def exists(self, path: Path) -> bool:
        return path.exists()


# What a fresh cgroup's files hold (cgroup-v1/v2 docs), for a dry run's reads.
DEFAULTS = {
    "cpu.shares": "1024",
    "cpu.idle": "0",
    "cpu.qos_level": "0",
    "cpu.cfs_quota_us": "-1",
    "cpu.cfs_period_us": "100000",
    "cpu.cfs_burst_us": "0",
    "cpu.weight": "100",
    "cpu.max": "max 100000",
    "cpu.max.burst": "0",
    "cpuset.cpus": "",
    "cpuset.mems": "",
    "cgroup.subtree_control": "",
    "memory.limit_in_bytes": str(PAGE_COUNTER_MAX_BYTES),
    "memory.max": "max",
    "memory.high": "max",
    "memory.low": "0",
    "memory.min": "0",
    "memory.oom.group": "0",
}


# Knobs the root cgroup does not have (a root cannot be limited).
ROOTLESS = {Knob.CPU_CFS_QUOTA_US, Knob.CPU_CFS_PERIOD_US, Knob.CPU_CFS_BURST_US, Knob.CPU_IDLE, Knob.CPU_SHARES}


# --- where the hierarchies are -----------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The cgroup hierarchies replay uses and this process's place in them.

    v1: `mounts` maps each controller to its hierarchy's mount point; v2: the one key "" maps
    to the unified mount. `own` maps the same keys to this process's cgroup path ("/..")."""

    version: int
    mounts: dict[str, Path]
    own: dict[str, str]
    # v2: whether the io controller is used (v1: a "blkio" key in mounts)
    io_v2: bool = False
    # v2: whether the memory controller is used (v1: a "memory" key in mounts)
    memory_v2: bool = False

    @property
    def io(self) -> bool:
        """Whether this layout holds the block IO controller (v1 blkio, v2 io)."""
        return V1_IO in self.mounts if self.version == 1 else self.io_v2

    @property
    def memory(self) -> bool:
        """Whether this layout holds the memory controller (v1 memory, v2 memory)."""
        return V1_MEMORY in self.mounts if self.version == 1 else self.memory_v2

    def own_dir(self, controller: str) -> Path:
        return self.mounts[controller] / self.own[controller].lstrip("/")

    @property
    def keys(self) -> list[str]:
        return list(self.mounts)


def detect_layout(
    mountinfo: str | None = None, self_cgroup: str | None = None, io: bool | None = False, memory: bool | None = False
) -> Layout:
    """Which cgroup version holds the cpu controller here, and where we sit in it.

    A v1 cpu hierarchy wins when there is one (a v2 mount beside it, as on this kind of host,
    has no cpu controller: the kernel gives a controller to one version only).

    `io`: True — the block IO controller is needed too (v1 blkio hierarchy; v2 io, which
    check_writable requires enabled for our children); None — used where it is mounted
    (cleanup); False — not used. `memory`: the same for the memory controller."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    if self_cgroup is None:
        self_cgroup = Path("/proc/self/cgroup").read_text()
    v1: dict[str, Path] = {}
    unified: Path | None = None
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        fstype, options = rfields[0], rfields[2].split(",")
        mount = Path(fields[4])
        if fstype == "cgroup":
            for c in (*V1_CONTROLLERS, V1_IO, V1_MEMORY):
                if c in options:
                    v1[c] = mount
        elif fstype == "cgroup2":
            unified = mount
    own_v1: dict[str, str] = {}
    own_v2 = None
    for line in self_cgroup.splitlines():
        num, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if num == "0" and controllers == "":
            own_v2 = path
        for c in controllers.split(","):
            if c in (*V1_CONTROLLERS, V1_IO, V1_MEMORY):
                own_v1[c] = path
    if "cpu" in v1:
        missing = [c for c in V1_CONTROLLERS if c not in v1 or c not in own_v1]
        if missing:
            raise HostError(f"cgroup v1: controller(s) {', '.join(missing)} not mounted")
        wanted = list(V1_CONTROLLERS)
        has_io = V1_IO in v1 and V1_IO in own_v1
        if io and not has_io:
            raise HostError("the scenario does block IO but cgroup v1 has no blkio hierarchy mounted here")
        if io is not False and has_io:
            wanted.append(V1_IO)
        has_memory = V1_MEMORY in v1 and V1_MEMORY in own_v1
        if memory and not has_memory:
            raise HostError("the scenario limits or measures memory but cgroup v1 has no memory hierarchy mounted here")
        if memory is not False and has_memory:
            wanted.append(V1_MEMORY)
        return Layout(1, {c: v1[c] for c in wanted}, {c: own_v1[c] for c in wanted})
    if unified is not None and own_v2 is not None:
        return Layout(2, {"": unified}, {"": own_v2}, io_v2=bool(io), memory_v2=bool(memory))
    raise HostError("no cgroup hierarchy with the cpu controller is mounted (looked in /proc/self/mountinfo)")


# --- knob ranges: what the kernel would accept (checked before writing) -----------------

# the controllers whose per-cgroup files replay writes (memcg: the files the kernel has; a
# missing one is refused with its stand-in, policies.cgroup.memory_refusal)
REPLAY_CONTROLLERS = ("cpu", "cpuset", "cgroup", "blkio", "memory")


def check_value(w: KnobWrite) -> None:
    """The knob's range as the knob table declares it (policies.cgroup.Knob: the kernel's,
    kernel-and-anchors.md §A; cgroup-v1 cpu/cpuset docs), so that a bad value is refused
    with its name before it reaches a file."""
    v, k = w.value, w.knob
    if k in ROOT_KNOBS or k in NET_KNOBS:
        raise HostError(not_replayable(k))
    if k in (Knob.CPUSET_CPUS, Knob.CPUSET_MEMS):
        if not isinstance(v, str):
            raise WriteRefused(f'{w.cgroup}/{k.v1}: must be a CPU list like "0-3,6" (got {v!r})')
        try:
            parse_cpus(v)
        except ValueError:
            raise WriteRefused(f"{w.cgroup}/{k.v1}: not a CPU list: {v!r}") from None
        return
    if isinstance(v, bool) or not isinstance(v, int):
        raise WriteRefused(f"{w.cgroup}/{k.v1}: must be an integer (got {v!r})")
    if k.controller not in REPLAY_CONTROLLERS or k.read_only or k.values.text:
        raise HostError(f"{w.cgroup}/{k.v1}: replay does not write this knob")
    if not k.values.accepts(v):
        raise WriteRefused(f"{w.cgroup}/{k.v1}: value {v} out of the kernel's range")


def not_replayable(knob: Knob) -> str:
    """Why a node-wide or network knob is not replayed here (one message, no traceback)."""
    if knob in NET_KNOBS:
        return network_refusal(f"{knob.v1}")
    return (
        f"{knob.v1} is node-wide (a file of the root cgroup): replay writes nothing outside its "
        "own cgroups, so it cannot switch iocost on or set its model on this host; the simulator "
        "models it (colosim run)"
    )


def network_refusal(what: str) -> str:
    """What cannot be replayed about the network on this host, and why."""
    qos = Path("/proc/qos")
    bwm = (
        "this host has no oncn-bwm (/proc/qos is absent)"
        if not qos.exists()
        else "oncn-bwm's /proc/qos files are node-wide, and replay writes nothing outside its own cgroups"
    )
    return (
        f"{what}: network limits do not replay on this host — {bwm}, and replay does no "
        "loopback traffic shaping (tc qdiscs are node-wide too) nor runs iperf; iperf workloads, "
        "net_cls.classid, net.egress_bps and the net_qos_* settings are simulator-only here "
        "(colosim run models them)"
    )


# --- the block device replay's IO goes to ------------------------------------------------


@dataclass(frozen=True)
class BlockDevice:
    """The whole disk holding a directory: blk-throttle and io.max take the disk's MAJ:MIN
    (a partition's rules would not apply); its IO scheduler from sysfs."""

    devno: str  # "254:0"
    name: str  # "vda"
    scheduler: str  # the bracketed one in queue/scheduler ("mq-deadline")


def block_device(directory: str | Path, sys_dev: Path = Path("/sys/dev/block")) -> BlockDevice:
    st = os.stat(directory)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    node = sys_dev / f"{major}:{minor}"
    if major == 0 or not node.exists():
        raise HostError(
            f"{directory} is not on a block device (device {major}:{minor}: tmpfs, overlay or a "
            "network file system); set TMPDIR to a directory on a local disk for replay's IO scratch files"
        )
    real = node.resolve()
    if (real / "partition").exists():  # a partition: its disk is the parent directory
        real = real.parent
    devno = (real / "dev").read_text().strip()
    text = (real / "queue" / "scheduler").read_text() if (real / "queue" / "scheduler").exists() else "none"
    chosen = next((t[1:-1] for t in text.split() if t.startswith("[")), text.strip() or "none")
    return BlockDevice(devno, real.name, chosen)


def read_disk_stat(dev: BlockDevice, sys_block: Path = Path("/sys/block")) -> dict[str, int]:
    """/sys/block/<dev>/stat: the whole device's reads and writes (IOs; sectors of 512 bytes)."""
    f = sys_block / dev.name / "stat"
    fields = [int(x) for x in f.read_text().split()]
    return {"read_bytes": fields[2] * 512, "write_bytes": fields[6] * 512, "read_ios": fields[0], "write_ios": fields[4]}


def read_node_busy_s(proc_stat: Path = Path("/proc/stat")) -> float:
    """CPU seconds every CPU of the node has been busy since boot: the "cpu" line of
    /proc/stat, user + nice + system + irq + softirq + steal (guest time is already in user),
    in USER_HZ ticks (proc(5))."""
    fields = proc_stat.read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


_THROTTLE_KEYS = {
    Knob.BLKIO_READ_BPS: "rbps",
    Knob.BLKIO_WRITE_BPS: "wbps",
    Knob.BLKIO_READ_IOPS: "riops",
    Knob.BLKIO_WRITE_IOPS: "wiops",
}


def parse_device_lines(text: str, devno: str) -> int:
    """A v1 throttle file ("MAJ:MIN VALUE" per line): the value for devno, 0 if none."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == devno:
            return int(parts[1])
    return 0


def parse_io_max(text: str, devno: str, key: str) -> int:
    """v2 io.max ("MAJ:MIN rbps=… wbps=… riops=… wiops=…"): one key for devno, 0 = max."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == devno:
            for item in parts[1:]:
                k, _, v = item.partition("=")
                if k == key:
                    return 0 if v == "max" else int(v)
    return 0


def parse_weight(text: str) -> int:
    """blkio.bfq.weight / blkio.weight ("100") or io.bfq.weight / io.weight ("default 100")."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "default":
            return int(parts[1])
        if len(parts) == 1:
            return int(parts[0])
    return 100


def parse_v1_io(text: str) -> tuple[int, int]:
    """blkio.throttle.io_service_bytes(_recursive) / io_serviced: (Read, Write) summed over
    devices ("MAJ:MIN Read N" lines)."""
    r = w = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("Read", "Write"):
            if parts[1] == "Read":
                r += int(parts[2])
            else:
                w += int(parts[2])
    return r, w


def parse_io_stat(text: str) -> dict[str, int]:
    """v2 io.stat ("MAJ:MIN rbytes=… wbytes=… rios=… wios=… …"), summed over devices."""
    out = {"read_bytes": 0, "write_bytes": 0, "read_ios": 0, "write_ios": 0}
    names = {"rbytes": "read_bytes", "wbytes": "write_bytes", "rios": "read_ios", "wios": "write_ios"}
    for line in text.splitlines():
        for item in line.split()[1:]:
            k, _, v = item.partition("=")
            if k in names and v.isdigit():
                out[names[k]] += int(v)
    return out


def _nesting_order(writes: list[KnobWrite], backend: HostBackend) -> list[KnobWrite]:
    """Where limits nest (v1 quotas, cpusets), a loosening write goes parent first and a
    tightening one child first, so the kernel never sees a child above its parent. The
    nested writes are reordered among their own slots; every other write keeps its place."""
    nested = [i for i, w in enumerate(writes) if w.knob in (Knob.CPU_CFS_QUOTA_US, Knob.CPUSET_CPUS, Knob.CPUSET_MEMS)]

    def key(i: int) -> tuple[int, int]:
        w = writes[i]
        depth = w.cgroup.count("/") + 1
        old = backend.read(w.cgroup, w.knob)
        if w.knob is Knob.CPU_CFS_QUOTA_US:
            tighter = w.value != -1 and (old == -1 or int(w.value) < int(old))
        else:
            tighter = not set(parse_cpus(str(old))) <= set(parse_cpus(str(w.value)))
        return (-depth if tighter else depth, i)

    out = list(writes)
    for slot, i in zip(nested, sorted(nested, key=key), strict=True):
        out[slot] = writes[i]
    return out


@dataclass(frozen=True)
class WriteRecord:
    """One knob write on the host, as it was made (for the run's record and --dry-run)."""

    t: float
    path: str
    value: str
    old: str

    def __str__(self) -> str:
        return f"echo {self.value!r} > {self.path}   (was {self.old.strip()!r})"


@dataclass
class HostBackend:
    """A run folder in the host's cgroup hierarchies, as a `Backend`.

    Cgroup names are paths relative to the run folder ("online", "kubepods/besteffort");
    "" is the run folder itself. `dry_run` records writes without making them (mkdir too)."""

    layout: Layout
    run_id: str
    fs: Fs = field(default_factory=Fs)
    dry_run: bool = False
    log: list[WriteRecord] = field(default_factory=list)
    missing: set[Knob] = field(default_factory=set)
    # the disk replay's IO goes to (blk-throttle's and io.max's MAJ:MIN); set when IO is used
    device: BlockDevice | None = None
    # what cleanup could not do (a memory cgroup the kernel kept, charges it kept): said, not raised
    leftovers: list[str] = field(default_factory=list)
    _created: list[str] = field(default_factory=list)
    _shadow: dict[Path, str] = field(default_factory=dict)  # dry run: what would be in the files
    _t0: float = field(default_factory=time.monotonic)

    # -- paths ---------------------------------------------------------------------------

    @property
    def folder(self) -> str:
        return RUN_PREFIX + self.run_id

    def dir(self, key: str, cgroup: str) -> Path:
        base = self.layout.own_dir(key) / self.folder
        path = base / cgroup if cgroup else base
        # Every path we write must stay inside the run folder.
        if os.path.commonpath([os.path.normpath(path), os.path.normpath(base)]) != os.path.normpath(base):
            raise ScenarioError(f"cgroup {cgroup!r} lies outside the run folder")
        return path

    def keys_for(self, knob_file: str) -> str:
        """Which hierarchy holds a file (v1: by its controller prefix)."""
        if self.layout.version == 2:
            return ""
        prefix = knob_file.split(".", 1)[0]
        return prefix if prefix in self.layout.mounts else "cpu"

    def path(self, cgroup: str, knob_file: str) -> Path:
        return self.dir(self.keys_for(knob_file), cgroup) / knob_file

    def now(self) -> float:
        return time.monotonic() - self._t0

    # -- lifecycle -----------------------------------------------------------------------

    def check_writable(self) -> None:
        """Root and a writable own cgroup in every hierarchy, before anything starts."""
        if os.geteuid() != 0:
            raise HostError("replay needs root to create cgroups (run it as root)")
        for key in self.layout.keys:
            own = self.layout.own_dir(key)
            if not self.fs.exists(own / "cgroup.procs"):
                raise HostError(f"{own}: not a cgroup directory")
            if not os.access(own, os.W_OK):
                raise HostError(f"{own}: cgroup not writable")
        if self.layout.version == 2:
            own = self.layout.own_dir("")
            enabled = self.fs.read(own / "cgroup.subtree_control").split()
            wanted = ("cpu", "cpuset", *(("io",) if self.layout.io else ()), *(("memory",) if self.layout.memory else ()))
            missing = [c for c in wanted if c not in enabled]
            if missing:
                raise HostError(
                    f"{own}: controller(s) {', '.join(missing)} not enabled for children "
                    f"(cgroup.subtree_control is {' '.join(enabled) or 'empty'}); replay writes nothing "
                    "outside its own folder, so delegate them first"
                )

    def create(self, cgroups: Iterable[str]) -> None:
        """The run folder and the given cgroups (parents first) in every hierarchy."""
        wanted = [""]
        for cg in cgroups:
            parts = cg.split("/")
            wanted += ["/".join(parts[: i + 1]) for i in range(len(parts))]
        for cg in dict.fromkeys(wanted):
            self._mkdir(cg)

    def _mkdir(self, cgroup: str) -> None:
        if cgroup in self._created:
            return
        for key in self.layout.keys:
            d = self.dir(key, cgroup)
            if not self.dry_run:
                self.fs.mkdir(d)
        self._created.append(cgroup)
        if self.layout.version == 1:
            # A new v1 cpuset is empty and takes no task until cpus and mems are set: start
            # it with its parent's, as cgroup.clone_children would (without writing the parent).
            parent = cgroup.rpartition("/")[0] if cgroup else None
            for knob in (Knob.CPUSET_CPUS, Knob.CPUSET_MEMS):
                src = self.dir("cpuset", parent) if parent is not None else self.layout.own_dir("cpuset")
                self._write_file(self.path(cgroup, knob.v1), self._read_file(src / knob.v1).strip())
        else:
            # Children of this cgroup get the cpu and cpuset controllers (cgroup v2 needs the
            # parent to enable them; the run folder and its inner cgroups hold no processes).
            controllers = "+cpu +cpuset" + (" +io" if self.layout.io else "") + (" +memory" if self.layout.memory else "")
            self._write_file(self.dir("", cgroup) / "cgroup.subtree_control", controllers)

    def activate_io_accounting(self) -> str:
        """Make the per-cgroup IO counters count on the scratch disk, and say which counters.

        cgroup v1: blkio.throttle.io_service_bytes/io_serviced are kept by blk-throttle, which
        since Linux 6.10 ("blk-throttle: delay initialization until configuration") attaches to
        a disk's queue only when a throttle rule is first written for that disk; until then
        blk_should_throtl() returns before counting, and a fresh host reads Total 0 for every
        cgroup. Writing "MAJ:MIN 0" (v1: 0 = no limit, tg_set_conf stores U64_MAX) into the run
        folder's blkio.throttle.read_bps_device attaches it without limiting anything; the
        rule goes with the run folder. (The queue keeps blk-throttle attached, which only
        counts; it stays so on any host where a limit was ever set.)
        cgroup v2: io.stat is kept by the blk-cgroup core for every bio, nothing to do."""
        if self.device is None:
            raise ValueError("no scratch disk: IO accounting needs the disk replay's IO goes to")
        if self.layout.version == 2:
            return f"io.stat on {self.device.devno} (cgroup v2: counted for every bio)"
        self._write_file(self.path("", "blkio.throttle.read_bps_device"), f"{self.device.devno} 0")
        return (
            f"blkio.throttle.io_service_bytes_recursive on {self.device.devno} (blk-throttle attached to the disk by a "
            "non-binding rule, read_bps 0, in the run folder: without a rule, Linux 6.10+ counts nothing)"
        )

    def created(self) -> list[str]:
        return list(self._created)

    def procs(self, cgroup: str) -> list[int]:
        out: set[int] = set()
        for key in self.layout.keys:
            f = self.dir(key, cgroup) / "cgroup.procs"
            if self.fs.exists(f):
                out.update(int(x) for x in self.fs.read(f).split())
        return sorted(out)

    def join_paths(self, cgroup: str) -> list[Path]:
        """The cgroup.procs files a process writes its pid to, to join `cgroup` everywhere."""
        return [self.dir(key, cgroup) / "cgroup.procs" for key in self.layout.keys]

    def remove(self) -> None:
        """Remove every cgroup this run made, children first (each must be empty). A memory
        cgroup is emptied first (release_memory); one the kernel keeps is reported in
        `leftovers`, never raised: cleanup goes on with the rest."""
        for cg in sorted(self._created, key=lambda c: -(c.count("/") + 1) if c else 0):
            for key in self.layout.keys:
                d = self.dir(key, cg)
                if self.dry_run or not self.fs.exists(d):
                    continue
                if key == V1_MEMORY or (self.layout.version == 2 and self.layout.memory):
                    self.release_memory(cg)
                    try:
                        _rmdir_retry(self.fs, d)
                    except OSError as err:
                        self.leftovers.append(
                            f"{d}: not removed ({os.strerror(err.errno) if err.errno else err}); colosim replay --cleanup"
                        )
                    continue
                _rmdir_retry(self.fs, d)
        self._created.clear()

    def release_memory(self, cgroup: str) -> None:
        """Before a memory cgroup of ours is removed: a task still in it (one the kill did
        not reach) moves to the run folder, which goes last; then, on v1, memory.force_empty
        reclaims what the group still has charged (its page cache) — otherwise rmdir leaves
        an offline memcg holding those pages until global reclaim finds them. What cannot be
        reclaimed (anon memory without swap) is said in `leftovers`."""
        key = V1_MEMORY if self.layout.version == 1 else ""
        d = self.dir(key, cgroup)
        if cgroup:
            for pid in self.fs.read(d / "cgroup.procs").split() if self.fs.exists(d / "cgroup.procs") else []:
                try:
                    self.fs.write(self.dir(key, "") / "cgroup.procs", pid)
                except OSError:
                    pass  # it exited meanwhile
        if self.layout.version != 1 or not self.fs.exists(d / "memory.force_empty"):
            return
        try:
            self.fs.write(d / "memory.force_empty", "0")
        except OSError as err:
            left = self.fs.read(d / "memory.usage_in_bytes").strip() if self.fs.exists(d / "memory.usage_in_bytes") else "?"
            self.leftovers.append(
                f"{d}: memory.force_empty could not reclaim everything ({os.strerror(err.errno) if err.errno else err}; "
                f"{left} bytes still charged, released when the kernel reclaims them)"
            )

    # -- the Backend protocol -------------------------------------------------------------

    def _read_file(self, path: Path) -> str:
        """A file's text; in a dry run, what it would hold (a file of a cgroup not made yet
        holds the kernel's default)."""
        if path in self._shadow:
            return self._shadow[path]
        if self.dry_run and not self.fs.exists(path):
            return DEFAULTS.get(path.name, "")
        return self.fs.read(path)

    def has_file(self, cgroup: str, knob: Knob) -> bool:
        """Whether the kernel offers this knob (its file exists in the cgroup). In a dry run
        the run folder does not exist: look beside it, in our own cgroup, whose missing
        bandwidth files (the root cgroup has none) are no evidence."""
        if knob is Knob.CGROUP_KILL:
            return True  # emulated where the kernel lacks it (see `kill`)
        if knob in ROOT_KNOBS or knob in NET_KNOBS:
            return False  # node-wide or network: never written by replay (not_replayable)
        if knob.controller == "memory" and not self.layout.memory:
            return False
        if knob in BLKIO_KNOBS:
            if not self.layout.io:
                return False
            names = self._blkio_files(knob)
            if self.dry_run and not self.fs.exists(self.dir(self.keys_for(names[0]), cgroup)):
                # the run folder is not made: our own cgroup (maybe the root, which has no
                # weight files) stands in; its per-policy stat files say which policy is there
                own = self.layout.own_dir(self.keys_for(names[0]))
                probes = {
                    Knob.BLKIO_WEIGHT: ("blkio.bfq.io_serviced", "blkio.weight", "io.bfq.weight"),
                    Knob.BLKIO_COST_WEIGHT: ("blkio.cost.weight", "io.weight", "blkio.cost.stat"),
                }.get(knob, names)
                return any(self.fs.exists(own / n) for n in probes)
            return any(self.fs.exists(self.path(cgroup, n)) for n in names)
        name = knob.v1 if self.layout.version == 1 else knob.v2
        if name is None:
            return False
        path = self.path(cgroup, name)
        if self.dry_run and not self.fs.exists(path.parent):
            own = self.layout.own_dir(self.keys_for(name)) / name
            return self.fs.exists(own) or knob in ROOTLESS
        return self.fs.exists(path)

    @staticmethod
    def _v2_file(knob: Knob) -> str:
        if knob.v2 is None:
            raise HostError(f"{knob.v1}: cgroup v2 has no such file")
        return knob.v2

    def _blkio_files(self, knob: Knob) -> tuple[str, ...]:
        """The files a blkio knob may live in, preferred first: bfq's weight, then cfq's."""
        if knob is Knob.BLKIO_WEIGHT:
            return ("blkio.bfq.weight", "blkio.weight") if self.layout.version == 1 else ("io.bfq.weight",)
        return (knob.v1,) if self.layout.version == 1 else (self._v2_file(knob),)

    def _blkio_file(self, cgroup: str, knob: Knob) -> Path:
        names = self._blkio_files(knob)
        for n in names:
            p = self.path(cgroup, n)
            if self.fs.exists(p) or (self.dry_run and not self.fs.exists(p.parent)):
                return p
        raise HostError(f"{cgroup or 'the run folder'}: this kernel has no {' or '.join(names)}")

    def _devno(self) -> str:
        if self.device is None:
            raise HostError("blk-throttle needs the scratch disk's MAJ:MIN (replay's IO set-up did not run)")
        return self.device.devno

    def _read_blkio(self, cgroup: str, knob: Knob) -> int:
        text = self._read_file(self._blkio_file(cgroup, knob))
        if knob in (Knob.BLKIO_WEIGHT, Knob.BLKIO_COST_WEIGHT):
            return parse_weight(text) if text.strip() else 100
        if self.layout.version == 1:
            return parse_device_lines(text, self._devno())
        return parse_io_max(text, self._devno(), _THROTTLE_KEYS[knob])

    def read(self, cgroup: str, knob: Knob) -> int | str:
        if knob is Knob.CGROUP_KILL:
            return 0  # write-only in the kernel
        if knob in BLKIO_KNOBS and knob not in ROOT_KNOBS:
            return self._read_blkio(cgroup, knob)
        if knob in (Knob.MEMORY_LIMIT, Knob.MEMORY_HIGH):
            name = knob.v1 if self.layout.version == 1 else self._v2_file(knob)
            return parse_memory_limit(self._read_file(self.path(cgroup, name)))
        if self.layout.version == 1:
            text = self._read_file(self.path(cgroup, knob.v1)).strip()
            return text if knob in (Knob.CPUSET_CPUS, Knob.CPUSET_MEMS) else int(text)
        d = self.dir("", cgroup)
        if knob is Knob.CPU_SHARES:
            return weight_to_shares(int(self._read_file(d / "cpu.weight")))
        if knob in (Knob.CPU_CFS_QUOTA_US, Knob.CPU_CFS_PERIOD_US):
            quota, period = parse_cpu_max(self._read_file(d / "cpu.max"))
            return quota if knob is Knob.CPU_CFS_QUOTA_US else period
        if knob in (Knob.CPUSET_CPUS, Knob.CPUSET_MEMS):
            return self._read_file(d / self._v2_file(knob)).strip()
        return int(self._read_file(d / self._v2_file(knob)).strip())

    def write(self, w: KnobWrite) -> None:
        self.apply([w])

    def apply(self, writes: list[KnobWrite]) -> None:
        """Validate each write, order nested limits, skip unchanged values, write and log."""
        for w in writes:
            check_value(w)
            if w.knob in MEMORY_KNOBS and not self.layout.memory:
                raise HostError(
                    f"{w.cgroup or 'the run folder'}/{w.knob.v1}: this run did not open the memory controller (its scenario "
                    "sets no memory knob, memory workload or [node] memory); set [node] memory for replay to manage memory"
                )
            if w.knob in MEMORY_KNOBS and not self.has_file(w.cgroup, w.knob):
                raise HostError(memory_refusal(w.knob, f"{w.cgroup or 'the run folder'}/{w.knob.v1}"))
        for w in _nesting_order(writes, self) if len(writes) > 1 else writes:
            if w.knob is Knob.CGROUP_KILL:
                self.kill(w.cgroup)
                continue
            if w.knob in (Knob.MEMORY_LIMIT, Knob.MEMORY_HIGH):
                # the kernel keeps whole pages: compare (and write) what it will hold
                w = KnobWrite(w.cgroup, w.knob, memory_limit_pages(int(w.value)))
            if self.read(w.cgroup, w.knob) == w.value:
                continue
            path, text = self._file_for(w)
            self._write_file(path, text)

    def kill(self, cgroup: str) -> None:
        """cgroup.kill: the kernel's file where it has one (v2, Linux >= 5.14); otherwise
        SIGKILL to every process of the subtree, as cgroup.procs lists them."""
        kill_file = self.dir("", cgroup) / "cgroup.kill" if self.layout.version == 2 else None
        if kill_file is not None and (self.dry_run or self.fs.exists(kill_file)):
            self._write_file(kill_file, "1")
            return
        subtree = [c for c in self._created if c == cgroup or c.startswith(cgroup + "/")] or [cgroup]
        pids = sorted({p for c in subtree for p in self.procs(c)})
        self.log.append(WriteRecord(self.now(), str(self.path(cgroup, "cgroup.procs")), f"SIGKILL {pids}", ""))
        if self.dry_run:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _file_for(self, w: KnobWrite) -> tuple[Path, str]:
        if w.knob in _THROTTLE_KEYS:
            path = self._blkio_file(w.cgroup, w.knob)
            if self.layout.version == 1:  # "MAJ:MIN 0" removes the rule
                return path, f"{self._devno()} {int(w.value)}"
            return path, f"{self._devno()} {_THROTTLE_KEYS[w.knob]}={int(w.value) or 'max'}"
        if w.knob in (Knob.BLKIO_WEIGHT, Knob.BLKIO_COST_WEIGHT):
            return self._blkio_file(w.cgroup, w.knob), str(int(w.value))
        if self.layout.version == 1:
            return self.path(w.cgroup, w.knob.v1), str(w.value)
        d = self.dir("", w.cgroup)
        k, v = w.knob, w.value
        if k in (Knob.MEMORY_LIMIT, Knob.MEMORY_HIGH):
            return d / self._v2_file(k), "max" if int(v) < 0 else str(v)
        if k is Knob.CPU_SHARES:
            return d / "cpu.weight", str(shares_to_weight(int(v)))
        if k is Knob.CPU_CFS_QUOTA_US:
            return d / "cpu.max", cpu_max(int(v), int(self.read(w.cgroup, Knob.CPU_CFS_PERIOD_US)))
        if k is Knob.CPU_CFS_PERIOD_US:
            return d / "cpu.max", cpu_max(int(self.read(w.cgroup, Knob.CPU_CFS_QUOTA_US)), int(v))
        return d / self._v2_file(k), str(v)

    def _write_file(self, path: Path, text: str) -> None:
        try:
            old = self._read_file(path)
        except OSError:
            old = ""
        self.log.append(WriteRecord(self.now(), str(path), text, old))
        if self.dry_run:
            self._shadow[path] = text
            return
        try:
            self.fs.write(path, text)
        except OSError as err:
            reason = os.strerror(err.errno) if err.errno else str(err)
            raise WriteRefused(f"{path}: the kernel refused {text!r}: {reason}{_why_refused(path.name, err.errno)}") from None

    # -- resctrl and perf counters: refused on this host ----------------------------------

    def resctrl_info(self) -> ResctrlInfo:
        """resctrl needs the CPU feature and the mount (policies/resctrl.py NO_RESCTRL); replay
        refuses a policy that uses it before the policy starts, with one message."""
        raise HostError(resctrl_refusal(self.fs))

    def resctrl(self, action: ResctrlAction) -> None:
        self.resctrl_info()  # raises: no write without the filesystem

    def perf_counters(self, cgroup: str) -> PerfCounters:
        raise HostError(f"{cgroup or 'the run folder'}: {PERF_REFUSAL}")

    def stats(self, cgroup: str) -> CgroupStats:
        if self.layout.version == 1:
            usage = int(self.fs.read(self.path(cgroup, "cpuacct.usage")))
            stat = _keyed(self.fs.read(self.path(cgroup, "cpu.stat")))
            scale = 1  # v1 cpu.stat times are in ns
            psi = 0  # v1 has no per-cgroup pressure files
        else:
            d = self.dir("", cgroup)
            stat = _keyed(self.fs.read(d / "cpu.stat"))
            usage = stat.get("usage_usec", 0) * 1000
            stat = {k.replace("_usec", "_time"): v for k, v in stat.items()}
            scale = 1000
            psi = _psi_total(self.fs.read(d / "cpu.pressure")) if self.fs.exists(d / "cpu.pressure") else 0
        io = self.io_stats(cgroup) if self.layout.io else None
        mem = self.memory_stats(cgroup) if self.layout.memory else {}
        return CgroupStats(
            memory_bytes=mem.get("current", 0),
            memory_file=mem.get("file", 0),
            memory_max_events=mem.get("events_max", 0),
            memory_oom_kills=mem.get("events_oom_kill", 0),
            io_bytes=io["read_bytes"] + io["write_bytes"] if io else 0,
            io_ios=io["read_ios"] + io["write_ios"] if io else 0,
            usage_ns=usage,
            nr_periods=stat.get("nr_periods", 0),
            nr_throttled=stat.get("nr_throttled", 0),
            throttled_ns=stat.get("throttled_time", 0) * scale,
            nr_bursts=stat.get("nr_bursts", 0),
            burst_ns=stat.get("burst_time", 0) * scale,
            psi_some_ns=psi,
            nr_running=self._nr_running(cgroup),
        )

    def io_stats(self, cgroup: str) -> dict[str, int]:
        """Bytes and IOs the cgroup's subtree moved, read and write, over every device: v1
        blkio.throttle.io_service_bytes/io_serviced (the _recursive files where the kernel
        has them), v2 io.stat (hierarchical)."""
        if self.layout.version == 2:
            f = self.dir("", cgroup) / "io.stat"
            return parse_io_stat(self.fs.read(f) if self.fs.exists(f) else "")
        out = {}
        for what, base in (("bytes", "blkio.throttle.io_service_bytes"), ("ios", "blkio.throttle.io_serviced")):
            f = self.path(cgroup, base + "_recursive")
            if not self.fs.exists(f):
                f = self.path(cgroup, base)
            r, w = parse_v1_io(self.fs.read(f))
            out[f"read_{what}"], out[f"write_{what}"] = r, w
        return out

    def memory_stats(self, cgroup: str) -> dict[str, int]:
        """The cgroup's memory under the simulator's names (sim.results CgroupResult.memory):
        v1 (Documentation/admin-guide/cgroup-v1/memory.rst) current = memory.usage_in_bytes,
        anon / file / swap = memory.stat total_rss / total_cache / total_swap (the subtree's),
        peak = memory.max_usage_in_bytes, events_max = memory.failcnt (v1 counts every failed
        page-counter charge, the batch's too — more than v2's one "max" event per charge
        that reclaims), events_oom_kill = memory.oom_control's oom_kill (this group's own kills:
        v1 does not add a child's), events_high = 0 (v1 has no memory.high), and
        pgmajfault, under_oom. v2: memory.current, memory.stat anon/file/…, memory.peak,
        memory.events."""
        if self.layout.version == 2:
            d = self.dir("", cgroup)
            st = _keyed(self.fs.read(d / "memory.stat"))
            ev = _keyed(self.fs.read(d / "memory.events"))
            peak = d / "memory.peak"
            return {
                "current": int(self.fs.read(d / "memory.current")),
                "anon": st.get("anon", 0),
                "file": st.get("file", 0),
                "swap": int(self.fs.read(d / "memory.swap.current")) if self.fs.exists(d / "memory.swap.current") else 0,
                "peak": int(self.fs.read(peak)) if self.fs.exists(peak) else 0,
                "events_low": ev.get("low", 0),
                "events_high": ev.get("high", 0),
                "events_max": ev.get("max", 0),
                "events_oom": ev.get("oom", 0),
                "events_oom_kill": ev.get("oom_kill", 0),
                "pgmajfault": st.get("pgmajfault", 0),
                "under_oom": 0,
            }
        d = self.dir(V1_MEMORY, cgroup)
        st = _keyed(self.fs.read(d / "memory.stat"))
        oom = _keyed(self.fs.read(d / "memory.oom_control"))
        return {
            "current": int(self.fs.read(d / "memory.usage_in_bytes")),
            "anon": st.get("total_rss", 0),
            "file": st.get("total_cache", 0),
            "swap": st.get("total_swap", 0),
            "peak": int(self.fs.read(d / "memory.max_usage_in_bytes")),
            "events_low": 0,
            "events_high": 0,
            "events_max": int(self.fs.read(d / "memory.failcnt")),
            "events_oom": 0,
            "events_oom_kill": oom.get("oom_kill", 0),
            "pgmajfault": st.get("total_pgmajfault", 0),
            "under_oom": oom.get("under_oom", 0),
        }

    def percpu_usage(self, cgroup: str) -> list[int] | None:
        """cpuacct.usage_percpu (v1 only): ns each CPU ran this cgroup's tasks."""
        if self.layout.version != 1:
            return None
        return [int(x) for x in self.fs.read(self.path(cgroup, "cpuacct.usage_percpu")).split()]

    def tids(self, cgroup: str) -> list[int]:
        """Every thread in the cgroup (its cpu hierarchy's `tasks`; v2 `cgroup.threads`)."""
        tasks = self.dir(self.keys_for("cpu"), cgroup) / ("tasks" if self.layout.version == 1 else "cgroup.threads")
        try:
            return [int(t) for t in self.fs.read(tasks).split()]
        except OSError:
            return []

    def cfs_rq_path(self, cgroup: str) -> str:
        """The cgroup's name in the scheduler's view (sched/debug's "cfs_rq[N]:/path"): its path
        in the cpu hierarchy."""
        key = self.keys_for("cpu")
        return "/" + str(self.dir(key, cgroup).relative_to(self.layout.mounts[key])).strip(".").strip("/")

    def _nr_running(self, cgroup: str) -> int:
        n = 0
        for tid in self.tids(cgroup):
            try:
                state = Path(f"/proc/{tid}/stat").read_text().rpartition(")")[2].split()[0]
            except (OSError, IndexError):
                continue
            n += state == "R"
        return n

    def node(self) -> NodeStats:
        return dataclasses.replace(read_proc_stat(), **read_meminfo())

    def cpus(self) -> list[Cpu]:
        return host_cpus()


def _rmdir_retry(fs: Fs, d: Path) -> None:
    # A killed task leaves its cgroup a moment after it is reaped: retry EBUSY briefly.
    for _ in range(100):
        try:
            fs.rmdir(d)
            return
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            time.sleep(0.02)
    fs.rmdir(d)


def _why_refused(name: str, err: int | None) -> str:
    """What a refused memcg limit write means (mm/memcontrol-v1.c mem_cgroup_resize_max):
    EBUSY — the group could not be reclaimed below the new limit (v1 refuses where v2's
    memory.max would OOM-kill); EINVAL — memory.limit_in_bytes above memory.memsw.limit_in_bytes."""
    if name != "memory.limit_in_bytes":
        return ""
    if err == errno.EBUSY:
        return " (the group's usage could not be reclaimed below it: cgroup v1 refuses a limit under unreclaimable usage)"
    if err == errno.EINVAL:
        return " (cgroup v1 keeps memory.limit_in_bytes <= memory.memsw.limit_in_bytes)"
    return ""


def _keyed(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _psi_total(text: str) -> int:
    """cpu.pressure's "some ... total=<µs>" in ns."""
    for line in text.splitlines():
        if line.startswith("some"):
            for item in line.split():
                if item.startswith("total="):
                    return int(item[6:]) * 1000
    return 0


def read_meminfo(text: str | None = None) -> dict[str, int]:
    """/proc/meminfo's MemTotal, MemFree and MemAvailable, in bytes (the file says kB)."""
    if text is None:
        text = Path("/proc/meminfo").read_text()
    fields = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemFree", "MemAvailable"):
            fields[key] = int(rest.split()[0]) * 1024
    return {"mem_total": fields.get("MemTotal", 0), "mem_free": fields.get("MemFree", 0), "mem_available": fields.get("MemAvailable", 0)}


def read_proc_stat(text: str | None = None) -> NodeStats:
    """/proc/stat's first line: busy = everything but idle and iowait, in ns (USER_HZ ticks)."""
    if text is None:
        text = Path("/proc/stat").read_text()
    first = text.splitlines()[0].split()
    ticks = [int(x) for x in first[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    total = sum(ticks[:8])  # guest time is already inside user/nice
    ncpus = sum(1 for line in text.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
    return NodeStats(ncpus=ncpus, busy_ns=(total - idle) * USER_HZ_NS, total_ns=total * USER_HZ_NS)


def host_cpus(root: Path = Path("/sys/devices/system/cpu")) -> list[Cpu]:
    """Online logical CPUs with core, socket and NUMA node from sysfs."""
    online = parse_cpus((root / "online").read_text())
    out = []
    for i in online:
        topo = root / f"cpu{i}" / "topology"
        core = int((topo / "core_id").read_text())
        socket = int((topo / "physical_package_id").read_text())
        nodes = sorted(p.name for p in (root / f"cpu{i}").glob("node[0-9]*"))
        out.append(Cpu(i, core, socket, int(nodes[0][4:]) if nodes else 0))
    return out


def leftover_folders(layout: Layout, fs: Fs | None = None) -> list[Path]:
    """Run folders a crashed replay left under our own cgroup, in every hierarchy."""
    fs = fs or Fs()
    out = []
    for key in layout.keys:
        own = layout.own_dir(key)
        if fs.exists(own):
            out += sorted(p for p in own.iterdir() if p.is_dir() and p.name.startswith(RUN_PREFIX))
    return out


def visible_tasks(folder: Path, fs: Fs | None = None) -> list[int]:
    """The tasks this pid namespace sees in a run folder and its children (cgroup.procs)."""
    fs = fs or Fs()
    dirs = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
    return [int(pid) for d in dirs if fs.exists(d / "cgroup.procs") for pid in fs.read(d / "cgroup.procs").split()]


def held_elsewhere(folder: Path, layout: Layout, fs: Fs | None = None, settle: float = 0.2) -> str | None:
    """Why a run folder with no task visible here still belongs to a live run, or None.

    Containers can share a host's cgroup hierarchies without sharing a pid namespace (this
    kind of host: /proc/self/cgroup says "/" in each), and a v1 cgroup.procs lists only the
    tasks of the reader's namespace (cgroup-v1.c pidlist_array_load skips a pid of 0), so
    another container's replay looks like a crashed one. Its tasks show themselves as CPU
    time: v2 says `populated 1` in cgroup.events; v1's cpuacct.usage of the folder grows over
    `settle` seconds. (One asleep the whole time shows nothing: its rmdir then fails EBUSY,
    which cleanup reports without removing more.)"""
    fs = fs or Fs()
    if visible_tasks(folder, fs):
        return None  # tasks of ours: a run of this namespace, which its record judges
    if layout.version == 2:
        events = folder / "cgroup.events"
        if fs.exists(events) and "populated 1" in fs.read(events):
            return "tasks not visible in this pid namespace run in it (another container's replay?)"
        return None
    if V1_CPUACCT not in layout.mounts:
        return None
    usage = layout.own_dir(V1_CPUACCT) / folder.name / "cpuacct.usage"
    if not fs.exists(usage):
        return None
    before = int(fs.read(usage))
    time.sleep(settle)
    if int(fs.read(usage)) > before:
        return "it is using CPU, by tasks not visible in this pid namespace (another container's replay?)"
    return None


def remove_tree(folder: Path, fs: Fs | None = None, kill=None) -> int:
    """Remove a leftover run folder bottom-up, killing the tasks still in it first; returns
    how many cgroups were removed. `kill(pid)` is how a task is killed (SIGKILL)."""
    fs = fs or Fs()
    dirs = sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [folder]
    for d in dirs:
        procs = d / "cgroup.procs"
        if kill is not None and fs.exists(procs):
            for pid in fs.read(procs).split():
                kill(int(pid))
    for d in dirs:
        if fs.exists(d / "memory.force_empty"):  # a v1 memory cgroup: its page cache goes first
            try:
                fs.write(d / "memory.force_empty", "0")
            except OSError:
                pass  # what stays charged goes with the offline memcg
        _rmdir_retry(fs, d)
    return len(dirs)
