"""The probe (replay/probe.py) against hand-made /proc text and a hand-made /proc tree: each
figure is worked out by hand from the text below."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from replay.probe import (
    Probe,
    Watch,
    parse_autogroup,
    parse_cpu_cgroup,
    parse_migrations,
    parse_sched_debug,
    parse_schedstat,
    parse_stat,
    parse_switches,
    sched_debug_lags,
)

# /proc/TID/stat of a thread whose comm has a space and a ')' in it: the fields after the
# last ')' are 3 (state) .. 52; session is field 6, processor field 39.
STAT = (
    "4242 (clickhouse (x) 1) R 4200 4200 4100 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 30 0 1123628 5251072 951 "
    "18446744073709551615 1 1 0 0 0 0 65536 4 1132560123 1 0 0 17 1 0 0 0 0 0 1 1 1 1 1 1 1 0"
)

SCHED = """\
clickhouse-serv (4242, #threads: 30)
-------------------------------------------------------------------
se.exec_start                                :      11487540.898023
se.vruntime                                  :         14239.385455
se.sum_exec_runtime                          :            59.692481
se.nr_migrations                             :                   32
nr_switches                                  :                  241
nr_voluntary_switches                        :                  200
nr_involuntary_switches                      :                   41
se.load.weight                               :              1048576
"""

STATUS = """\
Name:\tclickhouse-serv
Tgid:\t4200
Pid:\t4242
voluntary_ctxt_switches:\t7
nonvoluntary_ctxt_switches:\t3
"""

SCHED_DEBUG = """\
Sched Debug Version: v0.11, 6.18.44
cpu#0, 2599.998 MHz
  .nr_running                    : 3

cfs_rq[0]:/colosim-x
  .avg_vruntime                  : 1000.500000
  .se->vruntime                  : 77.000000

cfs_rq[0]:/colosim-x/offline
  .avg_vruntime                  : 5.000000
  .se->vruntime                  : 990.250000
  .load                          : 1048576
  .load_avg                      : 10240
  .tg_load_avg_contrib           : 10240
  .tg_load_avg                   : 10300
  .h_nr_runnable                 : 10
  .se->load.weight               : 1047552
  .se->avg.load_avg              : 1016

rt_rq[0]:
  .rt_nr_running                 : 0

cfs_rq[1]:/autogroup-12
  .load_avg                      : 5
  .se->load.weight               : 1048576
"""


def test_schedstat_is_run_wait_slices():
    assert parse_schedstat("104101 45298 2\n") == (104101, 45298, 2)


def test_stat_counts_fields_after_the_last_paren():
    st = parse_stat(STAT)
    assert (st.comm, st.state, st.session, st.processor) == ("clickhouse (x) 1", "R", 4100, 1)


def test_switches_from_sched_and_from_status():
    assert parse_switches(SCHED) == (200, 41)
    assert parse_switches(STATUS) == (7, 3)
    with pytest.raises(ValueError):
        parse_switches("Name: x\n")


def test_migrations_from_sched():
    assert parse_migrations(SCHED) == 32
    with pytest.raises(ValueError):
        parse_migrations(STATUS)


def test_autogroup_and_cpu_cgroup():
    assert parse_autogroup("/autogroup-1924 nice 0\n") == "/autogroup-1924"
    assert parse_autogroup("") == ""
    v1 = "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/colosim-x/online\n0::/\n"
    assert parse_cpu_cgroup(v1) == "/colosim-x/online"
    assert parse_cpu_cgroup("4:cpu,cpuacct:/a\n") == "/a"
    assert parse_cpu_cgroup("0::/user.slice/x\n") == "/user.slice/x"


def test_sched_debug_blocks_end_at_the_next_heading():
    d = parse_sched_debug(SCHED_DEBUG)
    assert set(d) == {(0, "/colosim-x"), (0, "/colosim-x/offline"), (1, "/autogroup-12")}
    # the offline entity's lag on /colosim-x: V - v = 1000.5 - 990.25; the folder's parent
    # (the root) is not in the text: no lag for it
    assert sched_debug_lags(d) == {(0, "/colosim-x/offline"): pytest.approx(10.25)}
    off = {k: v for k, v in d[(0, "/colosim-x/offline")].items() if k not in ("avg_vruntime", "se->vruntime")}
    # se->load.weight 1047552 = 1023 x 1024: scale_load_down -> 1023 shares' worth
    assert off == {
        "load": 1048576,
        "load_avg": 10240,
        "tg_load_avg_contrib": 10240,
        "tg_load_avg": 10300,
        "h_nr_runnable": 10,
        "se->load.weight": 1023,
    }
    assert d[(1, "/autogroup-12")] == {"load_avg": 5, "se->load.weight": 1024}


class FakeProc:
    """A /proc of two threads of one process whose counters the test sets between samples."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for tid in (11, 12):
            d = root / str(tid)
            d.mkdir(parents=True)
            (d / "status").write_text("Name:\tstress\nTgid:\t11\n")
            (d / "cgroup").write_text("1:cpu:/colosim-x/offline\n")
        (root / "11" / "autogroup").write_text("/autogroup-7 nice 0\n")

    def set(self, tid: int, run: int, wait: int, slices: int, vol: int, inv: int, migr: int, cpu: int, state: str = "R") -> None:
        d = self.root / str(tid)
        (d / "schedstat").write_text(f"{run} {wait} {slices}\n")
        fields = [state, "1", "11", "11"] + ["0"] * 32 + [str(cpu)] + ["0"] * 13
        (d / "stat").write_text(f"{tid} (stress) {' '.join(fields)}\n")
        (d / "sched").write_text(f"se.nr_migrations : {migr}\nnr_voluntary_switches : {vol}\nnr_involuntary_switches : {inv}\n")


def test_probe_sums_threads_over_the_marked_window(tmp_path):
    proc = FakeProc(tmp_path / "proc")
    percpu = [[0, 0]]
    probe = Probe(
        {"offline": Watch(tids=lambda: [11, 12], percpu=lambda: percpu[0])},
        ncpus=2,
        proc=proc.root,
        sched_debug=tmp_path / "none",
    )
    probe._t_start = 0.0
    # before the window: counters already running (they must not count)
    proc.set(11, 5_000, 1_000, 3, 1, 1, 1, cpu=0)
    proc.set(12, 7_000, 2_000, 4, 2, 0, 0, cpu=0)
    probe.sample(0.5)
    probe.window_start = 1.0
    proc.set(11, 10_000, 2_000, 5, 2, 2, 1, cpu=0)
    proc.set(12, 10_000, 4_000, 5, 2, 1, 0, cpu=0)
    percpu[0] = [1_000_000_000, 0]
    probe.sample(1.0)
    # one second later: thread 11 ran 0.6 s (CPU 0), waited 0.4 s; 12 ran 0.4 s on CPU 1
    # after one migration, waited 0.6 s
    proc.set(11, 600_010_000, 400_002_000, 9, 5, 12, 1, cpu=0)
    proc.set(12, 400_010_000, 600_004_000, 8, 4, 6, 1, cpu=1)
    percpu[0] = [1_600_000_000, 400_000_000]
    probe._t_end = 2.0
    probe.sample(2.0)
    r = probe.result()
    assert r.window_s == 1.0 and r.samples == 2
    g = r.groups["offline"]
    assert (g.run_s, g.wait_s) == pytest.approx((1.0, 1.0))
    # switches: 11: (5-2)+(12-2) = 13; 12: (4-2)+(6-1) = 7
    assert (g.switches, g.voluntary, g.involuntary, g.migrations, g.timeslices) == (20, 5, 15, 1, 7)
    assert g.cpuacct_s == pytest.approx(1.0) and g.cpuacct_percpu_s == pytest.approx([0.6, 0.4])
    # runnable samples in the window: both on CPU 0 at t=1, then one on each at t=2
    assert g.runnable_on_cpu == [1.5, 0.5]
    t11 = next(t for t in r.threads if t.tid == 11)
    assert (t11.pid, t11.process, t11.autogroup, t11.cgroup, t11.session) == (11, "stress", "/autogroup-7", "/colosim-x/offline", 11)
    # per-CPU CPUs over time between consecutive samples: (t=1 -> 2) CPU 0 0.6, CPU 1 0.4
    assert r.cpu_series["offline"][0][-1] == pytest.approx(0.6)
    assert r.cpu_series["offline"][1][-1] == pytest.approx(0.4)
    assert "offline" in r.table()


def test_a_thread_born_inside_the_window_counts_from_zero(tmp_path):
    proc = FakeProc(tmp_path / "proc")
    tids = [[11]]
    probe = Probe({"g": Watch(tids=lambda: tids[0])}, ncpus=2, hz=10, proc=proc.root, sched_debug=tmp_path / "none")
    probe._t_start = 0.0
    probe.window_start = 0.0
    proc.set(11, 0, 0, 0, 0, 0, 0, cpu=0)
    probe.sample(0.0)
    tids[0] = [11, 12]  # 12 appears 1 s later, having run 0.3 s since it was born
    proc.set(11, 500_000_000, 0, 1, 0, 0, 0, cpu=0)
    proc.set(12, 300_000_000, 100_000_000, 2, 1, 0, 0, cpu=1)
    probe._t_end = 1.0
    probe.sample(1.0)
    r = probe.result()
    assert r.groups["g"].run_s == pytest.approx(0.8)
    assert r.groups["g"].wait_s == pytest.approx(0.1)
    assert math.isnan(r.groups["g"].cpuacct_s)  # not a cgroup of ours: no cpuacct


def test_cpu_figure_draws_each_group_on_each_cpu(tmp_path):
    from replay.probe import cpu_figure

    proc = FakeProc(tmp_path / "proc")
    percpu = [[0, 0]]
    probe = Probe({"offline": Watch(tids=lambda: [11], percpu=lambda: percpu[0])}, ncpus=2, proc=proc.root, sched_debug=tmp_path / "none")
    for i, t in enumerate((0.0, 1.0, 2.0)):
        proc.set(11, i * 10**9, 0, i, 0, 0, 0, cpu=0)
        percpu[0] = [i * 10**9, 0]
        probe.sample(t)
    probe._t_end = 2.0
    fig = cpu_figure({"run": probe.result()})
    assert fig is not None
    assert [tr.name for tr in fig.data] == ["offline CPU 0", "offline CPU 1"]
    assert list(fig.data[0].y) == pytest.approx([1.0, 1.0]) and list(fig.data[1].y) == pytest.approx([0.0, 0.0])
    assert cpu_figure({}) is None


def test_without_proc_sched_switches_come_from_status_and_migrations_are_unknown(tmp_path):
    # a kernel without CONFIG_SCHED_DEBUG has no /proc/TID/sched
    proc = FakeProc(tmp_path / "proc")
    probe = Probe({"g": Watch(tids=lambda: [11])}, ncpus=2, proc=proc.root, sched_debug=tmp_path / "none")
    probe._t_start = probe.window_start = 0.0
    for t, (vol, inv) in ((0.0, (1, 2)), (1.0, (11, 7))):
        proc.set(11, int(t * 1e9), 0, 1, 0, 0, 0, cpu=0)
        (proc.root / "11" / "sched").unlink()
        (proc.root / "11" / "status").write_text(
            f"Name:\tstress\nTgid:\t11\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{inv}\n"
        )
        probe.sample(t)
    probe._t_end = 1.0
    g = probe.result().groups["g"]
    assert (g.voluntary, g.involuntary, g.switches, g.migrations) == (10, 5, 15, -1)
    assert re.search(r"\|\s+-\s+\|", probe.result().table())  # migrations shown as unknown


def test_sched_debug_is_kept_snapshot_by_snapshot_beside_its_means(tmp_path):
    """Two sched/debug snapshots in the window (and one before it, not counted): the means as
    before, and per snapshot the runnable count, the entity's weight and its lag."""
    proc = FakeProc(tmp_path / "proc")
    debug = tmp_path / "sched_debug"
    probe = Probe(
        {"offline": Watch(tids=lambda: [11], paths=("/colosim-x/offline", "/colosim-x"))},
        ncpus=2,
        proc=proc.root,
        sched_debug=debug,
    )
    probe._t_start = 0.0
    proc.set(11, 0, 0, 1, 1, 0, 0, cpu=0)

    def snapshot(t: float, runnable: int, vruntime: float) -> None:
        debug.write_text(
            SCHED_DEBUG.replace(".h_nr_runnable                 : 10", f".h_nr_runnable                 : {runnable}").replace(
                "990.250000", f"{vruntime:.6f}"
            )
        )
        probe.sample(t, debug=True)

    snapshot(0.5, 99, 0.0)  # before the window
    probe.window_start = 1.0
    snapshot(1.0, 10, 990.25)  # lag 1000.5 - 990.25 = 10.25
    probe._t_end = 2.0
    snapshot(2.0, 4, 1002.5)  # lag -2.0
    r = probe.result()
    assert r.sched_debug_snapshots == 2 and r.sched_debug_t_s == [1.0, 2.0]
    series = r.sched_debug_series["[0]:/colosim-x/offline"]
    assert series["h_nr_runnable"] == [10, 4]
    assert series["se lag (ms)"] == pytest.approx([10.25, -2.0])
    assert series["se->load.weight"] == [1023, 1023]
    means = r.sched_debug["[0]:/colosim-x/offline"]
    assert means["h_nr_runnable"] == 7 and means["se lag (ms)"] == pytest.approx(4.125)
    # the folder's queue has no lag (its parent is not in the text): NaN in its series
    assert all(math.isnan(x) for x in r.sched_debug_series["[0]:/colosim-x"]["se lag (ms)"])
    assert "sched_debug_series" in r.to_dict()
