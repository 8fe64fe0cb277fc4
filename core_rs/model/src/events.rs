//! The event queue: events ordered by (time, sequence number), so that events at the same
//! nanosecond run in the order they were scheduled — the tie-break that makes runs
//! bit-identical.
//!
//! Two stores share one sequence counter and are merged at `pop`: a binary heap for every
//! event kind, and timer slots — one per CPU for `Event::Cpu`, one for `Event::Disk` — for
//! the events that are re-armed rather than added (the disk's next completion is re-planned
//! twice per IO, and the same stale-entry argument holds for it). A CPU has at most one pending
//! completion/tick event (the kernel reprograms its one hrtimer/tick the same way), and it
//! is reprogrammed on almost every switch; in one heap each reprogram left a stale entry
//! behind, and a hog's far-future completion (no tick needed on a CPU that runs one task,
//! as under nohz) was never popped, so the heap grew without bound (65,000 entries after
//! 20 simulated s of the 96-CPU node) and every push and pop paid for it. The slots keep a
//! tournament tree over the CPUs (each inner node holds the earlier of its two children),
//! so a reprogram is one leaf-to-root walk and the earliest CPU event is the root. The order
//! of events is exactly the one heap's: same keys, stale entries were no-ops.

use crate::topology::CpuId;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

pub type Ns = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The running task on `cpu` completes its work or reaches the scheduler tick at which
    /// its slice is checked. Stale when `gen` is no longer the CPU's.
    Cpu { cpu: CpuId, gen: u64 },
    /// Periodic load balancing on `cpu` (its busy/idle interval per domain).
    Balance { cpu: CpuId, gen: u64 },
    /// A NOHZ idle-balance kick: idle CPUs pull waiting work at the next tick.
    IdleKick,
    /// A workload's timer (client think time over, next open-loop arrival, start).
    Workload { wl: usize, slot: u32 },
    /// Time-series sample.
    Sample,
    /// CFS bandwidth period timer of a cgroup (stale when `gen` is no longer the group's).
    Period { cg: usize, gen: u64 },
    /// CFS bandwidth slack timer of a cgroup.
    Slack { cg: usize, gen: u64 },
    /// PSI averaging (every PSI_FREQ).
    Psi,
    /// A task that slept on memory.high (or waits to start after one) goes on with its
    /// work.
    Resume { task: usize },
    /// The disk's next flow finishes (stale when `gen` is no longer the disk's).
    Disk { gen: u64 },
    /// The periodic flusher (dirty_writeback_centisecs).
    Kupdate,
    /// oncn-bwm's rate check (every 10 ms while enabled).
    Bwm { gen: u64 },
    /// A socket's shared-hardware equilibrium is due again (contention.rs).
    LlcRefresh { socket: usize },
    /// The hypervisor may take `cpu` away now (steal.rs).
    Stall { cpu: CpuId },
    /// It gives `cpu` back.
    StallEnd { cpu: CpuId },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    at: Ns,
    seq: u64,
    ev: Event,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// A timer in the tournament tree: when, its sequence number, which slot (a CPU, or
/// `ncpus` for the disk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timer {
    at: Ns,
    seq: u64,
    slot: u32,
}

impl Timer {
    /// An empty slot: later than every real event (a real one is never at `Ns::MAX`).
    const NONE: (Ns, u64) = (Ns::MAX, u64::MAX);

    fn key(&self) -> (Ns, u64) {
        (self.at, self.seq)
    }
}

#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
    /// Per slot, the gen of its pending event.
    slot_gen: Vec<u64>,
    /// The disk's slot (= ncpus).
    disk_slot: usize,
    /// Tournament tree over the CPU slots, keys held in the nodes (no indirection on the
    /// walk): leaves at `width + cpu`, `tree[i]` the earlier of `tree[2i]` and `tree[2i+1]`,
    /// so `tree[1]` is the earliest CPU timer.
    tree: Vec<Timer>,
    width: usize,
    /// The slot whose timer `pop` just returned, still in the tree: the node usually re-arms
    /// it while handling the event, so emptying its leaf is left to the next `peek_time` /
    /// `pop`, or undone by a re-arm — one walk up the tree per CPU event instead of two.
    fired: Option<usize>,
}

impl EventQueue {
    /// A queue with one timer slot per CPU (`set_cpu_timer`) and one for the disk
    /// (`set_disk_timer`).
    pub fn with_cpus(ncpus: usize) -> Self {
        let width = (ncpus + 1).next_power_of_two();
        let (at, seq) = Timer::NONE;
        let mut tree = vec![Timer { at, seq, slot: 0 }; 2 * width];
        for (slot, leaf) in tree[width..].iter_mut().enumerate() {
            leaf.slot = slot as u32;
        }
        for i in (1..width).rev() {
            tree[i] = earlier(tree[2 * i], tree[2 * i + 1]);
        }
        EventQueue {
            slot_gen: vec![0; width],
            disk_slot: ncpus,
            tree,
            width,
            ..Default::default()
        }
    }

    pub fn push(&mut self, at: Ns, ev: Event) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, ev });
    }

    /// Schedule `Event::Cpu { cpu, gen }` at `at`, replacing the CPU's pending one (it takes
    /// the next sequence number, as a push would).
    pub fn set_cpu_timer(&mut self, cpu: CpuId, at: Ns, gen: u64) {
        self.set_timer(cpu, at, gen);
    }

    /// Drop the CPU's pending `Event::Cpu`, if any.
    pub fn cancel_cpu_timer(&mut self, cpu: CpuId) {
        self.cancel_timer(cpu);
    }

    /// Schedule `Event::Disk { gen }` at `at`, replacing the pending one.
    pub fn set_disk_timer(&mut self, at: Ns, gen: u64) {
        self.set_timer(self.disk_slot, at, gen);
    }

    /// Drop the pending `Event::Disk`, if any.
    pub fn cancel_disk_timer(&mut self) {
        self.cancel_timer(self.disk_slot);
    }

    fn set_timer(&mut self, slot: usize, at: Ns, gen: u64) {
        self.seq += 1;
        self.slot_gen[slot] = gen;
        if self.fired == Some(slot) {
            self.fired = None;
        }
        self.set_leaf(slot, (at, self.seq));
    }

    fn cancel_timer(&mut self, slot: usize) {
        if self.fired == Some(slot) {
            self.fired = None;
        }
        if self.tree[self.width + slot].key() != Timer::NONE {
            self.set_leaf(slot, Timer::NONE);
        }
    }

    /// Empty the leaf of the timer fired last, if it was not re-armed.
    fn clear_fired(&mut self) {
        if let Some(slot) = self.fired.take() {
            self.set_leaf(slot, Timer::NONE);
        }
    }

    fn set_leaf(&mut self, slot: usize, (at, seq): (Ns, u64)) {
        let mut i = self.width + slot;
        self.tree[i].at = at;
        self.tree[i].seq = seq;
        i /= 2;
        while i >= 1 {
            let new = earlier(self.tree[2 * i], self.tree[2 * i + 1]);
            // Nothing changed here, so nothing changes above.
            if new == self.tree[i] {
                break;
            }
            self.tree[i] = new;
            i /= 2;
        }
    }

    /// The earliest timer, if any slot has one.
    fn first_timer(&self) -> Option<Timer> {
        let first = *self.tree.get(1)?;
        (first.key() != Timer::NONE).then_some(first)
    }

    pub fn peek_time(&mut self) -> Option<Ns> {
        self.clear_fired();
        let heap = self.heap.peek().map(|e| e.at);
        match self.first_timer() {
            Some(t) => Some(heap.map_or(t.at, |h| h.min(t.at))),
            None => heap,
        }
    }

    pub fn pop(&mut self) -> Option<(Ns, Event)> {
        self.pop_until(Ns::MAX)
    }

    /// The earliest event if it is due at or before `until` (`peek_time` then `pop` in one
    /// look at the two stores: the event loop's step).
    pub fn pop_until(&mut self, until: Ns) -> Option<(Ns, Event)> {
        self.clear_fired();
        let heap = self.heap.peek().map(|e| (e.at, e.seq));
        if let Some(t) = self.first_timer() {
            if heap.is_none_or(|h| t.key() < h) {
                if t.at > until {
                    return None;
                }
                let slot = t.slot as usize;
                self.fired = Some(slot);
                let gen = self.slot_gen[slot];
                let ev = if slot == self.disk_slot {
                    Event::Disk { gen }
                } else {
                    Event::Cpu { cpu: slot, gen }
                };
                return Some((t.at, ev));
            }
        }
        if heap?.0 > until {
            return None;
        }
        self.heap.pop().map(|e| (e.at, e.ev))
    }
}

fn earlier(a: Timer, b: Timer) -> Timer {
    if b.key() < a.key() {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo_among_equals() {
        let mut q = EventQueue::default();
        q.push(5, Event::Sample);
        q.push(3, Event::IdleKick);
        q.push(5, Event::Workload { wl: 1, slot: 0 });
        assert_eq!(q.pop(), Some((3, Event::IdleKick)));
        assert_eq!(q.pop(), Some((5, Event::Sample)));
        assert_eq!(q.pop(), Some((5, Event::Workload { wl: 1, slot: 0 })));
        assert!(q.pop().is_none());
    }

    /// The slots and the heap together give exactly the order one heap with lazy deletion
    /// gives (the queue before the slots): a reference that pushes every CPU event and skips
    /// the stale ones when popped, driven by the same pseudo-random reprograms.
    #[test]
    fn timer_slots_pop_in_the_order_one_heap_with_stale_entries_does() {
        let ncpus = 5;
        let mut q = EventQueue::with_cpus(ncpus);
        let mut reference = EventQueue::default();
        let mut gens = vec![0u64; ncpus + 1]; // the CPUs', then the disk's
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut now, mut popped) = (0, 0);
        for _ in 0..20_000 {
            let r = next();
            let at = now + r % 64; // many ties at the same nanosecond
            match r % 7 {
                0 | 1 => {
                    let ev = Event::Workload {
                        wl: (r % 3) as usize,
                        slot: popped,
                    };
                    q.push(at, ev);
                    reference.push(at, ev);
                }
                2..=4 => {
                    let slot = (r >> 8) as usize % (ncpus + 1);
                    gens[slot] += 1;
                    let gen = gens[slot];
                    if slot == ncpus {
                        q.set_disk_timer(at, gen);
                        reference.push(at, Event::Disk { gen });
                    } else {
                        q.set_cpu_timer(slot, at, gen);
                        reference.push(at, Event::Cpu { cpu: slot, gen });
                    }
                }
                5 => {
                    let slot = (r >> 8) as usize % (ncpus + 1);
                    gens[slot] += 1; // cancelled: the pending one is stale
                    if slot == ncpus {
                        q.cancel_disk_timer();
                    } else {
                        q.cancel_cpu_timer(slot);
                    }
                    reference.seq += 1; // keep the counters in step (no entry)
                    q.seq += 1;
                }
                _ => {
                    let slot_of = |ev: Event| match ev {
                        Event::Cpu { cpu, gen } => Some((cpu, gen)),
                        Event::Disk { gen } => Some((ncpus, gen)),
                        _ => None,
                    };
                    let want = loop {
                        match reference.pop() {
                            Some((_, ev)) if slot_of(ev).is_some_and(|(s, g)| gens[s] != g) => continue,
                            other => break other,
                        }
                    };
                    if let Some((s, _)) = want.and_then(|(_, ev)| slot_of(ev)) {
                        gens[s] += 1; // fired: what the node does (the next arm bumps gen)
                    }
                    assert_eq!(q.peek_time(), want.map(|w| w.0));
                    if let Some((t, _)) = want.filter(|w| w.0 > 0) {
                        assert_eq!(q.pop_until(t - 1), None, "nothing is due before the earliest");
                    }
                    assert_eq!(q.pop_until(want.map_or(Ns::MAX, |w| w.0)), want);
                    if let Some((t, _)) = want {
                        now = t;
                    }
                    popped += 1;
                }
            }
        }
        assert!(popped > 1000);
    }
}
