//! Shared hardware: the last-level cache and memory bandwidth of a socket, and how they slow
//! the work of the threads that share them. Only workloads with a contention profile take
//! part; without any profile the node never builds this state and runs as it always did.
//!
//! The model (docs/model.md, "Shared hardware: LLC and memory bandwidth"):
//!
//! * CPI = base + LLC misses per instruction × miss penalty (the standard CPI-stack split;
//!   Eyerman, Eeckhout et al., "A performance counter architecture for computing accurate CPI
//!   components", ASPLOS 2006). `base` is the profile's `cpi_base` (every LLC access hits),
//!   times (1 + the SMT siblings' core pressure) while siblings run (shared L1/L2 and issue
//!   slots); the penalty is the loaded memory latency × GHz ÷ the profile's memory-level
//!   parallelism.
//! * Miss ratio of a thread holding c bytes of LLC: m(c) = (1 + c/F)^(−α), F its footprint
//!   scale — the power-law tail of miss-ratio curves (Hartstein et al., "On the nature of
//!   cache miss behavior: is it √2?", JILP 2008: m ∝ c^(−α), α ≈ 0.5) with a finite cold
//!   value m(0) = 1.
//! * Occupancy: the running threads of a socket share its LLC as LRU does — a line lives the
//!   same characteristic time T whoever brought it in (Che, Tung, Wang, JSAC 2002), and a
//!   thread accessing a bytes/s fills dc/dt = a·m(c) (HOTL: Xiang, Ding, Luo et al., ASPLOS
//!   2013), so Σ c_i(T) = LLC fixes T. (The insertion-share rule of Chandra et al., HPCA 2005
//!   and CAMP, ISPASS 2010, gives a streamer nearly all of it; LRU lets a thread keep the lines
//!   it re-reads.) With CAT each way is its own pool, shared by the threads whose CBM has it,
//!   a thread spreading its lines evenly over its ways.
//! * Memory bandwidth per socket: demand = Σ misses/s × 64 B; latency L(u) = L0·(1 + k·u/(1−u))
//!   with u capped at `max_utilisation` (an M/M/1-like queue in front of the DRAM channels);
//!   demand above peak is throttled; MBA caps a group's bytes/s at its MB percent of peak.
//! * speed = CPI_ref / CPI_now, CPI_ref being the thread alone on an idle node (no sibling,
//!   the whole LLC, only its own traffic), so a calibrated service time keeps meaning "alone".

use crate::events::Ns;
use crate::node::{Node, SPEED_ONE};
use crate::resctrl::{Resctrl, ResctrlInfo};
use crate::topology::CpuId;
use crate::workload::TaskId;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A cache line: what one LLC miss moves from DRAM.
pub const LINE_BYTES: f64 = 64.0;
/// LLC per core when the scenario does not say: Skylake-SP's 1.375 MiB a core (11 ways).
pub const DEFAULT_LLC_PER_CORE: u64 = 1_441_792;
/// Fixed-point iterations at most over the access rates and utilisation, and the damping of
/// each step (a half step: rates fall as CPI rises, so undamped steps would oscillate).
const MAX_ITERS: usize = 60;
const DAMPING: f64 = 0.5;
const TOLERANCE: f64 = 1e-9;
/// Speeds are kept to 2^-10: a co-runner's switch that moves a thread's speed by less does
/// not reprogram its CPU.
const SPEED_QUANTUM: f64 = 1024.0;

// ---------------------------------------------------------------------------------------
// The spec (Python sends it under "hardware")

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareSpec {
    /// Core clock: cycles = CPU time × GHz (perf's cycles; the miss penalty in cycles).
    #[serde(default = "default_ghz")]
    pub ghz: f64,
    #[serde(default)]
    pub llc: LlcSpec,
    #[serde(default)]
    pub memory_bandwidth: MemoryBandwidthSpec,
    /// Workload name → its contention profile.
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileSpec>,
    /// resctrl groups set up before the run (scenario `[resctrl.<group>]`).
    #[serde(default)]
    pub resctrl: Vec<ResctrlGroupSpec>,
    /// How long a change of a socket's running set may wait before its other threads take
    /// their new speeds (changes within it are coalesced); None: one scheduler tick; 0: at
    /// once (exact, and slow on wide sockets).
    #[serde(default)]
    pub refresh_ns: Option<u64>,
}

impl Default for HardwareSpec {
    fn default() -> Self {
        HardwareSpec {
            ghz: default_ghz(),
            llc: LlcSpec::default(),
            memory_bandwidth: MemoryBandwidthSpec::default(),
            profiles: BTreeMap::new(),
            resctrl: vec![],
            refresh_ns: None,
        }
    }
}

fn default_ghz() -> f64 {
    2.5
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlcSpec {
    /// Bytes per socket; None: 1.375 MiB per core.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Ways (= CAT's cbm_mask bits).
    #[serde(default = "default_ways")]
    pub ways: u32,
    #[serde(default = "one")]
    pub min_cbm_bits: u32,
    #[serde(default = "default_closids")]
    pub num_closids: u32,
}

impl Default for LlcSpec {
    fn default() -> Self {
        LlcSpec {
            size_bytes: None,
            ways: default_ways(),
            min_cbm_bits: 1,
            num_closids: default_closids(),
        }
    }
}

fn default_ways() -> u32 {
    11
}
fn one() -> u32 {
    1
}
fn default_closids() -> u32 {
    16
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryBandwidthSpec {
    /// Per socket: six DDR4-2666 channels give 128 GB/s in theory, ≈ 100 GB/s in practice.
    #[serde(default = "default_peak")]
    pub peak_bytes_per_s: f64,
    /// Unloaded DRAM latency (≈ 80–90 ns on a two-socket Xeon, Intel MLC's idle latency).
    #[serde(default = "default_latency")]
    pub idle_latency_ns: f64,
    /// k in L0·(1 + k·u/(1−u)): 0.25 doubles the latency at 80% utilisation, as loaded-latency
    /// curves of Xeon servers (Intel MLC --loaded_latency) roughly do.
    #[serde(default = "default_queue_factor")]
    pub queue_factor: f64,
    /// Utilisation at which the latency stops growing (the queue is full; demand beyond peak
    /// is throttled instead).
    #[serde(default = "default_max_u")]
    pub max_utilisation: f64,
}

impl Default for MemoryBandwidthSpec {
    fn default() -> Self {
        MemoryBandwidthSpec {
            peak_bytes_per_s: default_peak(),
            idle_latency_ns: default_latency(),
            queue_factor: default_queue_factor(),
            max_utilisation: default_max_u(),
        }
    }
}

fn default_peak() -> f64 {
    100e9
}
fn default_latency() -> f64 {
    90.0
}
fn default_queue_factor() -> f64 {
    0.25
}
fn default_max_u() -> f64 {
    0.95
}

/// `[workloads.X.contention]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// Cycles per instruction when every LLC access hits.
    #[serde(default = "one_f")]
    pub cpi_base: f64,
    /// LLC accesses per thousand instructions.
    pub llc_apki: f64,
    /// F in m(c) = (1 + c/F)^(−α), bytes.
    pub footprint_bytes: f64,
    /// α.
    #[serde(default = "one_f")]
    pub miss_exponent: f64,
    /// Misses in flight at once (memory-level parallelism): a streaming loop overlaps many.
    #[serde(default = "one_f")]
    pub mlp: f64,
    /// What it adds to an SMT sibling's base CPI while both run; None: 1/smt_speed − 1, so two
    /// such threads without misses run at smt_speed, as threads without a profile do.
    #[serde(default)]
    pub core_pressure: Option<f64>,
}

fn one_f() -> f64 {
    1.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResctrlGroupSpec {
    pub name: String,
    #[serde(default)]
    pub schemata: String,
    #[serde(default)]
    pub cgroups: Vec<String>,
}

/// Checks of the hardware spec; messages name the field by its path.
pub fn validate(h: &HardwareSpec, workloads: &[String]) -> crate::Result<()> {
    use crate::error::SpecError;
    let positive = |field: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(SpecError::new(field, format!("must be a number > 0 (got {v})")))
        }
    };
    positive("hardware.ghz", h.ghz)?;
    positive(
        "hardware.memory_bandwidth.peak_bytes_per_s",
        h.memory_bandwidth.peak_bytes_per_s,
    )?;
    positive(
        "hardware.memory_bandwidth.idle_latency_ns",
        h.memory_bandwidth.idle_latency_ns,
    )?;
    let mb = &h.memory_bandwidth;
    if !(mb.queue_factor.is_finite() && mb.queue_factor >= 0.0) {
        return Err(SpecError::new(
            "hardware.memory_bandwidth.queue_factor",
            format!("must be >= 0 (got {})", mb.queue_factor),
        ));
    }
    if !(mb.max_utilisation > 0.0 && mb.max_utilisation < 1.0) {
        return Err(SpecError::new(
            "hardware.memory_bandwidth.max_utilisation",
            format!("must be in (0, 1) (got {})", mb.max_utilisation),
        ));
    }
    if !(1..=32).contains(&h.llc.ways) {
        return Err(SpecError::new(
            "hardware.llc.ways",
            format!("must be in 1..=32 (got {})", h.llc.ways),
        ));
    }
    if h.llc.min_cbm_bits > h.llc.ways {
        return Err(SpecError::new(
            "hardware.llc.min_cbm_bits",
            format!("must be at most llc.ways ({}) (got {})", h.llc.ways, h.llc.min_cbm_bits),
        ));
    }
    if h.llc.num_closids < 1 {
        return Err(SpecError::new(
            "hardware.llc.num_closids",
            "must be >= 1 (CLOSID 0 is the root group)",
        ));
    }
    if h.llc.size_bytes == Some(0) {
        return Err(SpecError::new("hardware.llc.size_bytes", "must be > 0"));
    }
    for (name, p) in &h.profiles {
        let at = |f: &str| format!("hardware.profiles.{name}.{f}");
        if !workloads.contains(name) {
            return Err(SpecError::new(
                format!("hardware.profiles.{name}"),
                "names no workload of this node",
            ));
        }
        positive(&at("cpi_base"), p.cpi_base)?;
        positive(&at("footprint_bytes"), p.footprint_bytes)?;
        positive(&at("mlp"), p.mlp)?;
        if !(p.llc_apki.is_finite() && p.llc_apki >= 0.0) {
            return Err(SpecError::new(
                at("llc_apki"),
                format!("must be >= 0 (got {})", p.llc_apki),
            ));
        }
        if !(p.miss_exponent > 0.0 && p.miss_exponent <= 2.0) {
            return Err(SpecError::new(
                at("miss_exponent"),
                format!("must be in (0, 2] (got {})", p.miss_exponent),
            ));
        }
        if let Some(c) = p.core_pressure {
            if !(c.is_finite() && c >= 0.0) {
                return Err(SpecError::new(at("core_pressure"), format!("must be >= 0 (got {c})")));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The model: pure functions and the per-socket solver

/// A profile as the solver uses it.
#[derive(Debug, Clone)]
pub struct Profile {
    pub cpi_base: f64,
    pub apki: f64,
    pub footprint: f64,
    pub alpha: f64,
    pub mlp: f64,
    pub pressure: f64,
    /// CPI alone on an idle node (set by `Machine::new`).
    pub cpi_ref: f64,
}

/// The socket's shared hardware.
#[derive(Debug, Clone)]
pub struct Machine {
    pub ghz: f64,
    pub llc_bytes: f64,
    pub ways: u32,
    /// Bytes/s per socket.
    pub peak: f64,
    pub idle_latency_ns: f64,
    pub queue_factor: f64,
    pub max_u: f64,
    pub profiles: Vec<Profile>,
}

/// Miss ratio of a thread holding `held` bytes: (1 + held/F)^(−α).
pub fn miss_ratio(p: &Profile, held: f64) -> f64 {
    libm::pow(1.0 + held.max(0.0) / p.footprint, -p.alpha)
}

/// Loaded memory latency at utilisation `u`: L0·(1 + k·u/(1−u)), u capped.
pub fn loaded_latency_ns(m: &Machine, u: f64) -> f64 {
    let u = u.clamp(0.0, m.max_u);
    m.idle_latency_ns * (1.0 + m.queue_factor * u / (1.0 - u))
}

/// CPI = base + misses per instruction × penalty cycles.
pub fn cpi(base: f64, apki: f64, miss: f64, penalty_cycles: f64) -> f64 {
    base + apki * miss / 1000.0 * penalty_cycles
}

/// A thread running on the socket, as the solver sees it.
#[derive(Debug, Clone, Copy)]
pub struct Runner {
    pub profile: usize,
    /// cpi_base × (1 + siblings' pressure).
    pub base_cpi: f64,
    /// Speed factor of remote memory (numa_remote_speed or 1).
    pub numa: f64,
    /// Its group's CBM on this socket.
    pub mask: u32,
    /// Its group's MB percent on this socket.
    pub mb_percent: u32,
    /// Its resctrl group (MBA caps each group's traffic).
    pub group: usize,
    /// How many identical threads it stands for.
    pub count: f64,
}

/// What the solver gives each runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct Share {
    /// LLC bytes it holds.
    pub occupancy: f64,
    /// Cycles per instruction now, stalls of MBA and peak throttling included.
    pub cpi: f64,
    /// LLC misses per thousand instructions now.
    pub mpki: f64,
    /// CPI_ref / CPI_now.
    pub speed: f64,
    /// LLC accesses, bytes/s.
    pub access: f64,
}

/// The socket's state at the fixed point: per runner shares, and the memory utilisation.
#[derive(Debug, Clone, Default)]
pub struct Equilibrium {
    pub shares: Vec<Share>,
    pub utilisation: f64,
    pub latency_ns: f64,
    pub iterations: usize,
    /// Characteristic time (s) of each way class.
    pub lifetimes: Vec<f64>,
}

impl Machine {
    pub fn new(h: &HardwareSpec, cores_per_socket: u32, smt_speed: f64, profiles: &[&ProfileSpec]) -> Machine {
        let mut m = Machine {
            ghz: h.ghz,
            llc_bytes: h
                .llc
                .size_bytes
                .unwrap_or(DEFAULT_LLC_PER_CORE * cores_per_socket as u64) as f64,
            ways: h.llc.ways,
            peak: h.memory_bandwidth.peak_bytes_per_s,
            idle_latency_ns: h.memory_bandwidth.idle_latency_ns,
            queue_factor: h.memory_bandwidth.queue_factor,
            max_u: h.memory_bandwidth.max_utilisation,
            profiles: vec![],
        };
        let full = ((1u64 << m.ways) - 1) as u32;
        for p in profiles {
            m.profiles.push(Profile {
                cpi_base: p.cpi_base,
                apki: p.llc_apki,
                footprint: p.footprint_bytes,
                alpha: p.miss_exponent,
                mlp: p.mlp,
                pressure: p.core_pressure.unwrap_or(1.0 / smt_speed - 1.0),
                cpi_ref: 1.0,
            });
            let i = m.profiles.len() - 1;
            let alone = Runner {
                profile: i,
                base_cpi: p.cpi_base,
                numa: 1.0,
                mask: full,
                mb_percent: 100,
                group: 0,
                count: 1.0,
            };
            m.profiles[i].cpi_ref = m.solve(&[alone], None).shares[0].cpi;
        }
        m
    }

    /// The occupancy / bandwidth fixed point of the runners of one socket. `warm`: the
    /// access rates to start from (the last solution), else each runner's rate alone.
    pub fn solve(&self, runners: &[Runner], warm: Option<&[f64]>) -> Equilibrium {
        let n = runners.len();
        let mut eq = Equilibrium {
            shares: vec![Share::default(); n],
            latency_ns: self.idle_latency_ns,
            ..Default::default()
        };
        if n == 0 {
            return eq;
        }
        let classes = way_classes(self.ways, runners);
        let mut access = match warm {
            Some(w) if w.len() == n => w.to_vec(),
            _ => runners
                .iter()
                .map(|r| {
                    let p = &self.profiles[r.profile];
                    self.ghz * 1e9 / p.cpi_ref * r.numa * p.apki / 1000.0 * LINE_BYTES
                })
                .collect(),
        };
        let mut u = 0.0;
        let mut times = vec![0.0; classes.len()];
        let mut state = self.step(runners, &classes, &access, u, &mut times);
        for it in 0..MAX_ITERS {
            eq.iterations = it + 1;
            let mut change = (state.utilisation - u).abs();
            for (a, &target) in access.iter_mut().zip(&state.access) {
                let next = *a + DAMPING * (target - *a);
                change = change.max((next - *a).abs() / a.max(1.0));
                *a = next;
            }
            u += DAMPING * (state.utilisation - u);
            state = self.step(runners, &classes, &access, u, &mut times);
            if change < TOLERANCE {
                break;
            }
        }
        for i in 0..n {
            let p = &self.profiles[runners[i].profile];
            let cpi = state.cpi[i] / state.throttle[i];
            eq.shares[i] = Share {
                occupancy: state.occupancy[i],
                cpi,
                mpki: p.apki * state.miss[i],
                speed: p.cpi_ref / cpi,
                access: access[i],
            };
        }
        eq.utilisation = u;
        eq.latency_ns = loaded_latency_ns(self, u);
        eq.lifetimes = times;
        eq
    }

    /// One evaluation at given access rates and utilisation: each way class's characteristic
    /// time and so every runner's occupancy and miss ratio, its CPI, the throttles (MBA per
    /// group, then the socket's peak), and the access rates and utilisation that result.
    fn step(&self, runners: &[Runner], classes: &[WayClass], access: &[f64], u: f64, times: &mut [f64]) -> Step {
        let lat = loaded_latency_ns(self, u);
        let n = runners.len();
        let mut s = Step {
            cpi: vec![0.0; n],
            miss: vec![0.0; n],
            occupancy: vec![0.0; n],
            throttle: vec![1.0; n],
            access: vec![0.0; n],
            utilisation: 0.0,
        };
        let way_bytes = self.llc_bytes / self.ways as f64;
        for (k, class) in classes.iter().enumerate() {
            // Σ_{i in class} fill_i(T) / n_i = way_bytes: each runner spreads its lines
            // evenly over its ways (per way of the class).
            let members: Vec<(usize, f64)> = class
                .members
                .iter()
                .map(|&i| (i, runners[i].mask.count_ones() as f64))
                .collect();
            let t = lifetime(way_bytes, times[k], |t| {
                members.iter().fold((0.0, 0.0), |(f, d), &(i, ni)| {
                    let p = &self.profiles[runners[i].profile];
                    let (c, dc) = fill(p, access[i], t);
                    let k = runners[i].count / ni;
                    (f + k * c, d + k * dc)
                })
            });
            times[k] = t;
            for &(i, ni) in &members {
                let p = &self.profiles[runners[i].profile];
                let c = fill(p, access[i], t).0;
                let share = class.ways as f64 / ni;
                s.occupancy[i] += share * c;
                s.miss[i] += share * miss_ratio(p, c);
            }
        }
        let mut traffic = vec![0.0; n];
        for (i, r) in runners.iter().enumerate() {
            let p = &self.profiles[r.profile];
            s.cpi[i] = cpi(r.base_cpi, p.apki, s.miss[i], lat * self.ghz / p.mlp);
            traffic[i] = self.ghz * 1e9 / s.cpi[i] * r.numa * p.apki * s.miss[i] / 1000.0 * LINE_BYTES;
        }
        // MBA: the threads of a group together get at most MB% of peak.
        for i in 0..n {
            if runners[i].mb_percent >= 100 {
                continue;
            }
            let demand: f64 = (0..n)
                .filter(|&j| runners[j].group == runners[i].group)
                .map(|j| traffic[j] * runners[j].count)
                .sum();
            let cap = self.peak * runners[i].mb_percent as f64 / 100.0;
            if demand > cap {
                s.throttle[i] = cap / demand;
            }
        }
        let total: f64 = (0..n).map(|i| traffic[i] * s.throttle[i] * runners[i].count).sum();
        let over = if total > self.peak { self.peak / total } else { 1.0 };
        for (i, r) in runners.iter().enumerate() {
            let p = &self.profiles[r.profile];
            s.throttle[i] *= over;
            s.access[i] = self.ghz * 1e9 / s.cpi[i] * s.throttle[i] * r.numa * p.apki / 1000.0 * LINE_BYTES;
        }
        s.utilisation = total * over / self.peak;
        s
    }
}

/// Ways that the same runners may fill (same membership in every runner's CBM).
#[derive(Debug, Clone)]
pub struct WayClass {
    pub ways: u32,
    pub members: Vec<usize>,
}

pub fn way_classes(ways: u32, runners: &[Runner]) -> Vec<WayClass> {
    let mut classes: Vec<WayClass> = vec![];
    for w in 0..ways {
        let members: Vec<usize> = (0..runners.len()).filter(|&i| runners[i].mask >> w & 1 == 1).collect();
        if members.is_empty() {
            continue;
        }
        match classes.iter_mut().find(|c| c.members == members) {
            Some(c) => c.ways += 1,
            None => classes.push(WayClass { ways: 1, members }),
        }
    }
    classes
}

/// HOTL's fill (Xiang, Ding, Luo et al., "HOTL: a higher order theory of locality",
/// ASPLOS 2013): a thread accessing `access` bytes/s whose miss ratio at c bytes is m(c)
/// fills its cache as dc/dt = access × m(c); for m(c) = (1 + c/F)^(−α) that integrates to
/// t(c) = F/((α+1)·access) · ((1 + c/F)^(α+1) − 1). Returns c(t) and dc/dt.
pub fn fill(p: &Profile, access: f64, t: f64) -> (f64, f64) {
    if access <= 0.0 || t <= 0.0 {
        return (0.0, access.max(0.0));
    }
    let a1 = p.alpha + 1.0;
    let base = 1.0 + t * access * a1 / p.footprint;
    let c = p.footprint * (libm::pow(base, 1.0 / a1) - 1.0);
    let dc = access * libm::pow(base, 1.0 / a1 - 1.0);
    (c, dc)
}

/// The time t(c) for a thread to fill c bytes (the inverse of `fill`).
pub fn fill_time(p: &Profile, access: f64, c: f64) -> f64 {
    let a1 = p.alpha + 1.0;
    p.footprint / (a1 * access) * (libm::pow(1.0 + c / p.footprint, a1) - 1.0)
}

/// The characteristic time T of a shared LRU cache of `size` bytes (Che, Tung, Wang, "Hierarchical
/// web caching systems: modeling, design and experimental results", JSAC 2002; composed with
/// HOTL fills): Σ fill_i(T) = size, by Newton's method on the concave increasing sum from
/// `guess` (the last solution), kept positive.
fn lifetime(size: f64, guess: f64, sum: impl Fn(f64) -> (f64, f64)) -> f64 {
    let mut t = if guess > 0.0 { guess } else { 1e-3 };
    for _ in 0..100 {
        let (f, d) = sum(t);
        if d <= 0.0 {
            return t; // nobody inserts: any lifetime holds
        }
        let next = t - (f - size) / d;
        let next = if next <= 0.0 { t / 16.0 } else { next };
        if (next - t).abs() <= 1e-12 * t {
            return next;
        }
        t = next;
    }
    t
}

struct Step {
    cpi: Vec<f64>,
    miss: Vec<f64>,
    occupancy: Vec<f64>,
    throttle: Vec<f64>,
    access: Vec<f64>,
    utilisation: f64,
}

// ---------------------------------------------------------------------------------------
// The node's shared hardware: resctrl, perf counters and (with profiles) the contention state

/// What makes two running threads of a socket interchangeable for the solver: profile,
/// base CPI (the SMT term), NUMA factor, CBM, MB percent and (under MBA) resctrl group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassKey {
    pub profile: usize,
    pub base_bits: u64,
    pub numa_bits: u64,
    pub mask: u32,
    pub mb: u32,
    /// Its resctrl group, when its MB is below 100 (else 0: groups without MBA share classes).
    pub group: usize,
}

/// A socket's solution: each class's share.
pub type Solution = Vec<(ClassKey, Share)>;

/// What the node keeps per running CPU from the last solve of its socket.
#[derive(Debug, Clone)]
pub struct Contention {
    pub machine: Machine,
    /// Per workload index: its profile.
    pub profile_of_wl: Vec<Option<usize>>,
    /// Per CPU: the running task's class, speed factor (with the SMT term), CPI, MPKI, LLC
    /// bytes and resctrl group, valid while `task[cpu]` is its running task.
    pub task: Vec<Option<TaskId>>,
    pub key: Vec<Option<ClassKey>>,
    pub speed: Vec<f64>,
    pub cpi: Vec<f64>,
    pub mpki: Vec<f64>,
    pub occupancy: Vec<f64>,
    pub group: Vec<usize>,
    /// Per socket: the solution in force, and whether a refresh is pending.
    pub current: Vec<std::sync::Arc<Solution>>,
    pub pending: Vec<bool>,
    /// Solutions by socket composition (sorted (class, count)): a pure function of it.
    pub memo: std::collections::HashMap<Vec<(ClassKey, u32)>, std::sync::Arc<Solution>>,
    /// How long a change may wait before the socket's co-runners take their new speeds.
    pub refresh_ns: Ns,
    /// Solves done and memo hits (for benchmarks).
    pub solves: u64,
}

/// Compositions remembered at most (then the memo starts over).
const MEMO_CAP: usize = 1 << 16;

/// Per cgroup: CPU time, instructions and LLC misses of its profiled tasks (perf counters of
/// the others follow from their CPU time).
#[derive(Debug, Clone, Default)]
pub struct PerfCounts {
    pub profiled_ns: u64,
    pub instructions: f64,
    /// LLC references (perf's `cache-references`): rubik dynCache's miss ratio divides by them.
    pub references: f64,
    pub misses: f64,
}

#[derive(Debug, Clone)]
pub struct Hardware {
    pub ghz: f64,
    pub llc_bytes: u64,
    pub resctrl: Resctrl,
    pub contention: Option<Box<Contention>>,
    pub perf: Vec<PerfCounts>,
}

impl Hardware {
    pub fn new(
        h: &HardwareSpec,
        topo: &crate::topology::Topology,
        cores_per_socket: u32,
        workload_names: &[String],
        tick_ns: Ns,
    ) -> Hardware {
        let refresh_ns = h.refresh_ns.unwrap_or(tick_ns);
        let nsockets = topo.socket_cpus.len();
        let names: Vec<&String> = h.profiles.keys().collect();
        let specs: Vec<&ProfileSpec> = h.profiles.values().collect();
        let machine = Machine::new(h, cores_per_socket, topo.smt_speed, &specs);
        let llc_bytes = machine.llc_bytes as u64;
        let contention = (!specs.is_empty()).then(|| {
            let ncpus = topo.ncpus;
            Box::new(Contention {
                profile_of_wl: workload_names
                    .iter()
                    .map(|w| names.iter().position(|n| *n == w))
                    .collect(),
                machine,
                task: vec![None; ncpus],
                key: vec![None; ncpus],
                speed: vec![1.0; ncpus],
                cpi: vec![1.0; ncpus],
                mpki: vec![0.0; ncpus],
                occupancy: vec![0.0; ncpus],
                group: vec![0; ncpus],
                current: (0..nsockets).map(|_| std::sync::Arc::new(vec![])).collect(),
                pending: vec![false; nsockets],
                memo: std::collections::HashMap::new(),
                refresh_ns,
                solves: 0,
            })
        });
        Hardware {
            ghz: h.ghz,
            llc_bytes,
            resctrl: Resctrl::new(ResctrlInfo {
                cbm_len: h.llc.ways,
                min_cbm_bits: h.llc.min_cbm_bits,
                num_closids: h.llc.num_closids as usize,
                bandwidth_gran: 10,
                min_bandwidth: 10,
                domains: nsockets,
            }),
            contention,
            perf: vec![],
        }
    }
}

impl Node {
    /// The profile of task `t`, if its workload has one.
    fn profile_of(&self, t: TaskId) -> Option<usize> {
        let c = self.hw.contention.as_ref()?;
        c.profile_of_wl.get(self.tasks[t].wl).copied().flatten()
    }

    /// The contention speed factor of `cpu`'s running task, when it has a profile (the SMT
    /// term included; NUMA is applied by `speed_of` as for every task).
    #[inline]
    pub(crate) fn contention_speed(&self, cpu: CpuId) -> Option<f64> {
        let c = self.hw.contention.as_ref()?;
        let t = self.cpus[cpu].curr?;
        (c.task[cpu] == Some(t)).then_some(c.speed[cpu])
    }

    /// `cpu`'s running task changed from `prev` to `next`. The new task and `cpu`'s SMT
    /// siblings (whose core pressure changed) take their class's share in the socket's
    /// current solution at once; the socket is solved again for its new composition within
    /// `refresh_ns` (changes coalesced), when every co-runner takes its new speed. A class
    /// the current solution does not have yet makes the solve immediate.
    #[cold]
    #[inline(never)]
    pub(crate) fn llc_changed(&mut self, cpu: CpuId, prev: Option<TaskId>, next: Option<TaskId>) {
        let Some(c) = self.hw.contention.as_ref() else { return };
        let profiled =
            |t: Option<TaskId>| t.is_some_and(|t| c.profile_of_wl.get(self.tasks[t].wl).copied().flatten().is_some());
        if !profiled(prev) && !profiled(next) && prev.is_some() == next.is_some() {
            return; // the profiled set and every sibling's busy state are unchanged
        }
        let socket = self.topo.socket_of[cpu];
        // A class the current solution lacks (a newcomer) cannot wait: solve now.
        let known = |s: CpuId| {
            self.class_of(s)
                .is_none_or(|k| c.current[socket].iter().any(|(ck, _)| *ck == k))
        };
        if c.refresh_ns == 0 || !self.topo.siblings(cpu).iter().all(|&s| known(s)) {
            self.resolve_socket(socket, Some(cpu));
            return;
        }
        for i in 0..self.topo.siblings(cpu).len() {
            let s = self.topo.siblings(cpu)[i];
            if s != cpu {
                self.observe_curr(s);
            }
            self.take_share(s, false);
        }
        let c = self.hw.contention.as_mut().expect("contention");
        if !c.pending[socket] {
            c.pending[socket] = true;
            let at = self.now + c.refresh_ns;
            self.queue.push(at, crate::events::Event::LlcRefresh { socket });
        }
    }

    /// The coalesced refresh of a socket is due.
    pub(crate) fn llc_refresh(&mut self, socket: usize) {
        if let Some(c) = self.hw.contention.as_mut() {
            c.pending[socket] = false;
            self.resolve_socket(socket, None);
        }
    }

    /// Solve the socket for its composition now (memoised) and give every profiled CPU but
    /// `except` (whose caller sets its speed) its new share, settling it at the old one first.
    pub(crate) fn resolve_socket(&mut self, socket: usize, except: Option<CpuId>) {
        let mut comp: Vec<(ClassKey, u32)> = vec![];
        for i in 0..self.topo.socket_cpus[socket].len() {
            let cpu = self.topo.socket_cpus[socket][i];
            if let Some(k) = self.class_of(cpu) {
                match comp.iter_mut().find(|(ck, _)| *ck == k) {
                    Some(e) => e.1 += 1,
                    None => comp.push((k, 1)),
                }
            }
        }
        comp.sort_unstable();
        let c = self.hw.contention.as_mut().expect("contention");
        let sol = match c.memo.get(&comp) {
            Some(s) => s.clone(),
            None => {
                let runners: Vec<Runner> = comp
                    .iter()
                    .map(|(k, n)| Runner {
                        profile: k.profile,
                        base_cpi: f64::from_bits(k.base_bits),
                        numa: f64::from_bits(k.numa_bits),
                        mask: k.mask,
                        mb_percent: k.mb,
                        group: k.group,
                        count: *n as f64,
                    })
                    .collect();
                let eq = c.machine.solve(&runners, None);
                let sol: Solution = comp.iter().map(|(k, _)| *k).zip(eq.shares).collect();
                let sol = std::sync::Arc::new(sol);
                if c.memo.len() >= MEMO_CAP {
                    c.memo.clear();
                }
                c.memo.insert(comp, sol.clone());
                c.solves += 1;
                sol
            }
        };
        c.current[socket] = sol;
        for i in 0..self.topo.socket_cpus[socket].len() {
            let o = self.topo.socket_cpus[socket][i];
            if Some(o) == except {
                self.take_share(o, false);
            } else if self.take_share(o, true) {
                self.refresh_speed(o);
            }
        }
    }

    /// After a resctrl change: every socket again, at once.
    pub(crate) fn resolve_all(&mut self) {
        if self.hw.contention.is_none() {
            return;
        }
        for s in 0..self.topo.socket_cpus.len() {
            self.resolve_socket(s, None);
        }
    }

    /// The class of `cpu`'s running task, if it has a profile.
    fn class_of(&self, cpu: CpuId) -> Option<ClassKey> {
        let c = self.hw.contention.as_ref()?;
        let t = self.cpus[cpu].curr?;
        let p = c.profile_of_wl.get(self.tasks[t].wl).copied().flatten()?;
        let smt_pressure = 1.0 / self.topo.smt_speed - 1.0;
        let mut pressure = 0.0;
        for &s in self.topo.siblings(cpu) {
            if s == cpu {
                continue;
            }
            if let Some(st) = self.cpus[s].curr {
                pressure += match c.profile_of_wl.get(self.tasks[st].wl).copied().flatten() {
                    Some(sp) => c.machine.profiles[sp].pressure,
                    None => smt_pressure,
                };
            }
        }
        let numa = match self.tasks[t].home_node {
            Some(h) if h != self.topo.numa_of[cpu] => self.topo.numa_remote_speed,
            _ => 1.0,
        };
        let socket = self.topo.socket_of[cpu];
        let group = self.hw.resctrl.group_of(self.tasks[t].cg, |g| self.cgroups[g].parent);
        let g = &self.hw.resctrl.groups[group];
        Some(ClassKey {
            profile: p,
            base_bits: (c.machine.profiles[p].cpi_base * (1.0 + pressure)).to_bits(),
            numa_bits: numa.to_bits(),
            mask: g.l3[socket],
            mb: g.mb[socket],
            group: if g.mb[socket] < 100 { group } else { 0 },
        })
    }

    /// Give `cpu`'s running task its class's share of the socket's current solution (a class
    /// the solution lacks runs as alone until the socket is solved). With `settle`, the CPU
    /// is settled at its old share first, and only when its speed changes; returns whether
    /// it changed.
    fn take_share(&mut self, cpu: CpuId, settle: bool) -> bool {
        let key = self.class_of(cpu);
        let curr = self.cpus[cpu].curr;
        let socket = self.topo.socket_of[cpu];
        let group = curr.map_or(0, |t| {
            self.hw.resctrl.group_of(self.tasks[t].cg, |g| self.cgroups[g].parent)
        });
        let c = self.hw.contention.as_ref().expect("contention");
        let Some(k) = key else {
            let was = c.task[cpu].is_some();
            self.hw.contention.as_mut().expect("contention").task[cpu] = None;
            return was;
        };
        let share = c.current[socket].iter().find(|(ck, _)| *ck == k).map(|(_, s)| *s);
        let speed = share.map_or(1.0, |s| (s.speed * SPEED_QUANTUM).round() / SPEED_QUANTUM);
        let same = c.task[cpu] == curr && c.key[cpu] == Some(k) && c.speed[cpu] == speed;
        if same && share.is_none_or(|s| s.occupancy == c.occupancy[cpu]) {
            return false;
        }
        if settle {
            self.observe_curr(cpu);
        }
        let c = self.hw.contention.as_mut().expect("contention");
        c.task[cpu] = curr;
        c.key[cpu] = Some(k);
        c.speed[cpu] = speed;
        c.group[cpu] = group;
        match share {
            Some(s) => {
                c.cpi[cpu] = s.cpi;
                c.mpki[cpu] = s.mpki;
                c.occupancy[cpu] = s.occupancy;
            }
            None => {
                let p = &c.machine.profiles[k.profile];
                c.cpi[cpu] = p.cpi_ref;
                c.mpki[cpu] = p.apki * miss_ratio(p, c.machine.llc_bytes);
                c.occupancy[cpu] = 0.0;
            }
        }
        !same
    }

    /// Account `delta` ns of CPU run by task `t` on `cpu` at fixed-point `speed`: the perf
    /// counters of its cgroup and its resctrl group's memory traffic (profiled tasks only;
    /// the others' counters follow from their CPU time).
    #[cold]
    #[inline(never)]
    pub(crate) fn charge_hw(&mut self, cpu: CpuId, t: TaskId, delta: Ns, speed: u64) {
        let Some(p) = self.profile_of(t) else { return };
        let c = self.hw.contention.as_ref().expect("contention");
        if c.task[cpu] != Some(t) {
            return;
        }
        let cpi_ref = c.machine.profiles[p].cpi_ref;
        let instructions = delta as f64 * self.hw.ghz * (speed as f64 / SPEED_ONE as f64) / cpi_ref;
        let misses = instructions * c.mpki[cpu] / 1000.0;
        let references = instructions * c.machine.profiles[p].apki / 1000.0;
        let group = c.group[cpu];
        let socket = self.topo.socket_of[cpu];
        let local = self.tasks[t]
            .home_node
            .is_none_or(|h| h / (self.topo.nnodes / self.topo.socket_cpus.len()).max(1) == socket);
        let cg = self.tasks[t].cg;
        if self.hw.perf.len() <= cg {
            self.hw.perf.resize(self.cgroups.len(), PerfCounts::default());
        }
        let pc = &mut self.hw.perf[cg];
        pc.profiled_ns += delta;
        pc.instructions += instructions;
        pc.references += references;
        pc.misses += misses;
        if let Some(m) = self.hw.resctrl.mon.get_mut(group) {
            m[socket].mbm_total_bytes += misses * LINE_BYTES;
            if local {
                m[socket].mbm_local_bytes += misses * LINE_BYTES;
            }
        }
    }

    /// perf_event's cgroup mode over `cg`'s subtree: cycles, instructions, LLC references and
    /// misses.
    pub fn perf_counters(&mut self, cg: usize) -> [(&'static str, u64); 4] {
        self.settle();
        let ghz = self.hw.ghz;
        let mut usage = 0u64;
        let mut prof = PerfCounts::default();
        for g in self.subtree(cg) {
            usage += self.cgroups[g].usage_total_ns;
            if let Some(p) = self.hw.perf.get(g) {
                prof.profiled_ns += p.profiled_ns;
                prof.instructions += p.instructions;
                prof.references += p.references;
                prof.misses += p.misses;
            }
        }
        let plain_ns = usage.saturating_sub(prof.profiled_ns);
        [
            ("cycles", (usage as f64 * ghz).round() as u64),
            (
                "instructions",
                (plain_ns as f64 * ghz + prof.instructions).round() as u64,
            ),
            ("cache-references", prof.references.round() as u64),
            ("cache-misses", prof.misses.round() as u64),
        ]
    }

    /// `cg` and its descendants (cgroup ids are topological: children after parents).
    fn subtree(&self, cg: usize) -> Vec<usize> {
        let mut out = vec![cg];
        for g in cg + 1..self.cgroups.len() {
            if self.cgroups[g].parent.is_some_and(|p| out.contains(&p)) {
                out.push(g);
            }
        }
        out
    }

    /// mon_data of a resctrl group per L3 domain: (llc_occupancy bytes now, mbm_total_bytes,
    /// mbm_local_bytes).
    pub fn resctrl_mon(&mut self, group: usize) -> Vec<(u64, u64, u64)> {
        self.settle();
        let nsockets = self.topo.socket_cpus.len();
        let mut occ = vec![0.0; nsockets];
        if let Some(c) = self.hw.contention.as_ref() {
            for cpu in 0..self.ncpus() {
                if c.task[cpu].is_some() && c.task[cpu] == self.cpus[cpu].curr && c.group[cpu] == group {
                    occ[self.topo.socket_of[cpu]] += c.occupancy[cpu];
                }
            }
        }
        let mon = &self.hw.resctrl.mon[group];
        (0..nsockets)
            .map(|s| {
                (
                    occ[s].round() as u64,
                    mon[s].mbm_total_bytes.round() as u64,
                    mon[s].mbm_local_bytes.round() as u64,
                )
            })
            .collect()
    }

    /// Write a group's schemata (creating it), as `echo ... > schemata` does.
    pub fn resctrl_write(&mut self, group: &str, schemata: &str) -> crate::Result<()> {
        self.hw
            .resctrl
            .write(group, schemata)
            .map_err(|e| crate::SpecError::new("", e))?;
        self.resolve_all();
        Ok(())
    }

    /// Every task of `cgroup`'s subtree joins `group`.
    pub fn resctrl_assign(&mut self, group: &str, cgroup: &str) -> crate::Result<()> {
        let g = self.resctrl_group(group)?;
        let cg = self.cgroup_id(cgroup)?;
        self.hw.resctrl.assign(g, cg);
        self.resolve_all();
        Ok(())
    }

    /// rmdir of a group (the root group cannot be removed).
    pub fn resctrl_remove(&mut self, group: &str) -> crate::Result<()> {
        if group.is_empty() {
            return Err(crate::SpecError::new("", "the resctrl root group cannot be removed"));
        }
        let g = self.resctrl_group(group)?;
        self.hw.resctrl.remove(g);
        self.resolve_all();
        Ok(())
    }

    pub fn resctrl_group(&self, group: &str) -> crate::Result<usize> {
        self.hw.resctrl.group_index(group).ok_or_else(|| {
            crate::SpecError::new(
                "",
                format!(
                    "no resctrl group {group:?} (groups: {})",
                    self.hw
                        .resctrl
                        .names()
                        .iter()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
    }

    /// The scenario's resctrl groups, before the run.
    pub(crate) fn init_resctrl(&mut self, groups: &[ResctrlGroupSpec]) -> crate::Result<()> {
        for (i, g) in groups.iter().enumerate() {
            let field = format!("resctrl.{}", g.name);
            if g.name.is_empty() {
                return Err(crate::SpecError::new(
                    format!("hardware.resctrl[{i}].name"),
                    "must not be empty",
                ));
            }
            self.hw
                .resctrl
                .write(&g.name, &g.schemata)
                .map_err(|e| crate::SpecError::new(format!("{field}.schemata"), e))?;
            for (j, cg) in g.cgroups.iter().enumerate() {
                let id = self
                    .cgroup_id(cg)
                    .map_err(|e| crate::SpecError::new(format!("{field}.cgroups[{j}]"), e.reason))?;
                let gi = self.hw.resctrl.group_index(&g.name).expect("just written");
                self.hw.resctrl.assign(gi, id);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(profiles: &[ProfileSpec]) -> Machine {
        let h = HardwareSpec {
            llc: LlcSpec {
                size_bytes: Some(16 << 20),
                ..Default::default()
            },
            ..Default::default()
        };
        let refs: Vec<&ProfileSpec> = profiles.iter().collect();
        Machine::new(&h, 8, 0.6, &refs)
    }

    fn profile(apki: f64, footprint_mb: f64) -> ProfileSpec {
        ProfileSpec {
            cpi_base: 1.0,
            llc_apki: apki,
            footprint_bytes: footprint_mb * (1 << 20) as f64,
            miss_exponent: 1.0,
            mlp: 1.0,
            core_pressure: None,
        }
    }

    fn runner(profile: usize, mask: u32) -> Runner {
        Runner {
            profile,
            base_cpi: 1.0,
            numa: 1.0,
            mask,
            mb_percent: 100,
            group: 0,
            count: 1.0,
        }
    }

    const FULL: u32 = 0x7ff;

    #[test]
    fn alone_runs_at_speed_one_with_the_whole_cache() {
        let m = machine(&[profile(10.0, 2.0)]);
        let eq = m.solve(&[runner(0, FULL)], None);
        assert!((eq.shares[0].occupancy - m.llc_bytes).abs() < 1e-6 * m.llc_bytes);
        assert!((eq.shares[0].speed - 1.0).abs() < 1e-9);
        // By hand: m(16 MiB) = (1 + 16/2)^-1 = 1/9; the CPI is 1 + 10/1000 × m × L × 2.5.
        let miss = 1.0 / 9.0;
        let c = m.profiles[0].cpi_ref;
        let u = 2.5e9 / c * 10.0 * miss / 1000.0 * 64.0 / 100e9;
        let lat = 90.0 * (1.0 + 0.25 * u / (1.0 - u));
        assert!(
            (c - (1.0 + 10.0 / 1000.0 * miss * lat * 2.5)).abs() < 1e-6,
            "cpi_ref {c}"
        );
    }

    #[test]
    fn two_identical_threads_each_hold_half() {
        let m = machine(&[profile(10.0, 2.0)]);
        let eq = m.solve(&[runner(0, FULL), runner(0, FULL)], None);
        for s in &eq.shares {
            assert!((s.occupancy - m.llc_bytes / 2.0).abs() < 1e-6 * m.llc_bytes);
            assert!(s.speed < 1.0);
        }
    }

    #[test]
    fn occupancies_share_one_lifetime_at_the_fixed_point() {
        // A cache-friendly service beside a streaming job: LRU keeps a line for the same
        // characteristic time T whoever owns it, so each thread holds what it fills in T
        // (t(c) integrated by hand from dc/dt = access × m(c)), and together they fill the LLC.
        let m = machine(&[profile(5.0, 1.0), profile(30.0, 4096.0)]);
        let rs = [runner(0, FULL), runner(1, FULL)];
        let eq = m.solve(&rs, None);
        let (s0, s1) = (eq.shares[0], eq.shares[1]);
        assert!((s0.occupancy + s1.occupancy - m.llc_bytes).abs() < 1e-6 * m.llc_bytes);
        let t_of = |i: usize, c: f64| {
            let p = &m.profiles[i];
            let (f, a, a1) = (p.footprint, eq.shares[i].access, p.alpha + 1.0);
            f / (a1 * a) * ((1.0 + c / f).powf(a1) - 1.0)
        };
        let (t0, t1) = (t_of(0, s0.occupancy), t_of(1, s1.occupancy));
        assert!((t0 - t1).abs() < 1e-6 * t0, "lifetimes {t0} vs {t1}");
        // The access rates are the ones the CPIs give.
        for (i, sh) in [s0, s1].iter().enumerate() {
            let a = 2.5e9 / sh.cpi * m.profiles[i].apki / 1000.0 * LINE_BYTES;
            assert!((sh.access - a).abs() < 1e-6 * a, "{} vs {a}", sh.access);
        }
        assert!(s0.speed < 0.99 && s1.speed < 1.0);
    }

    #[test]
    fn one_streamer_does_not_take_the_reused_lines() {
        // The service re-touches its lines within T, so it keeps more than its insertion share.
        let m = machine(&[profile(20.0, 1.0), profile(30.0, 4096.0)]);
        let eq = m.solve(&[runner(0, FULL), runner(1, FULL)], None);
        let ins = |i: usize| eq.shares[i].access * eq.shares[i].mpki / m.profiles[i].apki;
        let by_insertion = m.llc_bytes * ins(0) / (ins(0) + ins(1));
        assert!(
            eq.shares[0].occupancy > by_insertion,
            "{} vs {by_insertion}",
            eq.shares[0].occupancy
        );
    }

    #[test]
    fn disjoint_cat_masks_isolate_the_cache() {
        let m = machine(&[profile(5.0, 1.0), profile(30.0, 4096.0)]);
        // Service: ways 0-7, streamer: ways 8-10. Bandwidth still couples them.
        let eq = m.solve(&[runner(0, 0xff), runner(1, 0x700)], None);
        assert!((eq.shares[0].occupancy - m.llc_bytes * 8.0 / 11.0).abs() < 1.0);
        assert!((eq.shares[1].occupancy - m.llc_bytes * 3.0 / 11.0).abs() < 1.0);
        let shared = m.solve(&[runner(0, FULL), runner(1, FULL)], None);
        assert!(eq.shares[0].speed > shared.shares[0].speed + 0.05);
    }

    #[test]
    fn latency_follows_the_queueing_formula() {
        let m = machine(&[]);
        assert_eq!(loaded_latency_ns(&m, 0.0), 90.0);
        assert!((loaded_latency_ns(&m, 0.5) - 90.0 * 1.25).abs() < 1e-12);
        assert!((loaded_latency_ns(&m, 0.8) - 90.0 * 2.0).abs() < 1e-9);
        assert_eq!(loaded_latency_ns(&m, 3.0), loaded_latency_ns(&m, 0.95));
    }

    /// A machine whose one profile streams with 16 misses in flight, and `n` such threads.
    fn streamers(n: usize) -> (Machine, Vec<Runner>) {
        let mut streamer = profile(60.0, 4096.0);
        streamer.mlp = 16.0;
        (machine(&[streamer]), vec![runner(0, FULL); n])
    }

    /// DRAM bytes/s of the runners `pick` keeps.
    fn traffic_of(eq: &Equilibrium, pick: impl Fn(usize) -> bool) -> f64 {
        (0..eq.shares.len())
            .filter(|&i| pick(i))
            .map(|i| 2.5e9 / eq.shares[i].cpi * eq.shares[i].mpki / 1000.0 * LINE_BYTES)
            .sum()
    }

    #[test]
    fn mba_caps_a_groups_bandwidth() {
        let (m, mut rs) = streamers(12);
        let free = traffic_of(&m.solve(&rs, None), |_| true);
        assert!(free > 0.4 * m.peak, "unthrottled they use {free}");
        for r in &mut rs {
            r.mb_percent = 30;
        }
        let capped = traffic_of(&m.solve(&rs, None), |_| true);
        assert!((capped - 0.3 * m.peak).abs() < 1e-6 * m.peak, "{capped}");
    }

    #[test]
    fn mba_caps_each_group_on_its_own() {
        // Two groups at MB 20: each gets 20% of peak, not 20% between them.
        let (m, mut rs) = streamers(24);
        for (i, r) in rs.iter_mut().enumerate() {
            r.mb_percent = 20;
            r.group = 1 + i % 2;
        }
        let eq = m.solve(&rs, None);
        for g in [1, 2] {
            let bytes = traffic_of(&eq, |i| rs[i].group == g);
            assert!((bytes - 0.2 * m.peak).abs() < 1e-6 * m.peak, "group {g}: {bytes}");
        }
    }

    #[test]
    fn solving_is_deterministic() {
        let m = machine(&[profile(5.0, 1.0), profile(30.0, 4096.0)]);
        let rs = [runner(0, 0xff), runner(1, FULL), runner(1, 0x7)];
        let a = m.solve(&rs, None);
        let b = m.solve(&rs, None);
        for (x, y) in a.shares.iter().zip(&b.shares) {
            assert_eq!(x.speed.to_bits(), y.speed.to_bits());
        }
    }
}
