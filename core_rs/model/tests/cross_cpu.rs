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

/// Two clients on one event-loop thread, two workers, 8 idle CPUs: 0.6 ms of the generator's
/// CPU a request (0.4 ms reading the reply, 0.2 ms writing the next request) and 0.5 ms of
/// service, under `rearm`.
fn two_clients(rearm: &str) -> Run {
    let ev = json!({"client_threads": 1, "event_loop": {"read_share": 2.0 / 3.0, "rearm": rearm},
                    "client_cpu": {"dist": "constant", "value_ns": 6 * MS / 10},
                    "service": {"dist": "constant", "value_ns": MS / 2}});
    run(8, 2, 2, ev)
}

fn settles_to(r: &Run, want: &[u64]) -> bool {
    let tail = &r.latencies[r.latencies.len() - 20..];
    tail.iter().all(|l| want.contains(l)) && want.iter().all(|w| tail.contains(w))
}

#[test]
fn readd_an_event_loop_takes_steps_in_the_order_they_became_ready() {
    // redis-benchmark: a read re-adds its connection's write at the ready list's tail, behind
    // the replies that came before it. In ms, from the first write of each at 0 and 0.2:
    //   0.7 reply 0: pass [R0] 0.7-1.1 (latency 1.1); 0.9 reply 1 joins the list, then 0's
    //   write: pass [R1 1.1-1.5 (latency 1.5 - 0.2 = 1.3), W0 1.5-1.7]; pass [W1 1.7-1.9];
    //   asleep until 0's reply at 2.2, and so on every 1.5 ms:
    // client 0's latency 1.1 ms, client 1's 1.3 ms, X = 2 / 1.5 ms; the generator busy
    // 1.2 ms of every 1.5, asleep between.
    let r = two_clients("readd");
    assert!(
        settles_to(&r, &[11 * MS / 10, 13 * MS / 10]),
        "{:?}",
        &r.latencies[r.latencies.len() - 6..]
    );
    assert!((r.qps / (2.0 / 1.5e-3) - 1.0).abs() < 0.001, "{}", r.qps);
    // every latency is shorter than the 1.5 ms loop: the time from a read to the next
    // write (the rest of the pass, what the next has before it) is in none
    assert!(r.latencies.iter().rev().take(20).all(|&l| l < 3 * MS / 2));
    // the CPU: X x (0.6 + 0.5) ms
    assert!((r.cpu / (r.qps * 1.1e-3) - 1.0).abs() < 0.01, "{} {}", r.cpu, r.qps);
}

#[test]
fn modify_an_event_loop_writes_first_where_its_last_pass_read() {
    // wrk: the connections a pass reported lead the next, in its order (a read now a write),
    // ahead of replies that came to the others meanwhile:
    //   0.7 reply 0: pass [R0] 0.7-1.1 (0.9 reply 1 waits); pass [W0 1.1-1.3, R1 1.3-1.7
    //   (latency 1.5)]; pass [W1 1.7-1.9] (1.8 reply 0 waits); [R0 1.9-2.3] (latency
    //   2.3 - 1.1 = 1.2); [W0 2.3-2.5] (2.4 reply 1 waits); [R1 2.5-2.9] (latency 1.2) ...
    // the generator never sleeps: each reply waits for the step under way, 1.2 ms a latency
    // for both, X = 2 / 1.2 ms (the generator's 0.6 ms a request is the bottleneck).
    let r = two_clients("modify");
    assert!(
        settles_to(&r, &[6 * MS / 5]),
        "{:?}",
        &r.latencies[r.latencies.len() - 6..]
    );
    assert!((r.qps / (2.0 / 1.2e-3) - 1.0).abs() < 0.001, "{}", r.qps);
    assert!((r.cpu / (r.qps * 1.1e-3) - 1.0).abs() < 0.01, "{} {}", r.cpu, r.qps);
    // (settled, each pass holds one step, as readd's would from the same state: the order
    // decides which state it settles in; event_loop.rs's unit tests check the order itself)
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
    assert!(refused(share.clone()).contains("read_share"));
    share["event_loop"] = json!({"rearm": "tail"});
    // (the Python schema names the field; the core's JSON says what it expected)
    let err = refused(share);
    assert!(
        err.contains("`tail`") && err.contains("readd") && err.contains("modify"),
        "{err}"
    );
}
