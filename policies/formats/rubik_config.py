"""rubik's `/var/lib/rubik/config.json` ⇄ the rubik `[policy]`.

Field names, ranges and defaults of rubik's pkg/config (agent) and pkg/services/* (each
service's Config, NewConfig and Validate; ../shared/reference/rubik.md §5). rubik decodes
with Go's encoding/json, so keys match case-insensitively (psi's `avg10threshold` is also
written `avg10Threshold`); colosim reads them the same way. A section takes effect only when
`agent.enabledFeatures` lists it.

What the config does not carry comes from the scenario, as it comes from pod annotations in
production: which pods are offline (volcano.sh/preemptable), under quotaTurbo
(volcano.sh/quota-turbo), their quota burst (volcano.sh/quota-burst-time) and io limits
(volcano.sh/blkio-limit). quotaTurbo's elevateLimit, slowFallbackRatio and cpuFloatingLimit
are the quotaturbo library's own JSON names (pkg/lib/cpu/quotaturbo/config.go): rubik's
service reads only the water marks and syncInterval and ignores them (Go drops unknown
keys), so they are written only when they differ from the library's defaults.

Not modelled, accepted as rubik validates them: the agent's log and cgroup settings,
dynCache, ioLimit's and quotaBurst's (annotation-driven) feature switches, cpi, and the ioCost entries' nodeName.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies import io_cost as ic
from policies import net_qos as nq
from policies import quota_turbo as qt
from policies import watermark_evict as we
from policies.formats.fields import Field, FormatError, get, read, write
from policies.policy import PolicyError
from policies.rubik import Rubik

FEATURES = (
    "preemption",
    "dynCache",
    "ioLimit",
    "ioCost",
    "dynMemory",
    "quotaBurst",
    "quotaTurbo",
    "psi",
    "cpi",
    "cpuevict",
    "memoryevict",
)

FIELDS: tuple[Field, ...] = (
    # agent (pkg/config/config.go NewConfig; constant.Default*)
    Field("agent.logDriver", None, "str", choices=("stdio", "file")),
    Field("agent.logDir", None, "str"),
    Field("agent.logSize", None, "int", 10, 2**20),
    Field("agent.logLevel", None, "str", choices=("debug", "info", "warn", "error")),
    Field("agent.cgroupRoot", None, "str"),
    Field("agent.cgroupDriver", None, "str", choices=("cgroupfs", "systemd")),
    Field("agent.informerType", None, "str", choices=("apiserver", "nri")),
    Field("agent.enabledFeatures", None, "strs", choices=FEATURES, default=[]),
    # preemption (services/preemption): resource cpu|memory|net; net's bandwidths in MB
    Field("preemption.resource", None, "strs", choices=("cpu", "memory", "net")),
    Field("preemption.net.waterline", "net_waterline_mb", "int", 20, nq.MAX_MB),
    Field("preemption.net.bandwidthLow", "net_low_mb", "int", 1, nq.MAX_MB),
    Field("preemption.net.bandwidthHigh", "net_high_mb", "int", 1, nq.MAX_MB),
    # quotaTurbo (services/quotaturbo NewConfig and Validate); syncInterval in ms
    Field("quotaTurbo.highWaterMark", "high_water_mark", "int", 0, 100, 60),
    Field("quotaTurbo.alarmWaterMark", "alarm_water_mark", "int", 0, 100, 80),
    Field("quotaTurbo.syncInterval", "sync_interval", "int", 100, 10_000, 100, scale=1000),
    Field("quotaTurbo.elevateLimit", "elevate_limit", "float", 0, 100, qt.ELEVATE_LIMIT),
    Field("quotaTurbo.slowFallbackRatio", "slow_fallback_ratio", "float", 0, 1, qt.SLOW_FALLBACK_RATIO),
    Field("quotaTurbo.cpuFloatingLimit", "cpu_floating_limit", "float", 0, 100, qt.CPU_FLOATING_LIMIT),
    # psi (services/psi NewConfig and Validate): interval s, avg10threshold %
    Field("psi.interval", "psi_interval", "int", 10, 30, 10),
    Field("psi.avg10threshold", "psi_avg10_threshold", "float", 5.0, 100.0, 5.0),
    Field("psi.resource", None, "strs", choices=("cpu", "memory", "io")),
    # dynMemory (services/dynmemory): "fssr" is the only policy
    Field("dynMemory.policy", None, "str", choices=("fssr", "dynlevel")),  # dynlevel: rubik 1.0's
    Field("ioCost", None, "any"),
    *(Field(k, None, "any") for k in ("dynCache", "ioLimit", "quotaBurst", "cpi", "cpuevict", "memoryevict")),
    # cpuevict / memoryevict (services/eviction/{cpu,memory}/config.go) are read whole by
    # `_evict`, their ranges checked by policies/watermark_evict.py, as rubik's Validate does
)
MODEL = "linear"


def _enabled(doc: Any) -> list[str]:
    return list(get(doc, ("agent", "enabledFeatures"), fold=True)[0] or [])


def read_config(doc: Any) -> dict[str, Any]:
    """The rubik `[policy]` keys a config.json sets (the features it does not enable: off)."""
    out = read(doc, FIELDS, "", fold=True, params=Rubik.params)
    features = _enabled(doc)
    if "preemption" not in features:
        raise FormatError(
            'agent.enabledFeatures: must list "preemption" (rubik\'s absolute preemption of offline pods, '
            'which the rubik policy always runs; for no isolation use [policy] name = "none")'
        )
    resource, found = get(doc, ("preemption", "resource"), fold=True)
    if not found or not resource:
        raise FormatError('preemption.resource: must list the preempted resources (rubik refuses an empty list), e.g. ["cpu"]')
    out["net"] = "net" in resource
    if out["net"]:
        for f in FIELDS:
            if f.path.startswith("preemption.net.") and f.param not in out:
                raise FormatError(f"{f.path}: required with net in preemption.resource (rubik has no default)")
        if not out["net_low_mb"] < out["net_high_mb"]:
            raise FormatError("preemption.net.bandwidthLow: must be below bandwidthHigh")
    if not out["high_water_mark"] < out["alarm_water_mark"]:
        raise FormatError("quotaTurbo.highWaterMark: must be below alarmWaterMark (rubik: alarmWaterMark > highWaterMark)")
    # a feature left out of enabledFeatures is off, whatever the scenario's annotations say
    if "quotaTurbo" not in features:
        out["quota_turbo"] = []
    if "ioLimit" not in features:
        out["io_limit"] = None  # (None, not {}: an override's table would merge into the scenario's)
    out["dyn_memory"] = _dyn_memory(doc) if "dynMemory" in features else None
    out["psi"] = _psi(doc) if "psi" in features else None
    out["io_cost"] = _io_cost(doc) if "ioCost" in features else None
    for feature, key, check in (("cpuevict", "cpu_evict", we.cpu_config), ("memoryevict", "memory_evict", we.memory_config)):
        out[key] = _evict(doc, feature, check) if feature in features else None
    return out


def _evict(doc: Any, feature: str, check: Any) -> dict[str, int]:
    """A cpuevict / memoryevict section as the policy's table (same keys: interval, windows,
    threshold, cooldown — rubik's JSON names), validated as rubik validates it."""
    section, found = get(doc, (feature,), fold=True)
    table = {k.lower(): v for k, v in section.items()} if found and isinstance(section, Mapping) else {}
    try:
        check(table, feature)
    except PolicyError as err:
        raise FormatError(str(err)) from None
    return table


def _dyn_memory(doc: Any) -> str:
    policy, found = get(doc, ("dynMemory", "policy"), fold=True)
    if not found:
        raise FormatError('dynMemory.policy: required with dynMemory in agent.enabledFeatures ("fssr")')
    return str(policy)


def _psi(doc: Any) -> dict[str, Any]:
    resource, found = get(doc, ("psi", "resource"), fold=True)
    if not found or not resource:
        raise FormatError("psi.resource: required with psi in agent.enabledFeatures (rubik: specify at least one type resource)")
    if "io" in resource:
        raise FormatError("psi.resource: io pressure is not modelled by colosim (cpu and memory are)")
    return {"resource": list(resource)}


def _io_cost(doc: Any) -> dict[str, int]:
    """ioCost: [{nodeName, config: [{dev, enable, model, param}]}]; colosim models one disk,
    so one device in all."""
    entries, _ = get(doc, ("ioCost",), fold=True)
    if not isinstance(entries, list):
        raise FormatError("ioCost: must be a list of {nodeName, config} (with ioCost in agent.enabledFeatures)")
    devices = []
    for i, entry in enumerate(entries):
        where = f"ioCost[{i}]"
        if not isinstance(entry, Mapping):
            raise FormatError(f"{where}: must be a mapping of nodeName, config")
        for k in entry:
            if k.lower() not in ("nodename", "config"):
                raise FormatError(f"{where}.{k}: unknown field (known here: nodeName, config)")
        config, _ = get(entry, ("config",), fold=True)
        if not isinstance(config, list):
            raise FormatError(f"{where}.config: must be a list of {{dev, enable, model, param}}")
        for j, dev in enumerate(config):
            w = f"{where}.config[{j}]"
            if not isinstance(dev, Mapping):
                raise FormatError(f"{w}: must be a mapping of dev, enable, model, param")
            for k in dev:
                if k.lower() not in ("dev", "enable", "model", "param"):
                    raise FormatError(f"{w}.{k}: unknown field (known here: dev, enable, model, param)")
            if get(dev, ("enable",), fold=True)[0] is False:
                continue
            model, _ = get(dev, ("model",), fold=True)
            if model != MODEL:
                raise FormatError(f'{w}.model: must be "{MODEL}" (rubik\'s only ioCost model) (got {model!r})')
            try:
                param = ic.parse_model(get(dev, ("param",), fold=True)[0], f"{w}.param")
            except PolicyError as err:
                raise FormatError(str(err)) from None
            if param is None:
                raise FormatError(f"{w}.param: required (the linear model's {', '.join(ic.MODEL_KEYS)})")
            devices.append(param)
    if len(devices) != 1:
        raise FormatError(f"ioCost: colosim models one disk: give one enabled device (got {len(devices)})")
    return devices[0]


def effective(table: Mapping[str, Any]) -> dict[str, Any]:
    """What a rubik `[policy]` table runs with: every parameter and feature, the policy's
    defaults where the table leaves them out."""
    p = Rubik({k: v for k, v in table.items() if k != "name"})
    out: dict[str, Any] = dict(p.values)
    out.update(
        net=p.net,
        dyn_memory=p.dyn_memory,
        psi={"resource": list(p.psi)} if p.psi else None,
        io_cost=p.io_model,
        quota_turbo=p.turbo,
        quota_burst=p.burst,
        # ioLimit's per-pod limits stay the scenario's (annotations); off: None
        io_limit=table.get("io_limit") or None,
        cpu_evict=table.get("cpu_evict") or None,
        memory_evict=table.get("memory_evict") or None,
    )
    return out


def config_json(policy: Mapping[str, Any]) -> dict[str, Any]:
    """rubik's config.json for a rubik `[policy]` table: the features it uses enabled, every
    threshold it sets (defaults included, so the file says what runs)."""
    table = effective(policy)
    features = ["preemption"]
    features += [f for f, key in (("quotaTurbo", "quota_turbo"), ("quotaBurst", "quota_burst"), ("ioLimit", "io_limit")) if table.get(key)]
    doc = write(table, FIELDS, skip=_library_default)
    resource = ["cpu", "net"] if table.get("net") else ["cpu"]
    doc["preemption"] = {"resource": resource, **({"net": doc["preemption"]["net"]} if table.get("net") else {})}
    if table.get("dyn_memory"):
        features.append("dynMemory")
        doc["dynMemory"] = {"policy": table["dyn_memory"]}
    if table.get("psi"):
        features.append("psi")
        doc["psi"]["resource"] = list(table["psi"]["resource"])
    else:
        doc.pop("psi", None)
    if table.get("io_cost"):
        features.append("ioCost")
        doc["ioCost"] = [{"nodeName": "NODE", "config": [{"dev": "DEV", "enable": True, "model": MODEL, "param": dict(table["io_cost"])}]}]
    for feature, key in (("cpuevict", "cpu_evict"), ("memoryevict", "memory_evict")):
        if table.get(key):
            features.append(feature)
            doc[feature] = dict(table[key])
    return {"agent": {"enabledFeatures": features}, **doc}


def _library_default(f: Field, value: Any) -> bool:
    """The quotaturbo library's own keys are written only when they differ from its defaults."""
    return f.path.split(".")[-1] in ("elevateLimit", "slowFallbackRatio", "cpuFloatingLimit") and value == f.default


__all__ = ["FIELDS", "config_json", "read_config"]
