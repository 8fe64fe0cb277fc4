//! The event queue: a binary heap ordered by (time, sequence number), so that events at the
//! same nanosecond run in the order they were scheduled — the tie-break that makes runs
//! bit-identical.

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

#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, at: Ns, ev: Event) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, ev });
    }

    pub fn peek_time(&self) -> Option<Ns> {
        self.heap.peek().map(|e| e.at)
    }

    pub fn pop(&mut self) -> Option<(Ns, Event)> {
        self.heap.pop().map(|e| (e.at, e.ev))
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
}
