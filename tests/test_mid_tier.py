"""The Mid tier in a simulation (policies/peak_prediction.py, batch_resource.mid_*): koordlet's
peak predictor trained on the run's usage, the prod reclaimable it reports and the mid-cpu /
mid-memory the slo-controller advertises, checked against hand-worked histogram arithmetic."""

from __future__ import annotations

from sim.runner import run_scenario
from sim.scenario import Scenario

MID_NODE = """
[scenario]
name = "mid"
duration = "70s"
seed = 1

[node]
cores_per_socket = 8
memory = "4Gi"

[pods.web]
qos = "LS"
cpu_request = 4
memory_request = "1Gi"

[workloads.web]
kind = "hog"
pod = "web"
threads = 1

[policy]
name = "koordinator"
"""
MI, GI = 1 << 20, 1 << 30


def first_report(doc: str) -> dict:
    run = run_scenario(Scenario.from_toml(doc), progress=False).runs["mid"]
    (d,) = [d for d in run.decisions if d["what"].startswith("batch resources")]
    assert d["t_s"] == 60.0
    return d["inputs"]


def test_mid_cpu_is_the_prod_reclaimable_of_the_predicted_peaks():
    # One sample a minute: the prod pod at 1.0 core falls in the CPU histogram's bucket 22
    # (log_1.05(1.0 × 0.05 / 0.025 + 1) = 22.5), read as its top: 0.025 × (1.05^23 − 1) / 0.05
    # = 1.0357 cores → 1035 m; the system (node − pods) and the priority-less class at 0 read
    # the first bucket's top, 25 m.
    #   pod predictor:      4000 − int(1035 × 1.1) = 2862
    #   priority predictor: 4000 − int((25 + 1035 + 25) × 1.1) = 2807 (allocatable 8000 − 1193)
    # mid-cpu = min(min(2807, 2862), unused 7000) + unallocated × 0% = 2807.
    inputs = first_report(MID_NODE.replace('name = "koordinator"', 'name = "koordinator"\nprediction_cold_start_seconds = 0'))
    assert inputs["prod_reclaimable_cpu_milli"] == 2807 and inputs["mid_cpu_milli"] == 2807
    # memory: the pod uses none (its p98 is the first bucket's top, 5 MiB), so about its 1 GiB
    # request less the predicted peaks of the empty classes and the system's reserve
    assert 900 * MI < inputs["mid_memory_bytes"] <= GI - int(1.1 * 10 * MI)


def test_a_pod_in_its_cold_start_reclaims_nothing():
    # koordlet's default cold start is 24 h: every pod of a shorter run counts its requests as
    # its peak, so no prod resources are reclaimable and the Mid tier is empty
    inputs = first_report(MID_NODE)
    assert (inputs["prod_reclaimable_cpu_milli"], inputs["mid_cpu_milli"], inputs["mid_memory_bytes"]) == (0, 0, 0)


def test_mid_unallocated_percent_adds_a_share_of_the_unrequested_capacity():
    # cold start: reclaimable 0; unallocated = 8000 − 4000 requested = 4000 m; 50% → 2000 m
    sc = MID_NODE.replace('name = "koordinator"', 'name = "koordinator"\nmid_unallocated_percent = 50')
    assert first_report(sc)["mid_cpu_milli"] == 2000
