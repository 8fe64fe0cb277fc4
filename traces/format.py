"""The one trace format: per entity (a container, pod or service, or the whole node), a time
series of CPU used (cores), memory used (bytes) and, for services, the request rate; its role
and, where known, its requests and limits.

On disk it is one long table, a row per entity and sample, with these columns (units in the
names; a column not listed is an error, so a file in other units is refused, not misread):

    entity          text     the entity's id (the source's, kept for traceability)
    role            text     online | offline | node (the machine as a whole) | system
    time_s          number   seconds since the trace's start; strictly increasing per entity
    cpu_cores       number   CPU used, in cores (>= 0)
    memory_bytes    number   memory used, bytes (>= 0; empty: unknown)
    rate_per_s      number   requests per second (>= 0; empty: not a service, or unknown)
    cpu_request, cpu_limit            cores  (empty: not known)     — constant per entity
    memory_request, memory_limit      bytes  (empty: not known)     — constant per entity

Parquet (`.parquet`) for real traces, CSV (`.csv`, a header row) for small hand-made ones.
Loading validates everything and names the file, the row (1-based, the header is row 1 in a
CSV) and the column of the first problem.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import ScenarioError

if TYPE_CHECKING:
    import pyarrow as pa

ROLES = ("online", "offline", "node", "system")
REQUIRED = ("entity", "role", "time_s", "cpu_cores")
SERIES = ("cpu_cores", "memory_bytes", "rate_per_s")
CONSTANTS = ("cpu_request", "cpu_limit", "memory_request", "memory_limit")
COLUMNS = ("entity", "role", "time_s", *SERIES, *CONSTANTS)


class TraceError(ScenarioError):
    """A trace file cannot be used; the message names file, row and column."""


@dataclass
class Entity:
    name: str
    role: str
    t_s: np.ndarray
    cpu_cores: np.ndarray
    memory_bytes: np.ndarray | None = None  # NaN where unknown
    rate_per_s: np.ndarray | None = None
    cpu_request: float | None = None
    cpu_limit: float | None = None
    memory_request: float | None = None
    memory_limit: float | None = None

    def __len__(self) -> int:
        return len(self.t_s)


@dataclass
class Trace:
    entities: dict[str, Entity] = field(default_factory=dict)
    source: str = ""

    def add(self, e: Entity) -> None:
        self.entities[e.name] = e

    def role(self, role: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.role == role]

    @property
    def duration_s(self) -> float:
        ends = [float(e.t_s[-1]) for e in self.entities.values() if len(e)]
        return max(ends) if ends else 0.0

    # -- rows ------------------------------------------------------------------------

    def rows(self) -> list[dict[str, object]]:
        out = []
        for e in self.entities.values():
            for i in range(len(e)):
                row: dict[str, object] = {"entity": e.name, "role": e.role, "time_s": float(e.t_s[i]), "cpu_cores": float(e.cpu_cores[i])}
                for col in ("memory_bytes", "rate_per_s"):
                    v = getattr(e, col)
                    row[col] = None if v is None or math.isnan(v[i]) else float(v[i])
                for col in CONSTANTS:
                    row[col] = getattr(e, col)
                out.append(row)
        return out

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], where: Callable[[int, str], str], source: str = "") -> Trace:
        """Validate rows (dicts of column → value or None; numbers already numbers) and
        group them by entity; `where(i, column)` names a row for messages."""
        grouped: dict[str, dict[str, list[float]]] = {}
        meta: dict[str, dict[str, Any]] = {}
        for i, row in enumerate(rows):
            name = row.get("entity")
            if not isinstance(name, str) or not name:
                raise TraceError(f"{where(i, 'entity')}: empty entity")
            role = row.get("role")
            if role not in ROLES:
                raise TraceError(f"{where(i, 'role')}: role must be one of {', '.join(ROLES)} (got {role!r})")
            for col in ("time_s", *SERIES, *CONSTANTS):
                v = row.get(col)
                if v is None:
                    if col in REQUIRED:
                        raise TraceError(f"{where(i, col)}: missing value")
                    continue
                if not math.isfinite(v) or v < 0:
                    raise TraceError(f"{where(i, col)}: must be a finite number >= 0 (got {v!r})")
            g = grouped.setdefault(name, {c: [] for c in ("time_s", *SERIES)})
            m = meta.setdefault(name, {"role": role, **{c: row.get(c) for c in CONSTANTS}, "first": i})
            if m["role"] != role:
                raise TraceError(f"{where(i, 'role')}: entity {name!r} changes role ({m['role']} before, {role} here)")
            for c in CONSTANTS:
                if row.get(c) != m[c]:
                    raise TraceError(
                        f"{where(i, c)}: {c} of entity {name!r} must be the same on every row ({m[c]!r} before, {row.get(c)!r} here)"
                    )
            if g["time_s"] and row["time_s"] <= g["time_s"][-1]:
                why = "duplicate" if row["time_s"] == g["time_s"][-1] else "going back"
                raise TraceError(
                    f"{where(i, 'time_s')}: timestamp {row['time_s']:g} of entity {name!r} is {why} (previous {g['time_s'][-1]:g}); times must increase"
                )
            for c in ("time_s", *SERIES):
                v = row.get(c)
                g[c].append(math.nan if v is None else float(v))
        trace = cls(source=source)
        for name, g in grouped.items():
            m = meta[name]
            series = {c: np.array(g[c], dtype=float) for c in SERIES}
            trace.add(
                Entity(
                    name,
                    str(m["role"]),
                    np.array(g["time_s"], dtype=float),
                    series["cpu_cores"],
                    None if np.isnan(series["memory_bytes"]).all() else series["memory_bytes"],
                    None if np.isnan(series["rate_per_s"]).all() else series["rate_per_s"],
                    *(None if m[c] is None else float(m[c]) for c in CONSTANTS),
                )
            )
        return trace

    # -- files -----------------------------------------------------------------------

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        rows = self.rows()
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.table({c: [r[c] for r in rows] for c in COLUMNS}, schema=_schema())
            pq.write_table(table, path)
        elif path.suffix == ".csv":
            with path.open("w", newline="") as f:
                w = csv.writer(f)
                w.writerow(COLUMNS)
                for r in rows:
                    w.writerow(["" if r[c] is None else (repr(r[c]) if isinstance(r[c], float) else r[c]) for c in COLUMNS])
        else:
            raise TraceError(f"{path}: a trace file ends in .parquet or .csv")
        return path


def _schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([("entity", pa.string()), ("role", pa.string())] + [(c, pa.float64()) for c in COLUMNS[2:]])


def read(path: str | Path) -> Trace:
    """A trace from a .parquet or .csv file, validated."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.suffix == ".csv":
        return _read_csv(path)
    if path.suffix == ".parquet":
        return _read_parquet(path)
    raise TraceError(f"{path}: a trace file ends in .parquet or .csv")


def _check_header(path: Path, names: list[str]) -> None:
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise TraceError(f"{path}: unknown column {unknown[0]!r} (columns: {', '.join(COLUMNS)}; units are in the names)")
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise TraceError(f"{path}: missing column {missing[0]!r}")


def _read_csv(path: Path) -> Trace:
    with path.open(newline="") as f:
        reader = csv.reader(f)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise TraceError(f"{path}: empty file (a header row is needed)") from None
        _check_header(path, header)
        rows = []
        for n, cells in enumerate(reader, start=2):
            if len(cells) != len(header):
                raise TraceError(f"{path} row {n}: {len(cells)} cells for {len(header)} columns")
            row: dict[str, object] = {}
            for col, cell in zip(header, cells, strict=True):
                cell = cell.strip()
                if col in ("entity", "role"):
                    row[col] = cell
                elif cell == "":
                    row[col] = None
                else:
                    try:
                        row[col] = float(cell)
                    except ValueError:
                        raise TraceError(f"{path} row {n}, column {col}: not a number ({cell!r})") from None
            rows.append(row)
    return Trace.from_rows(rows, lambda i, c: f"{path} row {i + 2}, column {c}", source=str(path))


def _read_parquet(path: Path) -> Trace:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as err:  # noqa: BLE001 - pyarrow's many error types: one message
        raise TraceError(f"{path}: not a readable Parquet file ({err})") from None
    _check_header(path, table.column_names)
    cols = {}
    for c in table.column_names:
        values = table.column(c).to_pylist()
        if c not in ("entity", "role"):
            for i, v in enumerate(values):
                if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                    raise TraceError(f"{path} row {i + 1}, column {c}: not a number ({v!r})")
            values = [None if v is None else float(v) for v in values]
        cols[c] = values
    n = table.num_rows
    rows = [{c: cols[c][i] for c in cols} for i in range(n)]
    return Trace.from_rows(rows, lambda i, c: f"{path} row {i + 1}, column {c}", source=str(path))
