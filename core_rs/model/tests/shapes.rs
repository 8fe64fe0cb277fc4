//! Workload shapes (shape.rs): a request's CPU in bursts with sleeps between them, against
//! hand-worked single-CPU cases.
mod common;
use common::*;
use serde_json::json;

fn shaped_loop(scheduler: &str, extra: serde_json::Value, hogs: u32) -> colosim_core::Node {
    let mut w = json!({"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 1,
                       "service": {"dist": "constant", "value_ns": 10 * MS},
                       "shape": {"bursts": 2, "wait": {"dist": "constant", "value_ns": 3 * MS}}});
    for (k, v) in extra.as_object().unwrap() {
        w[k] = v.clone();
    }
    node(json!({
        "topology": topo(1, 1),
        "kernel": {"scheduler": scheduler},
        "cgroups": [cg("web", 1024, 0, 0), cg("batch", 1024, 0, 0)],
        "workloads": if hogs > 0 { json!([w, hog("stress", "batch", hogs)]) } else { json!([w]) },
    }))
}

#[test]
fn two_bursts_of_5ms_with_a_3ms_wait_take_13ms() {
    for scheduler in ["cfs", "eevdf"] {
        let mut n = shaped_loop(scheduler, json!({}), 0);
        n.run_until(13 * S).unwrap();
        n.check_invariants().unwrap();
        let svc = &n.services[n.service_id("web").unwrap()];
        assert_eq!(svc.completed, 1000, "{scheduler}");
        assert!(svc.latencies.iter().all(|&l| l == 13 * MS), "{scheduler}");
        // 10 ms of CPU a request; the 3 ms asleep are charged nothing
        assert_eq!(usage(&mut n, "web"), 1000 * 10 * MS, "{scheduler}");
    }
}

#[test]
fn a_hog_beside_it_takes_only_what_the_sleeper_leaves() {
    // The service's CPU stays 10 ms a request whatever the hog does, and the hog's and the
    // service's CPU add up to the node's: sleeping time goes to the hog, not to anyone's bill.
    for scheduler in ["cfs", "eevdf"] {
        let shape = json!({"shape": {"bursts": 4, "wait": {"dist": "exponential", "mean_ns": 2e6}}});
        let mut n = shaped_loop(scheduler, shape, 2);
        n.run_until(10 * S).unwrap();
        n.check_invariants().unwrap();
        let svc = &n.services[n.service_id("web").unwrap()];
        let (done, started) = (svc.completed, svc.started);
        assert!(svc.latencies.iter().all(|&l| l >= 10 * MS), "{scheduler}");
        let web = usage(&mut n, "web");
        assert!(
            done * 10 * MS <= web && web <= started * 10 * MS,
            "{scheduler}: {web} for {done}..{started}"
        );
        assert_eq!(web + usage(&mut n, "batch"), 10 * S, "{scheduler}");
    }
}
