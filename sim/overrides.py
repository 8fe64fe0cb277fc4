"""Dotted paths into the scenario document, and the overrides (`set`, `--set`) that use them.

Quoting rule: a path is a TOML dotted key, parsed by TOML itself.  Segments made of
letters, digits, `_` and `-` are written bare; any other segment (one containing a dot, a
slash, a space ...) is quoted, as in TOML:

    workloads.stress.enabled
    cgroups.offline."cpu.qos_level"
    cgroups."kubepods/besteffort"."cpu.shares"

Inside a TOML file the whole path is itself a key of the `set` table, so write it as a
literal string to avoid escaping the inner quotes:

    set = { 'cgroups.offline."cpu.qos_level"' = -1 }

Error messages print paths by the same rule, so a path from an error can be pasted into
`--set`.  List items print as `[i]` (they cannot be set by path).
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

from sim.errors import ScenarioError

Path = tuple[str | int, ...]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")

# Tables whose `kind`, `dist` or `name` (of a policy) selects their shape: an override naming another one replaces
# the table instead of merging into it (merging would keep the old shape's fields).
_SHAPE_KEYS = ("kind", "dist", "name")


def format_path(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE.match(part) else _quote(part)
        out += f".{text}" if out else text
    return out


def _quote(key: str) -> str:
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def parse_path(text: str) -> tuple[str, ...]:
    """Segments of a dotted path; ScenarioError if it is not a valid TOML key."""
    try:
        doc = tomllib.loads(f"{text} = 0")
    except tomllib.TOMLDecodeError:
        raise ScenarioError(
            f'{text.strip()}: not a dotted key (quote segments that contain dots, e.g. cgroups.offline."cpu.qos_level")'
        ) from None
    parts: list[str] = []
    node: Any = doc
    while isinstance(node, dict):
        if len(node) != 1:  # "a = 1\nb" parses, but is not one path
            raise ScenarioError(f"{text.strip()}: not a single dotted key")
        ((key, node),) = node.items()
        parts.append(key)
    return tuple(parts)


def parse_value(text: str) -> Any:
    """A TOML value ("-1", "false", "[1, 2]", "{dist=\"constant\", value=\"1ms\"}"), else the
    text itself, so `--set workloads.web.service=48ms` needs no quoting in the shell."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def parse_assignment(text: str) -> tuple[tuple[str, ...], Any]:
    """`key=value` as given to `--set`; the key is a dotted path, the value a TOML value."""
    split = _unquoted_equals(text)
    if split is None:
        raise ScenarioError(f"--set {text!r}: expected key=value, e.g. workloads.stress.threads=4")
    key, value = text[:split].strip(), text[split + 1 :]
    if not key:
        raise ScenarioError(f"--set {text!r}: missing key before '='")
    try:
        path = parse_path(key)
    except ScenarioError as err:
        raise ScenarioError(f"--set {err}") from None
    return path, parse_value(value)


def _unquoted_equals(text: str) -> int | None:
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return i
    return None


def normalize(overrides: Iterable[str] | Mapping[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    """Overrides as (path, value) pairs, from `key=value` strings or a {path: value} mapping."""
    if isinstance(overrides, Mapping):
        return [(parse_path(k), v) for k, v in overrides.items()]
    return [parse_assignment(item) for item in overrides]


def apply_override(doc: dict[str, Any], path: tuple[str, ...], value: Any, where: str) -> None:
    """Set `path` in the raw document to `value`, in place.

    A missing top-level table (`[kernel]`, `[node]` ...) is created; below the top level
    every table on the way must already exist, so a misspelt workload or cgroup name is an
    error here rather than a half-empty new entry.  A table value is merged into the table it
    replaces (so `set = { workloads.stress.enabled = false }`, which TOML reads as nested
    tables, means what it says) unless it names a different `kind`, `dist` or `name` (a policy).
    """
    shown = f"{where}{format_path(path)}"
    node: Any = doc
    for depth, key in enumerate(path[:-1]):
        if key not in node:
            if depth > 0:
                table = format_path(path[:depth])
                known = ", ".join(format_path([k]) for k in node) or "none"
                raise ScenarioError(f'{shown}: {table} has no "{key}" (declared: {known})')
            node[key] = {}
        node = node[key]
        if not isinstance(node, dict):
            raise ScenarioError(f"{shown}: {format_path(path[: depth + 1])} is not a table")
    node[path[-1]] = _merge(node.get(path[-1]), value)


def _merge(old: Any, new: Any) -> Any:
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return copy.deepcopy(new)
    if any(k in new and new[k] != old.get(k) for k in _SHAPE_KEYS):
        return copy.deepcopy(new)
    merged = dict(old)
    for key, value in new.items():
        merged[key] = _merge(old.get(key), value)
    return merged


def combine(*layers: Iterable[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Several layers of overrides (`key=value` strings or {path: value}) as one mapping,
    applied in order, so a later layer wins over an earlier one."""
    out: dict[str, Any] = {}
    for layer in layers:
        for path, value in normalize(layer):
            key = format_path(path)
            out.pop(key, None)  # keep the order of application: re-setting moves it last
            out[key] = value
    return out
