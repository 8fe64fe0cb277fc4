//! Fair sharing between groups, cpu.idle and qos_level, checked against the kernel's arithmetic.
mod common;
use common::*;
use serde_json::json;

#[test]
fn shares_1024_vs_512_split_two_to_one() {
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [cg("a", 1024, 0, 0), cg("b", 512, 0, 0)],
        "workloads": [hog("ha", "a", 4), hog("hb", "b", 4)],
    }));
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(11 * S).unwrap();
    let (a, b) = (usage(&mut n, "a") as f64, usage(&mut n, "b") as f64);
    let ratio = a / b;
    assert!((ratio / 2.0 - 1.0).abs() < 0.02, "a/b = {ratio}");
    // Work-conserving: both CPUs busy the whole time.
    assert_eq!(a as u64 + b as u64, 2 * 10 * S);
}

#[test]
fn shares_split_holds_with_uneven_thread_counts() {
    // 3 threads vs 5 threads on 4 CPUs: weights, not thread counts, decide.
    let mut n = node(json!({
        "topology": topo(4, 1),
        "cgroups": [cg("a", 1024, 0, 0), cg("b", 512, 0, 0)],
        "workloads": [hog("ha", "a", 6), hog("hb", "b", 10)],
    }));
    n.run_until(2 * S).unwrap();
    n.reset_stats();
    n.run_until(22 * S).unwrap();
    let (a, b) = (usage(&mut n, "a") as f64, usage(&mut n, "b") as f64);
    assert!((a / b / 2.0 - 1.0).abs() < 0.05, "a/b = {}", a / b);
}

#[test]
fn idle_group_starves_beside_normal_but_takes_all_cpu_alone() {
    let spec = |with_normal: bool| {
        let mut w = vec![hog("bg", "offline", 4)];
        if with_normal {
            w.push(hog("fg", "online", 4));
        }
        json!({
            "topology": topo(2, 1),
            "cgroups": [cg("online", 1024, 0, 0), cg("offline", 1024, 1, 0)],
            "workloads": w,
        })
    };
    let mut n = node(spec(true));
    n.run_until(10 * S).unwrap();
    let idle_share = usage(&mut n, "offline") as f64 / (2 * 10 * S) as f64;
    assert!(idle_share < 0.01, "cpu.idle group got {idle_share}");
    // Weight 3 (clamped to MIN_SHARES=2 per CPU) against 512: about 0.4%, not zero.
    assert!(
        idle_share > 0.001,
        "cpu.idle group got {idle_share}: SCHED_IDLE is not strict priority"
    );

    let mut n = node(spec(false));
    n.run_until(10 * S).unwrap();
    let alone = usage(&mut n, "offline") as f64 / (2 * 10 * S) as f64;
    assert!(alone > 0.999, "alone it got {alone}");
}

#[test]
fn qos_offline_gets_nothing_while_online_saturates() {
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [cg("online", 1024, 0, 0), cg("offline", 1024, 0, -1)],
        "workloads": [hog("fg", "online", 2), hog("bg", "offline", 4)],
    }));
    n.run_until(5 * S).unwrap();
    assert_eq!(usage(&mut n, "offline"), 0, "absolute preemption");
    assert_eq!(usage(&mut n, "online"), 2 * 5 * S);
}

#[test]
fn cpu_time_is_conserved_exactly() {
    let mut n = node(json!({
        "topology": {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 2},
        "cgroups": [cg("a", 1024, 0, 0), cg("b", 300, 1, 0)],
        "workloads": [
            hog("h", "b", 3),
            {"kind": "open_loop", "name": "web", "cgroup": "a", "rate_per_s": 900.0, "workers": 6,
             "service": {"dist": "exponential", "mean_ns": 2_000_000.0}},
        ],
        "sample_interval_ns": 50 * MS,
    }));
    for k in 1..=40 {
        n.run_until(k * 100 * MS).unwrap();
        n.settle();
        let total: u64 = n.hierarchical(|g| g.stats.usage_ns)[0];
        let busy: u64 = n.cpu_busy.iter().sum();
        assert_eq!(total, busy, "usage and per-CPU busy time agree");
        assert!(total <= 4 * n.now, "{total} > capacity {}", 4 * n.now);
    }
}

#[test]
fn runtime_knob_writes_take_effect() {
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [cg("online", 1024, 0, 0), cg("offline", 1024, 0, 0)],
        "workloads": [hog("fg", "online", 2), hog("bg", "offline", 2)],
    }));
    n.run_until(2 * S).unwrap();
    let before = usage(&mut n, "offline");
    assert!(
        (before as f64 / (2 * S) as f64 - 1.0).abs() < 0.05,
        "equal shares first: {before}"
    );
    n.write_knob("offline", "cpu.qos_level", -1).unwrap();
    n.reset_stats();
    n.run_until(4 * S).unwrap();
    assert_eq!(usage(&mut n, "offline"), 0);
    n.write_knob("offline", "cpu.qos_level", 0).unwrap();
    n.write_knob("offline", "cpu.idle", 1).unwrap();
    n.reset_stats();
    n.run_until(6 * S).unwrap();
    let idle = usage(&mut n, "offline") as f64 / (4 * S) as f64;
    assert!(idle > 0.0 && idle < 0.01, "{idle}");
    assert_eq!(n.read_knob("offline", "cpu.idle").unwrap(), 1);
    assert!(n
        .write_knob("offline", "cpu.shares", 1)
        .unwrap_err()
        .to_string()
        .contains("cpu.shares"));
}
