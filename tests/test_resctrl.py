"""policies/resctrl.py against the kernel's rules for a `schemata` write
(arch/x86/kernel/cpu/resctrl/ctrlmondata.c: parse_line, cbm_validate, bw_validate; the
printed form from show_doms), worked by hand on an 11-way cache (cbm_mask 7ff) with two L3
domains, min_cbm_bits 1, MB granularity 10 and minimum 10 — the seam's example node; and the
runner / backends carrying ResctrlWrite and ResctrlAssign (the fake node of
tests/fake_resctrl.py; the host backend on this host, which has no resctrl)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_resctrl import FakeResctrlNode, backend

from policies.policy import Decision, PolicyRunner
from policies.resctrl import NO_RESCTRL, ResctrlAssign, ResctrlInfo, ResctrlWrite, Schemata, SchemataError

INFO = ResctrlInfo(cbm_mask="7ff", min_cbm_bits=1, num_closids=16, bandwidth_gran=10, min_bandwidth=10, l3_domains=(0, 1))


def stored(text: str, info: ResctrlInfo = INFO) -> Schemata:
    return Schemata.parse(text).validated(info)


def test_the_seams_example_parses_and_prints_as_the_kernel_does():
    s = stored("L3:0=7ff;1=3f\nMB:0=100;1=30")
    assert s == Schemata({0: 0x7FF, 1: 0x3F}, {0: 100, 1: 30})
    # show_doms pads a CBM to cbm_mask's hex width: 3f on an 11-bit mask prints as 03f
    assert s.format(INFO) == "L3:0=7ff;1=03f\nMB:0=100;1=30"
    assert s.format() == "L3:0=7ff;1=3f\nMB:0=100;1=30"


def test_mb_rounds_up_to_the_granularity():
    # bw_validate: roundup(35, 10) = 40, roundup(91, 10) = 100; 10 and 100 stay
    assert stored("MB:0=35;1=91").mb == {0: 40, 1: 100}
    assert stored("MB:0=10;1=100").mb == {0: 10, 1: 100}
    coarse = ResctrlInfo(cbm_mask="7ff", bandwidth_gran=20, min_bandwidth=20, l3_domains=(0,))
    assert stored("MB:0=21", coarse).mb == {0: 40}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("MB:0=5", r"MB value 5 out of range \[10,100\]"),  # below min_bandwidth
        ("MB:0=101", r"out of range \[10,100\]"),
        ("MB:0=ten", "invalid MB value"),
        ("L3:0=0", "out of range"),  # no bits, min_cbm_bits 1
        ("L3:0=800", "out of range"),  # bit 11 is outside cbm_mask 7ff
        ("L3:0=fff", "out of range"),
        ("L3:0=5", "non-consecutive"),  # 101b
        ("L3:1=70f", "non-consecutive"),
        ("L3:0=xyz", "non-hex"),
        ("L3:2=f", "unknown domain 2"),
        ("L2:0=f", "unknown or unsupported resource name 'L2'"),
        ("L3 0=f", "missing ':'"),
        ("L3:0f", "missing '='"),
        ("L3:0=f;0=3", "duplicate domain 0"),
    ],
)
def test_the_kernel_refuses(text, message):
    with pytest.raises(SchemataError, match=message):
        stored(text)


def test_min_cbm_bits():
    two = ResctrlInfo(cbm_mask="fffff", min_cbm_bits=2, l3_domains=(0,))
    with pytest.raises(SchemataError, match="at least 2 bits"):
        stored("L3:0=4", two)  # one contiguous bit, two needed
    assert stored("L3:0=c0", two).l3 == {0: 0xC0}  # two contiguous high bits: fine
    assert stored("L3:0=fffff", two).l3 == {0: 0xFFFFF}


def test_a_partial_write_keeps_the_other_domains_and_resources():
    before = INFO.default()
    assert before == Schemata({0: 0x7FF, 1: 0x7FF}, {0: 100, 1: 100})
    after = stored("L3:1=3").over(before)
    assert after == Schemata({0: 0x7FF, 1: 0x3}, {0: 100, 1: 100})


def test_koordlets_trailing_separators_parse():
    # ResctrlSchemataRaw.L3String ends each entry with ';' and the line with '\n': the kernel
    # ignores the empty last token (parse_line returns at an empty line)
    assert stored("L3:0=3c;1=3c;\n") == Schemata({0: 0x3C, 1: 0x3C}, {})
    assert stored("    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n") == INFO.default()


def test_the_runner_applies_resctrl_actions_and_records_a_refusal():
    node = FakeResctrlNode(["be"])
    r = PolicyRunner.__new__(PolicyRunner)
    r.backend, r.decisions = backend(node), []
    r.apply(
        [
            Decision(
                0.0,
                "test",
                "cache for be",
                resctrl=(ResctrlWrite("BE", "L3:0=f\nMB:0=35"), ResctrlAssign("BE", "be"), ResctrlWrite("BE", "L3:1=5")),
            )
        ]
    )
    assert node.resctrl_read_schemata("BE") == "L3:0=00f;1=7ff\nMB:0=40;1=100"
    assert node.assigned == {"be": "BE"}
    refused = [d.what for d in r.decisions if d.what.startswith("write refused")]
    assert len(refused) == 1 and "non-consecutive" in refused[0] and "resctrl BE/schemata" in refused[0]
    assert r.decisions[0].to_dict()["resctrl"][1] == {"group": "BE", "cgroup": "be"}


def test_no_free_closid():
    node = FakeResctrlNode([], info={"cbm_mask": "7ff", "min_cbm_bits": 1, "num_closids": 2, **_domains()})
    node.resctrl_write("a", "L3:0=1")
    with pytest.raises(ValueError, match="no free CLOSID"):
        node.resctrl_write("b", "L3:0=1")


def _domains() -> dict[str, object]:
    return {"bandwidth_gran": 10, "min_bandwidth": 10, "l3_domains": [0, 1], "llc_bytes": 0}


@pytest.mark.skipif(Path("/sys/fs/resctrl/info").exists(), reason="this host has resctrl")
def test_the_host_backend_refuses_resctrl_with_one_message(tmp_path):
    """This host has no /sys/fs/resctrl: replay refuses before any write, naming what is
    needed; perf counters are refused the same way."""
    from replay.cgroupfs import HostBackend, Layout
    from sim.errors import HostError

    b = HostBackend(Layout(2, {"": tmp_path}, {"": "/me"}), "t")
    with pytest.raises(HostError) as err:
        b.resctrl_info()
    assert str(err.value) == NO_RESCTRL and "mount -t resctrl" in NO_RESCTRL and "Intel RDT / AMD PQoS" in NO_RESCTRL
    with pytest.raises(HostError, match="mount -t resctrl"):
        b.resctrl(ResctrlWrite("BE", "L3:0=f"))
    with pytest.raises(HostError, match="perf counters"):
        b.perf_counters("online")


SCENARIO = """
[scenario]
name = "cache"
duration = "1s"

[node]
sockets = 2
cores_per_socket = 1
threads_per_core = 1

[pods.online]
qos = "LS"
cpu_request = 1

[pods.offline]
qos = "BE"

[workloads.web]
kind = "closed_loop"
pod = "online"
clients = 1
workers = 1
service = { dist = "exponential", mean = "5ms" }

[workloads.batch]
kind = "hog"
pod = "offline"
threads = 1

[policy]
"""


@pytest.mark.skipif(Path("/sys/fs/resctrl/info").exists(), reason="this host has resctrl")
@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ('name = "koordinator"\nresctrl_qos = { BE = { enable = true } }', "mount -t resctrl"),
        ('name = "rubik"\ndyn_cache = {}', "mount -t resctrl"),
        ('name = "rubik"\ncpi = {}', "perf counters of kubepods/burstable/pod-online: replay does not read"),
    ],
)
def test_replay_refuses_before_anything_runs(tmp_path, policy, message):
    """check_knobs, which every replay entry point calls before it creates a cgroup, refuses
    a policy that needs resctrl or perf counters with one message."""
    from replay.host_run import check_knobs
    from sim.errors import HostError
    from sim.scenario.document import load_scenario

    path = tmp_path / "cache.toml"
    path.write_text(SCENARIO + policy + "\n")
    sc = load_scenario(path)
    said: list[str] = []
    with pytest.raises(HostError, match=message):
        check_knobs([sc], set(), said.append)
    path.write_text(SCENARIO + 'name = "rubik"\n')
    check_knobs([load_scenario(path)], set(), said.append)  # no resctrl, no perf: fine


def test_perf_counters_stay_cumulative_across_the_warmup_reset():
    """SimBackend keeps the core's counters monotonic, as perf's are: after the warm-up's
    reset_stats zeroes them, later reads continue from the last value."""
    node = FakeResctrlNode(["web"])
    b = backend(node)
    node.perf["web"] = {"cycles": 300, "instructions": 200, "cache-misses": 7}
    first = b.perf_counters("web")
    node.perf["web"] = {"cycles": 30, "instructions": 10, "cache-misses": 1}  # reset, then some work
    second = b.perf_counters("web")
    assert (first.cycles, first.instructions, first.cache_misses, first.cache_references) == (300, 200, 7, None)
    assert (second.cycles, second.instructions, second.cache_misses) == (330, 210, 8)
    assert (second - first).cpi() == 3.0
