use colosim_core::Node;
use serde_json::json;
fn main() {
    let spec = json!({
        "topology": {"sockets": 1, "cores_per_socket": 4},
        "cgroups": [{"name":"a","cpu.shares":1024},{"name":"b","cpu.shares":512}],
        "workloads": [{"kind":"hog","name":"ha","cgroup":"a","threads":6},{"kind":"hog","name":"hb","cgroup":"b","threads":10}],
    });
    let mut n = Node::from_json(&spec.to_string()).unwrap();
    n.run_until(2_000_000_000).unwrap();
    n.reset_stats();
    n.run_until(22_000_000_000).unwrap();
    n.settle();
    let u = n.hierarchical(|s| s.usage_ns);
    println!("usage {:?} events {} switches a {} b {} wait a {} b {}", u, n.events, n.cgroups[1].stats.nr_switches, n.cgroups[2].stats.nr_switches, n.cgroups[1].stats.wait_ns, n.cgroups[2].stats.wait_ns);
    for c in 0..4 { println!("cpu{c} tasks {:?}", n.cpus[c].tasks.iter().map(|&t| n.tasks[t].cg).collect::<Vec<_>>()); }
}
