"""Error messages: pydantic's errors turned into the user's dotted paths and plain words."""

from __future__ import annotations

import difflib
import tomllib
from typing import TYPE_CHECKING, Any, get_args

from pydantic import ValidationError

from sim.errors import ScenarioError
from sim.overrides import format_path
from sim.scenario.base import FieldError, FieldErrors, Table, alternatives, show
from sim.scenario.cgroups import Cgroup
from sim.scenario.distributions import Constant, Empirical, Exponential, Lognormal
from sim.scenario.node import Kernel, Topology
from sim.scenario.pods import Kubelet, PodTable, Scheduler
from sim.scenario.workloads import KINDS, SHAPED_KINDS

if TYPE_CHECKING:
    from sim.scenario.document import Scenario


def validate(cls: type[Scenario], document: dict[str, Any], where: str) -> Scenario:
    try:
        return cls.model_validate(document)
    except ValidationError as err:
        messages = [f"{format_path(p) or '(top level)'}: {m}" for p, m in _errors(err, document)]
        raise ScenarioError(where + "; ".join(messages)) from None


def toml_message(source: str, err: tomllib.TOMLDecodeError) -> str:
    # tomllib says "Invalid value (at line 3, column 9)"; lead with the place, as compilers do.
    message = str(err)
    lineno = getattr(err, "lineno", None)  # Python >= 3.14 has it; parse the text before that
    if lineno is None and "(at line " in message:
        message, _, place = message.rpartition(" (at line ")
        line, _, column = place.rstrip(")").partition(", column ")
        return f"{source} line {line}: {message} (column {column})"
    if lineno is not None:
        message = getattr(err, "msg", message)
        return f"{source} line {lineno}: {message} (column {getattr(err, 'colno', '?')})"
    message = message.replace(" (at end of document)", "")
    return f"{source}: {message} (at end of document)"


# The tagged tables: each model's tag is the one value of its discriminator's Literal.
_TAGGED: dict[str, tuple[type[Table], ...]] = {
    "kind": tuple(KINDS.values()),
    "dist": (Constant, Exponential, Lognormal, Empirical),
}
_BY_TAG: dict[str, type[Table]] = {
    get_args(model.model_fields[key].annotation)[0]: model for key, models in _TAGGED.items() for model in models
}
_TAGS = {key: tuple(get_args(m.model_fields[key].annotation)[0] for m in models) for key, models in _TAGGED.items()}
_ALL_TAGS = set(_BY_TAG)


def _document_path(loc: tuple[str | int, ...], document: Any) -> tuple[str | int, ...]:
    """The error's place in the user's document.

    pydantic puts the tag of a discriminated union into the location
    (workloads.web.open_loop.rate); walking the document alongside drops it.  Past a scalar
    (a shorthand like `service = "48ms"`) the rest of the location is pydantic's own.
    """
    out: list[str | int] = []
    node: Any = document
    skipped = False  # a tag never follows a tag
    for part in loc:
        if not skipped and part in _ALL_TAGS:
            if isinstance(node, dict):
                is_tag = any(node.get(key) == part for key in _TAGS)
            else:  # a scalar the shorthand turned into a table
                is_tag = node is not None and not isinstance(node, list)
            if is_tag:
                skipped = True
                continue
        skipped = False
        if isinstance(node, dict):
            out.append(part)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int):
            out.append(part)
            node = node[part] if 0 <= part < len(node) else None
        elif node is None:
            out.append(part)
        else:
            break
    return tuple(out)


def _errors(err: ValidationError, document: Any) -> list[FieldError]:
    out: list[FieldError] = []
    for error in err.errors():
        path = _document_path(error["loc"], document)
        kind, ctx, got = error["type"], error.get("ctx") or {}, error.get("input")
        if kind == "value_error" and isinstance(ctx.get("error"), FieldErrors):
            out.extend((path + rel, message) for rel, message in ctx["error"].errors)
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            key = ctx.get("discriminator", "").strip("'\"")
            tags = alternatives(_TAGS.get(key, ()))
            if kind == "union_tag_invalid":
                out.append((path + (key,), f"must be {tags} (got {show(ctx.get('tag'))})"))
            else:
                out.append((path + (key,), f"required field missing: {tags}"))
        else:
            out.append((path, _describe(kind, ctx, got, error["msg"], path, document)))
    # An unknown field usually explains a missing one beside it (a typo), so it goes first.
    return sorted(out, key=lambda e: not e[1].startswith("unknown field"))


def _describe(kind: str, ctx: dict[str, Any], got: Any, msg: str, path: tuple, document: Any) -> str:
    bounds = {
        "greater_than": (">", "gt"),
        "greater_than_equal": (">=", "ge"),
        "less_than": ("<", "lt"),
        "less_than_equal": ("<=", "le"),
    }
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {show(ctx[key])} (got {show(got)})"
    if kind == "extra_forbidden":
        if len(path) == 3 and path[0] == "cgroups" and isinstance(got, dict):
            return f'unknown field (a child cgroup is declared by its quoted path, e.g. [cgroups."{path[1]}/{path[2]}"])'
        if len(path) == 3 and path[0] == "workloads" and path[2] == "shape":
            table = document.get("workloads", {}).get(path[1], {}) if isinstance(document, dict) else {}
            kind = table.get("kind", "") if isinstance(table, dict) else ""
            return f"a {kind} workload has no requests to shape: a shape is for {alternatives(SHAPED_KINDS)}"
        close = difflib.get_close_matches(str(path[-1]), _fields_at(path[:-1], document), n=1)
        return f'unknown field (did you mean "{close[0]}"?)' if close else "unknown field"
    if kind == "missing":
        return "required field missing"
    if kind == "value_error":
        return str(ctx.get("error", msg)).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"must be {ctx['expected'].replace(chr(39), chr(34))} (got {show(got)})"
    simple = {
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "int_from_float": "must be an integer",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be a string",
        "dict_type": "must be a table",
        "model_type": "must be a table",
        "model_attributes_type": "must be a table",
        "list_type": "must be an array",
        "string_too_short": "must not be empty",
        "finite_number": "must be a finite number",
    }
    if kind in simple:
        return f"{simple[kind]} (got {show(got)})"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} items (got {show(got)})"
    return msg[:1].lower() + msg[1:]


def _fields_at(path: tuple[str | int, ...], document: Any) -> list[str]:
    """Field names of the table at `path`, for "did you mean" hints."""
    from sim.scenario.document import Meta, Run, Scenario

    model: Any = None
    node: Any = document
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    tag = node.get("kind") or node.get("dist") if isinstance(node, dict) else None
    fixed = {"scenario": Meta, "node": Topology, "kernel": Kernel, "kubelet": Kubelet, "scheduler": Scheduler}
    if not path:
        model = Scenario
    elif len(path) == 1:
        model = fixed.get(str(path[0]))
    elif path[0] == "cgroups" and len(path) == 2:
        model = Cgroup
    elif path[0] == "pods" and len(path) == 2:
        model = PodTable
    elif path[0] == "runs" and len(path) == 2:
        model = Run
    elif path[0] == "workloads":
        model = _BY_TAG.get(tag) if isinstance(tag, str) else None
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]
