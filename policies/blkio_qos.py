"""Koordinator's blkio QoS (koordlet's BlkIOReconcile; NodeSLO
resourceQOSStrategy.<class>.blkioQOS), from koordinator-sh/koordinator
pkg/koordlet/qosmanager/plugins/blkio and apis/slo/v1alpha1/nodeslo_types.go:

* only the BE class is configurable (LS/LSR are refused with a warning), and it is written on
  the besteffort QoS cgroup: blkio.throttle.{read,write}_{iops,bps}_device (0 = none) and
  blkio.cost.weight = ioWeightPercent as is (1..100, default 100; no scaling);
* iocost is switched on at the root: blkio.cost.qos "enable=1 ctrl=user rpct=95 rlat=3000
  wpct=95 wlat=3000" (no vrate bounds: the vrate floats) and blkio.cost.model "ctrl=auto"
  (the kernel's own model of the device);
* off by default (every class `enable: false`); koordlet reconciles every second — the
  configuration is static, so one write at start is the same.
"""

from __future__ import annotations

from policies.cgroup import Knob, KnobWrite

IO_WEIGHT_PERCENT = 100
QOS = "enable=1 ctrl=user rpct=95 rlat=3000 wpct=95 wlat=3000"
MODEL = "ctrl=auto"


def writes(besteffort: str, read_iops: int, write_iops: int, read_bps: int, write_bps: int, io_weight_percent: int) -> list[KnobWrite]:
    return [
        KnobWrite("", Knob.BLKIO_COST_QOS, QOS),
        KnobWrite("", Knob.BLKIO_COST_MODEL, MODEL),
        KnobWrite(besteffort, Knob.BLKIO_READ_IOPS, read_iops),
        KnobWrite(besteffort, Knob.BLKIO_WRITE_IOPS, write_iops),
        KnobWrite(besteffort, Knob.BLKIO_READ_BPS, read_bps),
        KnobWrite(besteffort, Knob.BLKIO_WRITE_BPS, write_bps),
        KnobWrite(besteffort, Knob.BLKIO_COST_WEIGHT, io_weight_percent),
    ]
