//! A closed loop's load generator (client_cpu) and the wait inside each request (delay): the
//! generator's CPU is charged to the workload's cgroup, a delay to none, and the latency runs
//! from when the client is ready.
mod common;
use common::*;
use serde_json::json;

fn run(extra: serde_json::Value, workers: Option<u32>) -> (f64, Vec<u64>, f64) {
    let mut wl = json!({"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 4,
                        "service": {"dist": "constant", "value_ns": 1_000_000}});
    for (k, v) in extra.as_object().unwrap() {
        wl[k] = v.clone();
    }
    if let Some(w) = workers {
        wl["workers"] = json!(w);
    }
    let mut n = node(json!({"topology": topo(8, 1), "cgroups": [cg("web", 1024, 0, 0)], "workloads": [wl]}));
    n.run_until(S).unwrap();
    n.reset_stats();
    let before = usage(&mut n, "web");
    n.run_until(11 * S).unwrap();
    n.check_invariants().unwrap();
    let cpu = (usage(&mut n, "web") - before) as f64 / (10.0 * S as f64);
    let svc = &n.services[n.service_id("web").unwrap()];
    let qps = svc.completed as f64 / 10.0;
    (qps, svc.latencies.clone(), cpu)
}

#[test]
fn a_client_cost_is_cpu_in_the_cgroup_and_part_of_the_latency() {
    // 4 clients on 8 idle CPUs, each request 0.5 ms of the client's CPU + 1 ms of service:
    // every latency is 1.5 ms, X = 4 / 1.5 ms, and the cgroup uses X x 1.5 ms = 4 CPUs
    for workers in [None, Some(4)] {
        let (qps, lat, cpu) = run(
            json!({"client_cpu": {"dist": "constant", "value_ns": 500_000}}),
            workers,
        );
        assert!(lat.iter().all(|&l| l == 1_500_000), "{workers:?}: {:?}", &lat[..4]);
        assert!((qps / (4.0 / 1.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {qps}");
        assert!((cpu / (qps * 1.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {cpu}");
    }
}

#[test]
fn a_delay_is_latency_without_cpu() {
    // 2 ms of delay + 1 ms of service: latency 3 ms, X = 4 / 3 ms, CPU X x 1 ms only
    for workers in [None, Some(4)] {
        let (qps, lat, cpu) = run(json!({"delay": {"dist": "constant", "value_ns": 2_000_000}}), workers);
        assert!(lat.iter().all(|&l| l == 3_000_000), "{workers:?}");
        assert!((qps / (4.0 / 3e-3) - 1.0).abs() < 0.001, "{workers:?}: {qps}");
        assert!((cpu / (qps * 1e-3) - 1.0).abs() < 0.001, "{workers:?}: {cpu}");
    }
}

#[test]
fn a_client_cost_a_delay_and_a_shape_add_up() {
    // 4 clients on 8 idle CPUs: 0.5 ms of the client's CPU, a 2 ms delay, then 1 ms of service
    // in 2 bursts with 3 ms asleep between: every latency is 0.5 + 2 + 0.5 + 3 + 0.5 = 6.5 ms,
    // X = 4 / 6.5 ms, and the cgroup is charged only the CPU, X x 1.5 ms
    for workers in [None, Some(4)] {
        let (qps, lat, cpu) = run(
            json!({"client_cpu": {"dist": "constant", "value_ns": 500_000},
                   "delay": {"dist": "constant", "value_ns": 2_000_000},
                   "shape": {"bursts": 2, "wait": {"dist": "constant", "value_ns": 3_000_000}}}),
            workers,
        );
        assert!(lat.iter().all(|&l| l == 6_500_000), "{workers:?}: {:?}", &lat[..4]);
        assert!((qps / (4.0 / 6.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {qps}");
        assert!((cpu / (qps * 1.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {cpu}");
    }
}
