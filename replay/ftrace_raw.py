"""The ftrace ring buffer's binary pages (tracefs per_cpu/cpuN/trace_pipe_raw), decoded.

Why not trace_pipe's text: the kernel formats every event as text in the reader's context, and
the reader then parses it. Measured on this 2-CPU host beside nginx + wrk (46 k sched events a
second): 3.7 µs an event to read the text and 12 µs to parse it in Python, 0.8 of the node's
CPUs taken from the very run being traced (its QPS fell from ~35 k to ~25 k, and the replay
counted the reader as "other tenants"). A raw page is one read of 4 KiB holding ~60 events and
nothing is formatted; the pages are kept as bytes and decoded after the run.

The layout (kernel/trace/ring_buffer.c; tracefs's events/header_page and events/header_event
describe it, and `page_layout` reads the former):

* A page (a sub-buffer: `buffer_subbuf_size_kb`, one page by default) starts with its header:
  u64 `timestamp` (the clock of its first event), local_t `commit` (bytes of event data on the
  page; bit 31 RB_MISSED_EVENTS: events were lost before this page, bit 30 RB_MISSED_STORED:
  their count follows the data, as an unsigned long), then the data.
* An event starts with a u32: `type_len` in its low 5 bits, `time_delta` (ns since the last
  event) in the high 27. type_len 1..28: 4 × type_len bytes of payload follow. 0: the next u32
  is the payload's length + 4, and the payload follows it. 29: padding, or a discarded event
  (time_delta 0: the rest of the page is empty; else the next u32 is its length; its delta does
  not move the clock). 30: time extend, the delta is
  (next u32 << 27) + time_delta. 31: an absolute time stamp, (next u32 << 27) + time_delta.
* A payload is the event's record as its `format` file lays it out (`EventFormat`): common_type
  (its id) at offset 0, then the fields at their offsets.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

TYPE_DATA_MAX = 28
TYPE_PADDING = 29
TYPE_TIME_EXTEND = 30
TYPE_TIME_STAMP = 31
MISSED_EVENTS = 1 << 31
MISSED_STORED = 1 << 30
MISSED_MASK = MISSED_EVENTS | MISSED_STORED

_U32 = struct.Struct("<I")
_FIELD = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d);")


@dataclass(frozen=True)
class Field:
    offset: int
    size: int
    signed: bool


@dataclass(frozen=True)
class PageLayout:
    """Where a page's header fields are (events/header_page)."""

    timestamp: Field = Field(0, 8, False)
    commit: Field = Field(8, 8, True)
    data: int = 16


@dataclass(frozen=True)
class EventFormat:
    """One event's `format` file: its name, id and fields (name -> offset, size, signed)."""

    name: str
    id: int
    fields: dict[str, Field]
    print_fmt: str

    def reader(self, name: str) -> struct.Struct:
        """A struct reading field `name` (an integer) at its offset in a payload."""
        f = self.fields.get(name)
        if f is None or f.size not in (1, 2, 4, 8):
            raise ValueError(f"event {self.name}: no integer field {name!r}")
        code = {1: "b", 2: "h", 4: "i", 8: "q"}[f.size]
        return struct.Struct("<" + "x" * f.offset + (code if f.signed else code.upper()))


# the 64-bit layout (this host's events/header_page)
LAYOUT_64 = PageLayout()


def _fields(text: str) -> dict[str, Field]:
    out = {}
    for m in _FIELD.finditer(text):
        decl = m["decl"].strip()
        name = decl.split()[-1].split("[")[0]
        out[name] = Field(int(m["offset"]), int(m["size"]), m["signed"] == "1")
    return out


def parse_format(text: str) -> EventFormat:
    """An event's tracefs `format` file ("name: ...", "ID: ...", field lines, "print fmt: ...")."""
    name = re.search(r"^name:\s*(\S+)", text, re.M)
    ident = re.search(r"^ID:\s*(\d+)", text, re.M)
    if name is None or ident is None:
        raise ValueError("not an event format file (no name: or ID: line)")
    fmt = re.search(r"^print fmt:\s*(.*)$", text, re.M)
    return EventFormat(name[1], int(ident[1]), _fields(text), fmt[1] if fmt else "")


def page_layout(text: str) -> PageLayout:
    """events/header_page; the 64-bit layout where a field is missing."""
    f = _fields(text)
    d = PageLayout()
    return PageLayout(f.get("timestamp", d.timestamp), f.get("commit", d.commit), f["data"].offset if "data" in f else d.data)


def _uint(page: bytes, f: Field) -> int:
    return int.from_bytes(page[f.offset : f.offset + f.size], "little")


@dataclass
class Page:
    """One page's events as (time ns, payload start, payload end) into `data`, and how many
    events were lost before it (-1: some, uncounted)."""

    data: bytes
    events: list[tuple[int, int, int]]
    missed: int


def decode_page(page: bytes, layout: PageLayout = LAYOUT_64) -> Page:
    """The events of one raw page, their times absolute (the page's timestamp plus the deltas).
    Raises ValueError on a page that does not hold together."""
    if len(page) < layout.data:
        raise ValueError(f"a raw page of {len(page)} bytes is shorter than its header ({layout.data})")
    ts = _uint(page, layout.timestamp)
    commit = _uint(page, layout.commit)
    size = commit & ~MISSED_MASK & 0xFFFFFFFF
    end = layout.data + size
    if end > len(page):
        raise ValueError(f"a raw page commits {size} bytes of data but holds {len(page) - layout.data}")
    missed = 0
    if commit & MISSED_EVENTS:
        missed = -1
        if commit & MISSED_STORED and end + 8 <= len(page):
            missed = int.from_bytes(page[end : end + 8], "little")
    events = []
    i = layout.data
    while i + 4 <= end:
        (head,) = _U32.unpack_from(page, i)
        kind, delta = head & 0x1F, head >> 5
        if kind == TYPE_PADDING:
            if delta == 0:
                break  # the rest of the page is empty
            (length,) = _U32.unpack_from(page, i + 4)
            i += 4 + length  # a discarded event: its delta is not the clock's (rb_update_read_stamp)
        elif kind == TYPE_TIME_EXTEND:
            (hi,) = _U32.unpack_from(page, i + 4)
            ts += (hi << 27) + delta
            i += 8
        elif kind == TYPE_TIME_STAMP:
            (hi,) = _U32.unpack_from(page, i + 4)
            ts = (hi << 27) + delta
            i += 8
        elif kind == 0:
            (length,) = _U32.unpack_from(page, i + 4)
            if length < 4:
                raise ValueError(f"a raw event at byte {i} has length {length}")
            ts += delta
            events.append((ts, i + 8, i + 4 + length))
            i += 4 + length
        else:
            ts += delta
            events.append((ts, i + 4, i + 4 + 4 * kind))
            i += 4 + 4 * kind
    if i > end:
        raise ValueError(f"a raw event runs {i - end} bytes past the page's data")
    return Page(page, events, missed)
