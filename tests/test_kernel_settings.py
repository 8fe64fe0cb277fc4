"""replay.host_kernel on hand-made kernel text and made-up /proc, /sys and /boot trees: each
source parsed, the sources taken best first, the sysctl_sched_features bitmask decoded in
features.h's order, and the [kernel] overrides a replay's prediction gets."""

from __future__ import annotations

import gzip
import os
import tomllib
from pathlib import Path

import pytest

from replay.host_kernel import (
    FEATURES,
    Paths,
    Sourced,
    decode_features,
    default_base_slice,
    kernel_overrides,
    kernel_toml,
    measure_hz,
    ms_text_to_ns,
    parse_config,
    parse_features,
    parse_preempt,
    parse_sched_debug,
    parse_timer_list_jiffies,
    preempt_from_uname,
    read_host_kernel,
    schema_fields,
)
from sim.scenario import Scenario

CONFIG = """\
#
# Automatically generated file; DO NOT EDIT.
# Linux/x86 6.18.44 Kernel Configuration
#
CONFIG_CC_VERSION_TEXT="gcc (GCC) 13.2.0"
CONFIG_PREEMPT_NONE=y
# CONFIG_PREEMPT_VOLUNTARY is not set
# CONFIG_PREEMPT is not set
# CONFIG_PREEMPT_LAZY is not set
CONFIG_PREEMPT_DYNAMIC=y
CONFIG_SCHED_AUTOGROUP=y
# CONFIG_HZ_100 is not set
CONFIG_HZ_250=y
# CONFIG_HZ_1000 is not set
CONFIG_HZ=250
"""

# sched/debug's head as 6.18 prints it (kernel/sched/debug.c sched_debug_header)
SCHED_DEBUG = """\
Sched Debug Version: v0.11, 6.18.44-fc-v669 #1
ktime                                   : 22609217.018251
jiffies                                 : 4300545646

sysctl_sched
  .sysctl_sched_base_slice                 : 2.800000
  .sysctl_sched_features                   : 99674079
  .sysctl_sched_tunable_scaling            : 1 (logarithmic)

cpu#0
  .nr_running                    : 1
"""

TIMER_LIST = """\
Timer List Version: v0.10
HRTIMER_MAX_CLOCK_BASES: 8
now at 22609217018251 nsecs

Tick Device: mode:     1
Per CPU device: 0
  .idle_jiffies   : 4300545552
  .last_jiffies   : 4300545552
jiffies: {j}
  .next_timer     : 22609220000000
jiffies: 1
"""

DEFAULTS_618 = dict(FEATURES["6.18"])


def uname(release: str = "6.18.44-fc-v669", version: str = "#1 SMP PREEMPT_DYNAMIC @0") -> os.uname_result:
    return os.uname_result(("Linux", "vm", release, version, "x86_64"))


def tree(tmp_path: Path, files: dict[str, str | bytes]) -> Paths:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return Paths(tmp_path)


def no_measure(read):
    raise AssertionError("HZ must not be measured when the config gives it")


# --- parsers ---------------------------------------------------------------------------------


def test_config_keeps_set_options_and_leaves_unset_ones_out() -> None:
    cfg = parse_config(CONFIG)
    assert cfg["CONFIG_HZ"] == "250"
    assert cfg["CONFIG_PREEMPT_NONE"] == "y"
    assert cfg["CONFIG_CC_VERSION_TEXT"] == "gcc (GCC) 13.2.0"
    assert "CONFIG_PREEMPT" not in cfg and "CONFIG_HZ_1000" not in cfg


def test_features_file_names_off_features_with_no() -> None:
    assert parse_features("PLACE_LAG NO_NEXT_BUDDY DELAY_DEQUEUE NO_HRTICK\n") == {
        "PLACE_LAG": True,
        "NEXT_BUDDY": False,
        "DELAY_DEQUEUE": True,
        "HRTICK": False,
    }


def test_sched_debug_gives_the_bitmask_and_the_base_slice() -> None:
    d = parse_sched_debug(SCHED_DEBUG)
    assert d["sysctl_sched_features"] == "99674079"
    assert ms_text_to_ns(d["sysctl_sched_base_slice"]) == 2_800_000
    assert ms_text_to_ns("0.750000") == 750_000


def test_timer_list_jiffies_is_the_first_global_line() -> None:
    assert parse_timer_list_jiffies(TIMER_LIST.format(j=4300545646)) == 4300545646
    with pytest.raises(ValueError, match="jiffies"):
        parse_timer_list_jiffies("Timer List Version: v0.10\n")


def test_hz_measured_from_jiffies_snaps_to_a_config_choice() -> None:
    # 62 jiffies in 0.25 s = 248/s -> 250; 75 in 0.25 s = 300/s -> 300; 250 -> 1000
    for ticks, hz in ((62, 250), (75, 300), (250, 1000), (25, 100)):
        texts = iter([TIMER_LIST.format(j=1000), TIMER_LIST.format(j=1000 + ticks)]).__next__
        times = iter([10.0, 10.25]).__next__
        got = measure_hz(texts, clock=times, sleep=lambda s: None)
        assert got is not None and got.value == hz and got.source.startswith("measured")


def test_preempt_file_and_uname() -> None:
    assert parse_preempt("none voluntary (full) lazy\n") == "full"
    assert preempt_from_uname("#1 SMP PREEMPT_DYNAMIC Thu Jan 1") == "dynamic"
    assert preempt_from_uname("#1 SMP PREEMPT_RT Thu") == "rt"
    assert preempt_from_uname("#1 SMP PREEMPT Thu") == "full"
    assert preempt_from_uname("#1 SMP PREEMPT_LAZY Thu") == "lazy"
    assert preempt_from_uname("#1 SMP Thu") is None


# --- the bitmask, worked by hand -----------------------------------------------------------------


def test_this_hosts_bitmask_is_618s_defaults() -> None:
    # 99674079 (sched/debug on this host, docs/replay.md "Features") = bits 0-4, 6-10, 13-15,
    # 20-24, 26: 31 + 1984 + 57344 + 32505856 + 67108864 -- PLACE_LAG..PREEMPT_SHORT,
    # PICK_BUDDY..WAKEUP_PREEMPTION, NONTASK_CAPACITY..SIS_UTIL, ATTACH_AGE_LOAD..UTIL_EST, NI_RANDOM.
    assert 31 + 1984 + 57344 + 32505856 + 67108864 == 99674079
    got = decode_features(99674079, FEATURES["6.18"])
    assert got == DEFAULTS_618
    on = {k for k, v in got.items() if v}
    assert {"PLACE_LAG", "RUN_TO_PARITY", "PREEMPT_SHORT", "PICK_BUDDY", "DELAY_DEQUEUE", "DELAY_ZERO", "WAKEUP_PREEMPTION"} <= on
    assert not got["NEXT_BUDDY"]


def test_bitmask_bits_by_position() -> None:
    # bit 0 PLACE_LAG, bit 5 NEXT_BUDDY, bit 8 DELAY_DEQUEUE: 1 + 32 + 256
    got = decode_features(289, FEATURES["6.18"])
    assert {k for k, v in got.items() if v} == {"PLACE_LAG", "NEXT_BUDDY", "DELAY_DEQUEUE"}
    # NO_DELAY_DEQUEUE on the defaults clears bit 8 only
    got = decode_features(99674079 - 256, FEATURES["6.18"])
    assert got == {**DEFAULTS_618, "DELAY_DEQUEUE": False}
    with pytest.raises(ValueError, match="beyond"):
        decode_features(1 << 27, FEATURES["6.18"])


def test_base_slice_defaults_by_release_and_cpus() -> None:
    # fair.c: 0.75 ms (6.6-6.14), 0.70 ms (6.15+, 6.12.y), x (1 + ilog2(min(ncpus, 8)))
    assert default_base_slice((6, 18), 2) == 1_400_000
    assert default_base_slice((6, 18), 64) == 2_800_000
    assert default_base_slice((6, 8), 4) == 2_250_000
    assert default_base_slice((6, 12), 1) == 700_000
    assert default_base_slice((6, 5), 8) is None


# --- sources, best first ---------------------------------------------------------------------


def test_debugfs_wins_when_readable(tmp_path: Path) -> None:
    paths = tree(
        tmp_path,
        {
            "proc/config.gz": gzip.compress(CONFIG.encode()),
            "sys/kernel/debug/sched/base_slice_ns": "3000000\n",
            "sys/kernel/debug/sched/features": "PLACE_LAG NO_RUN_TO_PARITY\n",
            "sys/kernel/debug/sched/preempt": "none (voluntary) full lazy\n",
            "proc/sys/kernel/sched_autogroup_enabled": "0\n",
        },
    )
    hk = read_host_kernel(paths, uname(), ncpus=2, measure=no_measure)
    assert hk.base_slice_ns == Sourced(3_000_000, "debugfs sched/base_slice_ns")
    assert hk.sched_features.value == {"PLACE_LAG": True, "RUN_TO_PARITY": False}
    assert hk.preempt.value == "voluntary" and hk.preempt.source.startswith("debugfs")
    assert hk.hz.value == 250 and "config.gz" in hk.hz.source
    assert hk.autogroup.value is False


def test_lockdown_leaves_sched_debug_and_its_bitmask(tmp_path: Path) -> None:
    paths = tree(tmp_path, {"boot/config-6.18.44-fc-v669": CONFIG, "sys/kernel/debug/sched/debug": SCHED_DEBUG})
    hk = read_host_kernel(paths, uname(), ncpus=2, measure=no_measure)
    assert hk.sched_features.value == DEFAULTS_618 and "99674079" in hk.sched_features.source
    assert hk.base_slice_ns.value == 2_800_000 and "sched/debug" in hk.base_slice_ns.source
    assert hk.hz.source == "config /boot/config-6.18.44-fc-v669 (CONFIG_HZ)"


def test_without_debugfs_the_release_defaults_and_config(tmp_path: Path) -> None:
    paths = tree(
        tmp_path,
        {"proc/config.gz": gzip.compress(CONFIG.encode()), "proc/sys/kernel/sched_autogroup_enabled": "1\n", "proc/cmdline": "quiet\n"},
    )
    hk = read_host_kernel(paths, uname(), ncpus=2, measure=no_measure)
    assert hk.version.value == "6.18" and hk.scheduler.value == "eevdf"
    assert hk.base_slice_ns == Sourced(1_400_000, "default for release 6.18, 2 CPUs")
    assert hk.sched_features.value == DEFAULTS_618 and hk.sched_features.source.startswith("default for release 6.18")
    assert hk.preempt.value == "none" and "PREEMPT_DYNAMIC" in hk.preempt.source
    assert hk.autogroup == Sourced(True, "/proc/sys/kernel/sched_autogroup_enabled")
    assert all(s.source for _, s in hk.items())


def test_preempt_on_the_command_line_beats_the_config_default(tmp_path: Path) -> None:
    paths = tree(tmp_path, {"proc/config.gz": gzip.compress(CONFIG.encode()), "proc/cmdline": "ro preempt=full quiet\n"})
    assert read_host_kernel(paths, uname(), ncpus=2, measure=no_measure).preempt.value == "full"


def test_no_config_measures_hz_and_an_old_release_is_cfs(tmp_path: Path) -> None:
    paths = tree(tmp_path, {"proc/timer_list": TIMER_LIST.format(j=5)})
    hk = read_host_kernel(paths, uname("5.10.0-60.oe2203", "#1 SMP"), ncpus=4, measure=lambda read: Sourced(1000, "measured (test)"))
    assert hk.hz == Sourced(1000, "measured (test)")
    assert hk.scheduler.value == "cfs" and hk.base_slice_ns.value is None
    assert hk.sched_features.value is None and "5.10" in hk.sched_features.source
    assert hk.autogroup.value is False and "CONFIG_SCHED_AUTOGROUP" in hk.autogroup.source
    unknown = read_host_kernel(Paths(tmp_path / "empty"), uname(), ncpus=2, measure=lambda read: None)
    assert unknown.hz.value is None and unknown.hz.source.startswith("unknown")
    assert "kernel.hz" not in kernel_overrides(unknown), "an unknown HZ leaves the scenario's"


def test_a_bitmask_beyond_the_known_order_falls_back_to_the_defaults(tmp_path: Path) -> None:
    # a stable or vendor build with a 28th feature: the decode refuses, the defaults stand
    paths = tree(
        tmp_path,
        {
            "proc/config.gz": gzip.compress(CONFIG.encode()),
            "sys/kernel/debug/sched/debug": SCHED_DEBUG.replace("99674079", str(99674079 | 1 << 27)),
        },
    )
    hk = read_host_kernel(paths, uname(), ncpus=2, measure=no_measure)
    assert hk.sched_features.value == DEFAULTS_618 and "does not fit" in hk.sched_features.source


# --- into the scenario -----------------------------------------------------------------------


def reading(tmp_path: Path):
    paths = tree(tmp_path, {"proc/config.gz": gzip.compress(CONFIG.encode()), "proc/sys/kernel/sched_autogroup_enabled": "1\n"})
    return read_host_kernel(paths, uname(), ncpus=2, measure=no_measure)


def test_overrides_fill_what_the_user_left_out(tmp_path: Path) -> None:
    hk = reading(tmp_path)
    got = kernel_overrides(hk, user_set={"hz", "scheduler"})
    assert got["kernel.scheduler"] == "eevdf", "the host's scheduler is not a choice"
    assert "kernel.hz" not in got, "the scenario's own hz wins"
    assert got["kernel.autogroup"] is True and got["kernel.base_slice"] == "1400000ns"
    fields = schema_fields()
    for extra in ("version", "sched_features"):
        assert (f"kernel.{extra}" in got) == (extra in fields), "passed only where the schema has it"
    wider = kernel_overrides(hk, fields=fields | {"version", "sched_features"})
    assert wider["kernel.version"] == "6.18.44" and wider["kernel.sched_features"] == DEFAULTS_618


def test_the_printed_kernel_table_is_a_valid_scenario_kernel(tmp_path: Path) -> None:
    text = kernel_toml(kernel_overrides(reading(tmp_path)))
    table = tomllib.loads(text)["kernel"]
    sc = Scenario.from_document({"scenario": {"name": "k", "duration": "1s"}, "node": {"cores_per_socket": 2}, "kernel": table})
    assert (sc.kernel.scheduler, sc.kernel.hz, sc.kernel.base_slice, sc.kernel.autogroup) == ("eevdf", 250, 1_400_000, True)
    with_features = kernel_toml({"kernel.sched_features": {"PLACE_LAG": True, "NEXT_BUDDY": False}})
    assert tomllib.loads(with_features)["kernel"]["sched_features"] == {"PLACE_LAG": True, "NEXT_BUDDY": False}


def test_the_json_reading_round_trips(tmp_path: Path) -> None:
    import json

    from replay.host_kernel import HostKernel

    hk = reading(tmp_path)
    assert HostKernel.from_dict(json.loads(json.dumps(hk.as_dict()))) == hk


def test_the_prediction_keeps_the_scenarios_own_kernel_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """replay.compare.load_for_host: the host fills [kernel] where the file is silent; the
    file's hz stays; its scheduler does not (the host has one); --set beats both."""
    import replay.host_run
    from replay.compare import load_for_host

    hk = reading(tmp_path / "tree")
    monkeypatch.setattr(replay.host_run, "host_kernel", lambda: hk)
    path = tmp_path / "s.toml"
    path.write_text(
        '[scenario]\nname = "s"\nduration = "1s"\n[kernel]\nhz = 1000\nscheduler = "cfs"\n'
        '[cgroups.a]\n[workloads.h]\nkind = "hog"\ncgroup = "a"\nthreads = 1\n'
    )
    sc = load_for_host(path, [])
    assert (sc.kernel.hz, sc.kernel.scheduler, sc.kernel.autogroup, sc.kernel.base_slice) == (1000, "eevdf", True, 1_400_000)
    assert load_for_host(path, ["kernel.autogroup=false"]).kernel.autogroup is False
