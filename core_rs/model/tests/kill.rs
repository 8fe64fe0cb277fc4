//! cgroup.kill: every task of the subtree leaves for good, its workloads stop, and the CPUs
//! go to what is left (work conservation), with the bookkeeping intact.
mod common;
use common::*;
use serde_json::json;

#[test]
fn killed_group_stops_and_the_rest_takes_every_cpu() {
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [
            cg("be", 1024, 0, 0),
            {"name": "be/pod", "parent": "be", "cpu.shares": 2, "cpu.cfs_quota_us": 50_000},
            cg("ls", 1024, 0, 0),
        ],
        "workloads": [
            hog("batch", "be/pod", 3),
            {"kind": "closed_loop", "name": "web", "cgroup": "ls", "clients": 4, "fanout": 1,
             "think": {"dist": "constant", "value_ns": 1_000_000},
             "service": {"dist": "constant", "value_ns": 2_000_000}, "start_ns": 0},
        ],
    }));
    n.run_until(2 * S).unwrap();
    n.write("be", "cgroup.kill", "1").unwrap();
    n.check_invariants().unwrap();
    assert_eq!(
        n.nr_tasks_in(n.cgroup_id("be").unwrap()),
        3,
        "tasks stay listed but never run"
    );
    assert_eq!(n.nr_running_in(n.cgroup_id("be").unwrap()), 0);
    n.reset_stats();
    n.run_until(12 * S).unwrap();
    n.check_invariants().unwrap();
    assert_eq!(usage(&mut n, "be"), 0, "a killed group runs nothing");
    // 4 clients alone on 2 CPUs, 2 ms of work and 1 ms of thought each: the CPUs, not the
    // clients, are the bottleneck, so the service completes 2 CPUs / 2 ms = 1000 requests/s.
    let done = n.services[n.service_id("web").unwrap()].completed;
    assert!((done as f64 / 10_000.0 - 1.0).abs() < 0.02, "completed {done} in 10 s");
    // Killing the service stops its requests too.
    n.write("ls", "cgroup.kill", "1").unwrap();
    n.reset_stats();
    n.run_until(14 * S).unwrap();
    assert_eq!(n.services[n.service_id("web").unwrap()].completed, 0);
    assert_eq!(usage(&mut n, ""), 0);
    n.check_invariants().unwrap();
}

#[test]
fn cgroup_kill_takes_only_1() {
    let mut n = node(json!({"topology": topo(1, 1), "cgroups": [cg("a", 1024, 0, 0)], "workloads": []}));
    let err = n.write("a", "cgroup.kill", "0").unwrap_err().to_string();
    assert!(err.contains("only takes 1"), "{err}");
}
