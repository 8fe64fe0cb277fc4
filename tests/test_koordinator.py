"""Pods and Koordinator: the kubelet layout, koord-scheduler's CPU binding (koordinator.md
§6.3's worked examples), CPU suppress with LSR/LSE pools (§1.3), BE CPU eviction (§4.2) and
batch resources (§5.3) against hand-worked cases; eviction end to end through cgroup.kill;
and seed 003's experiment."""

from __future__ import annotations

import pytest

from policies import batch_resource as br
from policies import cpu_evict as ce
from policies import cpu_suppress as cs
from policies.cgroup import Cpu, SimBackend
from policies.cpu_bind import BindError, take_cpus
from policies.pods import Pod, PriorityClass, QoSClass, cpu_milli, memory_bytes, milli_cpu_to_quota, milli_cpu_to_shares
from sim import ScenarioError, load_scenario, run_scenario
from sim.environment import NodeEnvironment
from sim.scenario import Scenario


def topo(sockets, numa_per_socket, cores_per_numa, threads):
    """Adjacent SMT siblings, as in the reference's examples."""
    out, cpu, core = [], 0, 0
    for s in range(sockets):
        for n in range(numa_per_socket):
            for _ in range(cores_per_numa):
                for _ in range(threads):
                    out.append(Cpu(cpu, core, s, s * numa_per_socket + n))
                    cpu += 1
                core += 1
    return out


# --- koord-scheduler's CPU bind (§6.3) ---------------------------------------------------


def test_full_pcpus_worked_example():
    t = topo(2, 2, 4, 2)  # 32 CPUs: N0 0-7, N1 8-15 (S0), N2 16-23, N3 24-31 (S1)
    taken = [*range(0, 6), *range(16, 24)]
    assert take_cpus(t, taken, 6, "FullPCPUs", "MostAllocated") == [24, 25, 26, 27, 28, 29]
    assert take_cpus(t, taken, 6, "FullPCPUs", "LeastAllocated") == [8, 9, 10, 11, 12, 13]
    # 12 fits no node and no socket's free full cores: S0's 10 CPUs, then one core of S1
    for strategy in ("MostAllocated", "LeastAllocated"):
        assert sorted(take_cpus(t, taken, 12, "FullPCPUs", strategy)) == [*range(6, 16), 24, 25]


def test_spread_by_pcpus_worked_example():
    t = topo(2, 1, 4, 2)
    assert take_cpus(t, [0, 2], 6, "SpreadByPCPUs", "MostAllocated") == [1, 3, 4, 6, 5, 7]
    assert take_cpus(t, [0, 2], 6, "SpreadByPCPUs", "LeastAllocated") == [8, 10, 12, 14, 9, 11]
    # DistributeEvenly is LeastAllocated to the CPU accumulator
    assert take_cpus(t, [0, 2], 6, "SpreadByPCPUs", "DistributeEvenly") == [8, 10, 12, 14, 9, 11]


def test_bind_on_linux_numbering_and_when_full():
    # The seed's node: 2 sockets × 12 cores × 2 threads, siblings c and c + 24.
    sc = Scenario.model_validate(
        {"scenario": {"name": "t", "duration": "1s"}, "node": {"sockets": 2, "cores_per_socket": 12, "threads_per_core": 2}}
    )
    t = sc.node.cpus()
    assert sorted(take_cpus(t, [], 8, "FullPCPUs")) == [0, 1, 2, 3, 24, 25, 26, 27]  # 4 physical cores
    assert sorted(take_cpus(t, [], 8, "SpreadByPCPUs")) == list(range(8))  # 8 physical cores
    with pytest.raises(BindError):
        take_cpus(t, range(44), 8)


def test_python_topology_numbers_cpus_as_the_core_does():
    for node in (
        {"sockets": 2, "cores_per_socket": 6, "threads_per_core": 2, "numa_nodes_per_socket": 2},
        {"cores_per_socket": 4, "threads_per_core": 2, "siblings": [[0, 1], [2, 3], [4, 5], [6, 7]]},
    ):
        sc = Scenario.model_validate({"scenario": {"name": "t", "duration": "1s"}, "node": node})
        env = NodeEnvironment(sc.core_spec())
        mine = [(c.cpu, c.core, c.socket, c.node) for c in sc.node.cpus()]
        core = [(c.cpu, c.core, c.socket, c.node) for c in SimBackend(env).cpus()]
        assert mine == core


# --- pods and the kubelet layout -----------------------------------------------------------


def test_quantities_and_kubelet_arithmetic():
    assert cpu_milli("500m") == 500 and cpu_milli(2) == 2000 and cpu_milli("2.5") == 2500
    assert memory_bytes("16000Mi") == 16000 * 2**20 and memory_bytes("4Gi") == 4 * 2**30
    assert milli_cpu_to_shares(500) == 512 and milli_cpu_to_shares(0) == 2
    assert milli_cpu_to_quota(2000) == 200_000 and milli_cpu_to_quota(None) == -1
    assert milli_cpu_to_quota(5) == 1000  # floored at 1000 µs
    for bad in ("two", -1, True):
        with pytest.raises(ValueError):
            cpu_milli(bad)


POD_SCENARIO = """
[scenario]
name = "pods"
duration = "1s"
[node]
sockets = 2
cores_per_socket = 4
threads_per_core = 2
[kubelet]
reserved_cpu = 1
[pods.db]
qos = "LSR"
cpu_request = 4
cpu_limit = 4
memory_request = "1Gi"
memory_limit = "1Gi"
cpu_bind_policy = "Default"
[pods.web]
cpu_request = "500m"
cpu_limit = 2
[pods.batch]
qos = "BE"
cpu_request = 1
[workloads.w]
kind = "hog"
pod = "web"
threads = 1
"""


def test_kubelet_layout_and_classes():
    sc = Scenario.from_toml(POD_SCENARIO)
    pods = {p.name: p for p in sc.pod_list()}
    assert pods["db"].cgroup == "kubepods/pod-db" and pods["db"].priority is PriorityClass.PROD
    assert pods["web"].cgroup == "kubepods/burstable/pod-web" and pods["web"].qos is QoSClass.LS
    assert pods["batch"].cgroup == "kubepods/besteffort/pod-batch" and pods["batch"].priority is PriorityClass.BATCH
    assert sc.workloads["w"].cgroup == "kubepods/burstable/pod-web"
    cg = sc.cgroups
    assert cg["kubepods"].cpu_shares == 15 * 1024  # allocatable: 16 CPUs − 1 reserved
    assert cg["kubepods/burstable"].cpu_shares == 512
    assert cg["kubepods/besteffort"].cpu_shares == 2
    # Default binds FullPCPUs: 2 physical cores (siblings c, c + 8), no quota (koordlet)
    assert pods["db"].cpuset == (0, 8, 1, 9)
    assert cg["kubepods/pod-db"].cpuset_cpus == "0-1,8-9" and cg["kubepods/pod-db"].cpu_cfs_quota_us == -1
    # LS pods get the LS share pool; BE starts from the BE pool (LSR CPUs included)
    assert cg["kubepods/burstable/pod-web"].cpuset_cpus == "2-7,10-15"
    assert cg["kubepods/besteffort"].cpuset_cpus == "0-15"
    assert cg["kubepods/burstable/pod-web"].cpu_cfs_quota_us == 200_000
    assert cg["kubepods/burstable"].cpuset_cpus is None  # every CPU: a bound pod may sit below
    assert cg["kubepods/besteffort/pod-batch"].cpu_shares == 1024  # batch-cpu request


@pytest.mark.parametrize(
    "change, needle",
    [
        ('[pods.db]\ncpu_bind_policy = "FullPCPUs"\nqos = "LS"\ncpu_request = 2', "only LSR and LSE pods"),
        ('[pods.db]\ncpu_bind_policy = "FullPCPUs"\nqos = "LSR"\ncpu_request = 1.5\ncpu_limit = 2', "whole number of CPUs"),
        ('[pods.db]\ncpu_bind_policy = "FullPCPUs"\nqos = "LSR"\ncpu_request = 40\ncpu_limit = 40', "cannot bind"),
        ('[pods.db]\ncgroup = "nowhere"', "a pod needs a declared cgroup"),
        ("[pods.db]\ncpu_request = 4\ncpu_limit = 2", "must be >= cpu_request"),
        ('[pods.db]\nqos = "Gold"', "pods.db.qos"),
        ('[workloads.x]\nkind = "hog"\npod = "nobody"\nthreads = 1', "no pod named"),
        ('[workloads.x]\nkind = "hog"\nthreads = 1', "exactly one of cgroup or pod"),
    ],
)
def test_bad_pods_are_named(change, needle):
    text = '[scenario]\nname = "t"\nduration = "1s"\n' + change
    with pytest.raises(ScenarioError, match=needle):
        Scenario.from_toml(text)


def test_a_bound_burstable_pod_keeps_its_cpus():
    """An LSR pod with no memory limit is Burstable; bound, its cpuset lies under
    kubepods/burstable, which therefore keeps every CPU."""
    sc = Scenario.from_toml(POD_SCENARIO.replace('memory_request = "1Gi"\nmemory_limit = "1Gi"\n', ""))
    db = next(p for p in sc.pod_list() if p.name == "db")
    assert db.cgroup == "kubepods/burstable/pod-db"
    assert sc.cgroups[db.cgroup].cpuset_cpus == "0-1,8-9"
    from sim.environment import NodeEnvironment

    NodeEnvironment(sc.core_spec())  # the core takes it (before: 'not within the parent's')


# --- CPU suppress with pools (§1.3) ------------------------------------------------------------


def test_be_cpuset_splits_between_lsr_and_ls_pools():
    t = topo(1, 1, 8, 2)  # 16 CPUs, siblings adjacent
    lsr = {0, 2, 4, 6}  # an LSR pod spread over 4 cores
    # 16 candidates, 4 LSR: BE gets floor(8 × 4/16) = 2 from the LSR pool, 6 from the LS pool
    got = cs.be_cpuset(t, 8, lsr=lsr)
    assert got[:2] == [0, 2] and got[2:] == [8, 9, 10, 11, 12, 13]
    # LSE CPUs are never BE's, and reserved CPUs are nobody's
    got = cs.be_cpuset(t, 6, lse={8, 9, 10, 11}, reserved={0, 1})
    assert set(got).isdisjoint({0, 1, 8, 9, 10, 11}) and len(got) == 6
    # a pool too small gives nothing from it
    assert cs.be_cpuset(t, 4, lsr=set(range(16))) == [0, 1, 2, 3]
    assert cs.be_cpuset(t, 4, lse=set(range(16))) == []


# --- BE CPU eviction (§4.2) -------------------------------------------------------------------


def test_evict_release_hand_worked():
    # BE requested 40 CPUs, gets a 24-CPU cpuset, uses 23: satisfaction 0.6 ≤ 0.6
    s = ce.BEState(usage=23_000, request=40_000, limit=24_000)
    assert ce.usage_high_enough(s)  # 23/24 = 95.8% ≥ 90%
    assert ce.release_milli(s, 60, 80) == int(40_000 * (0.8 - 0.6)) == 8000
    assert ce.release_milli(s, 50, 80) == 0  # 0.6 > 0.5: satisfied enough
    assert ce.to_release(s, s, 60, 80) == 8000
    # latest sample differs: the smaller release
    latest = ce.BEState(23_000, 40_000, 22_000)
    assert ce.to_release(s, latest, 60, 80) == min(8000, int(40_000 * (0.8 - 0.55)))
    # not busy enough: nothing, whatever the satisfaction
    assert ce.to_release(ce.BEState(10_000, 40_000, 24_000), s, 60, 80) == 0
    # a limit under one core counts as busy (issue #1825); a limit of 0 never
    assert ce.usage_high_enough(ce.BEState(0, 4000, 500)) and not ce.usage_high_enough(ce.BEState(0, 4000, 0))
    # no request (a BE pod with no batch-cpu): nothing to give back
    assert ce.release_milli(ce.BEState(5000, 0, 2000), 60, 80) == 0
    assert ce.real_limit(24, -1) == 24_000 and ce.real_limit(24, 1_000_000) == 10_000


def test_evict_victims_order():
    c = [
        ce.Candidate("a", 5500, used=4000, request=4000),
        ce.Candidate("b", 5000, used=1000, request=8000),
        ce.Candidate("c", 5500, used=4000, request=2000),
        ce.Candidate("none", 5500, used=100, request=0),
    ]
    # lowest priority first (b), then the highest usage per request (none: ∞, c: 2, a: 1)
    assert [v.name for v in ce.victims(c, 9000)] == ["b", "none", "c"]
    assert [v.name for v in ce.victims(c, 8000)] == ["b"]
    assert ce.victims(c, 0) == []


def pod(name, qos, cpu_req, cgroup=None, mem_req=0, priority=None):
    p = priority or PriorityClass.for_qos(qos)
    return Pod(name, qos, p, p.default, cpu_req, None, mem_req, None, cgroup or f"kubepods/pod-{name}")


def test_batch_resource_hand_worked():
    pods = [
        pod("ls", QoSClass.LS, 8000, mem_req=2**30),
        pod("lse", QoSClass.LSE, 4000),
        pod("nometric", QoSClass.LS, 2000),
        pod("be", QoSClass.BE, 10_000),
    ]
    usage = {"kubepods/pod-ls": 5500.0, "kubepods/pod-lse": 1000.0, "kubepods/pod-be": 9000.0}
    hp = br.hp_sums(pods, usage)
    # used: ls 5500 + lse its request 4000 + nometric its request 2000; BE is not HP
    assert hp == br.HPSums(used=11_500, request=14_000, max_used_req=8000 + 4000)
    # 48 CPUs, reclaim 60% → margin 19.2; system 1.5 (above a 1-CPU reservation)
    assert br.batch_allocatable(48_000, 60, 1500, 1000, hp) == 48_000 - 19_200 - 1500 - 11_500
    assert br.batch_allocatable(48_000, 60, 500, 1000, hp, "request") == 48_000 - 19_200 - 1000 - 14_000
    assert br.batch_allocatable(48_000, 60, 500, 1000, hp, "maxUsageRequest") == 48_000 - 19_200 - 1000 - 12_000
    assert br.batch_allocatable(8000, 0, 0, 0, hp) == 0  # never negative
    assert br.batch_allocatable(48_000, 100, 0, 0, br.HPSums(0, 0, 0)) == 48_000  # no margin
    assert br.needs_sync(None, 5, 0) and br.needs_sync(100, 111, 10) and not br.needs_sync(100, 109, 10)
    assert br.needs_sync(100, 100, 300)


EVICT_SCENARIO = """
[scenario]
name = "evict"
duration = "40s"
[node]
cores_per_socket = 8
[pods.web]
cpu_request = 2
cpu_limit = 2
[pods.batch1]
qos = "BE"
cpu_request = 8
priority = 5100
[pods.batch2]
qos = "BE"
cpu_request = 8
priority = 5900
[workloads.web]
kind = "hog"
pod = "web"
threads = 2
[workloads.b1]
kind = "hog"
pod = "batch1"
threads = 4
[workloads.b2]
kind = "hog"
pod = "batch2"
threads = 4
[policy]
name = "koordinator"
cpu_evict_be_satisfaction_lower_percent = 40
cpu_evict_be_satisfaction_upper_percent = 60
# Phase 0: the web hogs' throttle/unthrottle instants then leave them off the BE cpuset. At
# other phases one can stay on a BE CPU after the suppress (beside shares-2 BE it takes that
# CPU), BE uses 3 of its 4 CPUs, below cpuEvictBEUsageThresholdPercent, and nothing is evicted.
[kernel]
cfs_period_phase = "0ms"
"""


def test_eviction_kills_the_lowest_priority_be_pod_after_the_cool_down():
    # 8 CPUs × 65% − 2 LS = 3.2 → BE cpuset of 4 CPUs; 16 CPUs requested: satisfaction 25% ≤ 40%;
    # release 16 × (0.6 − 0.25) = 5.6 CPUs → one pod (8 CPUs), the lower priority one, at 20 s.
    result = run_scenario(Scenario.from_toml(EVICT_SCENARIO), progress=False)
    run = result.runs["evict"]
    evictions = [d for d in run.decisions if "evict" in d["what"]]
    assert len(evictions) == 1 and evictions[0]["t_s"] == pytest.approx(20.0)
    assert evictions[0]["writes"] == [{"cgroup": "kubepods/besteffort/pod-batch1", "knob": "cgroup.kill", "value": 1}]
    assert evictions[0]["inputs"]["release_milli"] == int(16_000 * (0.6 - 0.25))
    # batch1 ran only until 20 s of the 40; batch2 kept the BE cpuset after it
    b1 = run.cgroups["kubepods/besteffort/pod-batch1"].cpu_share
    b2 = run.cgroups["kubepods/besteffort/pod-batch2"].cpu_share
    assert b1 < 0.6 * b2


# --- seed 003 ------------------------------------------------------------------------------


def test_seed_003_shapes(root):
    """The seed's own numbers are the truth (requests/s at 30/20/10/4/0 offline cores): plain
    88/148/214/263/272, FullPCPUs 146/150/161/163/165, SpreadByPCPUs 244/248/255/272/273."""
    sc = load_scenario(root / "experiments/koordinator_cpu_curve.toml", ["scenario.duration=30s"])
    r = run_scenario(sc, progress=False)
    q = {name: run.services["wrk"] for name, run in r.runs.items()}
    assert r.grid["Koordinator SpreadByPCPUs, 30c"] == ("Koordinator SpreadByPCPUs", "30c")
    solo = q["plain colocation, 0c"]
    # the service alone serves about what the seed measured alone (272 requests/s)
    assert solo.qps == pytest.approx(272, rel=0.05)
    # plain colocation loses within 10 percentage points of the seed's loss at every column
    # (CPU sharing, SMT, and the offline job's LLC and memory-bandwidth contention)
    for cores, seed in zip((30, 20, 10, 4), (88, 148, 214, 263), strict=True):
        assert abs(q[f"plain colocation, {cores}c"].qps / solo.qps - seed / 272) < 0.10
    assert q["plain colocation, 30c"].p99_s > 1.3 * solo.p99_s
    # bound SpreadByPCPUs: no CPU sharing, but the shared cache and memory cost ~10% at 30c
    spread = q["Koordinator SpreadByPCPUs, 30c"].qps / solo.qps
    assert 0.84 < spread < 0.94
    # FullPCPUs shares 4 physical cores between 8 threads: about the seed's 165/s alone, and
    # it loses less to the offline load than plain colocation does
    full = [q[f"Koordinator FullPCPUs, {c}c"].qps for c in (30, 20, 10, 4, 0)]
    assert full[-1] == pytest.approx(165, rel=0.05)
    assert min(full) > 0.85 * full[-1]
    # Koordinator beats plain colocation where the offline load is heaviest
    assert q["Koordinator, 30c"].qps > 1.3 * q["plain colocation, 30c"].qps
    # Unbound, the service's threads left on the BE hogs' SMT siblings are spread to idle
    # cores by the balancer (SD_PREFER_SIBLING, active balance: lb_groups.rs); the seed keeps
    # 233/272 = 0.86 at 20c, a balancer by instantaneous load alone left 0.62
    assert q["Koordinator, 20c"].qps / solo.qps > 0.70


@pytest.mark.parametrize("name, knob, value", [("static", "cpu.idle", 1), ("rubik", "cpu.qos_level", -1)])
def test_static_and_rubik_take_the_be_pods_when_not_told(name, knob, value):
    sc = Scenario.from_toml(POD_SCENARIO + f'[policy]\nname = "{name}"\n')
    run = run_scenario(sc, progress=False).runs["pods"]
    writes = [w for d in run.decisions for w in d["writes"]]
    assert {"cgroup": "kubepods/besteffort/pod-batch", "knob": knob, "value": value} in writes
    assert all(w["cgroup"] == "kubepods/besteffort/pod-batch" for w in writes if w["knob"] == knob)
