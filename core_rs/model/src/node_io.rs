//! The node's side of block IO and networking: building the disk and link from the spec,
//! taking the IOs and flow switches workloads ask for, the disk's completion, flusher and
//! bwm events, and the IO and network knobs (disk.rs, net.rs hold the models).

use crate::cgroup::CgId;
use crate::disk::{Disk, IoOp, IoStat, LinearModel, Waker, DIRTY_WRITEBACK};
use crate::error::{Result, SpecError};
use crate::events::Event;
use crate::net::{Net, BWM_INTERVAL, MIB};
use crate::node::Node;
use crate::spec::NodeSpec;
use crate::workload::Effects;

/// Dirtyable memory of a node whose memory is not modelled.
const UNMODELLED_DIRTYABLE: u64 = 16 << 30;

impl Node {
    pub(crate) fn init_io(&mut self, spec: &NodeSpec) -> Result<()> {
        let parents: Vec<Option<CgId>> = self.cgroups.iter().map(|g| g.parent).collect();
        if let Some(d) = &spec.disk {
            let dirtyable = spec
                .memory
                .as_ref()
                .map(|m| m.total_bytes)
                .unwrap_or(UNMODELLED_DIRTYABLE);
            let (ratio, background) = spec.kernel.dirty_ratios();
            self.disk = Some(Disk::new(
                d.clone(),
                parents.clone(),
                dirtyable,
                ratio,
                background,
                spec.kernel.cgroup_writeback,
            ));
        }
        if let Some(n) = &spec.network {
            self.net = Some(Net::new(n.egress_bytes_per_s, parents));
        }
        for (i, c) in spec.cgroups.iter().enumerate() {
            for (k, v) in c.io_knobs() {
                if v != crate::spec::CgroupSpec::io_default(k) {
                    self.set_io_knob(i + 1, k, v)
                        .map_err(|e| SpecError::new(format!("cgroups[{i}].{k}"), e.reason))?;
                }
            }
        }
        Ok(())
    }

    /// Hand the IOs and flow switches of `eff` to the disk and the link.
    pub(crate) fn submit_io(&mut self, eff: &mut Effects) {
        if !eff.io.is_empty() {
            let now = self.now;
            let disk = self.disk.as_mut().expect("validated: IO workloads need a disk");
            disk.settle(now);
            for (t, r) in eff.io.drain(..) {
                let task = &self.tasks[t];
                if task.dead {
                    continue;
                }
                let op = IoOp {
                    cg: task.cg,
                    dir: r.dir,
                    bytes: r.bytes,
                    random: r.random,
                    direct: r.direct,
                    waker: Waker {
                        wl: task.wl,
                        tag: r.tag,
                    },
                };
                if r.dir == crate::disk::Dir::Write && !r.direct {
                    if let Some(m) = self.memory.as_mut().filter(|m| m.cache.legacy.is_some()) {
                        // a cache writer's chunk was marked dirty as its object (node_memory.rs);
                        // another buffered write keeps its place in the flusher's order
                        if !matches!(self.workloads[task.wl], crate::workload::Workload::CacheWriter(_)) {
                            let domain = crate::lru::writeback_domain(disk.cgroup_writeback, task.cg);
                            m.cache.dirty(domain, None, r.bytes);
                        }
                    }
                }
                disk.submit(op, now);
            }
            self.disk_changed();
        }
        if !eff.net.is_empty() {
            let now = self.now;
            let net = self.net.as_mut().expect("validated: network workloads need a link");
            net.settle(now);
            for (f, on) in eff.net.drain(..) {
                net.switch(f, on);
            }
            net.reshare();
        }
    }

    /// The disk's flows changed (or may have finished): settle, reshare, arm the next event,
    /// deliver completions.
    fn disk_changed(&mut self) {
        let now = self.now;
        let Some(disk) = self.disk.as_mut() else { return };
        disk.finish(now);
        let next = disk.reshare();
        disk.gen += 1;
        let gen = disk.gen;
        let completions = std::mem::take(&mut disk.completions);
        let cleaned = std::mem::take(&mut disk.cleaned);
        let arm_kupdate = disk.dirty_total > 0 && !disk.kupdate_armed;
        if arm_kupdate {
            disk.kupdate_armed = true;
        }
        // One pending disk event, re-armed (it was a push that left the last one stale).
        match next {
            Some(at) => self.queue.set_disk_timer(at, gen),
            None => self.queue.cancel_disk_timer(),
        }
        if let Some(m) = self.memory.as_mut() {
            for (owner, bytes) in cleaned {
                m.cache.written_back(owner, bytes);
            }
        }
        for (at, w) in completions {
            self.queue.push(at, Event::Workload { wl: w.wl, slot: w.tag });
        }
        if arm_kupdate {
            self.queue.push(now + DIRTY_WRITEBACK, Event::Kupdate);
        }
    }

    /// Reclaim met dirty pages not under writeback: wake the flushers (disk.rs
    /// `wakeup_flusher`).
    pub(crate) fn wake_flushers(&mut self) {
        let now = self.now;
        let Some(disk) = self.disk.as_mut() else { return };
        disk.settle(now);
        disk.wakeup_flusher(now);
        self.disk_changed();
    }

    pub(crate) fn disk_event(&mut self, gen: u64) {
        let now = self.now;
        let Some(disk) = self.disk.as_mut() else { return };
        if disk.gen != gen {
            return;
        }
        disk.settle(now);
        self.disk_changed();
    }

    pub(crate) fn kupdate_event(&mut self) {
        let now = self.now;
        let Some(disk) = self.disk.as_mut() else { return };
        disk.settle(now);
        disk.kupdate_armed = false;
        disk.kupdate(now);
        self.disk_changed();
    }

    pub(crate) fn bwm_event(&mut self, gen: u64) {
        let now = self.now;
        let Some(net) = self.net.as_mut() else { return };
        if net.bwm_gen != gen || !net.bwm.enabled {
            return;
        }
        net.settle(now);
        net.bwm_check(now);
        net.reshare();
        self.queue.push(now + BWM_INTERVAL, Event::Bwm { gen });
    }

    pub(crate) fn settle_io(&mut self) {
        let now = self.now;
        if let Some(d) = self.disk.as_mut() {
            d.settle(now);
        }
        if let Some(n) = self.net.as_mut() {
            n.settle(now);
        }
    }

    pub(crate) fn reset_io_stats(&mut self) {
        if let Some(d) = self.disk.as_mut() {
            d.reset_stats();
        }
        if let Some(n) = self.net.as_mut() {
            n.reset_stats();
        }
    }

    /// A cgroup's IO counters over its subtree, since the last reset (None: no disk).
    pub fn io_stat(&self, cg: CgId) -> Option<IoStat> {
        let d = self.disk.as_ref()?;
        let mut s = IoStat::default();
        for g in 0..self.cgroups.len() {
            if self.is_descendant(g, cg) {
                let o = d.stat(g);
                s.read_bytes += o.read_bytes;
                s.write_bytes += o.write_bytes;
                s.read_ios += o.read_ios;
                s.write_ios += o.write_ios;
                s.wait_ns += o.wait_ns;
            }
        }
        Some(s)
    }

    /// Bytes a cgroup's subtree sent since the last reset (None: no link).
    pub fn net_tx(&self, cg: CgId) -> Option<f64> {
        let n = self.net.as_ref()?;
        Some(
            (0..self.cgroups.len())
                .filter(|&g| self.is_descendant(g, cg))
                .map(|g| n.tx(g))
                .sum(),
        )
    }

    /// Cumulative (since time 0) read, write and sent bytes of each cgroup's subtree, for
    /// the time series.
    pub(crate) fn io_totals(&self) -> (Vec<u64>, Vec<u64>) {
        let n = self.cgroups.len();
        let mut io = vec![0.0; n];
        let mut tx = vec![0.0; n];
        if let Some(d) = &self.disk {
            for (g, c) in d.cgs.iter().enumerate() {
                io[g] = c.stat.read_bytes + c.stat.write_bytes;
            }
        }
        if let Some(net) = &self.net {
            for (g, c) in net.cgs.iter().enumerate() {
                tx[g] = c.tx;
            }
        }
        for g in (1..n).rev() {
            let p = self.cgroups[g].parent.unwrap();
            io[p] += io[g];
            tx[p] += tx[g];
        }
        (
            io.iter().map(|v| v.round() as u64).collect(),
            tx.iter().map(|v| v.round() as u64).collect(),
        )
    }

    fn no_disk(knob: &str) -> SpecError {
        SpecError::new(knob, "the node has no disk ([disk] in the scenario)")
    }
    fn no_net(knob: &str) -> SpecError {
        SpecError::new(knob, "the node has no network link ([network] in the scenario)")
    }

    /// Write an IO or network knob of a (non-root) cgroup; the value is checked already.
    pub(crate) fn set_io_knob(&mut self, cg: CgId, knob: &str, value: i64) -> Result<()> {
        let now = self.now;
        if knob.starts_with("blkio.") {
            let d = self.disk.as_mut().ok_or_else(|| Node::no_disk(knob))?;
            d.settle(now);
            let c = &mut d.cgs[cg];
            let v = value as u64;
            match knob {
                "blkio.weight" => c.weight = v,
                "blkio.cost.weight" => c.cost_weight = v,
                "blkio.throttle.read_bps_device" => c.throttle.read_bps = v,
                "blkio.throttle.write_bps_device" => c.throttle.write_bps = v,
                "blkio.throttle.read_iops_device" => c.throttle.read_iops = v,
                "blkio.throttle.write_iops_device" => c.throttle.write_iops = v,
                _ => unreachable!("checked knob {knob}"),
            }
            self.disk_changed();
        } else {
            let n = self.net.as_mut().ok_or_else(|| Node::no_net(knob))?;
            n.settle(now);
            match knob {
                "net_cls.classid" => n.cgs[cg].classid = value as u64,
                "net.egress_bps" => n.cgs[cg].egress_bps = value as u64,
                _ => unreachable!("checked knob {knob}"),
            }
            n.reshare();
        }
        Ok(())
    }

    pub(crate) fn read_io_knob(&self, cg: CgId, knob: &str) -> Result<i64> {
        if knob.starts_with("blkio.") {
            let c = &self.disk.as_ref().ok_or_else(|| Node::no_disk(knob))?.cgs[cg];
            let v = match knob {
                "blkio.weight" => c.weight,
                "blkio.cost.weight" => c.cost_weight,
                "blkio.throttle.read_bps_device" => c.throttle.read_bps,
                "blkio.throttle.write_bps_device" => c.throttle.write_bps,
                "blkio.throttle.read_iops_device" => c.throttle.read_iops,
                "blkio.throttle.write_iops_device" => c.throttle.write_iops,
                _ => return Err(SpecError::new(knob, "not an IO knob")),
            };
            return Ok(v as i64);
        }
        let c = &self.net.as_ref().ok_or_else(|| Node::no_net(knob))?.cgs[cg];
        match knob {
            "net_cls.classid" => Ok(c.classid as i64),
            "net.egress_bps" => Ok(c.egress_bps as i64),
            _ => Err(SpecError::new(knob, "not a network knob")),
        }
    }

    /// Write a node-wide file (ROOT_KNOBS) as its text.
    pub(crate) fn write_root_knob(&mut self, knob: &str, text: &str) -> Result<()> {
        let now = self.now;
        match knob {
            "blkio.cost.model" => {
                let model = LinearModel::parse(text, knob)?;
                let d = self.disk.as_mut().ok_or_else(|| Node::no_disk(knob))?;
                d.settle(now);
                d.iocost.model = model;
                self.disk_changed();
            }
            "blkio.cost.qos" => {
                let (enabled, vrate) = parse_cost_qos(text, knob)?;
                let d = self.disk.as_mut().ok_or_else(|| Node::no_disk(knob))?;
                d.settle(now);
                d.iocost.enabled = enabled;
                d.iocost.vrate = vrate;
                self.disk_changed();
            }
            "net_qos_enable" => {
                let on = match text.trim() {
                    "1" => true,
                    "0" => false,
                    t => return Err(SpecError::new(knob, format!("takes 0 or 1 (got {t:?})"))),
                };
                let n = self.net.as_mut().ok_or_else(|| Node::no_net(knob))?;
                n.settle(now);
                if on && !n.bwm.enabled {
                    n.bwm_start(now);
                    n.bwm_gen += 1;
                    let gen = n.bwm_gen;
                    self.queue.push(now + BWM_INTERVAL, Event::Bwm { gen });
                }
                let n = self.net.as_mut().unwrap();
                n.bwm.enabled = on;
                n.reshare();
            }
            "net_qos_waterline" => {
                let v = parse_rate(text.trim(), knob)?;
                // bwmcli: the water mark is 20 MiB/s .. 9999 GiB/s
                if !(20 * MIB..=9999 << 30).contains(&v) {
                    return Err(SpecError::new(
                        knob,
                        format!("must be in 20mb..=9999gb (got {v} bytes/s)"),
                    ));
                }
                let n = self.net.as_mut().ok_or_else(|| Node::no_net(knob))?;
                n.bwm.waterline = v;
            }
            "net_qos_bandwidth" => {
                let (lo, hi) = text.split_once(',').ok_or_else(|| {
                    SpecError::new(knob, format!("takes \"LOW,HIGH\" (e.g. \"20mb,1gb\") (got {text:?})"))
                })?;
                let (lo, hi) = (parse_rate(lo.trim(), knob)?, parse_rate(hi.trim(), knob)?);
                // bwmcli: each 1 MiB/s .. 9999 GiB/s, low <= high
                for v in [lo, hi] {
                    if !(MIB..=9999 << 30).contains(&v) {
                        return Err(SpecError::new(
                            knob,
                            format!("each rate must be in 1mb..=9999gb (got {v} bytes/s)"),
                        ));
                    }
                }
                if lo > hi {
                    return Err(SpecError::new(
                        knob,
                        format!("low ({lo}) must not be above high ({hi})"),
                    ));
                }
                let n = self.net.as_mut().ok_or_else(|| Node::no_net(knob))?;
                n.settle(now);
                n.bwm.low = lo;
                n.bwm.high = hi;
                // the rate in force moves with the setting it came from
                n.bwm.offline_rate = if n.bwm.offline_rate == n.bwm.high { hi } else { lo };
                n.reshare();
            }
            _ => {
                return Err(SpecError::new(
                    knob,
                    format!("not a node-wide file (known: {})", crate::spec::ROOT_KNOBS.join(", ")),
                ))
            }
        }
        Ok(())
    }

    pub(crate) fn read_root_knob(&self, knob: &str) -> Result<String> {
        match knob {
            "blkio.cost.model" => {
                let d = self.disk.as_ref().ok_or_else(|| Node::no_disk(knob))?;
                Ok(d.iocost
                    .model
                    .map(|m| m.text())
                    .unwrap_or_else(|| format!("ctrl=auto {}", d.spec.device().text().replacen("ctrl=user ", "", 1))))
            }
            "blkio.cost.qos" => {
                let d = self.disk.as_ref().ok_or_else(|| Node::no_disk(knob))?;
                let c = d.iocost;
                Ok(format!(
                    "enable={} ctrl=user min={:.2} max={:.2}",
                    c.enabled as u8, c.vrate.0, c.vrate.1
                ))
            }
            "net_qos_enable" => {
                Ok((self.net.as_ref().ok_or_else(|| Node::no_net(knob))?.bwm.enabled as u8).to_string())
            }
            "net_qos_waterline" => Ok(self
                .net
                .as_ref()
                .ok_or_else(|| Node::no_net(knob))?
                .bwm
                .waterline
                .to_string()),
            "net_qos_bandwidth" => {
                let b = self.net.as_ref().ok_or_else(|| Node::no_net(knob))?.bwm;
                Ok(format!("{},{}", b.low, b.high))
            }
            _ => Err(SpecError::new(
                knob,
                format!("not a node-wide file (known: {})", crate::spec::ROOT_KNOBS.join(", ")),
            )),
        }
    }
}

/// io.cost.qos text: "[MAJ:MIN] enable=0|1 [ctrl=auto|user] [rpct=… rlat=… wpct=… wlat=…]
/// [min=… max=…]" → (enabled, (min, max) vrate %). Without min/max, or with ctrl=auto, the
/// vrate floats (1..10000%): the model does not cap the device.
fn parse_cost_qos(text: &str, knob: &str) -> Result<(bool, (f64, f64))> {
    let mut enabled = false;
    let (mut lo, mut hi) = (1.0, 10000.0);
    for tok in text.split_whitespace() {
        if tok.contains(':') && !tok.contains('=') {
            continue;
        }
        let (k, v) = tok
            .split_once('=')
            .ok_or_else(|| SpecError::new(knob, format!("expected KEY=VALUE, got {tok:?}")))?;
        let num = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| SpecError::new(knob, format!("{k} must be a number (got {v:?})")))
        };
        match k {
            "enable" => {
                enabled = match v {
                    "1" => true,
                    "0" => false,
                    _ => return Err(SpecError::new(knob, format!("enable takes 0 or 1 (got {v:?})"))),
                }
            }
            "ctrl" if v == "auto" || v == "user" => {}
            "rpct" | "wpct" | "rlat" | "wlat" => {
                num(v)?;
            }
            "min" => lo = num(v)?,
            "max" => hi = num(v)?,
            _ => {
                return Err(SpecError::new(
                    knob,
                    format!("unknown key {k:?} (enable, ctrl, rpct, rlat, wpct, wlat, min, max)"),
                ))
            }
        }
    }
    if !(1.0..=10000.0).contains(&lo) || !(1.0..=10000.0).contains(&hi) || lo > hi {
        return Err(SpecError::new(
            knob,
            format!("min and max must be in 1..=10000 with min <= max (got {lo}, {hi})"),
        ));
    }
    Ok((enabled, (lo, hi)))
}

/// bwmcli's rates: a number with an optional kb/mb/gb suffix (binary units), else bytes/s.
fn parse_rate(text: &str, knob: &str) -> Result<u64> {
    let t = text.to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("gb") {
        (n, 1u64 << 30)
    } else if let Some(n) = t.strip_suffix("mb") {
        (n, 1 << 20)
    } else if let Some(n) = t.strip_suffix("kb") {
        (n, 1 << 10)
    } else {
        (t.as_str(), 1)
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| SpecError::new(knob, format!("expected a rate like 20mb or 1gb (got {text:?})")))?;
    v.checked_mul(mult)
        .ok_or_else(|| SpecError::new(knob, format!("rate too large ({text:?})")))
}
