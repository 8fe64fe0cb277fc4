//! A closed loop's exchanges across CPUs (`cross_cpu`) and its generator's threads
//! (`client_threads`): a message costs its receiver more CPU, and a request waits its delay,
//! only when sender and receiver run on different CPUs; a generator of fewer threads than
//! clients serves them in turn. Hand-worked on idle nodes, where the arithmetic is exact.
mod common;
use common::*;
use serde_json::json;

const MS: u64 = 1_000_000;

struct Run {
    qps: f64,
    latencies: Vec<u64>,
    /// the cgroup's CPU (CPUs)
    cpu: f64,
    exchanges: u64,
    crossed: u64,
}

/// `clients` clients of one worker (a pool of `workers`) on `cpus` idle CPUs, measured 10 s
/// after 1 s: 0.5 ms of the generator's CPU and 1 ms of service a request, plus `extra`.
fn run(cpus: u32, clients: u32, workers: u32, extra: serde_json::Value) -> Run {
    let mut wl = json!({"kind": "closed_loop", "name": "kv", "cgroup": "kv", "clients": clients,
                        "workers": workers,
                        "client_cpu": {"dist": "constant", "value_ns": MS / 2},
                        "service": {"dist": "constant", "value_ns": MS}});
    for (k, v) in extra.as_object().unwrap() {
        wl[k] = v.clone();
    }
    if workers == 0 {
        // a thread per client (rounds need one)
        wl.as_object_mut().unwrap().remove("workers");
    }
    let mut n = node(json!({"topology": topo(cpus, 1), "cgroups": [cg("kv", 1024, 0, 0)], "workloads": [wl]}));
    n.run_until(S).unwrap();
    n.reset_stats();
    let before = usage(&mut n, "kv");
    n.run_until(11 * S).unwrap();
    n.check_invariants().unwrap();
    let cpu = (usage(&mut n, "kv") - before) as f64 / (10.0 * S as f64);
    let svc = &n.services[n.service_id("kv").unwrap()];
    Run {
        qps: svc.completed as f64 / 10.0,
        latencies: svc.latencies.clone(),
        cpu,
        exchanges: svc.exchanges,
        crossed: svc.crossed,
    }
}

fn cross() -> serde_json::Value {
    json!({"server_ns": MS / 5, "client_ns": 3 * MS / 10})
}

#[test]
fn on_one_cpu_no_exchange_crosses_and_none_costs_more() {
    // one CPU: request 0.5 + 1 ms, latency 1.5 ms, X = 1 / 1.5 ms, the CPU always busy
    let r = run(1, 1, 1, json!({"cross_cpu": cross()}));
    assert!(r.latencies.iter().all(|&l| l == 3 * MS / 2), "{:?}", &r.latencies[..4]);
    assert!((r.qps / (1.0 / 1.5e-3) - 1.0).abs() < 0.001, "{}", r.qps);
    // a request and a reply each
    assert!(
        r.exchanges as f64 >= 2.0 * r.qps * 10.0 - 2.0 && r.crossed == 0,
        "{} {}",
        r.exchanges,
        r.crossed
    );
}

#[test]
fn apart_on_idle_cpus_every_exchange_crosses_and_costs_its_receiver() {
    // two idle CPUs: the worker and the generator start on different CPUs and stay there (a
    // sync wakeup onto a busy waker's CPU gives way to an idle prev, select_idle_sibling):
    // latency = 0.5 + 0.3 (the reply read apart) + 1 + 0.2 (the request read apart) = 2 ms
    let r = run(2, 1, 1, json!({"cross_cpu": cross()}));
    assert!(r.latencies.iter().all(|&l| l == 2 * MS), "{:?}", &r.latencies[..4]);
    assert!((r.qps / (1.0 / 2e-3) - 1.0).abs() < 0.001, "{}", r.qps);
    assert!(
        r.crossed == r.exchanges && r.exchanges > 0,
        "{} {}",
        r.exchanges,
        r.crossed
    );
    // the costs are CPU in the cgroup: X x 2 ms
    assert!((r.cpu / (r.qps * 2e-3) - 1.0).abs() < 0.001, "{}", r.cpu);
    // a think between requests: the reply was read (across CPUs) before it, and still costs
    // 0.3 ms when the generator runs the next request: 2 ms again
    let think = run(
        2,
        1,
        1,
        json!({"cross_cpu": cross(), "think": {"dist": "constant", "value_ns": MS}}),
    );
    assert!(
        think.latencies.iter().all(|&l| l == 2 * MS),
        "{:?}",
        &think.latencies[..4]
    );
    // without cross_cpu the same placement costs nothing more: 1.5 ms
    let plain = run(2, 1, 1, json!({}));
    assert!(plain.latencies.iter().all(|&l| l == 3 * MS / 2) && plain.exchanges == 0);
}

#[test]
fn with_cross_cpu_only_a_request_across_cpus_waits_its_delay() {
    // a 2 ms delay: on one CPU (nothing crosses) it is skipped, 1.5 ms; apart it is waited,
    // 0.5 + 0.3 + 2 + 1 + 0.2 = 4 ms; without cross_cpu every request waits it, 3.5 ms
    let delay = json!({"dist": "constant", "value_ns": 2 * MS});
    let one = run(1, 1, 1, json!({"cross_cpu": cross(), "delay": delay}));
    assert!(
        one.latencies.iter().all(|&l| l == 3 * MS / 2),
        "{:?}",
        &one.latencies[..4]
    );
    let apart = run(2, 1, 1, json!({"cross_cpu": cross(), "delay": delay}));
    assert!(
        apart.latencies.iter().all(|&l| l == 4 * MS),
        "{:?}",
        &apart.latencies[..4]
    );
    let always = run(1, 1, 1, json!({"delay": delay}));
    assert!(
        always.latencies.iter().all(|&l| l == 7 * MS / 2),
        "{:?}",
        &always.latencies[..4]
    );
}

#[test]
fn a_generator_of_one_thread_serves_its_clients_in_turn() {
    // 4 clients, 4 workers, 8 idle CPUs. A generator task per client: nothing waits,
    // X = 4 / 1.5 ms. One generator thread: it is the bottleneck, busy all the time at 0.5 ms
    // a request: X = 1 / 0.5 ms, and by Little's law each request takes 4 / X = 2 ms
    let own = run(8, 4, 4, json!({}));
    assert!((own.qps / (4.0 / 1.5e-3) - 1.0).abs() < 0.001, "{}", own.qps);
    let one = run(8, 4, 4, json!({"client_threads": 1}));
    assert!((one.qps / 2000.0 - 1.0).abs() < 0.001, "{}", one.qps);
    let mean = one.latencies.iter().sum::<u64>() as f64 / one.latencies.len() as f64;
    assert!((mean / 2e6 - 1.0).abs() < 0.001, "{mean}");
    // the CPU: the generator's 1 CPU + the workers' X x 1 ms = 3 CPUs
    assert!((one.cpu / 3.0 - 1.0).abs() < 0.001, "{}", one.cpu);
}

#[test]
fn a_generator_of_one_thread_serves_every_round_of_its_clients_in_turn() {
    // rounds = 2: each request is 0.25 ms of the generator, 0.5 ms of the server, again each.
    // A generator task per client: 1.5 ms a request, X = 4 / 1.5 ms. One generator thread
    // runs every client's parts in turn, never idle (a client is away 0.5 ms, two of its
    // parts): X = 1 / 0.5 ms, 2 ms a request by Little's law, 1 + X x 1 ms = 3 CPUs.
    let rounds = json!({"rounds": 2});
    let own = run(8, 4, 0, rounds.clone());
    assert!((own.qps / (4.0 / 1.5e-3) - 1.0).abs() < 0.001, "{}", own.qps);
    let one = run(8, 4, 0, json!({"rounds": 2, "client_threads": 1}));
    assert!((one.qps / 2000.0 - 1.0).abs() < 0.001, "{}", one.qps);
    let mean = one.latencies.iter().sum::<u64>() as f64 / one.latencies.len() as f64;
    assert!((mean / 2e6 - 1.0).abs() < 0.001, "{mean}");
    assert!((one.cpu / 3.0 - 1.0).abs() < 0.001, "{}", one.cpu);
}

/// The core's message for a closed loop `wl` on 2 CPUs (it must refuse it).
fn refused(wl: serde_json::Value) -> String {
    let spec = json!({"topology": topo(2, 1), "cgroups": [cg("kv", 1024, 0, 0)], "workloads": [wl]});
    colosim_core::Node::from_json(&spec.to_string())
        .err()
        .unwrap()
        .to_string()
}

#[test]
fn a_bad_client_threads_names_its_field() {
    let wl = json!({"kind": "closed_loop", "name": "kv", "cgroup": "kv", "clients": 2,
                        "client_cpu": {"dist": "constant", "value_ns": MS}, "client_threads": 0,
                        "service": {"dist": "constant", "value_ns": MS}});
    let err = refused(wl);
    assert!(err.contains("client_threads") && err.contains(">= 1"), "{err}");
}

#[test]
fn an_event_loop_times_a_request_from_its_write_to_its_reply_read() {
    // one client, one event-loop thread, one worker, 2 idle CPUs: the generator's 0.5 ms a
    // request is 0.25 ms reading the reply and 0.25 ms writing the next request. Alone in its
    // pass nothing separates a read from the next write: the clock (write start to read end)
    // is the whole loop, 0.25 + 1 + 0.25 = 1.5 ms, X = 1 / 1.5 ms
    let ev = json!({"client_threads": 1, "event_loop": {"read_share": 0.5}});
    let r = run(2, 1, 1, ev);
    assert!(r.latencies.iter().all(|&l| l == 3 * MS / 2), "{:?}", &r.latencies[..4]);
    assert!((r.qps / (1.0 / 1.5e-3) - 1.0).abs() < 0.001, "{}", r.qps);
    // apart, the server pays the request's crossing and the read the reply's:
    // 0.25 + 0.2 + 1 + 0.3 + 0.25 = 2 ms
    let apart = run(
        2,
        1,
        1,
        json!({"client_threads": 1, "event_loop": {}, "cross_cpu": cross()}),
    );
    assert!(
        apart.latencies.iter().all(|&l| l == 2 * MS),
        "{:?}",
        &apart.latencies[..4]
    );
    assert!((apart.qps / 500.0 - 1.0).abs() < 0.001, "{}", apart.qps);
}

#[test]
fn an_event_loop_reads_every_ready_reply_before_it_writes() {
    // 4 clients on one thread, 4 workers: replies that come during a pass wait for the next,
    // and the thread writes only after reading all of its pass: no latency includes the time
    // from a client's read to its next write, so each is shorter than the same loop's
    // latencies timed round the whole exchange, and the loop's CPU is the same
    let own = run(8, 4, 4, json!({"client_threads": 1}));
    let ev = run(8, 4, 4, json!({"client_threads": 1, "event_loop": {}}));
    let mean = |r: &Run| r.latencies.iter().sum::<u64>() as f64 / r.latencies.len() as f64;
    let loop_ns = 4.0 / ev.qps * 1e9;
    // (here the passes settle into two replies each: a read and a write of the other client
    // lie between each client's read and its next write, 0.25 ms, so every latency is 1.75 ms
    // of a 2 ms loop)
    assert!(mean(&ev) <= loop_ns - 0.2e6, "{} vs loop {loop_ns}", mean(&ev));
    assert!(ev.latencies.iter().all(|&l| (l as f64) < loop_ns * 2.0));
    assert!(mean(&ev) < mean(&own), "{} {}", mean(&ev), mean(&own));
    // the generator's CPU and the workers' are what each request costs: X x 1.5 ms
    assert!((ev.cpu / (ev.qps * 1.5e-3) - 1.0).abs() < 0.01, "{} {}", ev.cpu, ev.qps);
}

#[test]
fn a_bad_event_loop_names_its_field() {
    let wl = json!({"kind": "closed_loop", "name": "kv", "cgroup": "kv", "clients": 2,
                    "client_cpu": {"dist": "constant", "value_ns": MS}, "event_loop": {},
                    "service": {"dist": "constant", "value_ns": MS}});
    let err = refused(wl.clone());
    assert!(err.contains("event_loop") && err.contains("client_threads"), "{err}");
    // without client_cpu the generator is not on the node: nothing to refuse
    let mut off = wl.clone();
    off.as_object_mut().unwrap().remove("client_cpu");
    let spec = json!({"topology": topo(2, 1), "cgroups": [cg("kv", 1024, 0, 0)], "workloads": [off]});
    assert!(colosim_core::Node::from_json(&spec.to_string()).is_ok());
    let mut think = wl.clone();
    think["client_threads"] = json!(1);
    think["think"] = json!({"dist": "constant", "value_ns": MS});
    assert!(refused(think).contains("no think time"));
    let mut share = wl;
    share["client_threads"] = json!(1);
    share["event_loop"] = json!({"read_share": 1.5});
    assert!(refused(share).contains("read_share"));
}
