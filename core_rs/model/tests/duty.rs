//! A duty workload gives its cgroup exactly the CPU it is told (`cores`), changed at run
//! time as a trace player does, within 2% per second on a node with room for it.
mod common;
use common::*;
use serde_json::json;

#[test]
fn duty_follows_its_cores_second_by_second() {
    let mut n = node(json!({
        "topology": topo(8, 1),
        "cgroups": [cg("batch", 1024, 0, 0), cg("web", 1024, 0, 0)],
        "workloads": [
            {"kind": "duty", "name": "trace", "cgroup": "batch", "max_threads": 8},
            {"kind": "open_loop", "name": "svc", "cgroup": "web", "rate_per_s": 200.0, "workers": 4,
             "service": {"dist": "exponential", "mean_ns": 2_000_000}},
        ],
    }));
    let series = [0.5, 1.7, 3.2, 2.0, 0.0, 5.5, 7.25];
    let (mut before, mut prev) = (0, 0.0f64);
    for (i, &cores) in series.iter().enumerate() {
        n.set_workload("trace", "cores", cores).unwrap();
        n.run_until((i as u64 + 1) * S).unwrap();
        let used = usage(&mut n, "batch");
        let got = (used - before) as f64 / S as f64;
        before = used;
        // a new value takes effect at the next 10 ms period: within 2% of the series' level
        assert!(
            (got - cores).abs() <= 0.02 * cores.max(prev).max(0.05),
            "second {i}: asked {cores}, got {got:.4} cores"
        );
        prev = cores;
    }
    // the open loop's rate changes too, from its next arrival on
    n.set_workload("svc", "rate_per_s", 50.0).unwrap();
    let e = n.set_workload("svc", "cores", 1.0).unwrap_err().to_string();
    assert!(e.contains("has no run-time"), "{e}");
    assert!(n.set_workload("trace", "cores", 9.0).is_err());
}

#[test]
fn on_a_saturated_node_the_demand_is_not_met() {
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [cg("batch", 1024, 0, 0), cg("hogs", 1024, 0, 0)],
        "workloads": [
            {"kind": "duty", "name": "trace", "cgroup": "batch", "max_threads": 2, "cores": 2.0},
            hog("h", "hogs", 2),
        ],
    }));
    n.run_until(2 * S).unwrap();
    let got = usage(&mut n, "batch") as f64 / (2 * S) as f64;
    assert!(got < 1.2 && got > 0.8, "{got}"); // its fair half of 2 CPUs, not the 2 asked
}
