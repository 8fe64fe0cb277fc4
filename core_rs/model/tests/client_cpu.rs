//! A closed loop's load generator (client_cpu) and the wait inside each request (delay): the
//! generator's CPU is charged to the workload's cgroup, a delay to none, and the latency runs
//! from when the client is ready.
mod common;
use common::*;
use serde_json::json;

fn run(extra: serde_json::Value, workers: Option<u32>) -> (f64, Vec<u64>, f64) {
    let mut wl = json!({"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 4,
                        "service": {"dist": "constant", "value_ns": 1_000_000}});
    for (k, v) in extra.as_object().unwrap() {
        wl[k] = v.clone();
    }
    if let Some(w) = workers {
        wl["workers"] = json!(w);
    }
    let mut n = node(json!({"topology": topo(8, 1), "cgroups": [cg("web", 1024, 0, 0)], "workloads": [wl]}));
    n.run_until(S).unwrap();
    n.reset_stats();
    let before = usage(&mut n, "web");
    n.run_until(11 * S).unwrap();
    n.check_invariants().unwrap();
    let cpu = (usage(&mut n, "web") - before) as f64 / (10.0 * S as f64);
    let svc = &n.services[n.service_id("web").unwrap()];
    let qps = svc.completed as f64 / 10.0;
    (qps, svc.latencies.clone(), cpu)
}

#[test]
fn a_client_cost_is_cpu_in_the_cgroup_and_part_of_the_latency() {
    // 4 clients on 8 idle CPUs, each request 0.5 ms of the client's CPU + 1 ms of service:
    // every latency is 1.5 ms, X = 4 / 1.5 ms, and the cgroup uses X x 1.5 ms = 4 CPUs
    for workers in [None, Some(4)] {
        let (qps, lat, cpu) = run(
            json!({"client_cpu": {"dist": "constant", "value_ns": 500_000}}),
            workers,
        );
        assert!(lat.iter().all(|&l| l == 1_500_000), "{workers:?}: {:?}", &lat[..4]);
        assert!((qps / (4.0 / 1.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {qps}");
        assert!((cpu / (qps * 1.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {cpu}");
    }
}

#[test]
fn a_delay_is_latency_without_cpu() {
    // 2 ms of delay + 1 ms of service: latency 3 ms, X = 4 / 3 ms, CPU X x 1 ms only
    for workers in [None, Some(4)] {
        let (qps, lat, cpu) = run(json!({"delay": {"dist": "constant", "value_ns": 2_000_000}}), workers);
        assert!(lat.iter().all(|&l| l == 3_000_000), "{workers:?}");
        assert!((qps / (4.0 / 3e-3) - 1.0).abs() < 0.001, "{workers:?}: {qps}");
        assert!((cpu / (qps * 1e-3) - 1.0).abs() < 0.001, "{workers:?}: {cpu}");
    }
}

#[test]
fn a_client_cost_a_delay_and_a_shape_add_up() {
    // 4 clients on 8 idle CPUs: 0.5 ms of the client's CPU, a 2 ms delay, then 1 ms of service
    // in 2 bursts with 3 ms asleep between: every latency is 0.5 + 2 + 0.5 + 3 + 0.5 = 6.5 ms,
    // X = 4 / 6.5 ms, and the cgroup is charged only the CPU, X x 1.5 ms
    for workers in [None, Some(4)] {
        let (qps, lat, cpu) = run(
            json!({"client_cpu": {"dist": "constant", "value_ns": 500_000},
                   "delay": {"dist": "constant", "value_ns": 2_000_000},
                   "shape": {"bursts": 2, "wait": {"dist": "constant", "value_ns": 3_000_000}}}),
            workers,
        );
        assert!(lat.iter().all(|&l| l == 6_500_000), "{workers:?}: {:?}", &lat[..4]);
        assert!((qps / (4.0 / 6.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {qps}");
        assert!((cpu / (qps * 1.5e-3) - 1.0).abs() < 0.001, "{workers:?}: {cpu}");
    }
}

/// One client with `extra` on `cpus` idle CPUs, measured 10 s after 1 s: latencies, QPS, the
/// cgroup's CPU (CPUs) and its switches per request.
fn one_client(cpus: u32, extra: serde_json::Value) -> (Vec<u64>, f64, f64, f64) {
    let mut wl = json!({"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 1,
                        "client_cpu": {"dist": "constant", "value_ns": 600_000},
                        "service": {"dist": "constant", "value_ns": 1_000_000}});
    for (k, v) in extra.as_object().unwrap() {
        wl[k] = v.clone();
    }
    let mut n = node(json!({"topology": topo(cpus, 1), "cgroups": [cg("web", 1024, 0, 0)], "workloads": [wl]}));
    n.run_until(S).unwrap();
    n.reset_stats();
    let before = usage(&mut n, "web");
    n.run_until(11 * S).unwrap();
    n.check_invariants().unwrap();
    let cpu = (usage(&mut n, "web") - before) as f64 / (10.0 * S as f64);
    let svc = &n.services[n.service_id("web").unwrap()];
    let qps = svc.completed as f64 / 10.0;
    let switches = n.cgroups[1].stats.nr_switches as f64 / svc.completed as f64;
    (svc.latencies.clone(), qps, cpu, switches)
}

#[test]
fn rounds_alternate_the_client_and_the_server() {
    // One client on 4 idle CPUs, 0.6 ms of client CPU and 1 ms of service in 3 rounds: the
    // client runs 0.2 ms, the server 0.333 ms, three times over, nothing overlaps and nothing
    // waits, so every latency is still 1.6 ms, X = 1 / 1.6 ms, the cgroup uses X x 1.6 ms = 1
    // CPU; but the generator and the server thread each go to sleep 3 times per request (6
    // switches) where one round has them sleep once each (2).
    for (rounds, switches) in [(1, 2.0), (3, 6.0), (7, 14.0)] {
        let (lat, qps, cpu, sw) = one_client(4, json!({"rounds": rounds}));
        assert!(lat.iter().all(|&l| l == 1_600_000), "rounds {rounds}: {:?}", &lat[..4]);
        assert!((qps / (1.0 / 1.6e-3) - 1.0).abs() < 0.001, "rounds {rounds}: {qps}");
        assert!((cpu - 1.0).abs() < 0.001, "rounds {rounds}: {cpu}");
        assert!(
            (sw - switches).abs() < 0.01,
            "rounds {rounds}: {sw} switches per request"
        );
    }
}

#[test]
fn streamed_rounds_run_the_client_beside_the_server() {
    // The same client and server (0.6 ms + 1 ms in 3 rounds) streamed: round 1 is the
    // client's 0.2 ms, then the server's first 0.333333 ms; in rounds 2 and 3 the client's
    // 0.2 ms runs beside the server's 0.333333 and 0.333334 ms (parts equal to the ns, the last
    // taking the remainder), so a request takes 0.2 + 3 x 1/3 = 1.2 ms, X = 1 / 1.2 ms, and the
    // cgroup uses X x 1.6 ms = 1.333 CPUs. Switches: the client sleeps after each of its 3
    // parts (it always finishes first); the server runs on into rounds 2 and 3 and sleeps
    // once, after the last: 4 a request. On 1 CPU nothing overlaps: 1.6 ms, 1 CPU.
    let stream = json!({"rounds": 3, "exchange": "stream"});
    let (lat, qps, cpu, sw) = one_client(4, stream.clone());
    assert!(lat.iter().all(|&l| l == 1_200_000), "{:?}", &lat[..4]);
    assert!((qps / (1.0 / 1.2e-3) - 1.0).abs() < 0.001, "{qps}");
    assert!((cpu - 1.6 / 1.2).abs() < 0.001, "{cpu}");
    assert!((sw - 4.0).abs() < 0.01, "{sw} switches per request");
    let (lat, qps, cpu, _) = one_client(1, stream);
    assert!(lat.iter().all(|&l| l == 1_600_000), "1 CPU: {:?}", &lat[..4]);
    assert!(
        (qps / (1.0 / 1.6e-3) - 1.0).abs() < 0.001 && (cpu - 1.0).abs() < 0.001,
        "1 CPU: {qps}/s, {cpu} CPUs"
    );
}

#[test]
fn a_streamed_round_waits_for_its_slowest_party() {
    // fanout 2 on 3 CPUs, 2 rounds, client 1.2 ms (0.6 a part) and 1 ms a thread (0.5 a
    // part): round 1 is 0.6 + 0.5 ms, round 2 the client's 0.6 ms beside both threads' 0.5 ms:
    // 1.7 ms a request. The client is the last of round 2 and asks again on its own task.
    let (lat, qps, cpu, _) = one_client(
        3,
        json!({"rounds": 2, "exchange": "stream", "fanout": 2,
               "client_cpu": {"dist": "constant", "value_ns": 1_200_000}}),
    );
    assert!(lat.iter().all(|&l| l == 1_700_000), "{:?}", &lat[..4]);
    assert!((cpu / (qps * 3.2e-3) - 1.0).abs() < 0.001, "{cpu} CPUs at {qps}/s");
}

#[test]
fn each_round_waits_for_every_thread_of_the_fanout() {
    // fanout 2 on 2 CPUs, 2 rounds: each round the client's 0.3 ms, then both threads' 0.5 ms
    // side by side (the client waits for both), so a request takes 2 x (0.3 + 0.5) = 1.6 ms
    // and uses 0.6 + 2 ms of CPU; on 1 CPU everything queues: 0.6 + 2 = 2.6 ms, 1 CPU busy.
    for (cpus, latency) in [(2, 1_600_000u64), (1, 2_600_000)] {
        let (lat, qps, cpu, _) = one_client(cpus, json!({"rounds": 2, "fanout": 2}));
        assert!(lat.iter().all(|&l| l == latency), "{cpus} CPUs: {:?}", &lat[..4]);
        assert!(
            (cpu / (qps * 2.6e-3) - 1.0).abs() < 0.001,
            "{cpus} CPUs: {cpu} CPUs at {qps}/s"
        );
    }
}

#[test]
fn one_round_is_the_loop_without_rounds_bit_for_bit() {
    // random service and client CPU, a delay and a hog beside: `rounds = 1` draws nothing
    // more and splits nothing
    let spec = |rounds: Option<u32>| {
        let mut wl = json!({"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 3, "fanout": 2,
                            "client_cpu": {"dist": "exponential", "mean_ns": 700_000.0},
                            "delay": {"dist": "exponential", "mean_ns": 300_000.0},
                            "service": {"dist": "exponential", "mean_ns": 2_000_000.0}});
        if let Some(r) = rounds {
            wl["rounds"] = json!(r);
        }
        json!({"topology": topo(2, 1), "cgroups": [cg("web", 1024, 0, 0), cg("batch", 1024, 0, 0)],
               "workloads": [wl, hog("stress", "batch", 3)]})
    };
    let lat = |rounds| {
        let mut n = node(spec(rounds));
        n.run_until(3 * S).unwrap();
        let svc = &n.services[n.service_id("web").unwrap()];
        (svc.latencies.clone(), usage(&mut n, "batch"))
    };
    let (a, b) = (lat(None), lat(Some(1)));
    assert!(a.0.len() > 100);
    assert_eq!(a, b);
    assert_ne!(lat(Some(2)).0, a.0);
}

#[test]
fn rounds_are_refused_where_their_parts_are_undefined() {
    let bad = |extra: serde_json::Value, why: &str| {
        let mut wl = json!({"kind": "closed_loop", "name": "web", "cgroup": "web", "clients": 1,
                            "service": {"dist": "constant", "value_ns": 1_000}});
        for (k, v) in extra.as_object().unwrap() {
            wl[k] = v.clone();
        }
        let spec = json!({"topology": topo(2, 1), "cgroups": [cg("web", 1024, 0, 0)], "workloads": [wl]});
        let Err(err) = colosim_core::Node::from_json(&spec.to_string()) else {
            panic!("{why}: accepted")
        };
        assert_eq!(err.field, "workloads[0].rounds", "{err:?}");
        assert!(err.reason.contains(why), "{err:?}");
    };
    let cpu = json!({"dist": "constant", "value_ns": 1_000});
    bad(json!({"rounds": 0}), "must be in 1..=");
    bad(json!({"rounds": 2}), "client_cpu");
    bad(json!({"rounds": 2, "client_cpu": cpu, "workers": 1}), "workers");
    bad(
        json!({"rounds": 2, "client_cpu": cpu, "shape": {"bursts": 2, "wait": cpu}}),
        "shape",
    );
}
