//! Block IO and the egress link against hand-worked truth: blkio weights split a disk 10:1
//! for direct IO under bfq and not at all under mq-deadline or for buffered writes (seed
//! 004); blk-throttle caps are never exceeded over any 100 ms window; iocost shares by
//! blkio.cost.weight and its pinned vrate caps the device; the link is shared per flow, a
//! per-cgroup rate is a hard cap, and oncn-bwm hands the link back to online traffic within
//! its 10 ms check (rubik.md §4.5); bad settings are refused by name.
mod common;
use colosim_core::Node;
use common::*;
use serde_json::{json, Value};

const MB: u64 = 1_000_000;
const MIB: u64 = 1 << 20;

fn disk(scheduler: &str) -> Value {
    json!({"scheduler": scheduler, "latency_ns": 100_000})
}

fn dd(name: &str, cgroup: &str, direct: bool) -> Value {
    json!({"kind": "dd", "name": name, "cgroup": cgroup, "direct": direct})
}

fn write_bytes(n: &mut Node, cg: &str) -> f64 {
    n.settle();
    n.io_stat(n.cgroup_id(cg).unwrap()).unwrap().write_bytes
}

/// Bytes each dd service moved in blocks completed over the measured window.
fn dd_bytes(n: &Node, svc: usize) -> f64 {
    n.services[svc].completed as f64 * MIB as f64
}

/// Two writers, weights 1000 and 100. The gap between a writer's blocks (access latency and
/// the block's CPU) is kept small: bfq idles the device through a gap, so a writer with long
/// gaps loses some of its share to its own think time — a real effect, not the one tested.
fn two_writers(scheduler: &str, direct: bool, kernel: Value) -> Node {
    let mut w = [dd("dd-a", "a", direct), dd("dd-b", "b", direct)];
    for x in &mut w {
        x["cpu_ns_per_block"] = json!(1_000);
    }
    let mut n = node(
        json!({"topology": topo(4, 1), "kernel": kernel, "disk": {"scheduler": scheduler, "latency_ns": 20_000},
        "cgroups": [{"name": "a", "blkio.weight": 1000, "blkio.cost.weight": 1000},
                    {"name": "b", "blkio.weight": 100, "blkio.cost.weight": 100}],
        "workloads": w}),
    );
    n.run_until(10 * S).unwrap();
    n.reset_stats();
    n.run_until(20 * S).unwrap();
    n
}

#[test]
fn bfq_splits_direct_writes_by_blkio_weight() {
    let mut n = two_writers("bfq", true, json!({}));
    let (a, b) = (write_bytes(&mut n, "a"), write_bytes(&mut n, "b"));
    let ratio = a / b;
    assert!(
        (ratio / 10.0 - 1.0).abs() < 0.05,
        "a/b = {ratio:.3} (a {a:.0}, b {b:.0})"
    );
    // the device stays busy: 500 MB/s of 1 MiB writes, less bfq's idling in a's gaps
    let total = (a + b) / 10.0;
    assert!(
        total > 0.9 * 500.0 * MB as f64 && total <= 500.0 * MB as f64 * 1.0001,
        "{total:.0} B/s"
    );
}

#[test]
fn mq_deadline_ignores_blkio_weight() {
    let mut n = two_writers("mq-deadline", true, json!({}));
    let ratio = write_bytes(&mut n, "a") / write_bytes(&mut n, "b");
    assert!((ratio - 1.0).abs() < 0.05, "a/b = {ratio:.3}");
}

#[test]
fn buffered_writes_escape_blkio_weight_on_cgroup_v1() {
    // bfq and 10:1 weights, but the flusher writes everything back as the root cgroup
    let mut n = two_writers("bfq", false, json!({}));
    let (a, b) = (dd_bytes(&n, 0), dd_bytes(&n, 1));
    assert!((a / b - 1.0).abs() < 0.1, "dd a {a:.0} B, dd b {b:.0} B");
    assert_eq!(write_bytes(&mut n, "a"), 0.0);
    assert_eq!(write_bytes(&mut n, "b"), 0.0);
    // past vm.dirty_ratio the writers run at the disk's writeback rate together
    let total = (a + b) / 10.0;
    assert!(
        total > 0.9 * 500.0 * MB as f64 && total < 1.1 * 500.0 * MB as f64,
        "{total:.0} B/s"
    );
}

#[test]
fn iocost_with_cgroup_writeback_weighs_buffered_writes_too() {
    // rubik's ioCost: iocost on, writeback charged to the writer (cgroup1_writeback)
    let mut n = node(
        json!({"topology": topo(4, 1), "kernel": {"cgroup_writeback": true}, "disk": disk("mq-deadline"),
        "cgroups": [{"name": "a", "blkio.cost.weight": 1000}, {"name": "b", "blkio.cost.weight": 100}],
        "workloads": [dd("dd-a", "a", false), dd("dd-b", "b", false)]}),
    );
    n.write("", "blkio.cost.qos", "254:0 enable=1 ctrl=user min=100.00 max=100.00")
        .unwrap();
    n.run_until(10 * S).unwrap();
    n.reset_stats();
    n.run_until(20 * S).unwrap();
    let (a, b) = (write_bytes(&mut n, "a"), write_bytes(&mut n, "b"));
    assert!((a / b / 10.0 - 1.0).abs() < 0.05, "writeback a/b = {:.3}", a / b);
    let (da, db) = (dd_bytes(&n, 0), dd_bytes(&n, 1));
    assert!(da / db > 8.0, "dd a/b = {:.3}", da / db);
}

#[test]
fn iocost_shares_by_cost_weight_and_a_pinned_vrate_caps_the_device() {
    // No gaps between a writer's IOs (no access latency, no CPU between blocks): iocost does
    // not idle, so in a gap the other cgroup would take the device and blur the ratio.
    let mut spec = json!({"topology": topo(8, 1), "disk": {"scheduler": "none", "latency_ns": 0},
        "cgroups": [{"name": "a", "blkio.cost.weight": 1000}, {"name": "b", "blkio.cost.weight": 100}],
        "workloads": [dd("dd-a", "a", true), dd("dd-b", "b", true)]});
    for w in 0..2 {
        spec["workloads"][w]["cpu_ns_per_block"] = json!(1);
    }
    let mut n = node(spec);
    n.write("", "blkio.cost.qos", "enable=1 ctrl=user min=50.00 max=50.00")
        .unwrap();
    n.run_until(2 * S).unwrap();
    n.reset_stats();
    n.run_until(12 * S).unwrap();
    let (a, b) = (write_bytes(&mut n, "a"), write_bytes(&mut n, "b"));
    assert!((a / b / 10.0 - 1.0).abs() < 0.05, "a/b = {:.3}", a / b);
    // vrate 50% of a model equal to the device: half its 500 MB/s
    let total = (a + b) / 10.0;
    assert!((total / (250.0 * MB as f64) - 1.0).abs() < 0.01, "{total:.0} B/s");
}

/// The largest amount a cumulative per-cgroup series grows over any `window` samples.
fn max_window(series: &[u64], ncg: usize, cg: usize, window: usize) -> u64 {
    let col: Vec<u64> = series.chunks(ncg).map(|row| row[cg]).collect();
    col.windows(window + 1).map(|w| w[window] - w[0]).max().unwrap()
}

#[test]
fn a_throttle_is_never_exceeded_over_any_100ms_window() {
    let cap = 50 * MB;
    let mut n = node(
        json!({"topology": topo(4, 1), "disk": disk("mq-deadline"), "sample_interval_ns": MS,
        "cgroups": [{"name": "a", "blkio.throttle.write_bps_device": cap}, {"name": "b"}],
        "workloads": [dd("dd-a", "a", true), dd("dd-b", "b", true)]}),
    );
    n.run_until(5 * S).unwrap();
    let ncg = n.cgroups.len();
    let worst = max_window(&n.series.io_bytes, ncg, 1, 100);
    assert!(worst <= cap / 10 + 1, "{worst} bytes in 100 ms against a {cap} B/s cap");
    assert!(worst as f64 > 0.97 * (cap / 10) as f64, "the cap is not used: {worst}");
    // the unthrottled writer takes the rest of the device (work conserving)
    let b = max_window(&n.series.io_bytes, ncg, 2, 1000) as f64;
    assert!(b > 0.85 * (500 * MB - cap) as f64, "b moved {b:.0} B in 1 s");
}

#[test]
fn an_iops_limit_caps_a_databases_reads() {
    let mut n = node(
        json!({"topology": topo(4, 1), "disk": disk("mq-deadline"), "sample_interval_ns": 10 * MS,
        "cgroups": [{"name": "db", "blkio.throttle.read_iops_device": 1000}],
        "workloads": [{"kind": "database", "name": "db", "cgroup": "db", "clients": 8, "reads": 4,
                        "service": {"dist": "constant", "value_ns": 50_000}}]}),
    );
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(11 * S).unwrap();
    let st = n.io_stat(n.cgroup_id("db").unwrap()).unwrap();
    let iops = st.read_ios as f64 / 10.0;
    assert!(iops <= 1000.5 && iops > 990.0, "{iops} IO/s");
    // 4 reads a request, 8 clients: 250 requests/s, each waiting ≈ 8 × 4 ms in the throttle
    let done = n.services[0].completed as f64 / 10.0;
    assert!((done / 250.0 - 1.0).abs() < 0.02, "{done} requests/s");
}

#[test]
fn buffered_writes_wait_for_writeback_past_dirty_ratio() {
    // 1 GiB of memory: dirty limit 20% = 204.8 MiB; an 100 MB/s disk
    let mut n = node(json!({"topology": topo(2, 1), "memory": {"total_bytes": 1u64 << 30},
        "disk": {"wbps": 100 * MB, "wseqiops": 25_000, "latency_ns": 100_000},
        "cgroups": [{"name": "a"}], "workloads": [dd("dd", "a", false)]}));
    n.run_until(S / 10).unwrap();
    let d = n.disk.as_ref().unwrap();
    // the writer first fills the cache at memory speed, up to the limit
    assert!(
        d.dirty_total <= d.dirty_thresh && d.dirty_total + MIB > d.dirty_thresh,
        "dirty {}",
        d.dirty_total
    );
    n.reset_stats();
    n.run_until(10 * S + S / 10).unwrap();
    let rate = dd_bytes(&n, 0) / 10.0;
    assert!((rate / (100 * MB) as f64 - 1.0).abs() < 0.03, "writer at {rate:.0} B/s");
}

fn link(bwm: bool) -> Node {
    // 1 Gbit/s link; online sends 0–10 s and 15–25 s, offline 5–20 s (seed 001, case 4)
    let mut n = node(
        json!({"topology": topo(2, 1), "network": {"egress_bytes_per_s": 125 * MB},
        "sample_interval_ns": MS,
        "cgroups": [{"name": "online"}, {"name": "offline", "net_cls.classid": 4294967295u64}],
        "workloads": [
            {"kind": "iperf", "name": "on", "cgroup": "online", "windows_ns": [[0, 10 * S], [15 * S, 25 * S]]},
            {"kind": "iperf", "name": "off", "cgroup": "offline", "windows_ns": [[5 * S, 20 * S]]}]}),
    );
    if bwm {
        n.write("", "net_qos_waterline", "20mb").unwrap();
        n.write("", "net_qos_bandwidth", "20mb,1gb").unwrap();
        n.write("", "net_qos_enable", "1").unwrap();
    }
    n.run_until(25 * S).unwrap();
    n
}

/// Mean rate (bytes/s) of a cgroup's sent bytes over [a, b) ms.
fn rate(n: &Node, cg: &str, a: usize, b: usize) -> f64 {
    let ncg = n.cgroups.len();
    let id = n.cgroup_id(cg).unwrap();
    let at = |i: usize| n.series.net_bytes[i * ncg + id] as f64;
    (at(b) - at(a)) * 1000.0 / (b - a) as f64
}

#[test]
fn flows_share_the_link_fairly_without_the_bandwidth_manager() {
    let n = link(false);
    let half = 62.5 * MB as f64;
    assert!((rate(&n, "online", 6000, 9000) / half - 1.0).abs() < 1e-3);
    assert!((rate(&n, "offline", 6000, 9000) / half - 1.0).abs() < 1e-3);
    assert!((rate(&n, "offline", 11000, 14000) / (125 * MB) as f64 - 1.0).abs() < 1e-3);
}

#[test]
fn the_bandwidth_manager_gives_online_its_link_back_within_its_interval() {
    let n = link(true);
    let low = 20.0 * MIB as f64;
    let line = 125.0 * MB as f64;
    // both sending: offline paced at `low`, online gets the rest
    assert!((rate(&n, "offline", 6000, 9000) / low - 1.0).abs() < 1e-3);
    assert!((rate(&n, "online", 6000, 9000) / (line - low) - 1.0).abs() < 1e-3);
    // online stops at 10 s: offline is switched to `high` at the next 10 ms check
    assert!((rate(&n, "offline", 10_020, 14_000) / line - 1.0).abs() < 1e-3);
    // online is back at 15 s: the first check after it (≤ 10 ms) pushes offline to `low`,
    // and from then on online has line − low again
    let back = (15_000..15_040)
        .find(|&t| rate(&n, "online", t, t + 1) > 0.99 * (line - low))
        .expect("online never recovered");
    assert!(back < 15_000 + 10 + 1, "online recovered only at {back} ms");
    assert!((rate(&n, "online", 15_020, 19_000) / (line - low) - 1.0).abs() < 1e-3);
    // low → high when online stopped at 10 s, high → low when it came back at 15 s
    assert_eq!(n.net.as_ref().unwrap().bwm.switches, 2);
}

#[test]
fn a_per_cgroup_rate_is_never_exceeded() {
    let cap = 30 * MB;
    let mut n = node(
        json!({"topology": topo(2, 1), "network": {"egress_bytes_per_s": 125 * MB}, "sample_interval_ns": MS,
        "cgroups": [{"name": "a", "net.egress_bps": cap}, {"name": "b"}],
        "workloads": [{"kind": "iperf", "name": "a", "cgroup": "a", "streams": 4}, {"kind": "iperf", "name": "b", "cgroup": "b"}]}),
    );
    n.run_until(3 * S).unwrap();
    let ncg = n.cgroups.len();
    assert!(max_window(&n.series.net_bytes, ncg, 1, 100) <= cap / 10 + 1);
    assert!(max_window(&n.series.net_bytes, ncg, 2, 1000) as f64 > 0.999 * (95 * MB) as f64);
}

fn rejected(spec: Value) -> String {
    match Node::from_json(&spec.to_string()) {
        Ok(_) => panic!("accepted {spec}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_io_and_network_settings_are_refused_by_name() {
    let base = |cg: Value, wl: Value| {
        json!({"topology": topo(2, 1), "disk": {}, "network": {"egress_bytes_per_s": 1000},
        "cgroups": [cg], "workloads": [wl]})
    };
    let idle = json!({"kind": "hog", "name": "h", "cgroup": "a", "threads": 1});
    let e = rejected(base(json!({"name": "a", "blkio.weight": 0}), idle.clone()));
    assert!(e.contains("cgroups[0].blkio.weight") && e.contains("1..=1000"), "{e}");
    let e = rejected(base(
        json!({"name": "a", "blkio.throttle.read_bps_device": -5}),
        idle.clone(),
    ));
    assert!(e.contains("cgroups[0].blkio.throttle.read_bps_device"), "{e}");
    let e = rejected(base(json!({"name": "a", "net_cls.classid": 1u64 << 33}), idle.clone()));
    assert!(e.contains("net_cls.classid"), "{e}");
    let e = rejected(json!({"topology": topo(2, 1), "cgroups": [{"name": "a"}], "workloads": [dd("d", "a", true)]}));
    assert!(e.contains("workloads[0].kind") && e.contains("disk"), "{e}");
    let e = rejected(json!({"topology": topo(2, 1), "disk": {"wbps": 0}}));
    assert!(e.contains("disk.wbps"), "{e}");
    let e = rejected(base(
        json!({"name": "a"}),
        json!({"kind": "iperf", "name": "i", "cgroup": "a", "windows_ns": [[5, 5]]}),
    ));
    assert!(e.contains("workloads[0].windows_ns[0]"), "{e}");
    let mut n = node(base(json!({"name": "a"}), idle));
    for (knob, text, want) in [
        ("net_qos_bandwidth", "1gb,20mb", "low"),
        ("net_qos_bandwidth", "20mb", "LOW,HIGH"),
        ("net_qos_waterline", "1mb", "20mb"),
        (
            "blkio.cost.model",
            "rbps=0 rseqiops=1 rrandiops=1 wbps=1 wseqiops=1 wrandiops=1",
            "rbps",
        ),
        ("blkio.cost.qos", "enable=1 min=200 max=100", "min"),
    ] {
        let e = n.write("", knob, text).unwrap_err().to_string();
        assert!(e.contains(knob) && e.contains(want), "{knob}={text}: {e}");
    }
    let e = n.write("a", "blkio.weight", "5000").unwrap_err().to_string();
    assert!(e.contains("1..=1000"), "{e}");
    // the v1 files' "MAJ:MIN VALUE" form is taken
    n.write("a", "blkio.throttle.write_bps_device", "254:0 1048576")
        .unwrap();
    assert_eq!(n.read_knob("a", "blkio.throttle.write_bps_device").unwrap(), 1048576);
}

#[test]
fn the_same_spec_and_seed_give_identical_io() {
    let spec = json!({"topology": topo(4, 1), "disk": disk("bfq"), "network": {"egress_bytes_per_s": 125 * MB},
        "sample_interval_ns": 10 * MS, "memory": {"total_bytes": 1u64 << 30}, "seed": 7,
        "cgroups": [{"name": "db", "blkio.weight": 500}, {"name": "b", "blkio.throttle.write_bps_device": 30 * MB}],
        "workloads": [{"kind": "database", "name": "db", "cgroup": "db", "clients": 4, "reads": 2,
                        "service": {"dist": "exponential", "mean_ns": 100_000}, "think": {"dist": "exponential", "mean_ns": 500_000}},
                      dd("w", "b", false), dd("d", "b", true),
                      {"kind": "iperf", "name": "i", "cgroup": "b", "windows_ns": [[S, 2 * S]]}]});
    let run = || {
        let mut n = node(spec.clone());
        n.run_until(3 * S).unwrap();
        (
            n.series.io_bytes.clone(),
            n.series.net_bytes.clone(),
            n.services[0].latencies.clone(),
            n.events,
        )
    };
    let a = run();
    assert!(!a.2.is_empty() && a.0.iter().any(|&b| b > 0));
    assert_eq!(a, run());
}
