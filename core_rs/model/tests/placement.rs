//! cpusets, NUMA home nodes and the SMT expeller: where tasks may and may not run.
mod common;
use colosim_core::stats::percentile;
use colosim_core::Node;
use common::*;
use serde_json::json;

/// Replay a run trace: for each task, the CPUs it ran on after `from`.
fn cpus_used_by(n: &Node, tasks: &[usize], from: u64) -> Vec<usize> {
    let mut cpus: Vec<usize> = n
        .run_trace
        .as_ref()
        .unwrap()
        .iter()
        .filter(|(t, _, task)| *t >= from && task.is_some_and(|x| tasks.contains(&x)))
        .map(|&(_, cpu, _)| cpu)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

fn tasks_of(n: &Node, cg: &str) -> Vec<usize> {
    let id = n.cgroup_id(cg).unwrap();
    (0..n.tasks.len()).filter(|&t| n.tasks[t].cg == id).collect()
}

#[test]
fn tasks_stay_inside_their_cpuset_also_after_a_change() {
    let mut n = node(json!({
        "seed": 2,
        "topology": topo(4, 1),
        "cgroups": [{"name": "ls"}, {"name": "be", "cpuset.cpus": "2-3"}],
        "workloads": [hog("batch", "be", 4),
                      {"kind": "open_loop", "name": "web", "cgroup": "ls", "rate_per_s": 800.0, "workers": 8,
                       "service": {"dist": "exponential", "mean_ns": 1e6}}],
    }));
    n.run_trace = Some(vec![]);
    n.run_until(2 * S).unwrap();
    let be = tasks_of(&n, "be");
    assert_eq!(cpus_used_by(&n, &be, 0), vec![2, 3]);
    assert_eq!(n.read("be", "cpuset.cpus").unwrap(), "2-3");
    // Koordinator-style suppress: shrink the batch cpuset at run time.
    n.write("be", "cpuset.cpus", "3").unwrap();
    let t = n.now;
    n.run_until(4 * S).unwrap();
    assert_eq!(cpus_used_by(&n, &be, t), vec![3], "moved off CPU 2 at once");
    let web = tasks_of(&n, "ls");
    assert!(cpus_used_by(&n, &web, 0).len() == 4, "the service may use every CPU");
    n.check_invariants().unwrap();
    // Growing it back lets balancing spread the batch again.
    n.write("be", "cpuset.cpus", "0-3").unwrap();
    let t = n.now;
    n.run_until(6 * S).unwrap();
    assert_eq!(cpus_used_by(&n, &be, t).len(), 4);
    n.check_invariants().unwrap();
}

#[test]
fn cpuset_rules_of_cgroup_v1() {
    let mut n = node(
        json!({"topology": topo(4, 1), "cgroups": [{"name": "p", "cpuset.cpus": "0-1"}, {"name": "c", "parent": "p"}],
                            "workloads": [hog("h", "c", 1)]}),
    );
    assert_eq!(
        n.read("c", "cpuset.cpus").unwrap(),
        "0-1",
        "a child starts with its parent's set"
    );
    assert!(n
        .write("c", "cpuset.cpus", "2")
        .unwrap_err()
        .to_string()
        .contains("not within the parent"));
    assert!(n
        .write("p", "cpuset.cpus", "0")
        .unwrap_err()
        .to_string()
        .contains("shrink the child first"));
    assert!(n
        .write("c", "cpuset.cpus", "")
        .unwrap_err()
        .to_string()
        .contains("must not be empty"));
    assert!(n
        .write("c", "cpuset.cpus", "0-9")
        .unwrap_err()
        .to_string()
        .contains("0..3"));
    n.write("c", "cpuset.cpus", "1").unwrap();
    n.write("p", "cpuset.cpus", "1").unwrap();
}

#[test]
fn remote_numa_memory_runs_at_remote_speed() {
    // Two sockets, one node each; the service's memory is on node 1, its CPUs on node 0.
    let spec = |mems: &str| {
        json!({
            "topology": {"sockets": 2, "cores_per_socket": 1, "numa_remote_speed": 0.75},
            "cgroups": [{"name": "svc", "cpuset.cpus": "0", "cpuset.mems": mems}],
            "workloads": [{"kind": "closed_loop", "name": "s", "cgroup": "svc", "clients": 1,
                           "service": {"dist": "constant", "value_ns": 9_000_000}}],
        })
    };
    let p50 = |mems| {
        let mut n = node(spec(mems));
        n.run_until(S).unwrap();
        percentile(&n.services[0].latencies, 50.0).unwrap() as f64
    };
    assert!((p50("0") - 9e6).abs() < 1.0);
    assert!((p50("1") / 12e6 - 1.0).abs() < 1e-6, "{}", p50("1"));
}

#[test]
fn balancing_moves_the_task_whose_memory_is_on_the_idle_node() {
    // CPU 0 (node 0) runs three hogs: two with memory on node 0, one with memory on node 1.
    // When CPU 1 (node 1) opens up, the node-1 task is the one that moves there.
    let mut n = node(json!({
        "topology": {"sockets": 2, "cores_per_socket": 1},
        "cgroups": [{"name": "a", "cpuset.cpus": "0", "cpuset.mems": "0"},
                    {"name": "b", "cpuset.cpus": "0", "cpuset.mems": "1"}],
        "workloads": [hog("ha", "a", 2), hog("hb", "b", 1)],
    }));
    n.run_until(S).unwrap();
    n.write("a", "cpuset.cpus", "0-1").unwrap();
    n.write("b", "cpuset.cpus", "0-1").unwrap();
    n.run_until(2 * S).unwrap();
    let b = tasks_of(&n, "b")[0];
    assert_eq!(n.tasks[b].cpu, 1, "the node-1 task moved to node 1");
    assert!(tasks_of(&n, "a").iter().all(|&t| n.tasks[t].cpu == 0));
}

fn expeller_run(on: bool) -> (Node, Vec<usize>, Vec<usize>) {
    let mut n = node(json!({
        "seed": 4,
        "topology": {"sockets": 1, "cores_per_socket": 1, "threads_per_core": 2},
        "kernel": {"smt_expeller": on},
        "cgroups": [{"name": "online"}, {"name": "offline", "cpu.qos_level": -1}],
        "workloads": [hog("bg", "offline", 2),
                      {"kind": "open_loop", "name": "web", "cgroup": "online", "rate_per_s": 300.0, "workers": 2,
                       "service": {"dist": "exponential", "mean_ns": 1e6}}],
    }));
    n.run_trace = Some(vec![]);
    n.run_until(5 * S).unwrap();
    let (on_t, off_t) = (tasks_of(&n, "online"), tasks_of(&n, "offline"));
    (n, on_t, off_t)
}

/// Nanoseconds during which one sibling ran online work while the other ran offline work.
fn overlap(n: &Node, online: &[usize], offline: &[usize]) -> u64 {
    let mut curr: [Option<usize>; 2] = [None, None];
    let mut last = 0;
    let mut total = 0;
    for &(t, cpu, task) in n.run_trace.as_ref().unwrap() {
        let mixed = |c: &[Option<usize>; 2]| {
            let is = |x: Option<usize>, set: &[usize]| x.is_some_and(|x| set.contains(&x));
            (is(c[0], online) && is(c[1], offline)) || (is(c[1], online) && is(c[0], offline))
        };
        if mixed(&curr) {
            total += t - last;
        }
        curr[cpu] = task;
        last = t;
    }
    total
}

#[test]
fn smt_expeller_keeps_offline_off_the_sibling_of_online_work() {
    let (n, online, offline) = expeller_run(true);
    assert_eq!(overlap(&n, &online, &offline), 0);
    assert!(n.services[0].completed > 1000);
    n.check_invariants().unwrap();
    let (n, online, offline) = expeller_run(false);
    assert!(
        overlap(&n, &online, &offline) > 100_000_000,
        "without the expeller they do share a core"
    );
}

#[test]
fn the_expeller_lets_go_when_online_work_leaves_by_a_knob_write() {
    // Review finding: making the online group offline at run time must release the sibling.
    let mut n = node(json!({
        "kernel": {"smt_expeller": true},
        "topology": {"sockets": 1, "cores_per_socket": 1, "threads_per_core": 2},
        "cgroups": [{"name": "on", "cpuset.cpus": "0"}, {"name": "off", "cpu.qos_level": -1, "cpuset.cpus": "1"}],
        "workloads": [hog("a", "on", 1), hog("b", "off", 1)],
    }));
    n.run_until(10 * MS).unwrap();
    n.write("on", "cpu.qos_level", "-1").unwrap();
    n.reset_stats();
    n.run_until(5 * S).unwrap();
    assert!(usage(&mut n, "off") > 4 * S, "the sibling stayed expelled");
    n.check_invariants().unwrap();
}

#[test]
fn balancing_does_not_migrate_a_task_that_started_running() {
    // Review finding: a preemption check during balancing (expeller → schedule of the source
    // CPU) used to start a later candidate, which was then migrated while running.
    let mut n = node(json!({"seed": 15109, "kernel": {"hz": 1000, "smt_expeller": true},
        "topology": {"cores_per_socket": 1, "threads_per_core": 2},
        "cgroups": [{"name": "g0", "cpu.cfs_quota_us": 169430}, {"name": "g1", "cpu.qos_level": -1}],
        "workloads": [{"kind": "open_loop", "name": "w1", "cgroup": "g1", "rate_per_s": 1253.6, "workers": 2,
                       "service": {"dist": "exponential", "mean_ns": 868396.5}},
                      {"kind": "closed_loop", "name": "w4", "cgroup": "g0", "clients": 2, "fanout": 3,
                       "service": {"dist": "exponential", "mean_ns": 2709004.6}}]}));
    for k in 1..=20 {
        n.run_until(k * 50 * MS).unwrap();
        n.check_invariants().unwrap();
    }
}

#[test]
fn idle_groups_shares_follow_the_kernel() {
    let mut n = node(json!({"topology": topo(1, 1), "cgroups": [{"name": "g", "cpu.shares": 512}]}));
    n.write("g", "cpu.idle", "1").unwrap();
    assert_eq!(n.read("g", "cpu.shares").unwrap(), "3");
    assert!(n
        .write("g", "cpu.shares", "100")
        .unwrap_err()
        .to_string()
        .contains("EINVAL"));
    n.write("g", "cpu.idle", "0").unwrap();
    assert_eq!(
        n.read("g", "cpu.shares").unwrap(),
        "1024",
        "cleared idle resets to NICE_0_LOAD, not the old 512"
    );
}
