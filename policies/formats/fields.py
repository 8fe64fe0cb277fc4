"""One table per format: each upstream field (its path in the agent's document) beside the
`[policy]` key it sets, its type, range and upstream default. Reading walks the document
against the table (an unknown key or a bad value is one `FormatError` naming the field's
path in the document); writing walks the table the other way.

A field whose `param` is None is upstream's and accepted (validated where it has a type), but
colosim does not model it; `kind="any"` accepts a whole subtree as it is (sections colosim
does not model at all, such as resctrlQOS).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from policies.policy import Param, PolicyError

Kind = Literal["int", "float", "bool", "flag", "str", "strs", "any"]
_TYPE_WORD = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "flag": "0 or 1",
    "str": "a string",
    "strs": "a list of strings",
}


class FormatError(PolicyError):
    """A field of an agent's configuration file is unknown or invalid; the message names the
    field by its path in the file (e.g. spec.cpuBurstStrategy.cpuBurstPercent)."""


@dataclass(frozen=True)
class Field:
    """One upstream field. `path` is relative to the section the table describes; `param`
    is the dotted `[policy]` key it maps to (None: upstream's, not modelled); `default` is
    upstream's (None: upstream has none, the policy's own default stands); `scale` is how
    many upstream units one policy unit is (rubik's syncInterval is ms, ours s)."""

    path: str
    param: str | None
    kind: Kind
    low: float | None = None
    high: float | None = None
    default: Any = None
    choices: tuple[str, ...] = ()
    scale: float = 1

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.path.split("."))

    def check(self, value: Any, where: str) -> Any:
        """The value as upstream validates it, else FormatError naming `where`."""
        if self.kind == "any":
            return value
        ok = {
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
            "bool": lambda v: isinstance(v, bool),
            "flag": lambda v: v in (0, 1) and not isinstance(v, bool),
            "str": lambda v: isinstance(v, str),
            "strs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        }[self.kind](value)
        if not ok:
            raise FormatError(f"{where}: must be {_TYPE_WORD[self.kind]} (got {value!r})")
        for item in value if self.kind == "strs" else [value] if self.kind == "str" else []:
            if self.choices and item not in self.choices:
                raise FormatError(f"{where}: must be one of {', '.join(self.choices)} (got {item!r})")
        if self.low is not None and value < self.low or self.high is not None and value > self.high:
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            raise FormatError(f"{where}: must be in [{lo}, {hi}] (got {value!r})")
        return value

    def to_param(self, value: Any) -> Any:
        if self.kind == "flag":
            return bool(value)
        if self.scale != 1:
            return value / self.scale
        return value

    def to_upstream(self, value: Any) -> Any:
        if self.kind == "flag":
            return int(bool(value))
        if self.kind == "int":
            return int(round(value * self.scale))  # Go's int fields refuse 60.0
        return value * self.scale if self.scale != 1 else value


def _lookup(doc: Mapping[str, Any], key: str, fold: bool) -> str | None:
    """The document's spelling of `key` (Go's encoding/json matches keys case-insensitively,
    which rubik relies on: avg10threshold and avg10Threshold both work)."""
    if key in doc:
        return key
    if fold:
        return next((k for k in doc if isinstance(k, str) and k.lower() == key.lower()), None)
    return None


def read(doc: Any, fields: Sequence[Field], where: str, fold: bool = False, params: Sequence[Param] = ()) -> dict[str, Any]:
    """`{param: value}` for every mapped field (upstream's default where the document leaves
    it out and upstream has one); unknown keys and bad values raise FormatError. `params`
    are the policy's: a value upstream takes but outside what the policy models is refused
    here too, by the field's path."""
    ranges = {p.name: p for p in params}
    tree: dict[str, Any] = {}
    for f in fields:
        node = tree
        for k in f.keys[:-1]:
            node = node.setdefault(k, {})
        node[f.keys[-1]] = f
    _check_known(doc, tree, where, fold)
    out: dict[str, Any] = {}
    for f in fields:
        value, found = get(doc, f.keys, fold)
        if found:
            value = f.check(value, f"{where}.{f.path}" if where else f.path)
        elif f.default is not None:
            value = f.default
        else:
            continue
        if f.param is None:
            continue
        out[f.param] = f.to_param(value)
        p = ranges.get(f.param)
        if found and p is not None and not p.low <= out[f.param] <= p.high:
            shown = f"{where}.{f.path}" if where else f.path
            lo, hi = f.to_upstream(p.low), f.to_upstream(p.high)
            raise FormatError(f"{shown}: colosim models [{lo:g}, {hi:g}] of it (got {value!r})")
    return out


def _check_known(doc: Any, tree: Mapping[str, Any], where: str, fold: bool) -> None:
    if not isinstance(doc, Mapping):
        raise FormatError(f"{where or 'the document'}: must be a mapping of {', '.join(tree)}")
    for key, value in doc.items():
        here = f"{where}.{key}" if where else str(key)
        match = _lookup(tree, str(key), fold)
        if match is None:
            raise FormatError(f"{here}: unknown field (known here: {', '.join(tree)})")
        sub = tree[match]
        if isinstance(sub, Field):
            continue  # a leaf: its value is checked against its Field
        if value is None:
            continue  # `key:` with nothing under it, as YAML writes an empty section
        _check_known(value, sub, here, fold)


def get(doc: Any, keys: Sequence[str], fold: bool = False) -> tuple[Any, bool]:
    node = doc
    for k in keys:
        if not isinstance(node, Mapping):
            return None, False
        match = _lookup(node, k, fold)
        if match is None:
            return None, False
        node = node[match]
    return node, node is not None


def put(doc: dict[str, Any], keys: Sequence[str], value: Any) -> None:
    node = doc
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value


def write(table: Mapping[str, Any], fields: Sequence[Field], skip: Callable[[Field, Any], bool] = lambda f, v: False) -> dict[str, Any]:
    """The upstream document of every mapped field the (dotted-key) `table` has."""
    out: dict[str, Any] = {}
    for f in fields:
        if f.param is None or f.param not in table:
            continue
        value = table[f.param]
        if skip(f, value):
            continue
        put(out, f.keys, f.to_upstream(value))
    return out


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{"memory_qos.LS.enable": true} → {"memory_qos": {"LS": {"enable": true}}}."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        put(out, key.split("."), value)
    return out


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The inverse of `nest`, for the keys a table of fields names (tables below are opened)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


__all__ = ["Field", "FormatError", "flatten", "get", "nest", "put", "read", "write"]
