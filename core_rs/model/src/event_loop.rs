//! A load generator whose threads are event loops (redis-benchmark's one `aeEventLoop`, wrk's
//! `-t` threads): each thread owns its connections (client c on thread c mod T), and one pass
//! of its loop first reads every reply that is ready, then writes the next request of each.
//! Such generators time a request from the moment they write it to the moment they read its
//! reply (redis-benchmark sets `c->start` in writeHandler and takes the latency in
//! readHandler; wrk starts `c->start` in socket_writeable and records in response_complete,
//! both re-arming the write for the next pass): the time a connection waits between its
//! reply read and its next write — behind the other replies of the pass — is not in any
//! latency they report, though it is in the time round the loop.

use std::collections::VecDeque;

use crate::events::Ns;

/// What a generator thread does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read client c's reply: its part of the client CPU, then its latency ends.
    Read(usize),
    /// Write client c's next request: its part, then the request goes out.
    Write(usize),
    /// Nothing ready: the thread sleeps until a reply comes.
    Idle,
}

#[derive(Debug)]
pub struct EventLoop {
    /// The share of a request's client CPU spent reading its reply (the rest writes the next).
    read_ppm: u64,
    /// Per thread: clients whose reply is ready and not yet in a pass.
    ready: Vec<VecDeque<usize>>,
    /// Per thread: the clients of its current pass, and how far it has got.
    pass: Vec<Vec<usize>>,
    pos: Vec<usize>,
    writing: Vec<bool>,
    busy: Vec<bool>,
    /// Per client: when its current request's write started (the generator's clock).
    pub sent_at: Vec<Ns>,
}

impl EventLoop {
    pub fn new(threads: usize, clients: usize, read_share: f64) -> EventLoop {
        EventLoop {
            read_ppm: (read_share.clamp(0.0, 1.0) * 1e6).round() as u64,
            ready: vec![VecDeque::new(); threads],
            pass: vec![Vec::new(); threads],
            pos: vec![0; threads],
            writing: vec![false; threads],
            busy: vec![false; threads],
            sent_at: vec![0; clients],
        }
    }

    /// The thread that owns client `c`'s connection.
    pub fn owner(&self, c: usize) -> usize {
        c % self.ready.len()
    }

    /// The share of a request's client CPU `work` that reads its reply, and the share that
    /// writes the next request (each ≥ 1 ns).
    pub fn read_part(&self, work: u64) -> u64 {
        ((work as u128 * self.read_ppm as u128 / 1_000_000) as u64).max(1)
    }

    pub fn write_part(&self, work: u64) -> u64 {
        (work - self.read_part(work).min(work)).max(1)
    }

    /// The start: every thread's first pass writes the first request of each of its clients.
    pub fn start(&mut self, g: usize) -> Step {
        let clients = (0..self.sent_at.len())
            .filter(|&c| self.owner(c) == g)
            .collect::<Vec<_>>();
        self.busy[g] = true;
        self.writing[g] = true;
        self.pos[g] = 0;
        self.pass[g] = clients;
        self.current(g)
    }

    /// Client c's reply is ready: Some(step) when its thread was asleep (it wakes to a new
    /// pass), None when a pass is under way (the reply waits for the next).
    pub fn reply(&mut self, c: usize) -> Option<Step> {
        let g = self.owner(c);
        self.ready[g].push_back(c);
        if self.busy[g] {
            return None;
        }
        self.busy[g] = true;
        Some(self.next_pass(g))
    }

    /// Thread g finished its current step: the next one.
    pub fn done(&mut self, g: usize) -> Step {
        self.pos[g] += 1;
        if self.pos[g] < self.pass[g].len() {
            return self.current(g);
        }
        if !self.writing[g] {
            // every reply of the pass is read: now each client's next request
            self.writing[g] = true;
            self.pos[g] = 0;
            return self.current(g);
        }
        if self.ready[g].is_empty() {
            self.busy[g] = false;
            self.pass[g].clear();
            return Step::Idle;
        }
        self.next_pass(g)
    }

    fn next_pass(&mut self, g: usize) -> Step {
        let ready = std::mem::take(&mut self.ready[g]);
        self.pass[g].clear();
        self.pass[g].extend(ready);
        self.writing[g] = false;
        self.pos[g] = 0;
        self.current(g)
    }

    /// The step thread g is running (Idle between passes).
    pub fn step_of(&self, g: usize) -> Step {
        if !self.busy[g] {
            return Step::Idle;
        }
        self.current(g)
    }

    fn current(&self, g: usize) -> Step {
        let c = self.pass[g][self.pos[g]];
        if self.writing[g] {
            Step::Write(c)
        } else {
            Step::Read(c)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_reads_every_ready_reply_before_writing_any_request() {
        let mut ev = EventLoop::new(2, 4, 0.5);
        // thread 0 owns clients 0 and 2
        assert_eq!(ev.start(0), Step::Write(0));
        assert_eq!(ev.done(0), Step::Write(2));
        assert_eq!(ev.done(0), Step::Idle);
        assert_eq!(ev.reply(2), Some(Step::Read(2)));
        assert_eq!(ev.reply(0), None); // mid-pass: waits for the next
        assert_eq!(ev.done(0), Step::Write(2));
        assert_eq!(ev.done(0), Step::Read(0));
        assert_eq!(ev.done(0), Step::Write(0));
        assert_eq!(ev.done(0), Step::Idle);
    }

    #[test]
    fn the_parts_split_the_work() {
        let ev = EventLoop::new(1, 1, 0.25);
        assert_eq!((ev.read_part(1000), ev.write_part(1000)), (250, 750));
        assert_eq!((ev.read_part(1), ev.write_part(1)), (1, 1));
    }
}
