//! Memory workloads on a node: a `stress --vm` worker's time to allocate is its touch cost
//! plus what reclaim and memory.high add; memory.max ends in the OOM killer's choice;
//! lowering a limit at run time reclaims or kills; a memory-free node is untouched.
mod common;
use colosim_core::memcg::PAGE;
use common::*;
use serde_json::{json, Value};

const MI: u64 = 1 << 20;

fn mem_node(cgroups: Value, workloads: Value) -> colosim_core::Node {
    node(json!({
        "topology": topo(2, 1),
        "memory": {"total_bytes": 8u64 << 30},
        "cgroups": cgroups,
        "workloads": workloads,
    }))
}

fn vm(name: &str, cg: &str, bytes: u64, mode: &str) -> Value {
    json!({"kind": "memory_hog", "name": name, "cgroup": cg, "bytes": bytes, "mode": mode})
}

fn mem(n: &colosim_core::Node, cg: &str) -> colosim_core::memcg::MemCg {
    n.memory.as_ref().unwrap().cgs[n.cgroup_id(cg).unwrap()].clone()
}

#[test]
fn a_worker_allocates_at_its_touch_cost_then_holds() {
    let mut n = mem_node(json!([cg("a", 1024, 0, 0)]), json!([vm("vm", "a", 100 * MI, "keep")]));
    // 25,600 pages × 800 ns = 20.48 ms of CPU on an idle CPU
    n.run_until(20 * MS).unwrap();
    assert!(mem(&n, "a").usage < 100 * MI);
    n.run_until(21 * MS).unwrap();
    assert_eq!(mem(&n, "a").usage, 100 * MI);
    assert_eq!(mem(&n, "").usage, 100 * MI);
    // keep: it re-dirties what it holds, a CPU hog with its memory
    n.run_until(S).unwrap();
    assert_eq!(mem(&n, "a").usage, 100 * MI);
    assert!(usage(&mut n, "a") > 990 * MS);
}

#[test]
fn churn_frees_and_starts_over_and_hang_sleeps_holding_it() {
    let mut n = mem_node(
        json!([cg("a", 1024, 0, 0), cg("b", 1024, 0, 0)]),
        json!([
            vm("churn", "a", 10 * MI, "churn"),
            {"kind": "memory_hog", "name": "hang", "cgroup": "b", "bytes": 10 * MI, "mode": "hang", "hang_ns": 100 * MS},
        ]),
    );
    n.run_until(S).unwrap();
    let a = mem(&n, "a");
    assert!(a.usage <= 10 * MI && a.peak == 10 * MI);
    // the hanging worker: 2.05 ms to allocate, 100 ms asleep holding it, free, again
    assert!(usage(&mut n, "b") < 30 * MS, "hang used {} ns", usage(&mut n, "b"));
    assert!(usage(&mut n, "a") > 990 * MS);
}

#[test]
fn memory_max_without_swap_kills_the_biggest_worker_inside_the_group() {
    let mut n = mem_node(
        json!([
            {"name": "a", "memory.limit_in_bytes": 150 * MI},
            cg("b", 1024, 0, 0),
        ]),
        json!([
            {"kind": "memory_hog", "name": "big", "cgroup": "a", "bytes": 100 * MI, "mode": "keep"},
            {"kind": "memory_hog", "name": "small", "cgroup": "a", "bytes": 60 * MI, "mode": "keep", "start_ns": 50 * MS},
            vm("outside", "b", 500 * MI, "keep"),
        ]),
    );
    n.run_until(S).unwrap();
    // small's last chunk does not fit: the OOM killer takes big (100 MiB beats 59), in a only
    assert_eq!(n.oom_kills, vec![1, 0, 0]);
    let a = mem(&n, "a");
    assert_eq!(a.usage, 60 * MI);
    assert!(a.usage <= a.max && a.events.oom == 1 && a.events.oom_kill == 1);
    assert_eq!(mem(&n, "b").usage, 500 * MI);
    n.check_invariants().unwrap();
}

#[test]
fn memory_high_throttles_the_allocator_by_the_kernel_penalty_and_never_kills() {
    let mut n = mem_node(
        json!([{"name": "a", "memory.high": 50 * MI}]),
        json!([{"kind": "memory_hog", "name": "vm", "cgroup": "a", "bytes": 60 * MI, "chunk_bytes": PAGE * 64, "mode": "keep"}]),
    );
    // without high the 60 MiB take 12.3 ms; above high every 64-page chunk sleeps the
    // quadratic penalty (4% over: 102 ms ... 20% over: 2 s)
    n.run_until(2 * S).unwrap();
    let a = mem(&n, "a");
    assert!(a.usage < 60 * MI, "still allocating after 2 s: {} MiB", a.usage / MI);
    assert!(a.usage > 50 * MI && a.events.high > 0 && a.events.oom == 0);
    assert_eq!(n.oom_kills, vec![0]);
}

#[test]
fn lowering_the_limit_at_run_time_kills_when_nothing_can_be_reclaimed() {
    let mut n = mem_node(json!([cg("a", 1024, 0, 0)]), json!([vm("vm", "a", 100 * MI, "keep")]));
    n.run_until(100 * MS).unwrap();
    assert_eq!(n.read_knob("a", "memory.limit_in_bytes").unwrap(), -1);
    n.write_knob("a", "memory.limit_in_bytes", (50 * MI) as i64).unwrap();
    assert_eq!(n.oom_kills, vec![1]);
    assert_eq!(mem(&n, "a").usage, 0);
    let used = usage(&mut n, "a");
    n.run_until(200 * MS).unwrap(); // the killed worker never runs again
    assert_eq!(usage(&mut n, "a"), used);
    n.check_invariants().unwrap();
}

#[test]
fn same_seed_same_memory_run() {
    let run = || {
        let mut n = mem_node(
            json!([{"name": "a", "memory.limit_in_bytes": 64 * MI, "memory.high": 48 * MI}]),
            json!([{"kind": "memory_hog", "name": "vm", "cgroup": "a", "threads": 3, "bytes": 30 * MI, "mode": "churn"}]),
        );
        n.run_until(3 * S).unwrap();
        let a = mem(&n, "a");
        (a.usage, a.peak, a.events, n.oom_kills.clone(), usage(&mut n, "a"))
    };
    assert_eq!(run(), run());
}

#[test]
fn bad_memory_settings_are_named() {
    let bad = |spec: Value| {
        colosim_core::Node::from_json(&spec.to_string())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = bad(json!({"topology": topo(1, 1), "memory": {"total_bytes": 1 << 30},
        "cgroups": [{"name": "a", "memory.limit_in_bytes": 100, "memory.high": 200}]}));
    assert!(
        e.contains("cgroups[0].memory.high") && e.contains("must not be above memory.limit_in_bytes"),
        "{e}"
    );
    let e = bad(
        json!({"topology": topo(1, 1), "memory": {"total_bytes": 1 << 30}, "cgroups": [{"name": "a", "memory.min": -5}]}),
    );
    assert!(e.contains("cgroups[0].memory.min") && e.contains(">= 0"), "{e}");
    let e = bad(json!({"topology": topo(1, 1), "cgroups": [{"name": "a"}], "workloads": [vm("vm", "a", MI, "keep")]}));
    assert!(
        e.contains("workloads[0].kind") && e.contains("needs the node's memory"),
        "{e}"
    );
    let e = bad(
        json!({"topology": topo(1, 1), "memory": {"total_bytes": 1 << 30}, "cgroups": [{"name": "a"}],
        "workloads": [{"kind": "memory_hog", "name": "vm", "cgroup": "a", "bytes": MI, "oom_score_adj": 2000}]}),
    );
    assert!(e.contains("workloads[0].oom_score_adj"), "{e}");
}

#[test]
fn vendor_memcg_knobs_exist_only_on_their_kernels() {
    let mut n = mem_node(json!([cg("a", 1024, 0, 0)]), json!([]));
    let e = n.write_knob("a", "memory.wmark_ratio", 80).unwrap_err().to_string();
    assert!(e.contains("Alibaba Cloud Linux memcg extension"), "{e}");
    let e = n
        .write_knob("a", "memory.high_async_ratio", 80)
        .unwrap_err()
        .to_string();
    assert!(e.contains("openEuler memcg extension"), "{e}");
    let mut n = node(json!({"topology": topo(1, 1), "memory": {"total_bytes": 1u64 << 30},
        "kernel": {"alinux_memcg": true, "openeuler_memcg": true}, "cgroups": [cg("a", 1024, 0, 0)]}));
    n.write_knob("a", "memory.priority", 12).unwrap();
    n.write_knob("a", "memory.high_async_ratio", 80).unwrap();
    assert_eq!(
        (
            n.read_knob("a", "memory.priority").unwrap(),
            n.read_knob("a", "memory.high_async_ratio").unwrap()
        ),
        (12, 80)
    );
    assert!(n
        .write_knob("a", "memory.priority", 13)
        .unwrap_err()
        .to_string()
        .contains("0..=12"));
}

#[test]
fn memory_high_sleeps_are_memory_pressure() {
    let mut n = mem_node(
        json!([{"name": "a", "memory.high": 50 * MI}, cg("b", 1024, 0, 0)]),
        json!([
            {"kind": "memory_hog", "name": "vm", "cgroup": "a", "bytes": 200 * MI, "chunk_bytes": PAGE * 64, "mode": "keep"},
            vm("free", "b", 10 * MI, "keep"),
        ]),
    );
    n.run_until(12 * S).unwrap();
    let text = n.read("a", "memory.pressure").unwrap();
    let total_us: u64 = text
        .lines()
        .next()
        .unwrap()
        .rsplit("total=")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // one task, asleep on memory.high nearly all the time once above it (≈ 12 ms in)
    assert!(total_us > 11_500_000 && total_us <= 12_000_000, "{text}");
    let avg10: f64 = text
        .split("avg10=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // avg10 after six 2 s periods fully stalled: 100 × (1 − (1677/2048)^6) ≈ 70%, less the
    // first period's start (the averages tick at 2 s + 1 tick)
    assert!((55.0..=71.0).contains(&avg10), "{text}");
    assert!(n
        .read("b", "memory.pressure")
        .unwrap()
        .starts_with("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"));
    // the parent sees its child's stall; the root too
    assert!(n
        .read("", "memory.pressure")
        .unwrap()
        .contains(&format!("total={total_us}")));
    // FULL: nothing else of a is runnable while it sleeps, so FULL is (almost) SOME — less
    // the moments the task itself runs between its sleeps
    let full_us: u64 = text
        .lines()
        .nth(1)
        .unwrap()
        .rsplit("total=")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(full_us <= total_us && full_us > total_us - 100_000, "{text}");
    // ... but not at the root, where b's worker keeps running
    let root = n.read("", "memory.pressure").unwrap();
    let root_full: u64 = root
        .lines()
        .nth(1)
        .unwrap()
        .rsplit("total=")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(root_full, 0, "{root}");
}
