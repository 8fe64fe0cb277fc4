//! Criterion benchmarks of the core on the two reference scenarios of the [core] issue:
//! (a) the ClickHouse + stress node (8 CPUs, 10 clients × 8 threads, 10 hogs) and
//! (b) a 96-logical-CPU node (2 sockets × 24 cores × 2 SMT) with an open-loop service at
//! 5,000 requests/s on 48 workers beside 96 CPU hogs; (a) again under EEVDF as 6.6 and as 6.18.44
//! have it, and both with PELT group shares (`[kernel] group_shares = "pelt"`, which visits every
//! tick of a CPU running grouped work). Each iteration simulates one second.

use colosim_core::Node;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::json;

const S: u64 = 1_000_000_000;

fn clickhouse(kernel: serde_json::Value) -> String {
    json!({
        "seed": 1,
        "kernel": kernel,
        "topology": {"sockets": 1, "cores_per_socket": 8},
        "cgroups": [{"name": "online"}, {"name": "offline", "cpu.qos_level": -1}],
        "workloads": [
            {"kind": "closed_loop", "name": "clickhouse", "cgroup": "online", "clients": 10, "fanout": 8,
             "service": {"dist": "lognormal", "mean_ns": 48e6, "sigma": 0.4}},
            {"kind": "hog", "name": "stress", "cgroup": "offline", "threads": 10}
        ]
    })
    .to_string()
}

fn big_node(quotas: bool, kernel: serde_json::Value) -> String {
    // Kubernetes-style limits that the groups stay under ([cpu2]: must cost <= 20% speed).
    let cgroups = if quotas {
        json!([{"name": "online", "cpu.cfs_quota_us": 4_800_000, "cpu.cfs_burst_us": 4_800_000},
               {"name": "offline", "cpu.cfs_quota_us": 9_600_000, "cpu.cfs_burst_us": 9_600_000}])
    } else {
        json!([{"name": "online"}, {"name": "offline"}])
    };
    json!({
        "seed": 1,
        "kernel": kernel,
        "topology": {"sockets": 2, "cores_per_socket": 24, "threads_per_core": 2},
        "cgroups": cgroups,
        "workloads": [
            {"kind": "open_loop", "name": "web", "cgroup": "online", "rate_per_s": 5000.0, "workers": 48,
             "service": {"dist": "exponential", "mean_ns": 2e6}},
            {"kind": "hog", "name": "stress", "cgroup": "offline", "threads": 96}
        ]
    })
    .to_string()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulate_1s");
    g.sample_size(20);
    for (name, spec) in [
        ("clickhouse_stress_8cpu", clickhouse(json!({}))),
        (
            "clickhouse_stress_8cpu_eevdf",
            clickhouse(json!({"scheduler": "eevdf"})),
        ),
        (
            "clickhouse_stress_8cpu_eevdf_6_18",
            clickhouse(json!({"scheduler": "eevdf", "version": "6.18.44"})),
        ),
        (
            "clickhouse_stress_8cpu_eevdf_6_18_pelt",
            clickhouse(json!({"scheduler": "eevdf", "version": "6.18.44", "group_shares": "pelt"})),
        ),
        ("open_loop_96cpu_96hogs", big_node(false, json!({}))),
        ("open_loop_96cpu_96hogs_quota_burst", big_node(true, json!({}))),
        (
            "open_loop_96cpu_96hogs_pelt",
            big_node(false, json!({"group_shares": "pelt"})),
        ),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let mut n = Node::from_json(&spec).unwrap();
                    n.run_until(S).unwrap(); // warm: past start-up transients
                    n
                },
                |mut n| {
                    let t = n.now + S;
                    n.run_until(t).unwrap();
                    n.events
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
