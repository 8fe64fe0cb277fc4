//! `[kernel] group_shares = "pelt"` (pelt.rs) in a running node: the averages the ticks keep,
//! the shares the kernel's `calc_group_shares` gives from them, and "instant" unchanged.
mod common;
use colosim_core::Node;
use common::*;
use serde_json::{json, Value};

/// The host's 2 ms ping-pong beside `stress` (experiments/handoff_ablation.py), lognormal bursts.
fn handoff(group_shares: Option<&str>) -> Value {
    let burst = json!({"dist": "lognormal", "mean_ns": 2e6, "sigma": 0.3});
    let mut kernel = json!({"scheduler": "eevdf", "version": "6.18.44"});
    if let Some(g) = group_shares {
        kernel["group_shares"] = json!(g);
    }
    json!({
        "seed": 2,
        "kernel": kernel,
        "topology": topo(2, 1),
        "cgroups": [{"name": "online"}, {"name": "offline"}],
        "workloads": [
            {"kind": "closed_loop", "name": "pingpong", "cgroup": "online", "clients": 10,
             "service": burst, "client_cpu": burst},
            hog("stress", "offline", 10),
        ],
    })
}

fn trace(spec: Value) -> Vec<(u64, usize, Option<usize>)> {
    let mut n = node(spec);
    n.run_trace = Some(vec![]);
    n.run_until(2 * S).unwrap();
    n.check_invariants().unwrap();
    n.run_trace.take().unwrap()
}

#[test]
fn instant_shares_are_the_model_before_pelt_event_for_event() {
    let before = trace(handoff(None));
    assert!(before.len() > 1000);
    assert_eq!(trace(handoff(Some("instant"))), before);
    // ... and the switch does switch something.
    assert_ne!(trace(handoff(Some("pelt"))), before);
}

fn group_rq(n: &Node, name: &str, cpu: usize) -> usize {
    n.cgroup_id(name).unwrap() * n.ncpus() + cpu
}

#[test]
fn a_running_groups_queue_averages_its_weight_at_every_tick() {
    // One nice-0 hog in group a, alone on its CPU from t = 0: forked at its full load
    // (init_entity_runnable_average) and attached to the queue at once
    // (attach_entity_load_avg), so the queue's load_avg is 1024 from the start and stays
    // there, updated at every tick although nothing else happens there (pelt.c: always
    // runnable at 1024 keeps the sum at 1024 × the divider).
    let mut n = node(json!({
        "kernel": {"scheduler": "eevdf", "version": "6.18.44", "group_shares": "pelt"},
        "topology": topo(2, 1),
        "cgroups": [cg("a", 1024, 0, 0)],
        "workloads": [hog("a", "a", 1)],
    }));
    for t in [20 * MS, 33 * MS + MS / 2, 101 * MS, 400 * MS] {
        n.run_until(t).unwrap();
        let cpu = (0..2).find(|&c| n.cpus[c].curr.is_some()).unwrap();
        let r = &n.rqs[group_rq(&n, "a", cpu)];
        let last = r.avg.last_update_time;
        assert!(t - last <= n.tun.tick_ns, "not updated since {last} at {t}");
        let want = 1024.0;
        assert!(
            (r.avg.load_avg as f64 - want).abs() <= 2.0,
            "{} want {want:.1} at {last}",
            r.avg.load_avg
        );
        // tg->load_avg is this queue's published contribution, within the refresh rule.
        let g = &n.cgroups[n.cgroup_id("a").unwrap()];
        assert_eq!(g.total_load, g.load_contrib[cpu]);
        let c = g.load_contrib[cpu];
        let fresh = r.tg_load_written.is_some_and(|w| n.now - w < MS);
        assert!(
            fresh || r.avg.load_avg.abs_diff(c) <= c / 64,
            "contrib {c} vs {}",
            r.avg.load_avg
        );
        assert_eq!(n.rqs[group_rq(&n, "a", 1 - cpu)].avg.load_avg, 0);
    }
}

#[test]
fn a_new_queue_weighs_against_the_average_the_other_cpu_published() {
    // Group a: a hog from t = 0 (CPU X), a second from t = 100 ms (the idle CPU Y). Each is
    // forked at its full load and attached to its queue at once (init_entity_runnable_average,
    // attach_entity_load_avg): when the second is queued Y's average is 1024 — load =
    // max(1024, 1024) — and tg->load_avg is X's published 1024. shares = 1024 × 1024 /
    // (1024 + 1024) = 512, as instantaneous weights give. (With queues that ramped from 0, Y's
    // entity would weigh 1024 × 1024 / (c + 1024) with X's c ≈ 885 published: 546–553.)
    for (mode, lo, hi) in [("pelt", 511, 513), ("instant", 512, 512)] {
        let mut n = node(json!({
            "kernel": {"scheduler": "eevdf", "version": "6.18.44", "group_shares": mode},
            "topology": topo(2, 1),
            "cgroups": [cg("a", 1024, 0, 0)],
            "workloads": [hog("a1", "a", 1), {"kind": "hog", "name": "a2", "cgroup": "a", "threads": 1, "start_ns": 100 * MS}],
        }));
        n.run_until(100 * MS + MS / 2).unwrap();
        let y = n.tasks.iter().find(|t| t.wl == 1).unwrap().cpu;
        let gse = n.rqs[group_rq(&n, "a", y)].gse.unwrap();
        let w = n.ses[gse].weight >> 10;
        assert!((lo..=hi).contains(&w), "{mode}: group entity on the new CPU weighs {w}");
    }
}
