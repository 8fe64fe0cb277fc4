"""Koordinator's `slo-controller-config` ConfigMap ⇄ the koordinator `[policy]`.

The slo-controller renders each node's NodeSLO from this ConfigMap (apis/configuration/
slo_controller_config.go): every data key holds a JSON string. resource-threshold-config,
resource-qos-config, cpu-burst-config and system-config are `{clusterStrategy, nodeStrategies}`,
whose clusterStrategy is the NodeSLO spec section of the same shape (nodeslo.py reads it);
colocation-config is the ColocationStrategy itself (flat) with `nodeConfigs`, of which the
batch-resource thresholds are modelled (defaults of sloconfig.DefaultColocationStrategy).

colosim models one node with no labels, so it takes the clusterStrategy: `nodeStrategies`
and `nodeConfigs` (selected by node labels) are accepted and not applied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from policies.formats.fields import Field, FormatError, read, write
from policies.formats.nodeslo import BURST, QOS, SECTIONS, THRESHOLD, check_object, effective, read_spec, write_spec
from policies.koordinator import Koordinator

NAME = "slo-controller-config"
# data key ⇄ NodeSLO spec section (each `{clusterStrategy, nodeStrategies}`)
STRATEGIES = {
    "resource-threshold-config": THRESHOLD,
    "resource-qos-config": QOS,
    "cpu-burst-config": BURST,
    "system-config": "systemStrategy",
}
COLOCATION = "colocation-config"
# keys the slo-controller also reads, colosim does not model (accepted as they are)
OTHER_KEYS = ("host-application-config", "cpu-normalization-config", "resource-amplification-config")

# colocation-config (ColocationStrategy): the batch resource thresholds; `enable` (default
# false) only decides whether batch resources are advertised, which the policy records always
COLOCATION_FIELDS: tuple[Field, ...] = (
    Field("enable", None, "bool", default=False),
    Field("cpuReclaimThresholdPercent", "cpu_reclaim_threshold_percent", "int", 0, None, 60),
    Field("memoryReclaimThresholdPercent", "memory_reclaim_threshold_percent", "int", 0, None, 65),
    # caps on batch allocatable (percent of node capacity); upstream's nil is the policy's −1
    Field("batchCPUThresholdPercent", "batch_cpu_threshold_percent", "int", 0),
    Field("batchMemoryThresholdPercent", "batch_memory_threshold_percent", "int", 0),
    # the Mid tier (DefaultColocationStrategy: 100, 100, 0); the static reclaim mode is not modelled
    Field("midCPUThresholdPercent", "mid_cpu_threshold_percent", "int", 0, 100, 100),
    Field("midMemoryThresholdPercent", "mid_memory_threshold_percent", "int", 0, 100, 100),
    Field("midUnallocatedPercent", "mid_unallocated_percent", "int", 0, 100, 0),
    Field("metricAggregateDurationSeconds", None, "int", 1),
    Field("metricReportIntervalSeconds", None, "int", 1),
    Field("cpuCalculatePolicy", None, "str", choices=("usage", "request", "maxUsageRequest")),
    Field("memoryCalculatePolicy", None, "str", choices=("usage", "request", "maxUsageRequest")),
    Field("degradeTimeMinutes", None, "int", 1),
    Field("updateTimeThresholdSeconds", None, "int", 1),
    Field("resourceDiffThreshold", None, "float", 0, 1),
    *(
        Field(k, None, "any")
        for k in (
            "metricAggregatePolicy",
            "metricMemoryCollectPolicy",
            "midReclaimMode",
            "midStaticCPUReservedPercent",
            "midStaticMemoryReservedPercent",
            "extensions",
            "nodeConfigs",
        )
    ),
)


def _json(data: Mapping[str, Any], key: str) -> Any:
    text = data.get(key)
    if text is None:
        return None
    if not isinstance(text, str):
        raise FormatError(f"data.{key}: must be a JSON string (a ConfigMap's data values are strings; write `{key}: |` and the JSON)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise FormatError(f"data.{key}: not JSON: {err.msg} (line {err.lineno} column {err.colno} of the value)") from None


def read_configmap(doc: Any) -> dict[str, Any]:
    """The koordinator `[policy]` keys an slo-controller-config ConfigMap sets."""
    check_object(doc, "v1", "ConfigMap", ("data", "binaryData", "immutable"))
    name = (doc.get("metadata") or {}).get("name")
    if name != NAME:
        raise FormatError(f"metadata.name: the Koordinator ConfigMap is {NAME} (got {name!r})")
    data = doc.get("data") or {}
    if not isinstance(data, Mapping):
        raise FormatError("data: must map the config keys to JSON strings")
    known = (*STRATEGIES, COLOCATION, *OTHER_KEYS)
    for key in data:
        if key not in known:
            raise FormatError(f"data.{key}: unknown key of {NAME} (known: {', '.join(known)})")
    # a key left out is its section's defaults, named where the user would write it
    sections = {section: (None, f"data.{key}.clusterStrategy") for key, section in STRATEGIES.items()}
    for key, section in STRATEGIES.items():
        value = _json(data, key)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise FormatError(f"data.{key}: must be a JSON object with clusterStrategy, nodeStrategies")
        for k in value:
            if k not in ("clusterStrategy", "nodeStrategies"):
                raise FormatError(f"data.{key}.{k}: unknown field (known here: clusterStrategy, nodeStrategies)")
        sections[section] = (value.get("clusterStrategy"), f"data.{key}.clusterStrategy")
    out = read_spec(sections)
    colocation = _json(data, COLOCATION)
    out.update(read(colocation or {}, COLOCATION_FIELDS, f"data.{COLOCATION}", params=Koordinator.params))
    return out


def configmap(table: Mapping[str, Any], namespace: str = "koordinator-system") -> dict[str, Any]:
    """The ConfigMap of a koordinator `[policy]` table, for `kubectl apply` (it replaces the
    whole ConfigMap: merge by hand any nodeStrategies of the one in the cluster)."""
    spec = write_spec(table)
    data = {
        key: json.dumps({"clusterStrategy": spec[section]}, indent=2) + "\n"
        for key, section in STRATEGIES.items()
        if section in spec and SECTIONS[section]
    }
    colocation = write(effective(table), COLOCATION_FIELDS, skip=lambda f, v: f.path.startswith("batch") and v < 0)
    data[COLOCATION] = json.dumps({"enable": True, **colocation}, indent=2) + "\n"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": namespace}, "data": data}


__all__ = ["NAME", "configmap", "read_configmap"]
