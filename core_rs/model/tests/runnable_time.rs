//! `runnable_time`: per CPU, how long a group had k of its tasks runnable there — hand-worked
//! from what a cpuset and a duty cycle promise.
mod common;
use common::*;
use serde_json::json;

#[test]
fn a_cpuset_holds_every_runnable_task_on_its_cpu() {
    // three hogs confined to CPU 0: three runnable there all the time, none on CPU 1; the
    // root counts them too (its queue holds the group's), and the counts start at the reset
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [{"name": "pinned", "cpuset.cpus": "0"}],
        "workloads": [hog("h", "pinned", 3)],
    }));
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(3 * S).unwrap();
    for g in ["pinned", ""] {
        let t = n.runnable_time(g).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0][3], 2 * S, "{g}: {:?}", t[0]);
        assert_eq!(t[0].iter().sum::<u64>(), 2 * S);
        assert_eq!(t[1][0], 2 * S, "{g}: {:?}", t[1]);
    }
}

#[test]
fn a_duty_cycle_alone_is_runnable_its_share_of_the_time() {
    // one thread asking a quarter of a CPU in 10 ms periods, alone on the node: runnable a
    // quarter of the time, on whichever CPU it runs — summed over the CPUs, 1 runnable for
    // 0.25 × 4 s; each CPU's row covers the 4 s, and never 2
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [cg("batch", 1024, 0, 0)],
        "workloads": [{"kind": "duty", "name": "d", "cgroup": "batch", "max_threads": 1, "cores": 0.25}],
    }));
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(5 * S).unwrap();
    let t = n.runnable_time("batch").unwrap();
    let at1: u64 = t.iter().map(|c| c[1]).sum();
    assert!((at1 as f64 / (4 * S) as f64 - 0.25).abs() < 0.005, "{t:?}");
    assert!(
        t.iter()
            .all(|c| c.iter().sum::<u64>() == 4 * S && c[2..].iter().all(|&x| x == 0)),
        "{t:?}"
    );
    assert!(n.runnable_time("nope").is_err());
}
