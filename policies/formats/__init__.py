"""The node agents' own configuration files as `[policy]` tables, and back, so that
colosim's answer goes to production unchanged (docs/tuning.md, "Taking the answer to
production"):

* Koordinator: a NodeSLO (nodeslo.py) and the slo-controller-config ConfigMap (slo_config.py);
* rubik: its config.json (rubik_config.py).

`read_policy` tells the format from the content (a Kubernetes object's apiVersion and kind,
rubik's top-level sections) and returns the same `[policy]` table a tuned_policy.toml holds;
`write_files` writes the files of a `[policy]` table.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from policies.formats import nodeslo, rubik_config, slo_config
from policies.formats.fields import FormatError

# file names `colosim tune` writes beside tuned_policy.toml
NODESLO_FILE = "nodeslo-patch.yaml"
CONFIGMAP_FILE = "slo-controller-config.yaml"
RUBIK_FILE = "rubik-config.json"


def is_agent_file(path: Path, text: str) -> bool:
    """Whether `--policy` names an agent's own file rather than colosim's TOML: by the
    extension, else by the content (a TOML document with a [policy] table is colosim's)."""
    if path.suffix in (".yaml", ".yml", ".json"):
        return True
    if path.suffix == ".toml":
        return False
    try:
        return "policy" not in tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return True


def parse(text: str, path: Path) -> Any:
    """The agent's document (JSON or YAML); FormatError with the line of a syntax error. Of a
    YAML stream with several objects (rubik's hack/rubik-daemonset.yaml), the one holding an
    agent's configuration."""
    if path.suffix == ".json" or text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise FormatError(f"not JSON: {err.msg} (line {err.lineno} column {err.colno})") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1} column {mark.column + 1})" if mark is not None else ""
        raise FormatError(f"not YAML: {getattr(err, 'problem', None) or err}{where}") from None
    if len(docs) == 1:
        return docs[0]
    ours = [d for d in docs if _kind(d) in ("nodeslo", "configmap", "rubik-configmap")]
    if len(ours) != 1:
        raise FormatError(
            f"{len(docs)} objects, of which {len(ours)} an agent's configuration: give one (a NodeSLO, {slo_config.NAME}, {RUBIK_CONFIGMAP})"
        )
    return ours[0]


# rubik's DaemonSet manifest ships config.json in this ConfigMap (hack/rubik-daemonset.yaml)
RUBIK_CONFIGMAP = "rubik-config"


def _kind(doc: Any) -> str | None:
    """Which agent's configuration a document is: "nodeslo", "configmap" (Koordinator's),
    "rubik-configmap", "other-configmap", "rubik" (config.json itself) or None."""
    if not isinstance(doc, Mapping):
        return None
    if doc.get("kind") == nodeslo.KIND:
        return "nodeslo"
    if doc.get("kind") == "ConfigMap":
        name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
        if name == RUBIK_CONFIGMAP:
            return "rubik-configmap"
        return "configmap" if name == slo_config.NAME else "other-configmap"
    if "kind" not in doc and "apiVersion" not in doc:
        return "rubik"
    return None


def read_policy(doc: Any) -> dict[str, Any]:
    """The `[policy]` table (with its `name`) of a NodeSLO, an slo-controller-config
    ConfigMap or a rubik config.json (alone, or in its rubik-config ConfigMap)."""
    kind = _kind(doc)
    if kind == "nodeslo":
        return {"name": "koordinator", **nodeslo.read_nodeslo(doc)}
    if kind in ("configmap", "other-configmap"):  # the latter: read_configmap names the name
        return {"name": "koordinator", **slo_config.read_configmap(doc)}
    if kind == "rubik":
        return {"name": "rubik", **rubik_config.read_config(doc)}
    if kind == "rubik-configmap":
        text = (doc.get("data") or {}).get("config.json")
        if not isinstance(text, str):
            raise FormatError(f"data.config.json: the {RUBIK_CONFIGMAP} ConfigMap holds rubik's config.json as a string")
        try:
            return {"name": "rubik", **rubik_config.read_config(json.loads(text))}
        except json.JSONDecodeError as err:
            raise FormatError(f"data.config.json: not JSON: {err.msg} (line {err.lineno} column {err.colno} of the value)") from None
        except FormatError as err:
            raise FormatError(f"data.config.json: {err}") from None
    if isinstance(doc, Mapping):
        raise FormatError(
            f"kind: colosim reads a NodeSLO, the {slo_config.NAME} ConfigMap or rubik's config.json (got {doc.get('kind')!r})"
        )
    raise FormatError(f"the document: must be a mapping (a NodeSLO, a ConfigMap or rubik's config.json), got a {type(doc).__name__}")


class _Dumper(yaml.SafeDumper):
    """Block style, and the ConfigMap's JSON strings as `|` literal blocks (as the upstream
    samples write them)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def dump_yaml(doc: Mapping[str, Any], note: str) -> str:
    head = "".join(f"# {line}\n" if line else "#\n" for line in note.splitlines())
    return head + yaml.dump(dict(doc), Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def write_files(table: Mapping[str, Any], directory: Path, prefix: str = "") -> list[Path]:
    """The agent's own files for a `[policy]` table (Koordinator: a NodeSLO patch and the
    ConfigMap; rubik: config.json; none for other policies), in `directory`."""
    name = table.get("name")
    written = []
    if name == "koordinator":
        patch = nodeslo.nodeslo(table)
        del patch["metadata"]  # a merge patch keeps the node's own NodeSLO name
        for file, text in (
            (
                NODESLO_FILE,
                dump_yaml(
                    patch,
                    "colosim's thresholds as a NodeSLO merge patch:\n"
                    "  kubectl patch nodeslo NODE --type merge --patch-file nodeslo-patch.yaml\n"
                    "(the slo-controller re-renders NodeSLOs from slo-controller-config: apply that to keep them)",
                ),
            ),
            (
                CONFIGMAP_FILE,
                dump_yaml(
                    slo_config.configmap(table),
                    "colosim's thresholds as Koordinator's slo-controller-config (its clusterStrategy):\n"
                    "  kubectl patch configmap slo-controller-config -n koordinator-system --type merge --patch-file slo-controller-config.yaml",
                ),
            ),
        ):
            written.append(_write(directory / f"{prefix}{file}", text))
    elif name == "rubik":
        text = json.dumps(rubik_config.config_json(table), indent=2) + "\n"
        written.append(_write(directory / f"{prefix}{RUBIK_FILE}", text))
    return written


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["FormatError", "is_agent_file", "parse", "read_policy", "write_files"]
