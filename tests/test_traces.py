"""The trace format (round trip, validation with file/row/column), the Alibaba v2018 loader on
a fixture of our own in the dataset's layout (and on the real machine-level sample when it is
beside the project), and the seeded synthetic generators."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from traces import alibaba2018, synthetic
from traces.format import Entity, Trace, TraceError, read

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-v2018"


def small() -> Trace:
    tr = Trace()
    tr.add(
        Entity(
            "web",
            "online",
            np.array([0.0, 60.0, 120.0]),
            np.array([1.5, 2.25, 0.0]),
            np.array([1e9, np.nan, 2e9]),
            np.array([100.0, 150.0, 0.0]),
            cpu_request=2.0,
            cpu_limit=4.0,
            memory_limit=4e9,
        )
    )
    tr.add(Entity("batch", "offline", np.array([0.0, 30.0]), np.array([8.0, 7.5])))
    return tr


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_round_trip(tmp_path, suffix):
    tr = small()
    back = read(tr.write(tmp_path / f"t{suffix}"))
    assert list(back.entities) == ["web", "batch"]
    for name, e in tr.entities.items():
        b = back.entities[name]
        assert b.role == e.role and (b.t_s == e.t_s).all() and (b.cpu_cores == e.cpu_cores).all()
        for col in ("memory_bytes", "rate_per_s"):
            x, y = getattr(e, col), getattr(b, col)
            assert (x is None and y is None) or np.array_equal(x, y, equal_nan=True)
        assert (b.cpu_request, b.cpu_limit, b.memory_request, b.memory_limit) == (
            e.cpu_request,
            e.cpu_limit,
            e.memory_request,
            e.memory_limit,
        )


HEADER = "entity,role,time_s,cpu_cores,memory_bytes\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("entity,role,time_s\nweb,online,0\n", "missing column 'cpu_cores'"),
        ("entity,role,time_s,cpu_cores,memory_mb\nweb,online,0,1,5\n", "unknown column 'memory_mb'"),
        (HEADER + "web,online,0,1,5\nweb,online,10,abc,5\n", "row 3, column cpu_cores: not a number ('abc')"),
        (
            HEADER + "web,online,0,1,5\nweb,online,10,1,5\nweb,online,5,1,5\n",
            "row 4, column time_s: timestamp 5 of entity 'web' is going back",
        ),
        (HEADER + "web,online,0,1,5\nweb,online,0,1,5\n", "row 3, column time_s: timestamp 0 of entity 'web' is duplicate"),
        (HEADER + "web,online,0,-1,5\n", "row 2, column cpu_cores: must be a finite number >= 0"),
        (HEADER + "web,gold,0,1,5\n", "row 2, column role: role must be one of online, offline, node, system"),
        (HEADER + "web,online,0,1\n", "row 2: 4 cells for 5 columns"),
    ],
)
def test_malformed_files_name_file_row_and_column(tmp_path, text, message):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(TraceError) as err:
        read(p)
    assert str(err.value).startswith(str(p)) and message in str(err.value)


def test_parquet_in_other_units_or_types_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "x.parquet"
    pq.write_table(pa.table({"entity": ["a"], "role": ["online"], "time_s": [0.0], "cpu_cores": ["1.0"]}), p)
    with pytest.raises(TraceError, match=r"row 1, column cpu_cores: not a number \('1.0'\)"):
        read(p)
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(TraceError, match="a trace file ends in .parquet or .csv"):
        read(tmp_path / "x.json")


def fixture(d: Path) -> Path:
    """A few rows in cluster-trace-v2018's layout (no header; our own numbers)."""
    d.mkdir()
    # machine_usage: unsorted, a repeated timestamp (averaged), another machine, a bad -1 util
    (d / "machine_usage.csv").write_text(
        "m_1,120,50,80,,,10,10,1\n"
        "m_1,0,25,70,,,10,10,1\n"
        "m_2,0,99,99,,,10,10,1\n"
        "m_1,60,30,75,,,10,10,1\n"
        "m_1,60,40,75,,,10,10,1\n"
        "m_1,600,-1,75,,,10,10,1\n"
    )
    # container c_1: 400 = 4 cores requested, limit 800, 10% of the node's memory
    (d / "container_meta.csv").write_text("c_1,m_1,0,app_1,started,400,800,10\nc_9,m_2,0,app_2,started,100,100,5\n")
    (d / "container_usage.csv").write_text("c_1,m_1,0,50,40,1,1,1,1,1,1\nc_1,m_1,60,250,40,1,1,1,1,1,1\nc_9,m_2,0,10,10,1,1,1,1,1,1\n")
    # batch: two Terminated instances overlapping on m_1, one Failed (ignored)
    (d / "batch_instance.csv").write_text(
        "i1,t1,j1,1,Terminated,0,90,m_1,1,1,150,200,0.5,1\n"
        "i2,t1,j1,1,Terminated,60,200,m_1,1,1,100,100,1.0,1\n"
        "i3,t1,j1,1,Failed,0,200,m_1,1,1,900,900,1.0,1\n"
    )
    return d


def test_alibaba_loader_on_a_fixture(tmp_path):
    tr = alibaba2018.load(fixture(tmp_path / "v2018"), "m_1", 0, 180, step_s=60, node_memory_bytes=100 * 2**30)
    node = tr.entities["m_1"]
    assert node.role == "node"
    # 25% of 96 cores; the two 60 s samples averaged (35%); 50%
    assert node.t_s.tolist() == [0, 60, 120] and node.cpu_cores.tolist() == pytest.approx([24.0, 33.6, 48.0])
    assert node.memory_bytes.tolist() == pytest.approx([70 * 2**30, 75 * 2**30, 80 * 2**30])
    c = tr.entities["c_1"]
    # 50% of 4 cores = 2; 250% of 4 = 10, capped at the limit of 8; held to 120 s
    assert c.role == "online" and c.cpu_cores.tolist() == [2.0, 8.0, 8.0]
    assert (c.cpu_request, c.cpu_limit) == (4.0, 8.0) and c.memory_limit == pytest.approx(10 * 2**30)
    assert c.memory_bytes[0] == pytest.approx(0.4 * 0.1 * 100 * 2**30)
    b = tr.entities["batch"]
    # 1.5 cores on [0, 90), 1 core on [60, 200): 1.5, 2.5, 1.0 at 0/60/120
    assert b.role == "offline" and b.cpu_cores.tolist() == [1.5, 2.5, 1.0]
    assert "c_9" not in tr.entities
    with pytest.raises(TraceError, match="nothing for machine 'm_7'"):
        alibaba2018.load(tmp_path / "v2018", "m_7", 0, 180)


def test_a_long_hole_is_left_out_not_held(tmp_path):
    d = tmp_path / "h"
    d.mkdir()
    (d / "machine_usage.csv").write_text("m_1,0,10,50,,,1,1,1\nm_1,1000,20,50,,,1,1,1\n")
    node = alibaba2018.load(d, "m_1", 0, 1100, step_s=60).entities["m_1"]
    # held for 3 steps (0..180 s), then nothing until the next sample at 1000 s
    assert node.t_s.tolist() == [0, 60, 120, 180, 1020, 1080]


@pytest.mark.skipif(not (SAMPLE / "machine_usage_head100k.csv").exists(), reason="the real v2018 sample is not beside the project")
def test_alibaba_loader_on_the_real_machine_sample():
    tr = alibaba2018.load(SAMPLE, "m_1940", 86_400, 2 * 86_400, step_s=60)
    node = tr.entities["m_1940"]
    assert len(node) > 400  # a day of 60 s steps, less the trace's holes
    assert 0 <= node.cpu_cores.min() and node.cpu_cores.max() <= 96
    assert np.all(np.diff(node.t_s) > 0)


def test_synthetic_is_seeded_and_shaped():
    a, b = synthetic.day(7), synthetic.day(7)
    assert np.array_equal(a.entities["web"].cpu_cores, b.entities["web"].cpu_cores)
    assert not np.array_equal(a.entities["web"].cpu_cores, synthetic.day(8).entities["web"].cpu_cores)
    web = synthetic.diurnal("w", 86_400, 60, 400, 80, 0.02, seed=1, noise=0.0, spikes_per_day=0)
    hour = (web.t_s // 3600).astype(int)
    assert web.rate_per_s[hour == 14].mean() == pytest.approx(400, rel=0.01)
    assert web.rate_per_s[hour == 2].mean() == pytest.approx(80, rel=0.03)  # the hour around the trough
    assert np.allclose(web.cpu_cores, web.rate_per_s * 0.02)
    # bursty batch: mean cores ≈ jobs/h × cores × runtime / 3600 (Little's law), over a week
    batch = synthetic.bursty_batch("b", 7 * 86_400, 60, jobs_per_hour=6, mean_cores=4, mean_runtime_s=1800, seed=3)
    assert batch.cpu_cores.mean() == pytest.approx(6 * 4 * 1800 / 3600, rel=0.15)


def test_google2019_loader_on_a_fixture(tmp_path):
    from traces import google2019

    d = tmp_path / "g"
    d.mkdir()
    (d / "machine_events.csv").write_text("time,machine_id,type,capacity.cpus,capacity.memory\n0,7,ADD,0.5,0.25\n0,8,ADD,1.0,1.0\n")
    (d / "instance_events.csv").write_text(
        "time,type,collection_id,instance_index,machine_id,scheduling_class,priority,resource_request.cpus,resource_request.memory\n"
        "0,SCHEDULE,100,0,7,3,200,0.1,0.05\n"
        "0,SCHEDULE,200,4,7,0,110,0.05,0.01\n"
    )
    (d / "instance_usage.csv").write_text(
        "start_time,end_time,collection_id,instance_index,machine_id,average_usage.cpus,average_usage.memory,assigned_memory\n"
        "300000000,600000000,100,0,7,0.125,0.05,0.1\n"
        "0,300000000,100,0,7,0.05,0.025,0.1\n"
        "0,300000000,200,4,7,0.25,0.1,\n"
        "0,300000000,300,0,8,0.9,0.9,\n"
    )
    tr = google2019.load(d, "7", 0, 900, node_cores=64, node_memory_bytes=256 * 2**30)
    web, job = tr.entities["100/0"], tr.entities["200/4"]
    assert web.role == "online" and job.role == "offline" and "300/0" not in tr.entities
    # 0.05 of a 0.5-NCU machine = 10% of 64 cores; 0.125 → 16 cores
    assert web.t_s.tolist() == [0, 300] and web.cpu_cores.tolist() == pytest.approx([6.4, 16.0])
    assert web.memory_bytes.tolist() == pytest.approx([0.1 * 256 * 2**30, 0.2 * 256 * 2**30])
    assert web.cpu_request == pytest.approx(12.8) and web.memory_limit == pytest.approx(0.4 * 256 * 2**30)
    assert job.cpu_cores.tolist() == pytest.approx([32.0])
    with pytest.raises(TraceError, match="missing column 'average_usage.cpus'"):
        (d / "instance_usage.csv").write_text("start_time,collection_id,instance_index,machine_id\n")
        google2019.load(d, "7", 0, 900, 64, 2**30)
