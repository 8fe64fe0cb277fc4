//! Memory cgroups: hierarchical charging of anonymous memory and page cache, memory.max /
//! memory.high / memory.low / memory.min, node watermarks with background and direct reclaim,
//! and the OOM killer's choice (kernel-and-anchors.md §A10: cgroup-v2.rst, mm/memcontrol.c,
//! mm/page_counter.c, mm/vmscan.c, mm/oom_kill.c in 6.12).
//!
//! Pages live in leaves (a workload's cgroup); every ancestor's `usage` counts them, as a
//! page_counter chain does. A "process" for the OOM killer is an `Owner` (a workload): its
//! anonymous memory is its RSS. Page cache belongs to the cgroup that read or wrote it and
//! stays charged when the owner dies, as in the kernel ("Memory Ownership").
//!
//! Reclaim takes page cache before anonymous memory (anonymous only to free swap). It honours
//! protection: `memory.min` is never reclaimed, `memory.low` only when a first pass that skips
//! it frees too little. The allocating task pays `reclaim_ns_per_page` of CPU per page it
//! reclaims itself (direct reclaim, memory.max, memory.high); background reclaim (kswapd) is
//! free to it.

use std::collections::BTreeMap;

use crate::lru::{PageCache, Space};

/// Bytes per page.
pub const PAGE: u64 = 4096;
/// MEMCG_CHARGE_BATCH: the memory.high penalty is scaled by pages charged / 64.
pub const CHARGE_BATCH: u64 = 64;
/// SWAP_CLUSTER_MAX pages: the least one limit reclaim round frees (`try_charge_memcg`).
pub const SWAP_CLUSTER_BYTES: u64 = 32 * PAGE;
/// DEF_PRIORITY: reclaim first scans 1/4096 of every list (mm/vmscan.c).
const DEF_PRIORITY: u32 = 12;
/// MEMCG_MAX_HIGH_DELAY_JIFFIES = 2 s: the most one return to user space sleeps.
pub const MAX_HIGH_DELAY_NS: u64 = 2_000_000_000;
/// No sleep at or below HZ / 100 (10 ms).
pub const MIN_HIGH_DELAY_NS: u64 = 10_000_000;
/// MEMCG_DELAY_PRECISION_SHIFT and MEMCG_DELAY_SCALING_SHIFT.
const PRECISION_SHIFT: u32 = 20;
const SCALING_SHIFT: u32 = 14;
/// oom_score_adj that exempts a process from the OOM killer (OOM_SCORE_ADJ_MIN).
pub const OOM_SCORE_ADJ_MIN: i64 = -1000;
/// No limit (the kernel's PAGE_COUNTER_MAX, "max").
pub const UNLIMITED: u64 = u64::MAX;

pub type Owner = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Anon,
    File,
}

/// memory.events (hierarchical, as v2 reports them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemEvents {
    pub low: u64,
    pub high: u64,
    pub max: u64,
    pub oom: u64,
    pub oom_kill: u64,
}

#[derive(Debug, Clone)]
pub struct MemCg {
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// memory.max (v1 memory.limit_in_bytes), memory.high, memory.low, memory.min, in bytes.
    pub max: u64,
    pub high: u64,
    pub low: u64,
    pub min: u64,
    /// memory.oom.group: an OOM kill takes every process of the group.
    pub oom_group: bool,
    /// Alibaba Cloud Linux memcg async reclaim: above wmark_high = min(max, high) ×
    /// wmark_ratio / 100 a background worker reclaims down to wmark_low = wmark_high −
    /// max × wmark_scale_factor / 10000 (koordinator.md §3.3); 0 = off.
    pub wmark_ratio: u64,
    pub wmark_scale_factor: u64,
    /// openEuler's memory.high_async_ratio: above high × ratio / 100, background reclaim to
    /// high × (ratio − 10) / 100 (rubik.md §1.6); 100 = off.
    pub high_async_ratio: u64,
    /// Alibaba Cloud Linux memcg OOM priority (0..=12, larger = more important) and
    /// memory.use_priority_oom: the OOM killer takes from the least important groups first.
    pub priority: u64,
    pub use_priority_oom: bool,
    /// Alibaba Cloud Linux memory.wmark_min_adj (−25..=50, %): this group's own setting of
    /// the memcg global-min-watermark adjustment (`wmark_min_eadj` is what takes effect).
    pub wmark_min_adj: i64,
    /// memory.exstat `wmark_min_throttled_ms` (here in ns): time its tasks slept because
    /// an allocation broke the group's raised min watermark (positive wmark_min_adj).
    pub wmark_min_throttled_ns: u64,
    /// Pages charged to this cgroup itself, by kind (bytes).
    pub anon: u64,
    pub file: u64,
    /// Anonymous memory of this cgroup swapped out (bytes).
    pub swap: u64,
    /// memory.current: this cgroup and its descendants (page_counter usage).
    pub usage: u64,
    /// memory.peak.
    pub peak: u64,
    pub events: MemEvents,
}

impl MemCg {
    pub fn new(parent: Option<usize>) -> MemCg {
        MemCg {
            parent,
            children: vec![],
            max: UNLIMITED,
            high: UNLIMITED,
            low: 0,
            min: 0,
            oom_group: false,
            wmark_ratio: 0,
            wmark_scale_factor: 50,
            high_async_ratio: 100,
            priority: 0,
            use_priority_oom: false,
            wmark_min_adj: 0,
            wmark_min_throttled_ns: 0,
            anon: 0,
            file: 0,
            swap: 0,
            usage: 0,
            peak: 0,
            events: MemEvents::default(),
        }
    }
}

/// Node watermarks (bytes of free memory): below `low` kswapd reclaims until `high`; below
/// `min` the allocating task reclaims itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

impl Watermarks {
    /// min_free_kbytes = int_sqrt(lowmem_kbytes × 16) clamped to [128, 262144] KiB
    /// (mm/page_alloc.c `calculate_min_free_kbytes`); the low/high gaps are
    /// max(min / 4, total × watermark_scale_factor / 10000) with the default factor 10
    /// (`__setup_per_zone_wmarks`).
    pub fn for_total(total: u64, scale_factor: u64) -> Watermarks {
        let kb = total / 1024;
        let min_kb = isqrt(kb.saturating_mul(16)).clamp(128, 262_144);
        let min = min_kb * 1024;
        let gap = (min / 4).max(((total as u128) * scale_factor as u128 / 10_000) as u64);
        Watermarks {
            min,
            low: min + gap,
            high: min + 2 * gap,
        }
    }
}

/// Throttle time of an allocation that left `below` bytes under its group's raised min
/// watermark, `span` = that min − the global min. interfaces.rst: linear in the pages below,
/// "normally within [1ms, 100ms]", at most 1000 ms. The kernel's constant is not in the
/// docs; ours reaches 100 ms when the allocation has consumed the whole span (free at the
/// global min) and grows on, clamped, below it.
pub fn wmark_min_throttle_ns(below: u64, span: u64) -> u64 {
    const MS: u64 = 1_000_000;
    let t = (100 * MS as u128 * below as u128 / span.max(1) as u128) as u64;
    t.clamp(MS, 1_000 * MS)
}

pub(crate) fn isqrt(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let mut x = (n as f64).sqrt() as u64;
    while x * x > n {
        x -= 1;
    }
    while (x + 1) * (x + 1) <= n {
        x += 1;
    }
    x
}

/// What a charge cost the allocating task and did to others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Charge {
    /// Bytes the task reclaimed itself (direct reclaim, memory.max, memory.high).
    pub reclaimed: u64,
    /// CPU the task spent reclaiming them.
    pub reclaim_ns: u64,
    /// Bytes kswapd reclaimed for the node.
    pub kswapd_reclaimed: u64,
    /// memory.high: how long the task sleeps on return to user space.
    pub throttle_ns: u64,
    /// Processes the OOM killer took, in order.
    pub killed: Vec<Owner>,
    /// The charge could not be made (nothing left to kill): the allocating task dies.
    pub failed: bool,
}

impl Charge {
    /// Add what a further charge of the same task cost.
    pub fn absorb(&mut self, c: Charge) {
        self.reclaimed += c.reclaimed;
        self.reclaim_ns += c.reclaim_ns;
        self.kswapd_reclaimed += c.kswapd_reclaimed;
        self.throttle_ns += c.throttle_ns;
        self.killed.extend(c.killed);
        self.failed |= c.failed;
    }
}

#[derive(Debug, Clone)]
pub struct Memory {
    pub cgs: Vec<MemCg>,
    /// Node memory and swap, bytes.
    pub total: u64,
    pub swap_total: u64,
    pub watermarks: Watermarks,
    pub reclaim_ns_per_page: u64,
    /// Anonymous memory of each process in each cgroup (its RSS there).
    pub rss: BTreeMap<(usize, Owner), u64>,
    pub oom_score_adj: BTreeMap<Owner, i64>,
    /// Node-wide OOM kills (no cgroup limit involved).
    pub global_ooms: u64,
    /// The page cache's LRU lists (lru.rs) for the cache workloads charge by object; a
    /// cgroup's `file` bytes beyond its lists (`unlisted`) are reclaimed before them.
    pub cache: PageCache,
    /// Per reclaim target, its refault activations when it last reclaimed
    /// (`target_lruvec->refaults[WORKINGSET_FILE]`).
    last_refaults: BTreeMap<usize, u64>,
    /// Per cgroup, the fraction of a page its last reclaim shares fell short by (bytes).
    carry: Vec<u64>,
    /// Per reclaim target, the memcg its last reclaim walk stopped at (`shrink_file`).
    walk: BTreeMap<usize, usize>,
}

impl Memory {
    /// `parents[i]` is cgroup i's parent (cgroup 0, the root, has none).
    pub fn new(parents: &[Option<usize>], total: u64, swap_total: u64, reclaim_ns_per_page: u64) -> Memory {
        let mut cgs: Vec<MemCg> = parents.iter().map(|&p| MemCg::new(p)).collect();
        for (i, p) in parents.iter().enumerate() {
            if let Some(p) = *p {
                cgs[p].children.push(i);
            }
        }
        Memory {
            cgs,
            total,
            swap_total,
            watermarks: Watermarks::for_total(total, 10),
            reclaim_ns_per_page,
            rss: BTreeMap::new(),
            oom_score_adj: BTreeMap::new(),
            global_ooms: 0,
            cache: PageCache::new(parents),
            last_refaults: BTreeMap::new(),
            carry: vec![0; parents.len()],
            walk: BTreeMap::new(),
        }
    }

    pub fn free(&self) -> u64 {
        self.total.saturating_sub(self.cgs[0].usage)
    }

    /// /proc/meminfo MemAvailable (`si_mem_available`, without slab): free memory above the
    /// low watermark, plus the page cache but the part of it kept to the low watermark.
    pub fn available(&self) -> u64 {
        let low = self.watermarks.low;
        let file: u64 = self.cgs.iter().map(|c| c.file).sum();
        (self.free().saturating_sub(low) + file).saturating_sub((file / 2).min(low))
    }

    fn swap_free(&self) -> u64 {
        self.swap_total
            .saturating_sub(self.cgs.iter().map(|c| c.swap).sum::<u64>())
    }

    fn ancestors(&self, cg: usize) -> Vec<usize> {
        let mut out = vec![cg];
        let mut c = cg;
        while let Some(p) = self.cgs[c].parent {
            out.push(p);
            c = p;
        }
        out
    }

    fn subtree(&self, root: usize) -> Vec<usize> {
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            out.extend(self.cgs[out[i]].children.iter().copied());
            i += 1;
        }
        out
    }

    fn event(&mut self, cg: usize, f: impl Fn(&mut MemEvents)) {
        for a in self.ancestors(cg) {
            f(&mut self.cgs[a].events);
        }
    }

    fn add(&mut self, cg: usize, kind: Kind, bytes: u64) {
        match kind {
            Kind::Anon => self.cgs[cg].anon += bytes,
            Kind::File => self.cgs[cg].file += bytes,
        }
        for a in self.ancestors(cg) {
            let c = &mut self.cgs[a];
            c.usage += bytes;
            c.peak = c.peak.max(c.usage);
        }
    }

    fn sub(&mut self, cg: usize, kind: Kind, bytes: u64) {
        match kind {
            Kind::Anon => self.cgs[cg].anon -= bytes,
            Kind::File => self.cgs[cg].file -= bytes,
        }
        for a in self.ancestors(cg) {
            self.cgs[a].usage -= bytes;
        }
    }

    /// Charge `bytes` of `kind` to `cg` for `owner`: reclaim (and OOM) until every limit on
    /// the way up and the node's memory allow it, then the memory.high penalty.
    pub fn charge(&mut self, cg: usize, owner: Owner, kind: Kind, bytes: u64) -> Charge {
        let mut out = Charge::default();
        // memory.max: the deepest counter over its limit fails the charge first
        // (page_counter_try_charge walks up from the leaf).
        loop {
            let over = self
                .ancestors(cg)
                .into_iter()
                .find(|&a| self.cgs[a].usage + bytes > self.cgs[a].max);
            let Some(a) = over else { break };
            self.event(a, |e| e.max += 1);
            // The kernel charges page by page (a folio at a time: `try_charge_memcg`), and a
            // refused one reclaims `try_to_free_mem_cgroup_pages(nr_pages)`, whose
            // `nr_to_reclaim = max(nr_pages, SWAP_CLUSTER_MAX)` (mm/vmscan.c, 6.6–6.18): 32
            // pages a round, each round deciding afresh what to deactivate
            // (`prepare_scan_control`), until the charge fits. A round that frees nothing
            // goes to the OOM killer (the kernel retries MAX_RECLAIM_RETRIES times first).
            let got = self.reclaim(a, SWAP_CLUSTER_BYTES, &mut out, true);
            if got > 0 {
                continue;
            }
            self.event(a, |e| e.oom += 1);
            let limit = self.cgs[a].max;
            if !self.oom_kill(a, limit, &mut out) {
                out.failed = true; // nothing to kill: the allocation fails
                return out;
            }
            if out.killed.contains(&owner) {
                return out; // the allocating process itself was chosen
            }
        }
        // The node: kswapd below the low watermark (to high), direct reclaim below min, and
        // the global OOM killer when nothing more can be freed.
        let wm = self.watermarks;
        if self.free() < bytes + wm.low {
            let want = (bytes + wm.high).saturating_sub(self.free());
            let mut bg = Charge::default();
            let got = self.reclaim(0, want, &mut bg, false);
            out.kswapd_reclaimed += got;
        }
        // memory.wmark_min_adj: a negative one lets the group allocate below the global min
        // (its min is lower) before it reclaims directly; a positive one is throttled instead
        // of reclaiming between its raised min and the global one (below).
        let memcg_min = self.memcg_wmark_min(cg);
        let floor = memcg_min.min(wm.min);
        while self.free() < bytes + floor {
            let need = bytes + floor - self.free();
            let got = self.reclaim(0, need, &mut out, true);
            if got >= need {
                break;
            }
            if self.free() >= bytes {
                break; // below min but it fits: the allocation dips into the reserve
            }
            self.global_ooms += 1;
            let total = self.total + self.swap_total;
            if !self.oom_kill(0, total, &mut out) {
                out.failed = true;
                return out;
            }
            if out.killed.contains(&owner) {
                return out;
            }
        }
        self.add(cg, kind, bytes);
        if kind == Kind::Anon {
            *self.rss.entry((cg, owner)).or_insert(0) += bytes;
        }
        if memcg_min > wm.min && self.free() < memcg_min {
            let t = wmark_min_throttle_ns(memcg_min - self.free(), memcg_min - wm.min);
            out.throttle_ns += t;
            for a in self.ancestors(cg) {
                self.cgs[a].wmark_min_throttled_ns += t;
            }
        }
        self.async_reclaim(cg, &mut out);
        self.over_high(cg, bytes, &mut out);
        out
    }

    /// Alibaba Cloud Linux's effective memory.wmark_min_adj (what `cat` shows): the largest
    /// (most conservative) value on the way from the group up to the root's children, where
    /// an ancestor's 0 (the default) does not count but the group's own value does
    /// (Documentation/alibaba/interfaces.rst: A −10, B −25 under A, C 0 under A, E −25
    /// under B ⇒ eadj A −10, B −10, C 0, E −10). The root has no such file.
    pub fn wmark_min_eadj(&self, cg: usize) -> i64 {
        let own = self.cgs[cg].wmark_min_adj;
        self.ancestors(cg)
            .into_iter()
            .skip(1)
            .map(|a| self.cgs[a].wmark_min_adj)
            .filter(|&v| v != 0)
            .fold(own, i64::max)
    }

    /// The group's own global min watermark (bytes free) under its effective adjustment
    /// (interfaces.rst): negative ⇒ WMARK_MIN + WMARK_MIN × adj%, positive ⇒ WMARK_MIN +
    /// (WMARK_LOW − WMARK_MIN) × adj%.
    pub fn memcg_wmark_min(&self, cg: usize) -> u64 {
        let wm = self.watermarks;
        let adj = self.wmark_min_eadj(cg);
        if adj < 0 {
            wm.min - wm.min * adj.unsigned_abs() / 100
        } else {
            wm.min + (wm.low - wm.min) * adj as u64 / 100
        }
    }

    /// The background reclaim of the vendor kernels' memcg watermarks (free to the task):
    /// Alibaba's wmark_ratio and openEuler's memory.high_async_ratio.
    fn async_reclaim(&mut self, cg: usize, out: &mut Charge) {
        for a in self.ancestors(cg) {
            let c = &self.cgs[a];
            let mut target = None;
            if c.wmark_ratio > 0 {
                let base = c.max.min(c.high);
                if base != UNLIMITED {
                    let high = (base as u128 * c.wmark_ratio as u128 / 100) as u64;
                    let low =
                        high.saturating_sub((c.max.min(base) as u128 * c.wmark_scale_factor as u128 / 10_000) as u64);
                    if c.usage > high {
                        target = Some(low);
                    }
                }
            }
            if c.high_async_ratio < 100
                && c.high != UNLIMITED
                && c.usage > (c.high as u128 * c.high_async_ratio as u128 / 100) as u64
            {
                let low = (c.high as u128 * c.high_async_ratio.saturating_sub(10) as u128 / 100) as u64;
                target = Some(target.map_or(low, |t: u64| t.min(low)));
            }
            if let Some(t) = target {
                let need = self.cgs[a].usage.saturating_sub(t);
                let got = self.reclaim(a, need, &mut Charge::default(), false);
                out.kswapd_reclaimed += got;
            }
        }
    }

    /// memory.high after a charge: reclaim the overage of every ancestor above its high,
    /// then sleep by the largest remaining overage (`mem_cgroup_handle_over_high`).
    fn over_high(&mut self, cg: usize, bytes: u64, out: &mut Charge) {
        let mut worst = 0u64;
        for a in self.ancestors(cg) {
            let c = &self.cgs[a];
            if c.usage <= c.high {
                continue;
            }
            self.event(a, |e| e.high += 1);
            let need = self.cgs[a].usage - self.cgs[a].high;
            self.reclaim(a, need, out, true);
            let c = &self.cgs[a];
            if c.usage > c.high {
                worst = worst.max(overage(c.usage, c.high));
            }
        }
        if worst > 0 {
            out.throttle_ns += high_delay_ns(worst, bytes.div_ceil(PAGE));
        }
    }

    /// Give back `bytes` of `kind` (freed anonymous memory, dropped cache).
    pub fn uncharge(&mut self, cg: usize, owner: Owner, kind: Kind, bytes: u64) {
        let bytes = match kind {
            Kind::Anon => {
                let rss = self.rss.entry((cg, owner)).or_insert(0);
                let b = bytes.min(*rss);
                *rss -= b;
                b
            }
            Kind::File => bytes.min(self.cgs[cg].file),
        };
        self.sub(cg, kind, bytes);
    }

    /// A process exits (or is killed): its anonymous memory and swap go; its cache stays.
    pub fn release(&mut self, owner: Owner) {
        let mine: Vec<(usize, u64)> = self
            .rss
            .iter()
            .filter(|((_, o), _)| *o == owner)
            .map(|(&(cg, _), &b)| (cg, b))
            .collect();
        for (cg, b) in mine {
            let resident = b.min(self.cgs[cg].anon);
            self.sub(cg, Kind::Anon, resident);
            self.rss.remove(&(cg, owner));
        }
    }

    /// Effective protection (memory.min or memory.low) of every cgroup in `root`'s subtree
    /// for a reclaim of `root` (`effective_protection`, without memory_recursiveprot): a
    /// cgroup protects min(usage, setting); when siblings claim more than their parent's
    /// effective protection, it is shared in proportion to what each claims. The reclaim
    /// root itself and its direct children are bounded by nothing above.
    pub fn effective_protection(&self, root: usize, low: bool) -> BTreeMap<usize, u64> {
        let setting = |c: &MemCg| if low { c.low } else { c.min };
        let mut eff = BTreeMap::new();
        eff.insert(root, 0u64);
        for cg in self.subtree(root) {
            let kids = &self.cgs[cg].children;
            if kids.is_empty() {
                continue;
            }
            let claims: Vec<u64> = kids
                .iter()
                .map(|&k| self.cgs[k].usage.min(setting(&self.cgs[k])))
                .collect();
            let sum: u64 = claims.iter().sum();
            for (&k, &claim) in kids.iter().zip(&claims) {
                let e = if cg == root {
                    claim
                } else {
                    let parent = eff[&cg];
                    if sum > parent && sum > 0 {
                        ((parent as u128) * claim as u128 / sum as u128) as u64
                    } else {
                        claim
                    }
                };
                eff.insert(k, e);
            }
        }
        eff
    }

    /// Reclaim up to `target` bytes from `root`'s subtree; returns what it freed. Page cache
    /// first, then anonymous memory to free swap; a first pass spares memory.low, a second
    /// does not (a low event for each group it then takes from); memory.min is never taken.
    /// Each candidate gives in proportion to what it has above its protection.
    ///
    /// A task's own limit reclaim (`cgroup_reclaim`, `direct`) may wait on writeback under
    /// cgroup v1 (lru.rs `writeback`); what it waited becomes its sleep (`throttle_ns`).
    pub fn reclaim(&mut self, root: usize, target: u64, out: &mut Charge, direct: bool) -> u64 {
        let was = std::mem::replace(&mut self.cache.may_wait, direct && root != 0);
        let was_throttled = std::mem::replace(&mut self.cache.throttled, false);
        let freed = self.reclaim_kinds(root, target, out, direct);
        self.cache.may_wait = was;
        self.cache.throttled = was_throttled;
        if direct {
            out.throttle_ns += std::mem::take(&mut self.cache.waited_ns);
        }
        freed
    }

    fn reclaim_kinds(&mut self, root: usize, target: u64, out: &mut Charge, direct: bool) -> u64 {
        let emin = self.effective_protection(root, false);
        let elow = self.effective_protection(root, true);
        let mut freed = 0u64;
        for kind in [Kind::File, Kind::Anon] {
            for pass_low in [true, false] {
                if freed >= target {
                    break;
                }
                // what each cgroup holding pages of this kind can give in this pass
                let mut avail: Vec<(usize, u64)> = vec![];
                for cg in self.subtree(root) {
                    let c = &self.cgs[cg];
                    let own = match kind {
                        Kind::File => c.file,
                        Kind::Anon => c.anon.min(self.swap_free()),
                    };
                    if own == 0 {
                        continue;
                    }
                    // the tightest protection on the way up to the reclaim root
                    let mut prot_room = u64::MAX;
                    for a in self.ancestors(cg) {
                        if a == root {
                            break;
                        }
                        let p = if pass_low { emin[&a].max(elow[&a]) } else { emin[&a] };
                        prot_room = prot_room.min(self.cgs[a].usage.saturating_sub(p));
                    }
                    let give = own.min(prot_room);
                    if give > 0 {
                        avail.push((cg, give));
                    }
                }
                let total: u64 = avail.iter().map(|&(_, g)| g).sum();
                if total == 0 {
                    continue;
                }
                let want = (target - freed).min(total);
                let plan = if kind == Kind::File {
                    // kswapd walks every memcg at each priority (`memcg_full_walk`)
                    self.shrink_file(root, &avail, want, root == 0 && !direct)
                } else {
                    proportional_plan(&avail, want, total, &mut self.carry)
                };
                for (cg, take) in plan {
                    if take == 0 {
                        continue;
                    }
                    if !pass_low && elow.get(&cg).copied().unwrap_or(0) > 0 {
                        self.event(cg, |e| e.low += 1);
                    }
                    self.sub(cg, kind, take);
                    if kind == Kind::Anon {
                        self.cgs[cg].swap += take;
                        // swapped-out pages leave the owners' RSS in proportion
                        let owners: Vec<(Owner, u64)> = self
                            .rss
                            .range((cg, 0)..=(cg, usize::MAX))
                            .map(|(&(_, o), &b)| (o, b))
                            .collect();
                        let sum: u64 = owners.iter().map(|&(_, b)| b).sum();
                        let mut rest = take;
                        for (i, (o, b)) in owners.iter().enumerate() {
                            let part = if i + 1 == owners.len() {
                                rest
                            } else {
                                ((take as u128) * *b as u128 / sum.max(1) as u128) as u64
                            };
                            let part = part.min(*b).min(rest);
                            *self.rss.get_mut(&(cg, *o)).unwrap() -= part;
                            rest -= part;
                        }
                    }
                    freed += take;
                }
            }
        }
        if direct {
            out.reclaimed += freed;
            out.reclaim_ns += freed.div_ceil(PAGE) * self.reclaim_ns_per_page;
        }
        freed
    }

    /// Bytes of `cg`'s page cache on no LRU list (charged without an object: a `dd`'s).
    fn unlisted(&self, cg: usize) -> u64 {
        let (inactive, active) = self.cache.lists(cg);
        self.cgs[cg].file.saturating_sub(inactive + active)
    }

    /// Page cache reclaim over the candidates `avail` (cgroup, most it may give) as
    /// `do_try_to_free_pages` → `shrink_node_memcgs` → `shrink_lruvec` does it (mm/vmscan.c,
    /// 6.6–6.18, classic LRU). Priority goes from DEF_PRIORITY (12) down; at each, the memcgs
    /// are walked and each lruvec scans `size >> priority` pages of its inactive list
    /// (`get_scan_count`; its size scaled by what protection leaves it, as
    /// `mem_cgroup_protection` scales it) — a small list is not scanned at all until the
    /// priority is low enough, and the walk stops as soon as the goal is met — and, when the
    /// reclaim may deactivate, as many of its active list (`shrink_active_list`). A lruvec
    /// here stops at what the goal still lacks (the kernel's stops once it alone reclaimed
    /// the whole goal, so a round there can free up to one scan more). The walk is shared by the
    /// reclaimers of a target and goes on where the last one stopped (the partial walk with
    /// a reclaim cookie, "bail once goal is reached"); a pass that reaches the end starts the
    /// next priority from the first memcg. May deactivate: decided once for the reclaim's
    /// target (`prepare_scan_control`: its hierarchical lists' `inactive_is_low`, or refaults
    /// activated since its last reclaim — a new workingset forming). What this cannot give
    /// is then shrunk cgroup by cgroup with deactivation forced (`force_deactivate`).
    /// Returns (cgroup, bytes freed); the caller uncharges them.
    fn shrink_file(&mut self, root: usize, avail: &[(usize, u64)], want: u64, full_walk: bool) -> Vec<(usize, u64)> {
        let (mut inactive, mut active) = (0, 0);
        for cg in self.subtree(root) {
            let (i, a) = self.cache.lists(cg);
            inactive += i + self.unlisted(cg);
            active += a;
        }
        let refaults = self.cache.refault_activations(root);
        let seen = self.last_refaults.insert(root, refaults);
        let may_deactivate = crate::lru::inactive_is_low(inactive, active) || seen.is_some_and(|r| r != refaults);
        let mut plan: Vec<(usize, u64)> = avail.iter().map(|&(cg, _)| (cg, 0)).collect();
        let mut freed = 0;
        // a walk short of the goal with deactivation skipped is retried from DEF_PRIORITY
        // forcing it (do_try_to_free_pages: `sc->force_deactivate`), scanning the active lists
        // `size >> priority` as well — not all at once
        for deactivate in [may_deactivate, true] {
            if freed >= want {
                break;
            }
            freed = self.priority_walk(root, avail, want, deactivate, full_walk, &mut plan);
        }
        // what is still short (protection caps, lists emptied meanwhile): cgroup by cgroup
        for (i, &(cg, give)) in avail.iter().enumerate() {
            if freed >= want {
                break;
            }
            let room = give.saturating_sub(plan[i].1).min(want - freed);
            let loose = self.unlisted(cg).saturating_sub(plan[i].1).min(room);
            let got = loose + self.cache.shrink(cg, room - loose, true, root);
            plan[i].1 += got;
            freed += got;
        }
        plan
    }

    /// One walk of `shrink_file` from DEF_PRIORITY down (see there), adding to `plan`;
    /// returns what the plan has freed in all.
    fn priority_walk(
        &mut self,
        root: usize,
        avail: &[(usize, u64)],
        want: u64,
        may_deactivate: bool,
        full_walk: bool,
        plan: &mut [(usize, u64)],
    ) -> u64 {
        let mut freed: u64 = plan.iter().map(|&(_, b)| b).sum();
        let freed = &mut freed;
        // the shared walk's position: the last memcg visited (mem_cgroup_iter's reclaim
        // cookie); a new walk sees at least one memcg, from the first when at the end
        let mut from = match self.walk.get(&root) {
            Some(&last) if !full_walk => avail.iter().position(|&(cg, _)| cg > last).unwrap_or(0),
            _ => 0,
        };
        'priority: for priority in (0..=DEF_PRIORITY).rev() {
            for (i, &(cg, give)) in avail.iter().enumerate().skip(from) {
                let own = self.cgs[cg].file.max(1);
                let (listed, act) = self.cache.lists(cg);
                // unlisted: charged cache on no list (a `dd`'s), less what this call took
                // (what it evicted from the lists is still charged until the caller uncharges)
                let loose_all = self.unlisted(cg).saturating_sub(plan[i].1);
                let scaled = |size: u64| ((size as u128 * give as u128 / own as u128) as u64 / PAGE) >> priority;
                let scan = scaled(listed + loose_all) * PAGE;
                // a partial walk's lruvec takes what the round still lacks; on a full walk
                // each takes its scan up to the goal, and the goal is checked after the walk
                let goal = if full_walk { want } else { want.saturating_sub(*freed) };
                let room = give.saturating_sub(plan[i].1).min(scan).min(goal);
                if room > 0 {
                    let loose = loose_all.min(room);
                    let got = loose + self.cache.evict(cg, room - loose, root);
                    plan[i].1 += got;
                    *freed += got;
                }
                if may_deactivate {
                    self.cache.deactivate_credit(cg, scaled(act) * PAGE);
                }
                if *freed >= want && !full_walk {
                    self.walk.insert(root, cg);
                    break 'priority;
                }
            }
            from = 0;
            self.walk.remove(&root);
            if *freed >= want {
                break;
            }
        }
        *freed
    }

    /// Bring one page cache object (a file server's file, a writer's chunk) in for `cg`'s
    /// `owner`: its resident pages are accessed when `accessed` (a read marks what it copies;
    /// a write does not: FGP_WRITEBEGIN has no FGP_ACCESSED), its missing pages are charged
    /// and put on the LRU (lru.rs `add_pages`) SWAP_CLUSTER_MAX pages at a time, as the
    /// kernel adds each folio to the LRU right after charging it (`filemap_add_folio`): the
    /// object's first pages are on the inactive list while its last are charged. A charge's
    /// reclaim can take pages of the object itself (it may be at the inactive tail): those
    /// are charged again (a bounded number of times: an object larger than its limit stays
    /// partly resident).
    pub fn charge_object(&mut self, cg: usize, owner: Owner, s: Space, i: u32, accessed: bool) -> Charge {
        let mut out = Charge::default();
        if accessed && self.cache.resident_of(s, i) > 0 {
            self.cache.touch(s, i);
        }
        let rounds = 2 * self.cache.bytes_of(s, i).div_ceil(SWAP_CLUSTER_BYTES) + 4;
        for _ in 0..rounds {
            let missing = (self.cache.bytes_of(s, i) - self.cache.resident_of(s, i)).min(SWAP_CLUSTER_BYTES);
            if missing == 0 {
                break;
            }
            let c = self.charge(cg, owner, Kind::File, missing);
            let stop = c.failed || c.killed.contains(&owner);
            out.absorb(c);
            if stop {
                break;
            }
            // workingset_test_recent: with swap to put it in, anonymous memory is part of
            // the workingset a refault is measured against
            let anon = if self.swap_free() > 0 { self.cgs[cg].anon } else { 0 };
            // exactly what was charged: pages the charge took of the object are missing again
            self.cache.add_pages(s, i, missing, accessed, anon);
        }
        out
    }

    /// The OOM killer in `domain` (a cgroup, or the root for the node): the process with the
    /// most points (RSS + oom_score_adj × totalpages / 1000, `oom_badness`); −1000 is never
    /// chosen; with memory.oom.group on the victim's cgroup (or an ancestor inside the domain)
    /// every process of that group goes. False when there is no one to kill.
    pub fn oom_kill(&mut self, domain: usize, total_bytes: u64, out: &mut Charge) -> bool {
        let inside: Vec<usize> = self.subtree(domain);
        let mut points: BTreeMap<Owner, (i128, usize)> = BTreeMap::new();
        for (&(cg, o), &b) in &self.rss {
            if !inside.contains(&cg) {
                continue;
            }
            let e = points.entry(o).or_insert((0, cg));
            e.0 += (b / PAGE) as i128;
        }
        let total_pages = (total_bytes / PAGE) as i128;
        // memory.use_priority_oom on the domain: only the least important groups' processes
        // are candidates (memory.priority, the lowest first)
        let floor = if self.cgs[domain].use_priority_oom {
            points
                .iter()
                .filter(|(o, (rss, _))| *rss > 0 && self.oom_score_adj.get(o).copied().unwrap_or(0) > OOM_SCORE_ADJ_MIN)
                .map(|(_, &(_, cg))| self.priority_of(cg, domain))
                .min()
        } else {
            None
        };
        let mut best: Option<(i128, Owner, usize)> = None;
        for (&o, &(rss, cg)) in &points {
            let adj = self.oom_score_adj.get(&o).copied().unwrap_or(0);
            if adj <= OOM_SCORE_ADJ_MIN || rss == 0 {
                continue;
            }
            if floor.is_some_and(|f| self.priority_of(cg, domain) != f) {
                continue;
            }
            let p = rss + adj as i128 * total_pages / 1000;
            if best.is_none_or(|(bp, _, _)| p > bp) {
                best = Some((p, o, cg));
            }
        }
        let Some((_, victim, cg)) = best else { return false };
        // the highest oom.group ancestor within the domain (`mem_cgroup_get_oom_group`)
        let mut group = None;
        for a in self.ancestors(cg) {
            if self.cgs[a].oom_group {
                group = Some(a);
            }
            if a == domain {
                break;
            }
        }
        let victims: Vec<Owner> = match group {
            None => vec![victim],
            Some(g) => {
                let sub = self.subtree(g);
                let v: std::collections::BTreeSet<Owner> = self
                    .rss
                    .keys()
                    .filter(|(c, o)| {
                        sub.contains(c) && self.oom_score_adj.get(o).copied().unwrap_or(0) > OOM_SCORE_ADJ_MIN
                    })
                    .map(|&(_, o)| o)
                    .collect();
                v.into_iter().collect()
            }
        };
        for o in victims {
            let cgs: Vec<usize> = self.rss.keys().filter(|(_, x)| *x == o).map(|&(c, _)| c).collect();
            for c in cgs {
                self.event(c, |e| e.oom_kill += 1);
            }
            self.release(o);
            out.killed.push(o);
        }
        true
    }
}

impl Memory {
    /// A group's OOM priority within `domain`: the least of its and its ancestors' up to the
    /// domain (a group is no more important than what contains it).
    fn priority_of(&self, cg: usize, domain: usize) -> u64 {
        let mut p = u64::MAX;
        for a in self.ancestors(cg) {
            if a == domain {
                break;
            }
            p = p.min(self.cgs[a].priority);
        }
        if p == u64::MAX {
            self.cgs[domain].priority
        } else {
            p
        }
    }
}

/// Shares of `want` in proportion to each candidate's `(cgroup, weight)`, in whole pages
/// (each at most its weight). Reclaim goes in rounds of 32 pages, where a cgroup's share is
/// often a fraction of a page: the fraction a cgroup was not given is carried to its next
/// round (`carry`, bytes per cgroup), so over rounds each gives its proportion, as the
/// kernel's scanning by the same fraction of every list does (`get_scan_count`); the pages
/// left over go to the largest carries first (then in order).
fn proportional_plan(avail: &[(usize, u64)], want: u64, total: u64, carry: &mut [u64]) -> Vec<(usize, u64)> {
    let mut plan: Vec<(usize, u64)> = avail
        .iter()
        .map(|&(cg, g)| {
            let exact = ((want as u128) * g as u128 / total as u128) as u64 + carry[cg];
            let take = (exact / PAGE * PAGE).min(g);
            carry[cg] = exact.saturating_sub(take).min(PAGE - 1);
            (cg, take)
        })
        .collect();
    let mut left = want.saturating_sub(plan.iter().map(|&(_, p)| p).sum());
    let mut order: Vec<usize> = (0..avail.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(carry[avail[i].0]));
    for i in order {
        let (cg, g) = avail[i];
        let extra = left.min(g - plan[i].1);
        plan[i].1 += extra;
        carry[cg] = carry[cg].saturating_sub(extra);
        left -= extra;
    }
    plan
}

/// (usage − high) / high in units of 2^-20 (`calculate_overage`).
pub fn overage(usage: u64, high: u64) -> u64 {
    if usage <= high || high == 0 {
        return 0;
    }
    (((usage - high) as u128) << PRECISION_SHIFT) as u64 / high
}

/// The memory.high sleep for the largest overage after charging `nr_pages`
/// (`calculate_high_delay`, HZ = 1000): overage² × HZ >> 34, scaled by nr_pages / 64,
/// capped at 2 s, and none at or below 10 ms.
pub fn high_delay_ns(max_overage: u64, nr_pages: u64) -> u64 {
    let jiffies = raw_high_delay_jiffies(max_overage, nr_pages).min(MAX_HIGH_DELAY_NS / 1_000_000);
    let ns = jiffies * 1_000_000;
    if ns <= MIN_HIGH_DELAY_NS {
        0
    } else {
        ns
    }
}

/// The penalty before the cap and the floor, in jiffies of 1 ms.
pub fn raw_high_delay_jiffies(max_overage: u64, nr_pages: u64) -> u64 {
    let o = max_overage as u128;
    let j = (o * o * 1000) >> PRECISION_SHIFT >> SCALING_SHIFT;
    (j * nr_pages as u128 / CHARGE_BATCH as u128) as u64
}
