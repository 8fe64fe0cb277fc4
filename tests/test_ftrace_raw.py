"""replay.ftrace_raw and runqlat.SchedEvents: the ring buffer's raw pages, decoded.

Pages are built here byte by byte as kernel/trace/ring_buffer.c lays them out (the header
this host's events/header_page describes, the compressed event headers of
events/header_event), with payloads laid out by the sched events' `format` files of this host
(Linux 6.18.44, copied below). The decoded events are checked against the times and fields
worked by hand, and fed to the Accumulator beside the same events as trace_pipe prints them:
both must give the same figures.
"""

from __future__ import annotations

import struct

import pytest

from replay.ftrace_raw import MISSED_EVENTS, MISSED_STORED, PageLayout, decode_page, page_layout, parse_format
from replay.runqlat import Accumulator, SchedEvents, report_mask
from sim.runqlat import bucket

HEADER_PAGE = """\
\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
"""

COMMON = """\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
"""

SWITCH_FORMAT = (
    "name: sched_switch\nID: 372\nformat:\n"
    + COMMON
    + """
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", \
REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | \
0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state \
& ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) \
<< 1) - 1), "|", { 0x00000001, "S" }, { 0x00000002, "D" }) : "R", REC->prev_state & (((0x00000000 | 0x00000001) + 1) << 1) ? "+" : ""
"""
)


def wakeup_format(name: str, ident: int) -> str:
    return (
        f"name: {name}\nID: {ident}\nformat:\n"
        + COMMON
        + """
\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;

print fmt: "comm=%s pid=%d prio=%d target_cpu=%03d", REC->comm, REC->pid, REC->prio, REC->target_cpu
"""
    )


FORK_FORMAT = (
    "name: sched_process_fork\nID: 366\nformat:\n"
    + COMMON
    + """
\tfield:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] child_comm;\toffset:16;\tsize:4;\tsigned:0;
\tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;

print fmt: "comm=%s pid=%d child_comm=%s child_pid=%d", __get_str(parent_comm), REC->parent_pid
"""
)

FORMATS = {
    f.name: f
    for f in map(parse_format, (SWITCH_FORMAT, wakeup_format("sched_wakeup", 374), wakeup_format("sched_wakeup_new", 373), FORK_FORMAT))
}
R, S, R_PLUS = 0, 1, 0x100  # prev_state: runnable, asleep, preempted (TASK_REPORT_MAX)


def switch(prev: int, state: int, nxt: int) -> bytes:
    b = bytearray(64)
    struct.pack_into("<H", b, 0, 372)
    b[8:12] = b"prev"
    struct.pack_into("<i", b, 24, prev)
    struct.pack_into("<q", b, 32, state)
    b[40:44] = b"next"
    struct.pack_into("<i", b, 56, nxt)
    return bytes(b)


def wakeup(pid: int, target: int, new: bool = False) -> bytes:
    b = bytearray(36)
    struct.pack_into("<H", b, 0, 373 if new else 374)
    struct.pack_into("<ii", b, 24, pid, 120)
    struct.pack_into("<i", b, 32, target)
    return bytes(b)


def fork(parent: int, child: int) -> bytes:
    b = bytearray(24)
    struct.pack_into("<H", b, 0, 366)
    struct.pack_into("<i", b, 12, parent)
    struct.pack_into("<i", b, 20, child)
    return bytes(b)


def event(delta: int, payload: bytes) -> bytes:
    """A data event: type_len = payload words up to 28 (112 bytes), else 0 with the length."""
    assert len(payload) % 4 == 0
    if len(payload) <= 112:
        return struct.pack("<I", (delta << 5) | (len(payload) // 4)) + payload
    return struct.pack("<II", delta << 5, len(payload) + 4) + payload


def extend(delta: int) -> bytes:
    return struct.pack("<II", ((delta & ((1 << 27) - 1)) << 5) | 30, delta >> 27)


def padding(delta: int, length: int) -> bytes:
    return struct.pack("<II", (delta << 5) | 29, length) + bytes(length - 4)


def page(ts: int, *records: bytes, missed: int | None = None, size: int = 4096) -> bytes:
    data = b"".join(records)
    commit = len(data)
    tail = b""
    if missed is not None:
        commit |= MISSED_EVENTS | MISSED_STORED
        tail = struct.pack("<Q", missed)
    body = struct.pack("<Qq", ts, commit) + data + tail
    return body + bytes(size - len(body))


def test_the_page_header_is_read_from_header_page():
    assert page_layout(HEADER_PAGE) == PageLayout()
    shifted = HEADER_PAGE.replace("offset:16;", "offset:24;")
    assert page_layout(shifted).data == 24


def test_a_page_decodes_to_its_events_at_their_times():
    big = struct.pack("<H", 999) + bytes(118)  # 120 bytes: beyond 112, so type_len 0
    p = page(
        1_000_000_000,
        event(1000, switch(10, S, 11)),  # 1,000,001,000
        extend(3 << 27 | 5),  # + 402,653,189
        event(10, wakeup(12, 1)),  # 1,402,654,199
        padding(77, 16),  # a discarded event: its delta does not count
        event(1, big),  # 1,402,654,200
        struct.pack("<I", 29),  # a null padding: the rest of the page is empty
        event(5, switch(1, R, 2)),  # never read
    )
    got = decode_page(p)
    assert got.missed == 0
    assert [t for t, _, _ in got.events] == [1_000_001_000, 1_402_654_199, 1_402_654_200]
    (_, s0, e0), (_, s1, e1), (_, s2, e2) = got.events
    assert e0 - s0 == 64 and p[s0 + 24 : s0 + 28] == struct.pack("<i", 10)
    assert e1 - s1 == 36 and p[s1 + 24 : s1 + 28] == struct.pack("<i", 12)
    assert e2 - s2 == 120 and p[s2 : s2 + 2] == struct.pack("<H", 999)


def test_missed_events_are_counted_where_the_page_stores_them():
    assert decode_page(page(0, event(1, wakeup(1, 0)), missed=37)).missed == 37
    unstored = bytearray(page(0, event(1, wakeup(1, 0))))
    struct.pack_into("<q", unstored, 8, 40 | MISSED_EVENTS)
    assert decode_page(bytes(unstored)).missed == -1


def test_a_page_that_does_not_hold_together_is_refused():
    bad = bytearray(page(0, event(1, wakeup(1, 0))))
    struct.pack_into("<q", bad, 8, 5000)  # more data than a 4 KiB page holds
    with pytest.raises(ValueError, match="commits 5000 bytes"):
        decode_page(bytes(bad))
    with pytest.raises(ValueError, match="shorter than its header"):
        decode_page(b"\0" * 8)


def test_the_formats_give_the_fields_and_the_runnable_mask():
    sw = FORMATS["sched_switch"]
    assert sw.id == 372 and sw.fields["prev_state"].offset == 32 and sw.fields["prev_state"].size == 8
    assert sw.fields["next_pid"].offset == 56 and sw.fields["prev_comm"].size == 16
    assert FORMATS["sched_process_fork"].fields["child_pid"].offset == 20
    # TASK_REPORT 0x7f: ((0x7f + 1) << 1) - 1
    assert report_mask(sw.print_fmt) == 0xFF
    assert report_mask("no mask here") == 0xFF
    with pytest.raises(ValueError, match="no name"):
        parse_format("format:\n")


def text_line(cpu: int, us: int, what: str) -> str:
    return f"           x-1     [{cpu:03d}] d..2. {us // 1_000_000}.{us % 1_000_000:06d}: {what}"


def test_raw_pages_feed_the_accumulator_as_their_text_does():
    # CPU 0: task 10 wakes 20 onto CPU 1 at 100 µs, then blocks; CPU 1: 30 is preempted for 20 at
    # 150 µs (a 50 µs wait on a busy CPU), 20 forks 21 and blocks at 400, 30 runs again (a 250 µs
    # wait after preemption); CPU 0 wakes 21 onto CPU 0 at 450 and runs it at 460 (idle CPU)
    groups = {20: "svc", 21: "svc", 30: "hog"}.get
    raw = {
        0: [
            page(
                100_000,
                event(0, switch(0, R, 10)),
                event(0, wakeup(20, 1)),
                event(10_000, switch(10, S, 0)),
                event(340_000, wakeup(21, 0, new=True)),
                event(10_000, switch(0, R, 21)),
            )
        ],
        1: [
            page(
                50_000,
                event(0, switch(0, R, 30)),
                event(100_000, switch(30, R_PLUS, 20)),
                event(200_000, fork(20, 21)),
                event(50_000, switch(20, S, 30)),
            )
        ],
    }
    text = [
        text_line(1, 50, "sched_switch: prev_comm=swapper prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=h next_pid=30 next_prio=120"),
        text_line(
            0, 100, "sched_switch: prev_comm=swapper prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=10 next_prio=120"
        ),
        text_line(0, 100, "sched_wakeup: comm=s pid=20 prio=120 target_cpu=001"),
        text_line(
            0, 110, "sched_switch: prev_comm=a prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=swapper next_pid=0 next_prio=120"
        ),
        text_line(1, 150, "sched_switch: prev_comm=h prev_pid=30 prev_prio=120 prev_state=R+ ==> next_comm=s next_pid=20 next_prio=120"),
        text_line(1, 350, "sched_process_fork: comm=s pid=20 child_comm=s child_pid=21"),
        text_line(1, 400, "sched_switch: prev_comm=s prev_pid=20 prev_prio=120 prev_state=S ==> next_comm=h next_pid=30 next_prio=120"),
        text_line(0, 450, "sched_wakeup_new: comm=s pid=21 prio=120 target_cpu=000"),
        text_line(
            0, 460, "sched_switch: prev_comm=swapper prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=s next_pid=21 next_prio=120"
        ),
    ]
    from_raw, from_text = Accumulator(groups), Accumulator(groups)
    events = SchedEvents(FORMATS)
    events.feed(from_raw, raw)
    for line in text:
        from_text.feed(line)
    assert events.unparsed == 0 and from_text.unparsed == 0
    assert from_raw.figures() == from_text.figures()
    svc, hog = from_raw.figures()["svc"], from_raw.figures()["hog"]
    # wakeups: 20 after 50 µs onto busy CPU 1 (30 ran there), 21 after 10 µs onto idle CPU 0
    assert svc.count == 2 and svc.busy_count == 1
    assert svc.hist[bucket(50)] == 1 and svc.busy_hist[bucket(50)] == 1 and svc.hist[bucket(10)] == 1
    # 20 ran 150 → 400 and blocked; 30 ran 50 → 150, was preempted, waited 250 µs
    assert svc.sleeps == 1 and svc.blocked_hist[bucket(250)] == 1
    assert hog.preempted_hist[bucket(100)] == 1 and hog.preempted_wait_hist[bucket(250)] == 1


def test_counting_afresh_from_the_mark_and_after_lost_events():
    groups = {20: "svc"}.get
    raw = {
        0: [
            # a wakeup run 5 µs later; it sleeps at 7 µs and is woken again at 8
            page(
                1_000, event(0, wakeup(20, 0)), event(5_000, switch(0, R, 20)), event(1_000, switch(20, S, 0)), event(1_000, wakeup(20, 0))
            ),
            # 10 events lost before this page: the wakeup pending across the gap is not counted
            page(100_000, event(0, switch(0, R, 20)), event(1_000, switch(20, S, 0)), event(1_000, wakeup(20, 0)), missed=10),
            page(200_000, event(0, switch(0, R, 20))),
        ]
    }
    acc = Accumulator(groups)
    SchedEvents(FORMATS).feed(acc, raw)
    f = acc.figures()["svc"]
    assert f.count == 2 and f.hist[bucket(5)] == 1 and f.hist[bucket(98)] == 1 and f.lost == 10 and f.sleeps == 2
    marked = Accumulator(groups)
    SchedEvents(FORMATS).feed(marked, raw, since_us=150)
    g = marked.figures()["svc"]
    # counted from 150 µs: the wakeup at 102 µs still counts when it runs at 200
    assert g.count == 1 and g.hist[bucket(98)] == 1 and g.lost == 0 and g.sleeps == 0
