//! Autogroup (kernel/sched/autogroup.c): root-cgroup tasks scheduled in their session's task
//! group, weight 1024 at nice 0, beside the root's cgroups. Expected splits are worked by hand
//! from the fair class's weights: entities at one level share a CPU in proportion to weight.
mod common;
use common::*;
use serde_json::{json, Value};

fn spec(autogroup: bool, cgroups: Value, workloads: Value, sessions: Value) -> Value {
    json!({
        "topology": topo(1, 1),
        "kernel": {"autogroup": autogroup, "autogroup_sessions": sessions},
        "cgroups": cgroups,
        "workloads": workloads,
    })
}

/// Each workload's CPU time over 10 s after a 1 s warm-up.
fn run(spec: Value, names: &[&str]) -> Vec<f64> {
    let mut n = node(spec);
    n.run_until(S).unwrap();
    n.settle();
    let before: Vec<u64> = names.iter().map(|w| n.workload_usage(w).unwrap()).collect();
    n.run_until(11 * S).unwrap();
    n.settle();
    names
        .iter()
        .zip(before)
        .map(|(w, b)| (n.workload_usage(w).unwrap() - b) as f64)
        .collect()
}

fn near(got: f64, want: f64, tol: f64) -> bool {
    (got / want - 1.0).abs() < tol
}

#[test]
fn two_root_sessions_split_one_to_one_not_by_thread_count() {
    // One CPU. On: two autogroups of weight 1024 each → 1:1 whatever their threads.
    // Off: five nice-0 tasks of the root → 1 task : 4 tasks = 1:4.
    // Both fair classes: weights decide the long-run split in CFS and in EEVDF alike.
    for scheduler in ["cfs", "eevdf"] {
        let w = json!([hog("one", "", 1), hog("four", "", 4)]);
        let with = |on: bool| {
            let mut s = spec(on, json!([]), w.clone(), json!({}));
            s["kernel"]["scheduler"] = json!(scheduler);
            run(s, &["one", "four"])
        };
        let on = with(true);
        assert!(
            near(on[0] / on[1], 1.0, 0.02),
            "{scheduler} autogroup on: one/four = {}",
            on[0] / on[1]
        );
        assert_eq!(on[0] + on[1], (10 * S) as f64, "work-conserving");
        let off = with(false);
        assert!(
            near(off[0] / off[1], 0.25, 0.02),
            "{scheduler} autogroup off: one/four = {}",
            off[0] / off[1]
        );
    }
}

#[test]
fn root_session_beside_a_cgroup_of_shares_1024_splits_one_to_one() {
    // On: the session's group (1024) beside cgroup c (1024) → 1:1.
    // Off: two root tasks (1024 each) beside c's entity (1024) → 2:1.
    let cgroups = json!([cg("c", 1024, 0, 0)]);
    let w = json!([hog("root", "", 2), hog("inc", "c", 2)]);
    let on = run(spec(true, cgroups.clone(), w.clone(), json!({})), &["root", "inc"]);
    assert!(near(on[0] / on[1], 1.0, 0.02), "on: root/c = {}", on[0] / on[1]);
    let off = run(spec(false, cgroups, w, json!({})), &["root", "inc"]);
    assert!(near(off[0] / off[1], 2.0, 0.02), "off: root/c = {}", off[0] / off[1]);
}

#[test]
fn workloads_of_one_session_share_its_group() {
    // "one" and "four" in session s (one group of 1024 holding five tasks), "solo" in its own:
    // s gets 1/2, split 1:4 inside it (1/10 and 4/10); solo gets 1/2.
    let w = json!([hog("one", "", 1), hog("four", "", 4), hog("solo", "", 1)]);
    let got = run(
        spec(true, json!([]), w, json!({"one": "s", "four": "s"})),
        &["one", "four", "solo"],
    );
    let total = (10 * S) as f64;
    for (g, want) in got.iter().zip([0.1, 0.4, 0.5]) {
        assert!(near(g / total, want, 0.03), "{got:?}: want {want} of the CPU");
    }
}

#[test]
fn workloads_in_cgroups_are_unaffected() {
    // Nothing in the root: the run is the same event for event with autogroup on or off.
    let cgroups = json!([cg("a", 1024, 0, 0), cg("b", 512, 0, 0)]);
    let w = json!([hog("ha", "a", 3), hog("hb", "b", 3)]);
    let two = [true, false].map(|on| {
        let mut s = spec(on, cgroups.clone(), w.clone(), json!({}));
        s["topology"] = topo(2, 1);
        let mut n = node(s);
        n.run_until(5 * S).unwrap();
        n.settle();
        (n.events, usage(&mut n, "a"), usage(&mut n, "b"), n.cgroups.len())
    });
    assert_eq!(two[0], two[1]);
    assert_eq!(two[0].3, 3, "root, a, b: no autogroup was made");
}

#[test]
fn autogroups_are_not_reported_and_count_to_the_root() {
    let w = json!([hog("one", "", 1), hog("inc", "c", 1)]);
    let mut n = node(spec(true, json!([cg("c", 1024, 0, 0)]), w, json!({})));
    n.run_until(2 * S).unwrap();
    n.settle();
    assert_eq!(n.nr_reported_cgroups(), 2, "the root and c");
    assert!(
        n.cgroup_id("/autogroup-one").is_err(),
        "policies cannot name an autogroup"
    );
    // cpu_busy as reported: the root's column holds the session's CPU time.
    let busy = n.cpu_busy_reported();
    assert_eq!(busy.len(), 2);
    assert_eq!(busy[0], n.workload_usage("one").unwrap());
    assert_eq!(busy[1], n.workload_usage("inc").unwrap());
}

#[test]
fn a_session_for_a_cgroup_workload_is_refused() {
    let s = spec(
        true,
        json!([cg("c", 1024, 0, 0)]),
        json!([hog("inc", "c", 1)]),
        json!({"inc": "s"}),
    );
    let err = colosim_core::Node::from_json(&s.to_string()).err().expect("refused");
    assert!(err.to_string().contains("kernel.autogroup_sessions.inc"), "{err}");
    let s = spec(true, json!([]), json!([hog("one", "", 1)]), json!({"nope": "s"}));
    let err = colosim_core::Node::from_json(&s.to_string()).err().expect("refused");
    assert!(err.to_string().contains("no workload"), "{err}");
}
