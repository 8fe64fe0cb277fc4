//! The node's egress link: flows (an iperf3 stream each) share its bandwidth fairly per flow,
//! as competing TCP streams do, under two kinds of caps (`fluid.rs`):
//! - `net.egress_bps` of a cgroup's subtree: a plain rate limit, i.e. the tc rate (tbf/htb)
//!   that the bandwidth CNI plugin (`kubernetes.io/egress-bandwidth`) or Koordinator's tc
//!   plugin puts on a pod's traffic — not a cgroup file;
//! - openEuler's pod bandwidth manager, oncn-bwm (rubik.md §4.5): offline traffic
//!   (`net_cls.classid` = 4294967295) is paced, as one aggregate, at `low` while online
//!   traffic ran at or above the water mark over the last check interval and at `high`
//!   otherwise; the rate is re-chosen every 10 ms and starts at `low`. Online traffic is never
//!   delayed. Its node settings are the root's `net_qos.*` pseudo-files (/proc/qos/net_qos_*).

use crate::cgroup::CgId;
use crate::events::Ns;
use crate::fluid::{fill, Limit};

/// net_cls.classid that marks a cgroup offline for oncn-bwm (uint32 −1, rubik.md §4.5).
pub const OFFLINE_CLASSID: u64 = 4_294_967_295;
/// bwm re-chooses the offline rate every 10 ms (bpf/bwm_tc.c).
pub const BWM_INTERVAL: Ns = 10_000_000;
/// bwmcli defaults: water mark 20 MiB/s, low 20 MiB/s, high 1 GiB/s ("MB" = 2^20 bytes).
pub const MIB: u64 = 1 << 20;
pub const DEFAULT_WATERLINE: u64 = 20 * MIB;
pub const DEFAULT_LOW: u64 = 20 * MIB;
pub const DEFAULT_HIGH: u64 = 1 << 30;

#[derive(Debug, Clone)]
pub struct NetCgroup {
    pub classid: u64,
    /// net.egress_bps (bytes/s; 0: none).
    pub egress_bps: u64,
    /// Bytes its own flows sent since time 0, and at the last reset.
    pub tx: f64,
    pub base: f64,
}

#[derive(Debug, Clone)]
struct Flow {
    cg: CgId,
    /// Bytes/ns the sender tries to send (iperf3 -b); infinity: as fast as it can.
    target: f64,
    on: bool,
    rate: f64,
}

#[derive(Debug, Clone, Copy)]
pub struct Bwm {
    pub enabled: bool,
    pub waterline: u64,
    pub low: u64,
    pub high: u64,
    /// The offline rate chosen at the last check.
    pub offline_rate: u64,
    online_bytes: f64,
    last_check: Ns,
    /// Times the offline rate switched between low and high.
    pub switches: u64,
}

#[derive(Debug)]
pub struct Net {
    parents: Vec<Option<CgId>>,
    /// Link bandwidth in bytes/ns.
    pub egress: f64,
    pub cgs: Vec<NetCgroup>,
    flows: Vec<Flow>,
    clock: Ns,
    pub bwm: Bwm,
    /// Generation of the pending bwm check.
    pub bwm_gen: u64,
}

impl Net {
    pub fn new(egress_bytes_per_s: u64, parents: Vec<Option<CgId>>) -> Net {
        Net {
            parents: parents.clone(),
            egress: egress_bytes_per_s as f64 / 1e9,
            cgs: parents
                .iter()
                .map(|_| NetCgroup {
                    classid: 0,
                    egress_bps: 0,
                    tx: 0.0,
                    base: 0.0,
                })
                .collect(),
            flows: vec![],
            clock: 0,
            bwm: Bwm {
                enabled: false,
                waterline: DEFAULT_WATERLINE,
                low: DEFAULT_LOW,
                high: DEFAULT_HIGH,
                offline_rate: DEFAULT_LOW,
                online_bytes: 0.0,
                last_check: 0,
                switches: 0,
            },
            bwm_gen: 0,
        }
    }

    /// A flow of cgroup `cg`, off until switched on; returns its id.
    pub fn add_flow(&mut self, cg: CgId, target_bytes_per_s: u64) -> usize {
        let target = if target_bytes_per_s == 0 {
            f64::INFINITY
        } else {
            target_bytes_per_s as f64 / 1e9
        };
        self.flows.push(Flow {
            cg,
            target,
            on: false,
            rate: 0.0,
        });
        self.flows.len() - 1
    }

    /// The classid that applies to a cgroup: its own, or the nearest ancestor's set one
    /// (a child net_cls group starts with its parent's classid).
    pub fn offline(&self, mut g: CgId) -> bool {
        loop {
            let c = &self.cgs[g];
            if c.classid != 0 {
                return c.classid == OFFLINE_CLASSID;
            }
            match self.parents[g] {
                Some(p) => g = p,
                None => return false,
            }
        }
    }

    fn is_descendant(&self, g: CgId, ancestor: CgId) -> bool {
        crate::cgroup::descends(&self.parents, g, ancestor)
    }

    pub fn settle(&mut self, now: Ns) {
        let dt = now.saturating_sub(self.clock) as f64;
        self.clock = now;
        if dt == 0.0 {
            return;
        }
        for i in 0..self.flows.len() {
            let f = &self.flows[i];
            if !f.on || f.rate <= 0.0 {
                continue;
            }
            let moved = f.rate * dt;
            let cg = f.cg;
            self.cgs[cg].tx += moved;
            if !self.offline(cg) {
                self.bwm.online_bytes += moved;
            }
        }
    }

    pub fn switch(&mut self, flow: usize, on: bool) {
        self.flows[flow].on = on;
    }

    /// bwm's periodic check (the node calls it every BWM_INTERVAL while enabled).
    pub fn bwm_check(&mut self, now: Ns) {
        let b = &mut self.bwm;
        let elapsed = now.saturating_sub(b.last_check);
        if elapsed > 0 {
            let online_rate = b.online_bytes * 1e9 / elapsed as f64;
            let rate = if online_rate >= b.waterline as f64 {
                b.low
            } else {
                b.high
            };
            if rate != b.offline_rate {
                b.switches += 1;
            }
            b.offline_rate = rate;
        }
        b.online_bytes = 0.0;
        b.last_check = now;
    }

    /// bwm is switched on now: counters start afresh at the initial (low) rate.
    pub fn bwm_start(&mut self, now: Ns) {
        self.bwm.offline_rate = self.bwm.low;
        self.bwm.online_bytes = 0.0;
        self.bwm.last_check = now;
    }

    pub fn reshare(&mut self) {
        let on: Vec<usize> = (0..self.flows.len()).filter(|&i| self.flows[i].on).collect();
        for f in &mut self.flows {
            f.rate = 0.0;
        }
        if on.is_empty() {
            return;
        }
        let mut limits = vec![Limit {
            capacity: self.egress,
            members: (0..on.len()).map(|k| (k, 1.0)).collect(),
        }];
        for (k, &i) in on.iter().enumerate() {
            if self.flows[i].target.is_finite() {
                limits.push(Limit {
                    capacity: self.flows[i].target,
                    members: vec![(k, 1.0)],
                });
            }
        }
        for g in 0..self.cgs.len() {
            let cap = self.cgs[g].egress_bps;
            if cap == 0 {
                continue;
            }
            let members: Vec<(usize, f64)> = on
                .iter()
                .enumerate()
                .filter(|&(_, &i)| self.is_descendant(self.flows[i].cg, g))
                .map(|(k, _)| (k, 1.0))
                .collect();
            if !members.is_empty() {
                limits.push(Limit {
                    capacity: cap as f64 / 1e9,
                    members,
                });
            }
        }
        if self.bwm.enabled {
            let members: Vec<(usize, f64)> = on
                .iter()
                .enumerate()
                .filter(|&(_, &i)| self.offline(self.flows[i].cg))
                .map(|(k, _)| (k, 1.0))
                .collect();
            if !members.is_empty() {
                limits.push(Limit {
                    capacity: self.bwm.offline_rate as f64 / 1e9,
                    members,
                });
            }
        }
        let rates = fill(&vec![1.0; on.len()], &limits);
        for (k, &i) in on.iter().enumerate() {
            self.flows[i].rate = rates[k];
        }
    }

    pub fn tx(&self, cg: CgId) -> f64 {
        self.cgs[cg].tx - self.cgs[cg].base
    }

    pub fn reset_stats(&mut self) {
        for c in &mut self.cgs {
            c.base = c.tx;
        }
    }
}
