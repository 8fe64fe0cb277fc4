//! Helpers shared by the integration tests: build a node from a JSON spec, read usage.
#![allow(dead_code)]

use colosim_core::Node;
use serde_json::{json, Value};

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;

pub fn node(spec: Value) -> Node {
    Node::from_json(&spec.to_string()).unwrap_or_else(|e| panic!("spec rejected: {e}"))
}

pub fn topo(cores: u32, threads: u32) -> Value {
    json!({"sockets": 1, "cores_per_socket": cores, "threads_per_core": threads})
}

pub fn hog(name: &str, cg: &str, threads: u32) -> Value {
    json!({"kind": "hog", "name": name, "cgroup": cg, "threads": threads})
}

pub fn cg(name: &str, shares: u64, idle: i64, qos: i64) -> Value {
    json!({"name": name, "cpu.shares": shares, "cpu.idle": idle, "cpu.qos_level": qos})
}

/// Hierarchical usage (ns) of a cgroup by name.
pub fn usage(n: &mut Node, name: &str) -> u64 {
    n.settle();
    let id = n.cgroup_id(name).unwrap();
    n.hierarchical(|g| g.stats.usage_ns)[id]
}
