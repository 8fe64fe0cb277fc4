"""Fuzzing the inputs a user writes: scenario files, --set overrides, trace files and policy
files, mutated from the real ones. Every input must give a result (exit 0) or exactly one
line `colosim: error: ...` (exit 2): no traceback, no abort, no hang past a bound.

The CLI runs in-process (`sim.cli.main`) on a short duration, so an abort of the core would
take pytest down with it, and an escaping exception fails the test with its traceback.
Hypothesis runs derandomized with bounded example counts: the same inputs in CI every time,
about a minute in all.
"""

from __future__ import annotations

import io
import json
import re
import tempfile
import time
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sim.cli import main  # noqa: E402
from sim.overrides import format_path  # noqa: E402
from sim.tuning.output import toml_value  # noqa: E402
from traces.format import Entity, Trace, TraceError, read  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.toml"))
# Every run short: the fuzz is about input, not about simulating long.
SHORT = ["--set", "scenario.duration=20ms", "--set", "scenario.warmup=0s", "--set", "scenario.sample_interval=5ms"]
# A run that takes longer than this on a mutated input counts as a hang.
BOUND_S = 30.0


def fuzz_settings(n: int):
    return settings(
        max_examples=n,
        deadline=None,  # timed by BOUND_S instead: shared CI machines are noisy
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def colosim(*args: str) -> tuple[int, str]:
    """`colosim run ...` in-process: (exit status, stderr), checked to be a result or one
    error line, in time."""
    err, out = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        with redirect_stderr(err), redirect_stdout(out):
            code = main(["run", *args, "--no-progress", "--out", tmp])
        took = time.monotonic() - start
    text = err.getvalue()
    assert took < BOUND_S, f"took {took:.1f} s: {args}"
    assert "Traceback" not in text + out.getvalue(), text
    if code == 0:
        assert "colosim: error" not in text, text
    else:
        lines = text.splitlines()
        assert code == 2, (code, text)
        assert len(lines) == 1 and lines[0].startswith("colosim: error: "), text
        assert len(lines[0]) > len("colosim: error: "), text
    return code, text


# --- values ------------------------------------------------------------------------------

JUNK_STRINGS = ["", "1ms", "-1s", "0s", "1e9Gi", "ncpus", "0-3", "3-0", "0-99999999", "1Gbit", "-1", "nan", "x" * 300, "é\u202e\x00"]

junk = st.recursive(
    st.one_of(
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.sampled_from([0, 1, -1, 2**31, 2**32, 2**63 - 1, 4194305, 8193, 10**12]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([0.0, -0.0, 1e-300, 1e300, 0.5]),
        st.text(max_size=8),
        st.sampled_from(JUNK_STRINGS),
        st.booleans(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "dist", "mean", "kind", "name"]), inner, max_size=2)
    ),
    max_leaves=4,
)


def leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    """Paths of a document's values that --set can reach (tables' keys; a list is a value)."""
    if isinstance(doc, dict) and doc:
        return [p for k, v in doc.items() for p in leaves(v, (*path, k))] + ([path] if path else [])
    return [path] if path else []


DOCS = {p.name: tomllib.loads(p.read_text(encoding="utf-8")) for p in EXPERIMENTS}
PATHS = {name: leaves(doc) for name, doc in DOCS.items()}


# --- scenarios ---------------------------------------------------------------------------


@fuzz_settings(600)
@given(data=st.data())
def test_overrides_of_real_scenarios(data):
    """Alter or retype values of the real experiments (--set with junk), or add junk keys."""
    name = data.draw(st.sampled_from(sorted(DOCS)))
    sets = []
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(PATHS[name]))
        if data.draw(st.booleans()) and len(path) > 1:
            path = (*path[:-1], data.draw(st.sampled_from(["junk", "threads", "rate", "backlog", "1", "cpu.shares"])))
        sets += ["--set", f"{format_path(path)}={toml_value(data.draw(junk))}"]
    colosim(str(ROOT / "experiments" / name), *sets, *SHORT)


def mutate_text(data, text: bytes) -> bytes:
    """A textual mutation: drop, repeat, cut or swap lines, change a number or a word, insert
    junk or bytes that are not UTF-8."""
    lines = text.split(b"\n")
    i = data.draw(st.integers(0, max(0, len(lines) - 1)))
    op = data.draw(st.sampled_from(["drop", "repeat", "truncate", "number", "word", "junk", "bytes", "swap"]))
    if op == "drop":
        del lines[i]
    elif op == "repeat":
        lines.insert(i, lines[i])
    elif op == "truncate":
        return text[: data.draw(st.integers(0, len(text)))]
    elif op == "number":
        numbers = list(re.finditer(rb"-?\d+(\.\d+)?", lines[i]))
        if numbers:
            m = data.draw(st.sampled_from(numbers))
            new = data.draw(st.sampled_from([b"0", b"-1", b"1e300", b"99999999999999999999", b"0.0000001", b"nan", b"inf", b'"7"']))
            lines[i] = lines[i][: m.start()] + new + lines[i][m.end() :]
    elif op == "word":
        lines[i] = re.sub(rb"[A-Za-z_]+", lambda m: m.group(0)[::-1], lines[i], count=1)
    elif op == "junk":
        lines.insert(
            i, data.draw(st.sampled_from([b"[", b"]]", b"= 1", b"x = ", b'"a" = {', b"[workloads.new]", b"kind = 3", b"[[runs]]"]))
        )
    elif op == "bytes":
        lines[i] += data.draw(st.binary(min_size=1, max_size=8)) + b"\xff\xfe"
    else:
        j = data.draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


@fuzz_settings(400)
@given(data=st.data())
def test_mutated_scenario_files(data, tmp_path_factory):
    path = data.draw(st.sampled_from(EXPERIMENTS))
    text = path.read_bytes()
    for _ in range(data.draw(st.integers(1, 3))):
        text = mutate_text(data, text)
    bad = tmp_path_factory.mktemp("scenario") / path.name
    bad.write_bytes(text)
    colosim(str(bad), *SHORT)


@fuzz_settings(40)
@given(blob=st.binary(max_size=200))
def test_random_bytes_as_a_scenario(blob, tmp_path_factory):
    bad = tmp_path_factory.mktemp("bytes") / "x.toml"
    bad.write_bytes(blob)
    code, _ = colosim(str(bad), *SHORT)
    assert code == 2


@fuzz_settings(60)
@given(key=st.text(max_size=30), value=st.text(max_size=12))
@example(key="-", value="")  # a KEY=VALUE that starts with "-" is still the override's, not an option
def test_set_takes_any_text(key, value):
    colosim(str(ROOT / "experiments" / "quota_burst.toml"), "--set", f"{key}={value}", *SHORT)


# --- traces ------------------------------------------------------------------------------

TRACED = """
[scenario]
name = "traced"
duration = "1s"

[node]
cores_per_socket = 4

[cgroups.online]
[cgroups.offline]

[workloads.web]
kind = "open_loop"
cgroup = "online"
rate = 100
workers = 4
service = { dist = "exponential", mean = "1ms" }
trace = { entity = "web", speed = 60 }

[workloads.batch]
kind = "duty"
cgroup = "offline"
max_threads = 8
trace = { entity = "batch", speed = 60 }
"""


def base_trace() -> Trace:
    tr = Trace()
    t = np.array([0.0, 60.0, 120.0])
    tr.add(
        Entity("web", "online", t, np.array([1.5, 2.0, 0.5]), np.array([1e9, np.nan, 2e9]), np.array([100.0, 150.0, 50.0]), cpu_request=2.0)
    )
    tr.add(Entity("batch", "offline", t, np.array([3.0, 7.5, 1.0]), np.array([2e9, 3e9, 1e9])))
    return tr


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("traced")
    (d / "traced.toml").write_text(TRACED)
    return {"dir": d, "scenario": d / "traced.toml", "csv": base_trace().write(d / "t.csv"), "parquet": base_trace().write(d / "t.parquet")}


def test_the_unmutated_trace_runs(traced):
    for kind in ("csv", "parquet"):
        assert colosim(str(traced["scenario"]), "--trace", str(traced[kind]), *SHORT)[0] == 0


@fuzz_settings(300)
@given(data=st.data())
def test_mutated_csv_traces(data, traced, tmp_path_factory):
    text = traced["csv"].read_bytes()
    for _ in range(data.draw(st.integers(1, 3))):
        text = mutate_text(data, text)
    bad = tmp_path_factory.mktemp("csv") / "t.csv"
    bad.write_bytes(text)
    colosim(str(traced["scenario"]), "--trace", str(bad), *SHORT)


@fuzz_settings(60)
@given(data=st.data())
def test_mutated_parquet_traces(data, traced, tmp_path_factory):
    blob = bytearray(traced["parquet"].read_bytes())
    if data.draw(st.booleans()):
        del blob[data.draw(st.integers(1, len(blob) - 1)) :]
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    bad = tmp_path_factory.mktemp("parquet") / "t.parquet"
    bad.write_bytes(bytes(blob))
    try:
        read(bad)
    except TraceError:
        pass
    colosim(str(traced["scenario"]), "--trace", str(bad), *SHORT)


# --- policy files ------------------------------------------------------------------------


def policies() -> list[tuple[str, dict]]:
    """(experiment, [policy] table) of every policy the experiments use."""
    out = []
    for name, doc in DOCS.items():
        if isinstance(doc.get("policy"), dict):
            out.append((name, doc["policy"]))
        for run in doc.get("runs", []):
            p = run.get("set", {}).get("policy")
            if isinstance(p, dict):
                out.append((name, p))
    return out


POLICIES = policies()


@fuzz_settings(400)
@given(data=st.data())
def test_mutated_policy_files(data, tmp_path_factory):
    name, policy = data.draw(st.sampled_from(POLICIES))
    policy = dict(policy)
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["alter", "drop", "add"]))
        if op == "drop" and policy:
            del policy[data.draw(st.sampled_from(sorted(policy)))]
        elif op == "alter" and policy:
            policy[data.draw(st.sampled_from(sorted(policy)))] = data.draw(junk)
        else:
            policy[data.draw(st.sampled_from(["junk", "name", "offline", "besteffort", "ls", "interval"]))] = data.draw(junk)
    body = "[policy]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in policy.items())
    path = tmp_path_factory.mktemp("policy") / "policy.toml"
    path.write_text(body, encoding="utf-8")
    colosim(str(ROOT / "experiments" / name), "--policy", str(path), *SHORT)


# --- what the fuzz found, kept as plain cases --------------------------------------------


@pytest.mark.parametrize(
    "sets, message",
    [
        (["node.sockets=64", "node.cores_per_socket=100000", "node.threads_per_core=2"], "at most 8192 (the kernel's NR_CPUS)"),
        (["node.threads_per_core=64"], "node.threads_per_core: must be <= 8"),
        (["workloads.web.workers=5000000"], "workloads.web.workers: must be <= 4194304"),
        (["workloads.web.backlog=-1"], "workloads.web.backlog: must be >= 0"),
        (["scenario.sample_interval=1ns", "scenario.duration=60s"], "scenario.sample_interval: sampling every 1 ns for 60 s"),
        (['scenario.duration="1e999999999s"'], "scenario.duration: must be at most 10^18 ns"),
        (['node.memory="1e400Gi"'], "node.memory: must be at most 9223372036854775807 bytes"),
        (["node.memory=99999999999999999999999"], "node.memory: must be at most 9223372036854775807 bytes"),
        (['cgroups.online."cpu.cfs_quota_us"=99999999999999999999999'], '"cpu.cfs_quota_us": invalid type: floating point `1e+23`'),
        (["workloads.web.rate=1e12", "workloads.web.workers=2"], None),
    ],
)
def test_absurd_sizes_get_one_message(sets, message):
    args = [a for s in sets for a in ("--set", s)]
    code, err = colosim(str(ROOT / "experiments" / "memory_bench.toml"), *SHORT, *args)
    if message is None:  # a result
        assert code == 0, err
    else:
        assert code == 2 and message in err, err


def test_a_policy_name_that_is_not_a_string(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text("[policy]\nname = []\n")
    code, err = colosim(str(ROOT / "experiments" / "tune_koordinator.toml"), "--policy", str(path), *SHORT)
    assert code == 2 and "policy.name: unknown policy []" in err, err
