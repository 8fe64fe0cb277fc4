"""Koordinator's NodeSLO (`kubectl get nodeslo NAME -o yaml`) ⇄ the koordinator `[policy]`.

The fields are those of apis/slo/v1alpha1/nodeslo_types.go, with the `validate:` ranges
upstream enforces and the defaults koordlet merges the NodeSLO over
(pkg/util/sloconfig/nodeslo_config.go: DefaultResourceThresholdStrategy, DefaultCPUBurstConfig,
DefaultMemoryQOS; ../shared/reference/koordinator.md "defaults"). `SECTIONS` are the one table: a
parameter the koordinator policy gains is one line here.

The evictors' thresholds map to the policy's parameters; which evictors run is koordlet's
--feature-gates, not the NodeSLO: the policy's `evict_features` (BECPUEvict and BEMemoryEvict
also follow from their own settings).

Not modelled, accepted as upstream writes them: cpuSuppressMinPercent, every
class's cpuQOS and networkQOS, the system class's resctrlQOS, memoryQOS's pageCache*, the
blkioQOS of classes other than BE and all but one BE block, resourceQOSStrategy.policies,
systemStrategy, extensions, hostApplications.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from policies import memory_qos as mq
from policies import resctrl_qos as rq
from policies.formats.fields import Field, FormatError, flatten, get, nest, read, write
from policies.koordinator import Koordinator

API_VERSION = "slo.koordinator.sh/v1alpha1"
KIND = "NodeSLO"

# NodeSLO class keys ⇄ the koordinator policy's memory_qos classes (LSE takes LSR's)
CLASSES = {"lsrClass": "LSR", "lsClass": "LS", "beClass": "BE", "systemClass": "SYSTEM"}


def _percent(path: str, param: str | None, default: int | None = None, low: int = 0, high: int = 100) -> Field:
    return Field(path, param, "int", low, high, default)


def _memory_qos(cls: str, qos: str) -> list[Field]:
    """One class's memoryQOS (DefaultMemoryQOS: every percent 0; wmarkRatio 95 and
    wmarkScalePermill 20, but 0 and 50 for the system class)."""
    p, m = f"{cls}.memoryQOS", f"memory_qos.{qos}"
    system = qos == "SYSTEM"
    return [
        Field(f"{p}.enable", f"{m}.enable", "bool", default=False),
        _percent(f"{p}.minLimitPercent", f"{m}.min_limit_percent", 0),
        _percent(f"{p}.lowLimitPercent", f"{m}.low_limit_percent", 0),
        _percent(f"{p}.throttlingPercent", f"{m}.throttling_percent", 0),
        _percent(f"{p}.wmarkRatio", f"{m}.wmark_ratio", 0 if system else 95),
        Field(f"{p}.wmarkScalePermill", f"{m}.wmark_scale_permill", "int", 1, 1000, 50 if system else 20),
        Field(f"{p}.wmarkMinAdj", f"{m}.wmark_min_adj", "int", -25, 50, 0),
        Field(f"{p}.priorityEnable", f"{m}.priority_enable", "flag", default=0),
        Field(f"{p}.priority", f"{m}.priority", "int", 0, 12, 0),
        Field(f"{p}.oomKillGroup", f"{m}.oom_kill_group", "flag", default=0),
        Field(f"{p}.pageCacheEnable", None, "bool"),
        _percent(f"{p}.pageCacheLimitPercent", None),
        Field(f"{p}.pageCacheLimitSize", None, "int"),
        Field(f"{p}.pageCacheReclaimSync", None, "bool"),
    ]


def _resctrl_qos(cls: str, qos: str) -> list[Field]:
    """One class's resctrlQOS (koordlet reconciles LSR, LS and BE; policies/resctrl_qos.py).
    No defaults here: a NodeSLO without resctrlQOS leaves the koordlet's RdtResctrl gate off,
    and one with it gets DefaultResctrlQOS for what it leaves out (the policy merges them)."""
    if qos not in ("LSR", "LS", "BE"):
        return [Field(f"{cls}.resctrlQOS", None, "any")]
    p, r = f"{cls}.resctrlQOS", f"resctrl_qos.{qos}"
    return [
        Field(f"{p}.enable", f"{r}.enable", "bool"),
        _percent(f"{p}.catRangeStartPercent", f"{r}.cat_range_start_percent"),
        _percent(f"{p}.catRangeEndPercent", f"{r}.cat_range_end_percent"),
        _percent(f"{p}.mbaPercent", f"{r}.mba_percent"),
    ]


def _class(cls: str, qos: str) -> list[Field]:
    p = cls
    fields = _memory_qos(cls, qos) + _resctrl_qos(cls, qos) + [Field(f"{p}.{k}", None, "any") for k in ("cpuQOS", "networkQOS")]
    if cls != "beClass":
        return [*fields, Field(f"{p}.blkioQOS", None, "any")]
    b = f"{p}.blkioQOS"
    # koordlet's BlkIOReconcile: beClass blkioQOS.enable and its blocks' ioCfg; colosim
    # models one disk, so one block (a second is refused by `blocks`)
    return [
        *fields,
        Field(f"{b}.enable", "blkio_qos", "bool", default=False),
        Field(f"{b}.blocks", None, "any"),
    ]


THRESHOLD = "resourceUsedThresholdWithBE"
BURST = "cpuBurstStrategy"
QOS = "resourceQOSStrategy"

THRESHOLD_FIELDS: tuple[Field, ...] = (
    # resourceUsedThresholdWithBE: the suppress and evict thresholds
    Field("enable", None, "bool", default=False),
    _percent("cpuSuppressThresholdPercent", "cpu_suppress_threshold_percent", 65),
    _percent("cpuSuppressMinPercent", None),
    Field("cpuSuppressPolicy", "cpu_suppress_policy", "str", default="cpuset", choices=("cpuset", "cfsQuota")),
    _percent("memoryEvictThresholdPercent", "memory_evict_threshold_percent", 70),
    # no upstream default: koordlet takes threshold − 2 (the policy's 0)
    _percent("memoryEvictLowerPercent", "memory_evict_lower_percent", 0),
    # the evictors over all priorities (their koordlet feature gates are the policy's
    # `evict_features`): no upstream defaults; unset is the policy's -1
    _percent("memoryAllocatableEvictThresholdPercent", "memory_allocatable_evict_threshold_percent"),
    _percent("memoryAllocatableEvictLowerPercent", "memory_allocatable_evict_lower_percent"),
    # BECPUEvict: no defaults upstream (off until both satisfaction percents are set)
    _percent("cpuEvictBESatisfactionUpperPercent", "cpu_evict_be_satisfaction_upper_percent", 0),
    _percent("cpuEvictBESatisfactionLowerPercent", "cpu_evict_be_satisfaction_lower_percent", 0),
    # koordlet's cpu_evict.go takes 90 when the NodeSLO leaves it out
    _percent("cpuEvictBEUsageThresholdPercent", "cpu_evict_be_usage_threshold_percent", 90),
    Field("cpuEvictTimeWindowSeconds", "cpu_evict_time_window_seconds", "int", 1),
    _percent("cpuEvictThresholdPercent", "cpu_evict_threshold_percent"),
    _percent("cpuEvictLowerPercent", "cpu_evict_lower_percent"),
    _percent("cpuAllocatableEvictThresholdPercent", "cpu_allocatable_evict_threshold_percent"),
    _percent("cpuAllocatableEvictLowerPercent", "cpu_allocatable_evict_lower_percent"),
    Field("cpuEvictPolicy", "cpu_evict_policy", "str", default="evictByRealLimit", choices=("evictByRealLimit", "evictByAllocatable")),
    Field("evictEnabledPriorityThreshold", "evict_enabled_priority_threshold", "int", 0, 2**31 - 1),
    Field("allocatableEvictPriorityThreshold", "allocatable_evict_priority_threshold", "int", 0, 7999),
)
BURST_FIELDS: tuple[Field, ...] = (
    # cpuBurstStrategy (DefaultCPUBurstConfig)
    Field("policy", "cpu_burst_policy", "str", default="none", choices=("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")),
    Field("cpuBurstPercent", "cpu_burst_percent", "int", 1, 10_000, 1000),
    Field("cfsQuotaBurstPercent", "cfs_quota_burst_percent", "int", 100, None, 300),
    Field("cfsQuotaBurstPeriodSeconds", "cfs_quota_burst_period_seconds", "int", -1, None, -1),
    _percent("sharePoolThresholdPercent", "share_pool_threshold_percent", 50),
)
QOS_FIELDS: tuple[Field, ...] = (
    *(f for cls, qos in CLASSES.items() for f in _class(cls, qos)),
    Field("cgroupRoot", None, "any"),
    Field("policies", None, "any"),
)
# the spec's sections; those colosim does not model are accepted whole
SECTIONS: dict[str, tuple[Field, ...]] = {
    THRESHOLD: THRESHOLD_FIELDS,
    BURST: BURST_FIELDS,
    QOS: QOS_FIELDS,
    "systemStrategy": (),
    "extensions": (),
    "hostApplications": (),
}

# the BE block's ioCfg (IOCfg in nodeslo_types.go) ⇄ the blkio_be_* parameters
IO_CFG: tuple[Field, ...] = (
    Field("readIOPS", "blkio_be_read_iops", "int", 0, None, 0),
    Field("writeIOPS", "blkio_be_write_iops", "int", 0, None, 0),
    Field("readBPS", "blkio_be_read_bps", "int", 0, None, 0),
    Field("writeBPS", "blkio_be_write_bps", "int", 0, None, 0),
    Field("ioWeightPercent", "blkio_be_io_weight_percent", "int", 1, 100, 100),
    *(
        Field(k, None, "any")
        for k in (
            "readLatency",
            "writeLatency",
            "readLatencyPercent",
            "writeLatencyPercent",
            "enableUserModel",
            "modelReadBPS",
            "modelWriteBPS",
            "modelReadSeqIOPS",
            "modelWriteSeqIOPS",
            "modelReadRandIOPS",
            "modelWriteRandIOPS",
        )
    ),
)
BLOCKS = ("beClass", "blkioQOS", "blocks")

# resctrlQOS percents of the BE class the policy also takes flat (resctrl_be_mba_percent …)
FLAT_RESCTRL = {f"resctrl_be_{f}": f for f in rq.FLAT_FIELDS}
# memory QoS percents the policy also takes flat (memory_qos_ls_min_limit_percent …)
FLAT_MEMORY = {
    f"memory_qos_{c.lower()}_{f}": (c, f) for c in ("LS", "BE") for f in ("min_limit_percent", "low_limit_percent", "throttling_percent")
}


def read_spec(sections: Mapping[str, tuple[Any, str]]) -> dict[str, Any]:
    """The koordinator `[policy]` keys a NodeSLO spec sets, upstream defaults filled in.
    `sections` gives each spec section's document and the path it is at in the file (the
    NodeSLO's `spec.cpuBurstStrategy`, the ConfigMap's `data.cpu-burst-config.clusterStrategy`),
    so that an error names the field where the user wrote it."""
    flat: dict[str, Any] = {}
    for key, fields in SECTIONS.items():
        doc, where = sections.get(key, (None, key))
        if fields:
            flat.update(read(doc or {}, fields, where, params=Koordinator.params))
    threshold, where = sections.get(THRESHOLD, (None, THRESHOLD))
    if get(threshold, ("enable",))[0] is not True:
        raise FormatError(
            f"{where}.enable: must be true (false, the default, turns koordlet's CPU suppress and evictions "
            'off, which the koordinator policy always runs; for no suppression use [policy] name = "none" or "static")'
        )
    lower = flat["cpu_evict_be_satisfaction_lower_percent"]
    if lower and not lower < flat["cpu_evict_be_satisfaction_upper_percent"]:
        raise FormatError(f"{where}.cpuEvictBESatisfactionLowerPercent: must be below cpuEvictBESatisfactionUpperPercent")
    low = flat["memory_evict_lower_percent"]
    if low and not low < flat["memory_evict_threshold_percent"]:
        raise FormatError(f"{where}.memoryEvictLowerPercent: must be below memoryEvictThresholdPercent")
    qos, where = sections.get(QOS, (None, QOS))
    flat.update(_blocks(qos, where))
    table = nest(flat)
    # the flat memory QoS percents are carried by the classes (0: not set)
    table.update(dict.fromkeys(FLAT_MEMORY, 0))
    table.update(dict.fromkeys(FLAT_RESCTRL, 0))
    return table


def _blocks(qos: Any, where: str) -> dict[str, Any]:
    """The BE class's one blkioQOS block's ioCfg as blkio_be_* (upstream defaults otherwise)."""
    out = {f.param: f.default for f in IO_CFG if f.param is not None}
    blocks, found = get(qos, BLOCKS)
    if not found:
        return out
    b = f"{where}.{'.'.join(BLOCKS)}"
    if not isinstance(blocks, list) or len(blocks) > 1:
        raise FormatError(f"{b}: colosim models one disk: give at most one block (got {blocks!r})")
    for i, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise FormatError(f"{b}[{i}]: must be a mapping of name, type, ioCfg")
        extra = sorted(set(block) - {"name", "type", "ioCfg"})
        if extra:
            raise FormatError(f"{b}[{i}].{extra[0]}: unknown field (known here: name, type, ioCfg)")
        out.update(read(block.get("ioCfg") or {}, IO_CFG, f"{b}[{i}].ioCfg", params=Koordinator.params))
    return out


def effective(table: Mapping[str, Any]) -> dict[str, Any]:
    """What a koordinator `[policy]` table runs with: every parameter and switch, the
    policy's defaults where the table leaves them out (so the files say what ran)."""
    config = {k: v for k, v in table.items() if k != "name"}
    p = Koordinator(config)
    out: dict[str, Any] = dict(p.values)
    out.update(
        cpu_suppress_policy=p.mode,
        cpu_evict_policy=p.cpu_evict_policy,
        cpu_burst_policy=p.burst_policy,
        blkio_qos=p.blkio_qos,
        memory_qos={c: asdict(v) for c, v in p.memory_qos.items()},
    )
    if p.resctrl_qos is not None:
        out["resctrl_qos"] = {c: asdict(v) for c, v in p.resctrl_qos.items()}
    return out


def canonical(table: Mapping[str, Any]) -> dict[str, Any]:
    """A koordinator `[policy]` table in the form `read_spec` returns: the flat memory QoS
    percents folded into their classes as the policy folds them (a flat value above 0 sets
    the class's percent and enables it), each class with every field. wmark_scale_permill 0
    ("not written" to colosim) has no upstream spelling (validated >= 1), so it becomes
    koordlet's default for the class (20; 50 for SYSTEM), which is what koordlet writes."""
    out = dict(table)
    blank = asdict(mq.ClassConfig())
    classes = {c: {**blank, **v} for c, v in (out.get("memory_qos") or {}).items()}
    for key, (cls, field) in FLAT_MEMORY.items():
        value = out.get(key, 0)
        if value:
            classes.setdefault(cls, dict(blank))
            classes[cls].update({"enable": True, field: value})
        out[key] = 0
    for cls, v in classes.items():
        if not v["wmark_scale_permill"]:
            v["wmark_scale_permill"] = 50 if cls == "SYSTEM" else 20
    if classes:
        out["memory_qos"] = classes
    # the BE resctrl percents likewise (policies/resctrl_qos.py with_flat)
    flat = {f: out.get(key, 0) for key, f in FLAT_RESCTRL.items()}
    if any(flat.values()):
        folded = rq.with_flat(rq.parse(out.get("resctrl_qos"), "policy.resctrl_qos"), flat, "policy")
        assert folded is not None  # a flat value is set
        out["resctrl_qos"] = {c: asdict(v) for c, v in folded.items()}
    out.update(dict.fromkeys(FLAT_RESCTRL, 0))
    return out


def write_spec(table: Mapping[str, Any]) -> dict[str, Any]:
    """The NodeSLO spec of a koordinator `[policy]` table, by section: every field it maps,
    with resourceUsedThresholdWithBE.enable true (the policy suppresses)."""
    t = canonical(effective(table))
    flat = {k: v for k, v in t.items() if k not in ("memory_qos", "resctrl_qos")}
    for key in ("memory_qos", "resctrl_qos"):
        flat.update({f"{key}.{k}": v for k, v in flatten(t.get(key) or {}).items()})
    spec = {key: write(flat, fields, skip=_unset) for key, fields in SECTIONS.items() if fields}
    spec[THRESHOLD] = {"enable": True, **spec[THRESHOLD]}
    io = write(t, IO_CFG, skip=lambda f, v: v == f.default)
    if io:
        # one block: the node's disk (a BlockType "device" block, by its name)
        spec[QOS].setdefault("beClass", {}).setdefault("blkioQOS", {})["blocks"] = [{"name": "", "type": "device", "ioCfg": io}]
    return {k: v for k, v in spec.items() if v}


def _unset(f: Field, v: Any) -> bool:
    """0 stands for "not set" where upstream leaves the field out: the BE satisfaction
    percents (BECPUEvict off) and memoryEvictLowerPercent (koordlet then takes threshold − 2;
    an explicit 0 would evict down to an empty node); -1 for the evictors' thresholds that
    have no default upstream."""
    if v is None:  # a resctrlQOS percent left unset (koordlet then skips that line)
        return True
    if v == -1 and f.param is not None and f.param in UNSET_IS_MINUS_ONE:
        return True
    return v == 0 and f.path.endswith(("SatisfactionUpperPercent", "SatisfactionLowerPercent", "memoryEvictLowerPercent"))


# the koordinator policy's parameters whose -1 means "not in the NodeSLO"
UNSET_IS_MINUS_ONE = frozenset(
    p.name
    for p in Koordinator.params
    if p.default == -1 and p.name.endswith(("evict_threshold_percent", "evict_lower_percent", "priority_threshold"))
)


def read_nodeslo(doc: Any) -> dict[str, Any]:
    """A NodeSLO object (apiVersion, kind, metadata, spec, status), paths from its root."""
    check_object(doc, API_VERSION, KIND, ("spec", "status"))
    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise FormatError(f"spec: must be a mapping of {', '.join(SECTIONS)}")
    for key in spec:
        if key not in SECTIONS:
            raise FormatError(f"spec.{key}: unknown field (known here: {', '.join(SECTIONS)})")
    return read_spec({key: (spec.get(key), f"spec.{key}") for key in SECTIONS})


def check_object(doc: Any, api_version: str, kind: str, body: tuple[str, ...]) -> None:
    """A Kubernetes object's envelope: apiVersion, kind, metadata and its `body` keys."""
    known = ("apiVersion", "kind", "metadata", *body)
    if not isinstance(doc, Mapping):
        raise FormatError(f"the document: a {kind} is a mapping of {', '.join(known)}")
    for key in doc:
        if key not in known:
            raise FormatError(f"{key}: unknown field of a {kind} (known: {', '.join(known)})")
    if doc.get("apiVersion") != api_version:
        raise FormatError(f"apiVersion: a {kind} is {api_version} (got {doc.get('apiVersion')!r})")
    if doc.get("kind") != kind:
        raise FormatError(f"kind: must be {kind} (got {doc.get('kind')!r})")


def nodeslo(table: Mapping[str, Any], name: str = "NODE") -> dict[str, Any]:
    """A NodeSLO object for `kubectl apply`: the slo-controller renders one per node from
    slo-controller-config and would overwrite a hand-applied one, so production takes the
    ConfigMap (slo_config.py); this is what `kubectl get nodeslo` prints after that."""
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": write_spec(table)}


__all__ = ["API_VERSION", "KIND", "SECTIONS", "canonical", "nodeslo", "read_nodeslo", "read_spec", "write_spec"]
