//! The page cache's LRU: per memory cgroup an inactive and an active file list, as the
//! classic two-list LRU of mm/vmscan.c and mm/swap.c keeps them (this host has no MGLRU:
//! no /sys/kernel/mm/lru_gen), with mm/workingset.c's refault detection.
//!
//! - A page enters at the head of its cgroup's inactive list (`filemap_add_folio`); the read
//!   that brought it in marks it accessed (`filemap_read` → `folio_mark_accessed`: the
//!   PG_referenced bit), and a second access activates it (inactive + referenced → the
//!   active list's head, `folio_activate`).
//! - Reclaim evicts from the inactive list's tail. An unmapped page cache page's referenced
//!   bit does not save it there (`folio_check_references` → FOLIOREF_RECLAIM_CLEAN): only
//!   activation does. When the reclaim may deactivate — decided once for its target
//!   (memcg.rs `shrink_file`): the target's hierarchical inactive list is too small against
//!   its active one (`inactive_is_low`: inactive × inactive_ratio < active, inactive_ratio =
//!   int_sqrt(10 × the lists' size in GiB), 1 below 1 GiB) or refaults were activated since
//!   its last reclaim — `shrink_active_list` moves pages from the active tail to the inactive
//!   head (their referenced bit stays: the next access activates them again).
//! - An eviction leaves a shadow entry holding the reclaim target's `nonresident_age` (a
//!   counter every eviction and activation advances, in pages, on a lruvec and its
//!   ancestors: `workingset_age_nonresident`; `workingset_eviction` takes the target
//!   memcg's lruvec — a pod's limit reclaim ages the pod, not the leaf). A page read back
//!   while its shadow is there refaults at distance = that age now − age then; it goes
//!   straight to the active list when the distance is at most the workingset's size
//!   (`workingset_test_recent`: the eviction lruvec's hierarchical active file list, plus the
//!   anonymous lists when there is swap to put anonymous pages in).
//!
//! - Dirty pages (a buffered writer's chunks, until the flusher has written them back) are
//!   not reclaimable. Reclaim that meets one at the inactive tail marks it PG_reclaim and
//!   moves it out of the way to the active list (shrink_folio_list's `activate_locked`, "move
//!   dirty pages out of the way until they're flushed", c55e8d035b28); when its writeback
//!   ends it rotates to the inactive tail (`folio_end_writeback` → `folio_rotate_reclaimable`
//!   → `lru_move_tail`, which clears PG_active) and is the next to go. Under legacy (cgroup
//!   v1) memcg reclaim (!writeback_throttling_sane) the charging task sleeps on writeback
//!   two ways: a batch of SWAP_CLUSTER_MAX dirty pages not yet under writeback makes it sleep
//!   in `reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)` until 32 pages more were written back
//!   (the flusher's next completion) or HZ/10, and a folio met again with PG_reclaim set
//!   while under writeback is waited for (`folio_wait_writeback`, "Case 3") — until the
//!   writeback in flight completes (`writeback` below). On this host the first binds: a
//!   buffered writer under its memcg limit sleeps in `reclaim_throttle` ~40% of the time and
//!   goes at the disk's write rate (docs/replay.md, "Memory on the host").
//!
//! An object is what a workload touches as one (a file server's file, a writer's chunk); it
//! moves on the lists as one, as a large folio does, but is *reclaimed by the page*: reclaim
//! isolates SWAP_CLUSTER_MAX pages at a time from the inactive tail (`shrink_inactive_list`,
//! `isolate_lru_folios`), so an object at the tail can lose some of its pages and keep the
//! rest — its first pages, read first, are the oldest (a read brings a file's pages in offset
//! order, each at the inactive head), so what stays is its remaining pages at the tail, still
//! referenced. A read of a partially resident file touches the resident pages (a referenced
//! one is activated, with the object) and brings in only the missing ones. Objects live in an
//! arena with intrusive doubly linked lists, so every operation is O(1) but reclaim, which
//! is O(objects it moves).

/// Bytes per page (the unit of nonresident_age and refault distances).
const PAGE: u64 = 4096;
const NIL: u32 = u32::MAX;
/// reclaim_throttle's VMSCAN_THROTTLE_WRITEBACK timeout, HZ/10.
const THROTTLE_WRITEBACK_NS: u64 = 100_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    Absent,
    Inactive,
    Active,
}

#[derive(Debug, Clone, Copy)]
struct Obj {
    prev: u32,
    next: u32,
    at: Where,
    referenced: bool,
    /// The cgroup's nonresident_age when it was evicted (its shadow entry), if it was.
    shadow: Option<(usize, u64)>,
    /// Its size, and how much of it is resident (whole pages; 0 = absent, off the lists).
    bytes: u64,
    resident: u64,
    cg: usize,
    /// Writebacks still owed for it (each dirtying adds one; the flusher clears them in
    /// order): > 0 = dirty or under writeback, not reclaimable.
    dirty: u32,
    /// PG_reclaim: reclaim met it dirty and set it aside.
    reclaim: bool,
    /// Its writeback domain and where its latest dirtying ends in that domain's stream of
    /// dirty bytes (`WbQueue::pushed` then): it is under writeback (queued) once the
    /// flusher's in-flight chunk reaches that far.
    domain: u32,
    ends_at: u64,
}

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    bytes: u64,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        bytes: 0,
    };
}

/// One cgroup's lruvec (file lists only: anonymous memory is not on an LRU here).
#[derive(Debug, Clone, Copy)]
struct LruVec {
    inactive: List,
    active: List,
    /// workingset nonresident_age, in pages.
    age: u64,
    /// Bytes of active-list scanning owed but less than the tail object (fluid scanning).
    credit: u64,
    /// Advances whenever an object enters or leaves the lists (a view's freshness).
    epoch: u64,
    /// WORKINGSET_ACTIVATE_FILE of it and its descendants: refaults activated.
    refault_activations: u64,
    /// Active file bytes of it and its descendants (the hierarchical NR_ACTIVE_FILE).
    h_active: u64,
}

/// A run of objects one workload registered (a file server's files, a writer's chunks).
#[derive(Debug, Clone, Copy)]
pub struct Space {
    base: u32,
    n: u32,
}

/// What happened to an object a workload touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// It was resident: an access (mark_page_accessed).
    Hit,
    /// It was not: the caller charges it and then `insert`s it.
    Miss,
}

/// The dirty pages of one writeback domain in the order they were dirtied (the flusher
/// writes an inode's pages in offset order, the chunks a writer dirtied in turn): objects,
/// or `NIL` for buffered writes of no object (a `dd`'s), with their bytes.
#[derive(Debug, Clone, Default)]
struct WbQueue {
    q: std::collections::VecDeque<(u32, u64)>,
    /// Bytes written back but short of the front entry.
    credit: u64,
    /// Bytes ever dirtied in the domain, and ever written back: positions in its stream.
    pushed: u64,
    written: u64,
    /// Bytes a throttled reclaimer already counted written back (it slept until they were,
    /// `writeback`) that the disk has yet to report.
    ahead: u64,
}

/// The legacy-memcg writeback rule (`writeback` below), when on.
#[derive(Debug, Clone, Copy)]
pub struct LegacyWait {
    /// Device time of writing back one byte (the disk's linear model, sequential).
    pub ns_per_byte: f64,
    /// The disk's writeback in flight, as the node last saw it: how long until it completes
    /// (ns from now, at the device's current sharing), and how many bytes of each domain's
    /// stream it covers past what was written back (`Disk::writeback_due`). None: nothing
    /// in flight — the flusher woken now submits a chunk, done after its device time.
    pub in_flight: Option<(u64, u64)>,
}

impl LegacyWait {
    pub fn new(ns_per_byte: f64) -> LegacyWait {
        LegacyWait {
            ns_per_byte,
            in_flight: None,
        }
    }

    /// When the next writeback completes, ns from now: the one in flight, else a flusher
    /// chunk's (MAX_WRITEBACK_PAGES) device time.
    fn next_completion(&self) -> u64 {
        match self.in_flight {
            Some((due, _)) => due,
            None => (crate::disk::WB_CHUNK as f64 * self.ns_per_byte).ceil() as u64,
        }
    }
}

/// Where a legacy-memcg reclaimer slept on writeback (the host's /proc/PID/stack names the
/// same two: `reclaim_throttle` and `folio_wait_writeback`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WritebackWaits {
    /// `reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)` sleeps and their total ns.
    pub throttles: u64,
    pub throttle_ns: u64,
    /// `folio_wait_writeback` (shrink_folio_list case 3) sleeps and their total ns.
    pub waits: u64,
    pub wait_ns: u64,
}

#[derive(Debug, Clone)]
pub struct PageCache {
    objs: Vec<Obj>,
    vecs: Vec<LruVec>,
    parents: Vec<Option<usize>>,
    /// Dirty pages per writeback domain (a cgroup id; the root's without cgroup writeback).
    wb: Vec<WbQueue>,
    /// cgroup v1 memcg: `!writeback_throttling_sane` — limit reclaim waits on writeback.
    pub legacy: Option<LegacyWait>,
    /// Set by the current reclaim: it may wait on writeback (a task's own memcg limit reclaim).
    pub may_wait: bool,
    /// What the current reclaim waited on writeback (ns), for the charging task to sleep.
    pub waited_ns: u64,
    /// Reclaim met dirty pages not yet set aside: wake the flushers
    /// (shrink_inactive_list's `wakeup_flusher_threads(WB_REASON_VMSCAN)`).
    pub kick_flusher: bool,
    /// The current reclaim has been throttled once (reset when a reclaim starts).
    pub throttled: bool,
    pub waits: WritebackWaits,
}

/// `inactive_is_low`: inactive × inactive_ratio(inactive + active) < active.
pub fn inactive_is_low(inactive: u64, active: u64) -> bool {
    inactive * inactive_ratio(inactive + active) < active
}

/// inactive_ratio for a lruvec whose file lists hold `bytes` (`inactive_is_low`).
pub fn inactive_ratio(bytes: u64) -> u64 {
    let gb = bytes >> 30;
    if gb == 0 {
        1
    } else {
        crate::memcg::isqrt(10 * gb)
    }
}

/// The writeback domain of a page dirtied in cgroup `cg`: its own with cgroup writeback,
/// else the root's (one bdi_writeback for the whole device, plain cgroup v1).
pub fn writeback_domain(cgroup_writeback: bool, cg: usize) -> usize {
    if cgroup_writeback {
        cg
    } else {
        0
    }
}

impl PageCache {
    pub fn new(parents: &[Option<usize>]) -> PageCache {
        let empty = LruVec {
            inactive: List::EMPTY,
            active: List::EMPTY,
            age: 0,
            credit: 0,
            epoch: 0,
            refault_activations: 0,
            h_active: 0,
        };
        PageCache {
            objs: vec![],
            vecs: vec![empty; parents.len()],
            parents: parents.to_vec(),
            wb: vec![WbQueue::default(); parents.len()],
            legacy: None,
            may_wait: false,
            waited_ns: 0,
            kick_flusher: false,
            throttled: false,
            waits: WritebackWaits::default(),
        }
    }

    /// Room for `n` objects of `bytes` each, charged to cgroup `cg`; none resident yet.
    pub fn register(&mut self, cg: usize, n: u32, bytes: u64) -> Space {
        let base = self.objs.len() as u32;
        self.objs.extend((0..n).map(|_| Obj {
            prev: NIL,
            next: NIL,
            at: Where::Absent,
            referenced: false,
            shadow: None,
            bytes,
            resident: 0,
            cg,
            dirty: 0,
            reclaim: false,
            domain: 0,
            ends_at: 0,
        }));
        Space { base, n }
    }

    pub fn bytes_of(&self, s: Space, i: u32) -> u64 {
        self.objs[(s.base + i) as usize].bytes
    }

    /// Bytes of object `i` resident (a multiple of the page; its size when whole).
    pub fn resident_of(&self, s: Space, i: u32) -> u64 {
        self.objs[(s.base + i) as usize].resident
    }

    pub fn where_is(&self, s: Space, i: u32) -> Where {
        debug_assert!(i < s.n);
        self.objs[(s.base + i) as usize].at
    }

    /// Bytes on cgroup `cg`'s (inactive, active) file lists.
    pub fn lists(&self, cg: usize) -> (u64, u64) {
        (self.vecs[cg].inactive.bytes, self.vecs[cg].active.bytes)
    }

    pub fn age(&self, cg: usize) -> u64 {
        self.vecs[cg].age
    }

    /// Changes whenever an object of cgroup `cg` becomes resident or is evicted.
    pub fn epoch(&self, cg: usize) -> u64 {
        self.vecs[cg].epoch
    }

    /// How much of each of the space's objects is resident (a workload's view of its cache).
    pub fn resident(&self, s: Space, out: &mut Vec<u64>) {
        out.clear();
        let objs = &self.objs[s.base as usize..(s.base + s.n) as usize];
        out.extend(objs.iter().map(|o| o.resident));
    }

    fn list(&mut self, cg: usize, w: Where) -> &mut List {
        match w {
            Where::Inactive => &mut self.vecs[cg].inactive,
            Where::Active => &mut self.vecs[cg].active,
            Where::Absent => unreachable!("no list for an absent object"),
        }
    }

    fn unlink(&mut self, id: u32) {
        let o = self.objs[id as usize];
        let l = self.list(o.cg, o.at);
        if o.prev == NIL {
            l.head = o.next;
        } else {
            self.objs[o.prev as usize].next = o.next;
        }
        let l = self.list(o.cg, o.at);
        if o.next == NIL {
            l.tail = o.prev;
        } else {
            self.objs[o.next as usize].prev = o.prev;
        }
        self.list(o.cg, o.at).bytes -= o.resident;
        if o.at == Where::Active {
            self.walk_up(o.cg, |v| v.h_active -= o.resident);
        }
        let o = &mut self.objs[id as usize];
        o.prev = NIL;
        o.next = NIL;
        o.at = Where::Absent;
    }

    fn push_head(&mut self, id: u32, w: Where) {
        let (cg, bytes) = (self.objs[id as usize].cg, self.objs[id as usize].resident);
        let l = self.list(cg, w);
        let old = l.head;
        l.head = id;
        if old == NIL {
            l.tail = id;
        }
        l.bytes += bytes;
        if old != NIL {
            self.objs[old as usize].prev = id;
        }
        let o = &mut self.objs[id as usize];
        o.prev = NIL;
        o.next = old;
        o.at = w;
        if w == Where::Active {
            self.walk_up(cg, |v| v.h_active += bytes);
        }
    }

    /// Apply `f` to the lruvec of `cg` and of every ancestor.
    fn walk_up(&mut self, cg: usize, f: impl Fn(&mut LruVec)) {
        let mut c = Some(cg);
        while let Some(g) = c {
            f(&mut self.vecs[g]);
            c = self.parents[g];
        }
    }

    /// `workingset_age_nonresident`: the cgroup's and every ancestor's age advance.
    fn age_nonresident(&mut self, cg: usize, bytes: u64) {
        let pages = bytes.div_ceil(PAGE);
        self.walk_up(cg, |v| v.age += pages);
    }

    /// An access to object `i` (a read of a file, a rewrite of a chunk):
    /// `folio_mark_accessed` when it is resident.
    pub fn touch(&mut self, s: Space, i: u32) -> Touch {
        let id = s.base + i;
        let o = self.objs[id as usize];
        match (o.at, o.referenced) {
            (Where::Absent, _) => return Touch::Miss,
            (Where::Inactive, true) => {
                self.unlink(id);
                self.push_head(id, Where::Active);
                self.objs[id as usize].referenced = false;
                // workingset_activation
                self.age_nonresident(o.cg, o.resident);
            }
            (_, false) => self.objs[id as usize].referenced = true,
            (Where::Active, true) => {}
        }
        Touch::Hit
    }

    /// The missing pages of object `i` (all of it when absent) were charged and enter its
    /// cgroup's LRU (`filemap_add_folio` with `workingset_refault`): on the active list when
    /// they refault within the workingset (`workingset_size`: the active file list, plus
    /// `anon_in_workingset` — the cgroup's anonymous bytes when swap has room for them), else
    /// on the inactive list. `accessed`: the access that brought it in marks it (a read's
    /// `folio_mark_accessed`). An object partly resident keeps its place (its resident pages
    /// were touched by the same access, `touch`) unless the refault activates it.
    pub fn insert(&mut self, s: Space, i: u32, accessed: bool, anon_in_workingset: u64) {
        let o = self.objs[(s.base + i) as usize];
        self.add_pages(s, i, o.bytes - o.resident, accessed, anon_in_workingset);
    }

    /// `insert` of `missing` bytes of the object's missing pages (what was charged for it).
    pub fn add_pages(&mut self, s: Space, i: u32, missing: u64, accessed: bool, anon_in_workingset: u64) {
        let id = s.base + i;
        let o = self.objs[id as usize];
        debug_assert!(missing > 0 && o.resident + missing <= o.bytes, "{missing} of {o:?}");
        let grown = o.resident + missing;
        let recent = o.shadow.is_some_and(|(memcg, then)| {
            let distance = self.vecs[memcg].age - then;
            distance * PAGE <= self.vecs[memcg].h_active + anon_in_workingset
        });
        self.objs[id as usize].shadow = None;
        self.objs[id as usize].reclaim = false;
        self.vecs[o.cg].epoch += 1;
        if o.at == Where::Absent {
            self.objs[id as usize].resident = missing;
            self.push_head(id, if recent { Where::Active } else { Where::Inactive });
        } else if recent && o.at == Where::Inactive {
            self.unlink(id);
            self.objs[id as usize].resident = grown;
            self.push_head(id, Where::Active);
        } else {
            // the object grows where it is (one entry for all its pages: the new ones would
            // be at the inactive head in the kernel, the resident ones where they are)
            self.objs[id as usize].resident = grown;
            self.list(o.cg, o.at).bytes += missing;
            if o.at == Where::Active {
                self.walk_up(o.cg, |v| v.h_active += missing);
            }
        }
        if recent {
            self.age_nonresident(o.cg, missing);
            self.walk_up(o.cg, |v| v.refault_activations += 1);
        }
        self.objs[id as usize].referenced |= accessed;
    }

    /// `inactive_is_low` for cgroup `cg`'s own file lists.
    pub fn inactive_is_low(&self, cg: usize) -> bool {
        let v = &self.vecs[cg];
        inactive_is_low(v.inactive.bytes, v.active.bytes)
    }

    /// Refaults activated in `cg` and its descendants (WORKINGSET_ACTIVATE_FILE).
    pub fn refault_activations(&self, cg: usize) -> u64 {
        self.vecs[cg].refault_activations
    }

    /// `shrink_active_list`: move up to `bytes` (at least one object) from the active tail to
    /// the inactive head. Returns the bytes moved.
    pub fn deactivate(&mut self, cg: usize, bytes: u64) -> u64 {
        let mut moved = 0;
        while moved < bytes.max(1) {
            let id = self.vecs[cg].active.tail;
            if id == NIL {
                break;
            }
            self.unlink(id);
            self.push_head(id, Where::Inactive);
            moved += self.objs[id as usize].resident;
        }
        moved
    }

    /// Owe `bytes` of active-list scanning to cgroup `cg`: deactivate the whole objects the
    /// credit covers (a scan of a fraction of an object moves none yet).
    pub fn deactivate_credit(&mut self, cg: usize, bytes: u64) {
        let v = &mut self.vecs[cg];
        v.credit += bytes;
        while self.vecs[cg].active.tail != NIL {
            let b = self.objs[self.vecs[cg].active.tail as usize].resident;
            if self.vecs[cg].credit < b {
                break;
            }
            self.vecs[cg].credit -= b;
            self.deactivate(cg, b);
        }
        if self.vecs[cg].active.tail == NIL {
            self.vecs[cg].credit = 0;
        }
    }

    /// Evict from cgroup `cg`'s inactive tail until `bytes` (rounded up to whole pages) are
    /// freed or the list is empty, page by page: the tail object gives only the pages still
    /// wanted and keeps the rest at the tail (`isolate_lru_folios` takes pages, not files);
    /// `target`: the reclaim's root, whose age the shadows record. A dirty object is set
    /// aside whole (`writeback`). Returns the bytes freed.
    pub fn evict(&mut self, cg: usize, bytes: u64, target: usize) -> u64 {
        let bytes = bytes.div_ceil(PAGE) * PAGE;
        let mut freed = 0;
        while freed < bytes {
            let id = self.vecs[cg].inactive.tail;
            if id == NIL {
                break;
            }
            if self.objs[id as usize].dirty > 0 && !self.writeback(id) {
                continue;
            }
            let r = self.objs[id as usize].resident;
            let take = r.min(bytes - freed);
            if take == r {
                self.unlink(id);
                self.forget(id, target);
            } else {
                // part of it: its shadow is its latest evicted page's (one per object here)
                self.objs[id as usize].resident -= take;
                self.vecs[cg].inactive.bytes -= take;
                self.objs[id as usize].shadow = Some((target, self.vecs[target].age));
                self.vecs[cg].epoch += 1;
                self.age_nonresident(target, take);
            }
            freed += take;
        }
        freed
    }

    /// Reclaim meets dirty object `id` at the inactive tail (shrink_folio_list, 6.6–6.18):
    /// - under writeback (queued: inside the flusher's chunk in flight) and already
    ///   PG_reclaim, by a legacy memcg reclaim that may wait: "case 3", `folio_wait_writeback`
    ///   — the task sleeps until that writeback completes and the object, clean, can go (true);
    /// - under writeback, not yet PG_reclaim (case 2), or in global / cgroup v2 reclaim: it is
    ///   marked PG_reclaim and activated, out of the way (`activate_locked`; the lruvec ages
    ///   by it), false;
    /// - dirty and not queued: the same, and it counts toward `nr_unqueued_dirty`; a batch of
    ///   SWAP_CLUSTER_MAX such pages wakes the flushers and, on legacy memcg, throttles the
    ///   task (`shrink_inactive_list` → `reclaim_throttle(pgdat, VMSCAN_THROTTLE_WRITEBACK)`,
    ///   81a70c21d917): it sleeps until `__acct_reclaim_writeback` counts SWAP_CLUSTER_MAX ×
    ///   nr_throttled pages more written back node-wide — the next completion of the
    ///   flusher's writeback, whose chunk is ≥ 32 pages — or the HZ/10 timeout. Once per
    ///   reclaim here: woken, the kernel's reclaim finds the pages that completion cleaned
    ///   rotated to the inactive tail (`folio_rotate_reclaimable`) and takes them, where this
    ///   synchronous reclaim sets the rest aside unthrottled.
    fn writeback(&mut self, id: u32) -> bool {
        let o = self.objs[id as usize];
        let legacy = self.legacy.filter(|_| self.may_wait);
        let queued = self.queued(&o);
        if let (Some(l), true, true) = (legacy, o.reclaim, queued) {
            let t = l.next_completion();
            self.waited_ns += t;
            self.waits.waits += 1;
            self.waits.wait_ns += t;
            return true;
        }
        if !queued {
            self.kick_flusher = true;
            if let Some(l) = legacy {
                self.throttle(l, o.domain as usize);
                if self.objs[id as usize].dirty == 0 {
                    return true; // written back while the task slept: clean, it can go
                }
                self.objs[id as usize].reclaim = true;
                self.unlink(id);
                self.push_head(id, Where::Active);
                self.age_nonresident(o.cg, o.resident);
                return false;
            }
        }
        self.objs[id as usize].reclaim = true;
        self.unlink(id);
        self.push_head(id, Where::Active);
        self.age_nonresident(o.cg, o.resident);
        false
    }

    /// `reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)`: sleep until the next writeback
    /// completion — the chunk in flight, or (a second throttle in this reclaim, or nothing in
    /// flight) the flusher's next chunk, one chunk's device time on — or HZ/10. The reclaim
    /// goes on after the wake: that completion's pages are clean by then (set aside, they
    /// rotate to the inactive tail and are taken first), and the flusher's next chunk is in
    /// flight.
    fn throttle(&mut self, l: LegacyWait, domain: usize) {
        let chunk_ns = (crate::disk::WB_CHUNK as f64 * l.ns_per_byte).ceil() as u64;
        let (due, bytes) = match l.in_flight.filter(|_| !self.throttled) {
            Some(f) => f,
            None => (chunk_ns, crate::disk::WB_CHUNK),
        };
        let t = due.min(THROTTLE_WRITEBACK_NS);
        self.waited_ns += t;
        self.throttled = true;
        self.waits.throttles += 1;
        self.waits.throttle_ns += t;
        let q = &self.wb[domain];
        let bytes = bytes.min(q.pushed - q.written);
        self.wb[domain].ahead += bytes;
        self.clean(domain, bytes);
        if let Some(l) = self.legacy.as_mut() {
            l.in_flight = Some((chunk_ns, crate::disk::WB_CHUNK));
        }
    }

    /// Whether dirty object `o` is under writeback: its dirtying ends within the chunk the
    /// flusher has in flight (the model's flusher submits one chunk a domain at a time).
    fn queued(&self, o: &Obj) -> bool {
        let in_flight = self.legacy.and_then(|l| l.in_flight).map_or(0, |(_, b)| b);
        o.ends_at <= self.wb[o.domain as usize].written + in_flight
    }

    /// Object `i` was dirtied (a buffered write) in writeback domain `domain`; `None`: a
    /// buffered write of `bytes` of no object, kept for the order.
    pub fn dirty(&mut self, domain: usize, obj: Option<(Space, u32)>, bytes: u64) {
        self.wb[domain].pushed += bytes;
        let id = match obj {
            Some((s, i)) => {
                let id = s.base + i;
                let o = &mut self.objs[id as usize];
                o.dirty += 1;
                o.domain = domain as u32;
                o.ends_at = self.wb[domain].pushed;
                id
            }
            None => NIL,
        };
        self.wb[domain].q.push_back((id, bytes));
    }

    /// The flusher wrote back `bytes` of `domain`'s dirty pages, oldest first. An object
    /// whose last writeback this was is clean; set aside by reclaim (PG_reclaim), it moves to
    /// its inactive tail (`folio_rotate_reclaimable` → `lru_move_tail`, PG_active cleared).
    pub fn written_back(&mut self, domain: usize, bytes: u64) {
        // what a throttled reclaimer already counted (`throttle`) is not cleaned twice
        let early = self.wb[domain].ahead.min(bytes);
        self.wb[domain].ahead -= early;
        self.clean(domain, bytes - early);
    }

    /// `bytes` more of `domain`'s dirty stream are written back, oldest first.
    fn clean(&mut self, domain: usize, bytes: u64) {
        self.wb[domain].credit += bytes;
        self.wb[domain].written += bytes;
        while let Some(&(id, b)) = self.wb[domain].q.front() {
            if self.wb[domain].credit < b {
                break;
            }
            self.wb[domain].credit -= b;
            self.wb[domain].q.pop_front();
            if id == NIL {
                continue;
            }
            let o = &mut self.objs[id as usize];
            o.dirty -= 1;
            if o.dirty == 0 && o.reclaim && o.at != Where::Absent {
                o.reclaim = false;
                self.unlink(id);
                self.push_tail_inactive(id);
            }
        }
        if self.wb[domain].q.is_empty() {
            self.wb[domain].credit = 0;
            self.wb[domain].written = self.wb[domain].pushed;
        }
    }

    /// Whether object `i` is dirty or under writeback.
    pub fn is_dirty(&self, s: Space, i: u32) -> bool {
        self.objs[(s.base + i) as usize].dirty > 0
    }

    fn push_tail_inactive(&mut self, id: u32) {
        let cg = self.objs[id as usize].cg;
        let old = self.vecs[cg].inactive.tail;
        if old == NIL {
            self.push_head(id, Where::Inactive);
            return;
        }
        let bytes = self.objs[id as usize].resident;
        let l = &mut self.vecs[cg].inactive;
        l.tail = id;
        l.bytes += bytes;
        self.objs[old as usize].next = id;
        let o = &mut self.objs[id as usize];
        o.prev = old;
        o.next = NIL;
        o.at = Where::Inactive;
    }

    /// An unlinked object leaves the cache (`workingset_eviction`: the shadow holds the age
    /// before this eviction advances it).
    fn forget(&mut self, id: u32, target: usize) {
        let (cg, b) = (self.objs[id as usize].cg, self.objs[id as usize].resident);
        self.objs[id as usize].shadow = Some((target, self.vecs[target].age));
        self.objs[id as usize].resident = 0;
        self.objs[id as usize].referenced = false;
        self.vecs[cg].epoch += 1;
        self.age_nonresident(target, b);
    }

    /// Reclaim up to `want` bytes of cgroup `cg`'s page cache as `shrink_lruvec` does: when
    /// the reclaim may deactivate (`may_deactivate`, decided for the reclaim's target) and
    /// the inactive list is low or empty, deactivate from the active list first; then evict
    /// from the inactive tail. Returns the bytes freed.
    pub fn shrink(&mut self, cg: usize, want: u64, may_deactivate: bool, target: usize) -> u64 {
        let mut freed = 0;
        // at most one pass over what the lists hold
        let mut budget = {
            let (i, a) = self.lists(cg);
            i + a
        };
        while freed < want && budget > 0 {
            budget = budget.saturating_sub((want - freed).max(1));
            if may_deactivate && (self.inactive_is_low(cg) || self.vecs[cg].inactive.bytes == 0) {
                // deactivate what restores the balance, at least what is still wanted
                let v = &self.vecs[cg];
                let need = (want - freed).max(v.active.bytes.saturating_sub(v.inactive.bytes) / 2);
                if self.vecs[cg].inactive.bytes == 0 && self.deactivate(cg, need) == 0 {
                    break;
                }
                if self.inactive_is_low(cg) {
                    self.deactivate(cg, want - freed);
                }
            }
            let got = self.evict(cg, want - freed, target);
            if got == 0 && self.vecs[cg].active.bytes == 0 {
                break;
            }
            freed += got;
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;
    const MIB: u64 = 1 << 20;

    /// A page touched twice survives a streaming writer that touches each of its pages once:
    /// the reader's page is on the active list, the writer's on the inactive one, and reclaim
    /// takes the inactive tail.
    #[test]
    fn twice_touched_page_survives_a_stream() {
        let mut pc = PageCache::new(&[None]);
        let reader = pc.register(0, 1, 4 * KIB);
        let writer = pc.register(0, 1000, 4 * KIB);
        pc.insert(reader, 0, true, 0);
        assert_eq!(pc.touch(reader, 0), Touch::Hit); // second access: activated
        assert_eq!(pc.where_is(reader, 0), Where::Active);
        // a 1000-page stream under a 10-page limit: each new page pushes one out
        for i in 0..1000 {
            if pc.lists(0).0 + pc.lists(0).1 >= 10 * 4 * KIB {
                assert_eq!(pc.shrink(0, 4 * KIB, true, 0), 4 * KIB);
            }
            pc.insert(writer, i, true, 0);
        }
        assert_eq!(pc.where_is(reader, 0), Where::Active);
        // a page touched once, like the stream's own, does not survive it
        let mut pc = PageCache::new(&[None]);
        let once = pc.register(0, 1, 4 * KIB);
        let stream = pc.register(0, 1000, 4 * KIB);
        pc.insert(once, 0, true, 0);
        for i in 0..1000 {
            if pc.lists(0).0 + pc.lists(0).1 >= 10 * 4 * KIB {
                pc.shrink(0, 4 * KIB, true, 0);
            }
            pc.insert(stream, i, true, 0);
        }
        assert_eq!(pc.where_is(once, 0), Where::Absent);
    }

    /// Refault by distance without activations in between (they age the lruvec too): the
    /// active set is built first, then A is evicted behind four others.
    #[test]
    fn refault_distance_against_the_active_size() {
        for (active_pages, expect) in [(5u32, Where::Active), (4, Where::Inactive), (6, Where::Active)] {
            let mut pc = PageCache::new(&[None]);
            let hot = pc.register(0, active_pages, 4 * KIB);
            let a = pc.register(0, 1, 4 * KIB);
            let others = pc.register(0, 4, 4 * KIB);
            for i in 0..active_pages {
                pc.insert(hot, i, true, 0);
                pc.touch(hot, i);
            }
            pc.insert(a, 0, true, 0);
            for i in 0..4 {
                pc.insert(others, i, true, 0);
            }
            let before = pc.age(0);
            // the inactive tail is A, then the four others: five evictions
            assert_eq!(pc.evict(0, 20 * KIB, 0), 20 * KIB);
            assert_eq!(pc.age(0) - before, 5);
            assert_eq!(pc.where_is(hot, 0), Where::Active);
            pc.insert(a, 0, true, 0);
            assert_eq!(pc.where_is(a, 0), expect, "{active_pages} active pages");
        }
    }

    /// Eviction by the page: 40 pages wanted from two 32-page files on the inactive list
    /// take the tail file whole and 8 pages of the next, which stays at the tail with 24;
    /// the age advances by the 40 pages. Read again (it was read once: referenced), its
    /// resident pages are activated with it and only its missing pages come in (9, after
    /// one page more was evicted).
    #[test]
    fn eviction_takes_pages_and_leaves_the_rest_of_a_file_at_the_tail() {
        let mut pc = PageCache::new(&[None]);
        let files = pc.register(0, 2, 32 * PAGE);
        pc.insert(files, 0, true, 0);
        pc.insert(files, 1, true, 0);
        assert_eq!(pc.evict(0, 40 * PAGE, 0), 40 * PAGE);
        assert_eq!((pc.resident_of(files, 0), pc.resident_of(files, 1)), (0, 24 * PAGE));
        assert_eq!(
            (pc.where_is(files, 1), pc.lists(0), pc.age(0)),
            (Where::Inactive, (24 * PAGE, 0), 40)
        );
        // an eviction asks for whole pages: 1 byte takes one
        assert_eq!(pc.evict(0, 1, 0), PAGE);
        assert_eq!(pc.touch(files, 1), Touch::Hit);
        assert_eq!(pc.where_is(files, 1), Where::Active);
        pc.add_pages(files, 1, 9 * PAGE, true, 0);
        assert_eq!((pc.resident_of(files, 1), pc.lists(0)), (32 * PAGE, (0, 32 * PAGE)));
    }

    /// inactive_ratio = int_sqrt(10 × GiB), 1 below 1 GiB (mm/vmscan.c `inactive_is_low`'s
    /// table: 1 GB → 3, 10 GB → 10, 100 GB → 31, 1 TB → 101).
    #[test]
    fn inactive_ratio_arithmetic() {
        assert_eq!(inactive_ratio(512 * MIB), 1);
        assert_eq!(inactive_ratio(1 << 30), 3);
        assert_eq!(inactive_ratio(10 << 30), 10);
        assert_eq!(inactive_ratio(100 << 30), 31);
        assert_eq!(inactive_ratio(1 << 40), 101);
        // 4 GiB of lists, ratio 6: 500 MiB inactive is low against 3.5 GiB active
        let mut pc = PageCache::new(&[None]);
        let s = pc.register(0, 4096, MIB);
        for i in 0..4096 {
            pc.insert(s, i, true, 0);
            if i >= 500 {
                pc.touch(s, i);
            }
        }
        assert_eq!(pc.lists(0), (500 * MIB, 3596 * MIB));
        assert!(pc.inactive_is_low(0)); // 500 × 6 = 3000 < 3596
        pc.deactivate(0, 100 * MIB);
        assert!(!pc.inactive_is_low(0)); // 600 × 6 = 3600 ≥ 3496
    }
}
