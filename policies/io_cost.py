"""rubik's ioCost and ioLimit (../shared/reference/rubik.md §4.4): pure functions from the
configuration to the writes rubik makes.

ioCost (blk-iocost on cgroup v1; needs the kernel cmdline `cgroup1_writeback`, which a
scenario states as `[kernel] cgroup_writeback = true`): the node's linear model goes into the
root's blkio.cost.model, the QoS pins vrate at 100% (`enable=1 ctrl=user min=100.00
max=100.00`, so no latency-driven control), and every pod gets blkio.cost.weight 1000 when
online and 10 when offline (100:1). rubik also points memory.wb_blkio_ino at the pod's blkio
cgroup so writeback is charged to it — that is `cgroup_writeback` in the simulator.

ioLimit: the `volcano.sh/blkio-limit` annotation's device_{read,write}_{bps,iops} go into the
container cgroups' blkio.throttle.*_device files; 0 removes a limit; bps values are rounded to
page-size multiples (the doc's rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.cgroup import Knob, KnobWrite
from policies.policy import PolicyError, known_table

ONLINE_WEIGHT = 1000
OFFLINE_WEIGHT = 10
MODEL_KEYS = ("rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops")
# rubik pins the vrate: no latency targets, the model's rate is the device's budget
QOS = "enable=1 ctrl=user min=100.00 max=100.00"
PAGE = 4096

LIMIT_KEYS = {
    "device_read_bps": Knob.BLKIO_READ_BPS,
    "device_write_bps": Knob.BLKIO_WRITE_BPS,
    "device_read_iops": Knob.BLKIO_READ_IOPS,
    "device_write_iops": Knob.BLKIO_WRITE_IOPS,
}


def parse_model(value: Any, where: str) -> dict[str, int] | None:
    """ioCost's `param` table: the linear model's six parameters, each > 0 ("linear" is the
    only model rubik accepts)."""
    if value is None:
        return None
    keys = ", ".join(MODEL_KEYS)
    known_table(value, MODEL_KEYS, where, f"a table of the linear model's {keys}", f"the linear model has {keys}")
    out = {}
    for k in MODEL_KEYS:
        v = value.get(k)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise PolicyError(f"{where}.{k}: must be an integer > 0 (got {v!r})")
        out[k] = v
    return out


def model_text(model: Mapping[str, int]) -> str:
    return "ctrl=user model=linear " + " ".join(f"{k}={model[k]}" for k in MODEL_KEYS)


def weights(online: list[str], offline: list[str], offline_weight: int = OFFLINE_WEIGHT) -> list[KnobWrite]:
    """blkio.cost.weight of every pod: 1000 online, 10 offline (rubik's constants;
    `offline_weight` is the search space's what-if)."""
    return [KnobWrite(cg, Knob.BLKIO_COST_WEIGHT, ONLINE_WEIGHT) for cg in online] + [
        KnobWrite(cg, Knob.BLKIO_COST_WEIGHT, offline_weight) for cg in offline
    ]


def parse_limits(value: Any, where: str) -> dict[str, dict[Knob, int]]:
    """ioLimit: {cgroup: {device_read_bps = …, …}} (the annotation's lists, one device)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: must map cgroup names to {{device_read_bps, device_write_bps, device_read_iops, device_write_iops}}")
    out: dict[str, dict[Knob, int]] = {}
    for cg, limits in value.items():
        if not isinstance(limits, Mapping):
            raise PolicyError(f"{where}.{cg}: must be a table of {', '.join(LIMIT_KEYS)}")
        one: dict[Knob, int] = {}
        for k, v in limits.items():
            if k not in LIMIT_KEYS:
                raise PolicyError(f"{where}.{cg}.{k}: unknown (known: {', '.join(LIMIT_KEYS)})")
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise PolicyError(f"{where}.{cg}.{k}: must be an integer >= 0 (0 removes the limit) (got {v!r})")
            one[LIMIT_KEYS[k]] = v - v % PAGE if k.endswith("_bps") else v
        out[cg] = one
    return out


def limit_writes(limits: Mapping[str, Mapping[Knob, int]]) -> list[KnobWrite]:
    """rubik clears each file first, then writes the annotation's value (0 stays cleared)."""
    out = []
    for cg, one in limits.items():
        for knob in LIMIT_KEYS.values():
            out.append(KnobWrite(cg, knob, 0))
            if one.get(knob, 0):
                out.append(KnobWrite(cg, knob, one[knob]))
    return out
