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
    """Whether `--policy` names an agent's own file rather than colosim's TOML."""
    if path.suffix in (".yaml", ".yml", ".json"):
        return True
    return path.suffix != ".toml" and text.lstrip()[:1] in ("{", "a", "k")  # JSON, or YAML's apiVersion/kind


def parse(text: str, path: Path) -> Any:
    """The document (JSON or YAML); FormatError with the line of a syntax error."""
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
    if len(docs) != 1:
        raise FormatError(f"one object per file: a NodeSLO or the slo-controller-config ConfigMap (found {len(docs)} documents)")
    return docs[0]


def read_policy(doc: Any) -> dict[str, Any]:
    """The `[policy]` table (with its `name`) of a NodeSLO, an slo-controller-config
    ConfigMap or a rubik config.json."""
    if isinstance(doc, Mapping) and doc.get("kind") == nodeslo.KIND:
        return {"name": "koordinator", **nodeslo.read_nodeslo(doc)}
    if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap":
        return {"name": "koordinator", **slo_config.read_configmap(doc)}
    if isinstance(doc, Mapping) and "kind" not in doc and "apiVersion" not in doc:
        return {"name": "rubik", **rubik_config.read_config(doc)}
    kind = doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__
    raise FormatError(
        f"kind: colosim reads a NodeSLO, the {slo_config.NAME} ConfigMap or rubik's config.json (got {kind!r})"
        if isinstance(doc, Mapping)
        else f"the document: must be a mapping (a NodeSLO, a ConfigMap or rubik's config.json), got a {kind}"
    )


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
