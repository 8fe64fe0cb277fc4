//! A closed loop served by a fixed pool of workers: a closed queueing network whose
//! throughput and latency follow from Little's law.
mod common;
use common::*;
use serde_json::json;

#[test]
fn pooled_closed_loop_obeys_littles_law() {
    // 50 clients, no think time, 4 workers with 10 ms of CPU each on 8 idle CPUs: the workers
    // are the bottleneck, X = 4 / 10 ms = 400/s, and every client is always waiting or being
    // served, so the mean latency is N / X = 50 / 400 = 125 ms.
    let mut n = node(json!({
        "topology": topo(8, 1),
        "cgroups": [cg("web", 1024, 0, 0)],
        "workloads": [{"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 50,
                       "workers": 4, "service": {"dist": "constant", "value_ns": 10_000_000}}],
    }));
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(11 * S).unwrap();
    n.check_invariants().unwrap();
    let svc = &n.services[n.service_id("web").unwrap()];
    let x = svc.completed as f64 / 10.0;
    assert!((x / 400.0 - 1.0).abs() < 0.01, "throughput {x}/s");
    let mean = svc.latencies.iter().sum::<u64>() as f64 / svc.latencies.len() as f64;
    assert!((mean / 125e6 - 1.0).abs() < 0.02, "mean latency {} ms", mean / 1e6);
    // Only the workers ever run: 4 CPUs busy, 4 idle.
    assert!((usage(&mut n, "web") as f64 / (4.0 * 10.0 * S as f64) - 1.0).abs() < 0.01);
}

#[test]
fn a_pool_needs_fanout_1_and_a_worker() {
    for (workers, fanout, needle) in [(0, 1, "must be >= 1"), (2, 4, "fanout 1")] {
        let spec = json!({
            "topology": topo(2, 1), "cgroups": [cg("web", 1024, 0, 0)],
            "workloads": [{"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 4, "fanout": fanout,
                           "workers": workers, "service": {"dist": "constant", "value_ns": 1_000}}],
        });
        let err = colosim_core::node::Node::from_json(&spec.to_string())
            .err()
            .expect("rejected")
            .to_string();
        assert!(err.contains(needle), "{err}");
    }
}

/// One worker, three clients that ask again at once, 1 ms of CPU a request on 2 idle CPUs;
/// the completion times (ms) of the first 10 ms.
fn completions_ms(replies: &str) -> (Vec<u64>, Vec<u64>) {
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [cg("kv", 1024, 0, 0)],
        "workloads": [{"kind": "closed_loop", "name": "kv", "cgroup": "kv", "clients": 3, "workers": 1,
                       "replies": replies, "service": {"dist": "constant", "value_ns": 1_000_000}}],
    }));
    n.run_until(10 * MS + MS / 2).unwrap();
    n.check_invariants().unwrap();
    let svc = &n.services[n.service_id("kv").unwrap()];
    (
        svc.completions.iter().map(|&t| t / MS).collect(),
        svc.latencies.iter().map(|&l| l / MS).collect(),
    )
}

#[test]
fn a_pass_writes_its_replies_when_its_last_request_is_done() {
    // Each reply at once: one a millisecond, FIFO behind the other two (3 ms once all wait).
    let (done, lat) = completions_ms("each");
    assert_eq!(done, (1..=10).collect::<Vec<_>>());
    assert_eq!(lat[..4], [1, 2, 3, 3]);
    // By pass (redis's beforeSleep): client 0's request starts a pass alone (the others queue
    // behind the worker it woke) and is answered at 1 ms; the next pass is the three waiting
    // then (1, 2, and 0 again), served 1-4 ms and answered together at 4; then every pass is
    // all three, answered at 7 and 10. The same throughput and mean wait once all three cycle
    // (Little's law: 3 clients / 1,000 a second = 3 ms), the replies in batches.
    let (done, lat) = completions_ms("pass");
    assert_eq!(done, [1, 4, 4, 4, 7, 7, 7, 10, 10, 10]);
    assert_eq!(lat, [1, 4, 4, 3, 3, 3, 3, 3, 3, 3]);
}

#[test]
fn replies_by_pass_need_a_pool() {
    let spec = json!({
        "topology": topo(2, 1), "cgroups": [cg("kv", 1024, 0, 0)],
        "workloads": [{"kind": "closed_loop", "name": "kv", "cgroup": "kv", "clients": 4, "replies": "pass",
                       "service": {"dist": "constant", "value_ns": 1_000}}],
    });
    let err = colosim_core::node::Node::from_json(&spec.to_string())
        .err()
        .expect("rejected")
        .to_string();
    assert!(err.contains("replies") && err.contains("needs workers"), "{err}");
}
