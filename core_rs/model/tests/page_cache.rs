//! Page cache: a file server's hit ratio follows how much of its working set its cgroup
//! still caches; a writer's cache stays within its cgroup's limit; on a full node the
//! writer's cache squeezes the server's (global reclaim takes cache from everyone), and a
//! memory.high on the writer keeps the server's cache and latency (seed 001, case 3).
mod common;
use colosim_core::workload::Workload;
use common::*;
use serde_json::{json, Value};

const MI: u64 = 1 << 20;

fn server(ws: u64) -> Value {
    json!({"kind": "file_server", "name": "web", "cgroup": "online", "clients": 4,
           "service": {"dist": "constant", "value_ns": 200_000},
           "working_set_bytes": ws, "file_bytes": MI,
           "disk_latency_ns": 5_000_000, "disk_bytes_per_s": 100_000_000u64})
}

fn hits(n: &colosim_core::Node) -> (u64, u64) {
    n.workloads
        .iter()
        .find_map(|w| {
            if let Workload::FileServer(f) = w {
                Some((f.hits, f.misses))
            } else {
                None
            }
        })
        .unwrap()
}

fn file_of(n: &colosim_core::Node, cg: &str) -> u64 {
    n.memory.as_ref().unwrap().cgs[n.cgroup_id(cg).unwrap()].file
}

#[test]
fn the_cache_warms_to_the_working_set_and_misses_stop() {
    let mut n = node(json!({"topology": topo(4, 1), "memory": {"total_bytes": 8u64 << 30},
        "cgroups": [cg("online", 1024, 0, 0)], "workloads": [server(64 * MI)]}));
    n.run_until(10 * S).unwrap();
    assert_eq!(file_of(&n, "online"), 64 * MI); // every file once, never more
    let (h, m) = hits(&n);
    assert!(m >= 64 && h > 10 * m, "hits {h} misses {m}");
    // warm: a request is its CPU only (0.2 ms); a miss costs 5 ms + 1 MiB at 100 MB/s
    n.reset_stats();
    n.run_until(11 * S).unwrap();
    let svc = &n.services[0];
    assert!(
        svc.latencies.iter().all(|&l| l == 200_000),
        "a request missed after the warm-up"
    );
}

#[test]
fn a_writer_caches_up_to_its_limit_and_pays_for_reclaiming_its_own_cache() {
    let mut n = node(json!({"topology": topo(2, 1), "memory": {"total_bytes": 8u64 << 30},
        "cgroups": [{"name": "batch", "memory.limit_in_bytes": 256 * MI}],
        "workloads": [{"kind": "cache_writer", "name": "dd", "cgroup": "batch"}]}));
    n.run_until(2 * S).unwrap();
    let m = &n.memory.as_ref().unwrap().cgs[n.cgroup_id("batch").unwrap()];
    assert!(m.file <= 256 * MI && m.file > 250 * MI && m.events.max > 0 && m.events.oom == 0);
    assert_eq!(m.usage, m.file);
}

fn squeezed(writer_high: Option<u64>) -> (u64, f64) {
    let mut batch = json!({"name": "batch"});
    if let Some(h) = writer_high {
        batch["memory.high"] = json!(h);
    }
    let mut n = node(json!({"topology": topo(4, 1), "memory": {"total_bytes": 1u64 << 30},
        "cgroups": [cg("online", 1024, 0, 0), batch],
        "workloads": [server(512 * MI), {"kind": "cache_writer", "name": "dd", "cgroup": "batch", "start_ns": 3 * S}]}));
    n.run_until(3 * S).unwrap();
    n.reset_stats();
    n.run_until(10 * S).unwrap();
    let lat = &n.services[0].latencies;
    (file_of(&n, "online"), lat.iter().sum::<u64>() as f64 / lat.len() as f64)
}

#[test]
fn a_writer_squeezes_the_servers_cache_unless_its_memory_high_holds_it_back() {
    let (cache_free, lat_free) = squeezed(None);
    let (cache_held, lat_held) = squeezed(Some(200 * MI));
    // without a limit the writer's cache grows until global reclaim takes from both
    assert!(cache_free < 400 * MI, "server cache {} MiB", cache_free / MI);
    // with memory.high the writer reclaims its own cache and the server keeps its working set
    assert_eq!(cache_held, 512 * MI);
    assert!(lat_free > 2.0 * lat_held, "mean latency {lat_free} vs {lat_held} ns");
}

fn analytics(limit: Option<u64>) -> (f64, u64) {
    let mut c = json!({"name": "spark"});
    if let Some(l) = limit {
        c["memory.limit_in_bytes"] = json!(l);
    }
    let mut n = node(
        json!({"topology": topo(2, 1), "memory": {"total_bytes": 4u64 << 30, "swap_bytes": 2u64 << 30},
        "cgroups": [c],
        "workloads": [{"kind": "analytics", "name": "als", "cgroup": "spark", "working_set_bytes": 400 * MI,
                       "work_ns": 10 * MS, "fault_penalty": 20.0}]}),
    );
    n.run_until(S).unwrap();
    n.reset_stats();
    n.run_until(4 * S).unwrap();
    let s = &n.services[0];
    let mean = s.latencies.iter().sum::<u64>() as f64 / s.latencies.len() as f64;
    (mean, n.memory.as_ref().unwrap().cgs[n.cgroup_id("spark").unwrap()].swap)
}

#[test]
fn an_analytics_job_slows_by_the_share_of_its_set_in_swap() {
    let (fits, swap0) = analytics(None);
    assert_eq!((fits, swap0), (10.0 * MS as f64, 0));
    // 300 MiB of a 400 MiB set resident: a quarter in swap, each task 1 + 20 × 0.25 = 6× longer
    let (squeezed, swapped) = analytics(Some(300 * MI));
    assert_eq!(swapped, 100 * MI);
    assert_eq!(squeezed, 60.0 * MS as f64);
}
