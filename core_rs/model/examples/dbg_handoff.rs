use colosim_core::Node;
fn main() {
    let v = std::env::args().nth(1).unwrap_or("6.18.44".into());
    let burn: u64 = std::env::args().nth(2).map(|x| x.parse().unwrap()).unwrap_or(2000000);
    let spec = format!(r#"{{"seed":1,"topology":{{"cores_per_socket":2}},"kernel":{{"scheduler":"eevdf","version":"{v}"}},
      "cgroups":[{{"name":"online"}},{{"name":"offline"}}],
      "workloads":[{{"kind":"closed_loop","name":"pp","cgroup":"online","clients":10,"service":{{"dist":"constant","value_ns":{burn}}},"client_cpu":{{"dist":"constant","value_ns":{burn}}}}},
                   {{"kind":"hog","name":"stress","cgroup":"offline","threads":10}}]}}"#);
    let mut n = Node::from_json(&spec).unwrap();
    for k in 1..=10u64 {
        n.run_until(k * 100_000_000).unwrap();
        let mut s = String::new();
        for cpu in 0..2 {
            for cg in 1..3 {
                let rq = cg * 2 + cpu;
                let g = n.rqs[rq].gse.unwrap();
                let root = cpu;
                s += &format!(" cg{cg}@{cpu}: w={} lag={} nr={} h={} |", n.ses[g].weight >> 10, (n.avg_vruntime(root) - n.ses[g].vruntime)/1000, n.rqs[rq].nr_running, n.rqs[rq].h_nr_running);
            }
        }
        let off = n.cgroups[2].usage_total_ns as f64 / (k * 100_000_000 * 2) as f64;
        println!("{}ms off={off:.3}{s}", k*100);
    }
}
