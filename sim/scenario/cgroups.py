"""[cgroups."path"]: the knobs of one cgroup under their kernel file names."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from policies.cgroup import Knob
from policies.pods import memory_bytes
from sim.scenario.base import FieldError, FieldErrors, Rate, Table, alternatives


def _memory_limit(value: Any) -> int:
    """A memory limit: a size, or "max" / -1 for none."""
    if value == "max" or value == -1:
        return -1
    return memory_bytes(value)


def _one_of(knob: str) -> AfterValidator:
    # Not Literal[0, 1]: a Literal would take `true` for 1, and a knob file holds a number.
    allowed = Knob.named(knob).values.only or ()

    def check(value: int) -> int:
        if value not in allowed:
            raise ValueError(f"must be {alternatives(allowed)} (got {value})")
        return value

    return AfterValidator(check)


def _knob(name: str, default: Any, bounded: bool = True) -> Any:
    """The field of the knob file `name`: its alias, and its range from the knob table
    (policies.cgroup.Knob); a size (memory) is checked by its parser instead."""
    bounds = Knob.named(name).values.bounds() if bounded else {}
    return Field(default=default, alias=name, ge=bounds.get("ge"), le=bounds.get("le"))


class Cgroup(Table):
    """[cgroups."path"]: knobs under their kernel file names (cgroup v1 cpu controller)."""

    cpu_shares: int = _knob("cpu.shares", 1024)
    cpu_idle: Annotated[int, _one_of("cpu.idle")] = _knob("cpu.idle", 0)
    # openEuler: -1 marks the group offline (runs only while no online task is runnable)
    cpu_qos_level: Annotated[int, _one_of("cpu.qos_level")] = _knob("cpu.qos_level", 0)
    # CFS bandwidth control, in the files' units (µs); quota -1 is "no limit"
    cpu_cfs_quota_us: int = _knob("cpu.cfs_quota_us", -1)
    cpu_cfs_period_us: int = _knob("cpu.cfs_period_us", 100_000)
    cpu_cfs_burst_us: int = _knob("cpu.cfs_burst_us", 0)
    # cpusets in the kernel's list format ("0-3,6"); unset = the parent's (checked by the core)
    cpuset_cpus: str | None = _knob("cpuset.cpus", None)
    cpuset_mems: str | None = _knob("cpuset.mems", None)
    # memcg (bytes, or "512Mi"; "max" or -1: no limit): v1 memory.limit_in_bytes is v2
    # memory.max; memory.high/low/min as v2 (and Alibaba Cloud Linux's v1) have them
    memory_limit: Annotated[int, BeforeValidator(_memory_limit)] = _knob("memory.limit_in_bytes", -1, bounded=False)
    memory_high: Annotated[int, BeforeValidator(_memory_limit)] = _knob("memory.high", -1, bounded=False)
    memory_low: Annotated[int, BeforeValidator(memory_bytes)] = _knob("memory.low", 0, bounded=False)
    memory_min: Annotated[int, BeforeValidator(memory_bytes)] = _knob("memory.min", 0, bounded=False)
    memory_oom_group: Annotated[int, _one_of("memory.oom.group")] = _knob("memory.oom.group", 0)
    # blkio: the proportional schedulers' weight (cfq blkio.weight, bfq blkio.bfq.weight, v2
    # io.bfq.weight), iocost's (v2 io.weight), blk-throttle limits (bytes/s, IO/s; 0: none)
    blkio_weight: int = _knob("blkio.weight", 100)
    blkio_cost_weight: int = _knob("blkio.cost.weight", 100)
    blkio_read_bps: Rate = _knob("blkio.throttle.read_bps_device", 0)
    blkio_write_bps: Rate = _knob("blkio.throttle.write_bps_device", 0)
    blkio_read_iops: int = _knob("blkio.throttle.read_iops_device", 0)
    blkio_write_iops: int = _knob("blkio.throttle.write_iops_device", 0)
    # net_cls.classid (4294967295 marks offline traffic for rubik's bandwidth manager) and a
    # plain egress rate limit (tc on the pod's traffic; not a cgroup file)
    net_cls_classid: int = _knob("net_cls.classid", 0)
    net_egress_bps: Rate = _knob("net.egress_bps", 0)

    @model_validator(mode="after")
    def _check(self) -> Cgroup:
        # tg_set_cfs_bandwidth's rules; the parent/child rule is checked by the core.
        errors: list[FieldError] = []
        quota, q = self.cpu_cfs_quota_us, Knob.CPU_CFS_QUOTA_US.values
        if not q.accepts(quota):
            errors.append((("cpu.cfs_quota_us",), f"must be {q.none} (no limit) or >= {q.lo} (got {quota})"))
        elif quota != -1 and self.cpu_cfs_burst_us > quota:
            errors.append(
                (
                    ("cpu.cfs_burst_us",),
                    f"must not exceed cpu.cfs_quota_us ({quota}) (got {self.cpu_cfs_burst_us})",
                )
            )
        if self.memory_limit >= 0 and self.memory_high > self.memory_limit:
            errors.append((("memory.high",), f"must not be above memory.limit_in_bytes ({self.memory_limit}) (got {self.memory_high})"))
        if errors:
            raise FieldErrors(errors)
        return self

    def core_spec(self, path: str) -> dict[str, Any]:
        parent, _, _ = path.rpartition("/")
        return {
            "name": path,
            "parent": parent,
            "cpu.shares": self.cpu_shares,
            "cpu.idle": self.cpu_idle,
            "cpu.qos_level": self.cpu_qos_level,
            "cpu.cfs_quota_us": self.cpu_cfs_quota_us,
            "cpu.cfs_period_us": self.cpu_cfs_period_us,
            "cpu.cfs_burst_us": self.cpu_cfs_burst_us,
            "cpuset.cpus": self.cpuset_cpus,
            "cpuset.mems": self.cpuset_mems,
            "memory.limit_in_bytes": self.memory_limit,
            "memory.high": self.memory_high,
            "memory.low": self.memory_low,
            "memory.min": self.memory_min,
            "memory.oom.group": self.memory_oom_group,
            "blkio.weight": self.blkio_weight,
            "blkio.cost.weight": self.blkio_cost_weight,
            "blkio.throttle.read_bps_device": self.blkio_read_bps,
            "blkio.throttle.write_bps_device": self.blkio_write_bps,
            "blkio.throttle.read_iops_device": self.blkio_read_iops,
            "blkio.throttle.write_iops_device": self.blkio_write_iops,
            "net_cls.classid": self.net_cls_classid,
            "net.egress_bps": self.net_egress_bps,
        }
