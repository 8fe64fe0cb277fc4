//! CPU pressure (PSI) against its definition and the kernel's averaging.
mod common;
use colosim_core::Node;
use common::*;
use serde_json::json;

fn hogs_per_cpu(per_cpu: u32) -> Node {
    let mut n = node(json!({
        "topology": topo(2, 1),
        "cgroups": [{"name": "g"}],
        "workloads": [hog("h", "g", 2 * per_cpu)],
    }));
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(61 * S).unwrap();
    n
}

#[test]
fn one_runnable_task_per_cpu_is_no_pressure() {
    let mut n = hogs_per_cpu(1);
    n.settle();
    assert_eq!(n.cgroups[1].psi.total[0] - n.cgroups[1].psi_base[0], 0);
    assert!(n
        .read("g", "cpu.pressure")
        .unwrap()
        .starts_with("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"));
}

#[test]
fn two_runnable_tasks_per_cpu_is_full_some_pressure() {
    let mut n = hogs_per_cpu(2);
    n.settle();
    let g = &n.cgroups[1];
    let some = (g.psi.total[0] - g.psi_base[0]) as f64 / (60 * S) as f64;
    assert!(some > 0.999, "some {some}");
    // A task of the group is always on the CPU, so the group is never fully stalled.
    assert_eq!(g.psi.total[1] - g.psi_base[1], 0);
    // avg10 after 60 s at 100%: 100 (1 − (1677/2048)^30) ≈ 100; avg60 ≈ 100 (1 − (1981/2048)^30).
    let [a10, a60, a300] = n.pressure_avgs(1, 0);
    assert!(a10 > 99.5, "avg10 {a10}");
    let periods = 30.0; // 60 s of PSI_FREQ (2 s + a tick) updates, one short of 30
    let want60 = |k: f64| 100.0 * (1.0 - (1981.0f64 / 2048.0).powf(k));
    assert!(
        a60 > want60(periods - 2.0) && a60 < want60(periods + 1.0),
        "avg60 {a60}"
    );
    assert!(a300 > 5.0 && a300 < a60, "avg300 {a300}");
    // The node has the same SOME pressure; its FULL line is always zero for CPU.
    let node_text = n.read("", "cpu.pressure").unwrap();
    assert!(
        node_text.contains("full avg10=0.00 avg60=0.00 avg300=0.00 total=0"),
        "{node_text}"
    );
}

#[test]
fn throttled_tasks_count_as_stalled() {
    // A quota of half a CPU on one hog: it waits throttled half the time → SOME ≈ FULL ≈ 50%.
    let mut n = node(json!({
        "topology": topo(1, 1),
        "cgroups": [{"name": "g", "cpu.cfs_quota_us": 50_000}],
        "workloads": [hog("h", "g", 1)],
    }));
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(21 * S).unwrap();
    n.settle();
    let g = &n.cgroups[1];
    let some = (g.psi.total[0] - g.psi_base[0]) as f64 / (20 * S) as f64;
    let full = (g.psi.total[1] - g.psi_base[1]) as f64 / (20 * S) as f64;
    assert!(
        (some - 0.5).abs() < 0.02 && (full - 0.5).abs() < 0.02,
        "some {some} full {full}"
    );
}
