//! Bad or absurd input gets one error naming the field, never an abort: an overloaded open
//! loop drops what its backlog cannot hold, a node or workload beyond what kernels support
//! is refused, and a run that would keep more than its memory budget stops with a message.
mod common;
use colosim_core::Node;
use common::*;
use serde_json::{json, Value};
use std::time::Instant;

fn open_loop(rate: f64, workers: u32, mean_ns: u64, backlog: Option<u32>) -> Value {
    let mut w = json!({"kind": "open_loop", "name": "web", "cgroup": "web", "rate_per_s": rate,
                       "workers": workers, "service": {"dist": "exponential", "mean_ns": mean_ns}});
    if let Some(b) = backlog {
        w["backlog"] = json!(b);
    }
    w
}

fn refused(spec: Value) -> String {
    Node::from_json(&spec.to_string())
        .err()
        .expect("the spec should be refused")
        .to_string()
}

/// Waiting requests of the node's one open loop.
fn waiting(n: &Node) -> usize {
    match &n.workloads[0] {
        colosim_core::workload::Workload::OpenLoop(o) => o.queue.len(),
        _ => unreachable!(),
    }
}

#[test]
fn an_overloaded_open_loop_drops_what_its_backlog_cannot_hold() {
    // λ = 10,000/s against μ = 2 workers / 2 ms = 1,000/s on 8 idle CPUs, for T = 20 s: the
    // workers serve ≈ μT = 20,000; the backlog (100) stays full, so the rest of the λT =
    // 200,000 arrivals, ≈ (λ − μ)T = 180,000, are dropped.
    let mut n = node(json!({"topology": topo(8, 1), "cgroups": [cg("web", 1024, 0, 0)],
                            "workloads": [open_loop(10_000.0, 2, 2 * MS, Some(100))]}));
    let mut most = 0;
    for k in 1..=20 {
        n.run_until(k * S).unwrap();
        most = most.max(waiting(&n));
    }
    n.settle();
    n.check_invariants().unwrap();
    let s = &n.services[0];
    assert!(most <= 100, "queue reached {most}");
    assert!(
        (s.completed as f64 / 20_000.0 - 1.0).abs() < 0.03,
        "completed {}",
        s.completed
    );
    assert!(
        (s.dropped as f64 / 180_000.0 - 1.0).abs() < 0.02,
        "dropped {}",
        s.dropped
    );
    // every arrival is accepted or dropped: λT within a few standard deviations (√200,000 ≈ 450)
    let arrivals = (s.started + s.dropped) as f64;
    assert!((arrivals - 200_000.0).abs() < 2_000.0, "arrivals {arrivals}");
}

#[test]
fn a_rate_of_a_trillion_finishes_at_once_with_its_drops_counted() {
    let t = Instant::now();
    let mut n = node(json!({"topology": topo(8, 1), "cgroups": [cg("web", 1024, 0, 0)],
                            "workloads": [open_loop(1e12, 2, 2 * MS, None)]}));
    n.run_until(10 * S).unwrap();
    n.settle();
    assert!(t.elapsed().as_secs_f64() < 5.0, "took {:?}", t.elapsed());
    let s = &n.services[0];
    assert!(waiting(&n) <= 4096, "the default backlog is somaxconn's 4096");
    assert!(
        (s.completed as f64 / 10_000.0 - 1.0).abs() < 0.05,
        "completed {}",
        s.completed
    );
    assert!((s.dropped as f64 / 1e13 - 1.0).abs() < 1e-3, "dropped {}", s.dropped);
}

#[test]
fn under_capacity_nothing_is_dropped() {
    let mut n = node(json!({"topology": topo(8, 1), "cgroups": [cg("web", 1024, 0, 0)],
                            "workloads": [open_loop(500.0, 2, 2 * MS, None)]}));
    n.run_until(10 * S).unwrap();
    n.settle();
    assert_eq!(n.services[0].dropped, 0);
}

#[test]
fn a_backlog_of_zero_serves_only_what_finds_a_free_worker() {
    // Erlang's loss system M/M/1/1: λ = μ = 100/s drops a share λ/(λ + μ) = 1/2.
    let mut n = node(json!({"topology": topo(4, 1), "cgroups": [cg("web", 1024, 0, 0)],
                            "workloads": [open_loop(100.0, 1, 10 * MS, Some(0))]}));
    n.run_until(200 * S).unwrap();
    n.settle();
    let s = &n.services[0];
    let lost = s.dropped as f64 / (s.started + s.dropped) as f64;
    assert!((lost - 0.5).abs() < 0.02, "lost {lost}");
}

#[test]
fn nodes_beyond_what_kernels_support_are_refused() {
    let wl = |threads: u32| json!([{"kind": "hog", "name": "h", "cgroup": "g", "threads": threads}]);
    for (topology, needle) in [
        (
            json!({"sockets": 64, "cores_per_socket": 100_000, "threads_per_core": 2}),
            "topology: 64 sockets × 100000 cores × 2 threads = 12800000 logical CPUs; at most 8192 (NR_CPUS)",
        ),
        (
            json!({"sockets": 1, "cores_per_socket": 8, "threads_per_core": 64}),
            "topology.threads_per_core: at most 8",
        ),
        (
            json!({"sockets": 2, "cores_per_socket": 2048, "numa_nodes_per_socket": 1024}),
            "topology.numa_nodes_per_socket: 2 sockets × 1024 = 2048 NUMA nodes; at most 1024",
        ),
    ] {
        let msg = refused(json!({"topology": topology, "cgroups": [cg("g", 1024, 0, 0)], "workloads": wl(1)}));
        assert!(msg.starts_with(needle), "{msg}");
    }
    // the largest node is fine
    let big = json!({"sockets": 8, "cores_per_socket": 512, "threads_per_core": 2});
    node(json!({"topology": big, "cgroups": [cg("g", 1024, 0, 0)], "workloads": wl(1)}));
    let msg = refused(json!({"topology": topo(2, 1), "cgroups": [cg("g", 1024, 0, 0)], "workloads": wl(u32::MAX)}));
    assert!(
        msg.starts_with("workloads[0].threads: at most 4194304 (PID_MAX_LIMIT"),
        "{msg}"
    );
    let two = json!([{"kind": "hog", "name": "a", "cgroup": "g", "threads": 3_000_000},
                     {"kind": "closed_loop", "name": "b", "cgroup": "g", "clients": 1_000_000, "fanout": 2,
                      "service": {"dist": "constant", "value_ns": 1000}}]);
    let msg = refused(json!({"topology": topo(2, 1), "cgroups": [cg("g", 1024, 0, 0)], "workloads": two}));
    assert!(
        msg.starts_with("workloads: 5000000 threads by workloads[1] (\"b\")"),
        "{msg}"
    );
    let msg = refused(json!({"topology": topo(2, 1), "cgroups": [cg("web", 1024, 0, 0)],
                             "workloads": [open_loop(1.0, 1, MS, Some(u32::MAX))]}));
    assert!(msg.starts_with("workloads[0].backlog: at most 16777216"), "{msg}");
}

#[test]
fn sampling_beyond_the_memory_budget_is_refused_before_it_runs() {
    let mut n = node(json!({"topology": topo(2, 1), "cgroups": [cg("g", 1024, 0, 0)],
                            "workloads": [{"kind": "hog", "name": "h", "cgroup": "g", "threads": 1}],
                            "sample_interval_ns": 1}));
    let msg = n.run_until(60 * S).unwrap_err().to_string();
    assert!(
        msg.starts_with("sample_interval_ns: sampling every 1 ns up to 60.000 s keeps"),
        "{msg}"
    );
    assert!(msg.ends_with("sample less often"), "{msg}");
    assert_eq!(n.events, 0, "nothing ran");
}

#[test]
fn latency_records_beyond_the_memory_budget_stop_the_run() {
    let mut n = node(json!({"topology": topo(8, 1), "cgroups": [cg("web", 1024, 0, 0)],
                            "workloads": [open_loop(100_000.0, 8, 10_000, None)]}));
    n.memory_budget = 1 << 20; // 65,536 records
    let msg = n.run_until(10 * S).unwrap_err().to_string();
    assert!(msg.contains("completed requests") && msg.contains("\"web\""), "{msg}");
    assert!(n.now < S, "stopped at {}", n.now);
}
