//! A load generator whose threads are event loops (redis-benchmark's one `aeEventLoop`, wrk's
//! `-t` threads): each thread owns its connections (client c on thread c mod T). Such
//! generators time a request from the moment they write it to the moment they read its reply
//! (redis-benchmark sets `c->start` in writeHandler and takes the latency in readHandler; wrk
//! starts `c->start` in socket_writeable and records in response_complete).
//!
//! A pass of the loop is what one `epoll_wait` returned: the connections on the epoll ready
//! list when it was called, in the list's order (fs/eventpoll.c: `ep_poll_callback` and an
//! `epoll_ctl` that finds the file ready append to the tail of `rdllist`; `ep_send_events`
//! hands the list out in order). A read handler does not write the next request: it re-arms
//! the connection for writing (`aeCreateFileEvent(AE_WRITABLE)`), which this pass's snapshot
//! no longer sees, so the write comes in a later pass — and the time between the reply's read
//! and that write (the rest of this pass, and whatever of the next comes before it) is in the
//! time round the loop but in no latency the generator reports. Where the write lands in the
//! next pass depends on how the generator re-arms ([`Rearm`]).

use std::collections::VecDeque;

use serde::Deserialize;

use crate::events::Ns;

/// How a generator re-arms a connection between a read and the next write, and so where the
/// connection stands on the epoll ready list (ae_epoll.c `aeApiAddEvent`/`aeApiDelEvent`:
/// EPOLL_CTL_DEL when no event is left, ADD when there was none, MOD otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rearm {
    /// redis-benchmark: `resetClient` deletes both events (EPOLL_CTL_DEL unlinks the
    /// connection from the ready list) and adds the write (EPOLL_CTL_ADD links it at the
    /// tail, writable at once); `writeHandler` then deletes the write and adds the read, which
    /// joins the list when the reply comes. Every step joins the list's tail when it becomes
    /// ready: the passes take the steps in the order they became ready.
    #[default]
    Readd,
    /// wrk: the read stays registered and the write is added and removed with EPOLL_CTL_MOD,
    /// which leaves a linked connection where it is. A level-triggered connection that a pass
    /// reported is linked again at the list's tail when `epoll_wait` returns (`ep_send_events`),
    /// so the next pass first sees this pass's connections, in this pass's order (a read
    /// now a write; a write now a read if its reply came meanwhile, else dropped), then the
    /// replies that came to the others during this pass.
    Modify,
}

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

/// One generator thread's loop.
#[derive(Debug, Clone, Default)]
struct Thread {
    /// The current pass (what its `epoll_wait` returned) and how far it has got.
    pass: Vec<Step>,
    pos: usize,
    /// Steps that became ready since the pass began, in the ready list's order.
    ready: VecDeque<Step>,
    /// Whether a pass is under way (false: asleep in `epoll_wait`).
    busy: bool,
}

#[derive(Debug)]
pub struct EventLoop {
    /// The share of a request's client CPU spent reading its reply (the rest writes the next).
    read_ppm: u64,
    rearm: Rearm,
    threads: Vec<Thread>,
    /// Per client (`Rearm::Modify`): in the current pass of its thread (linked where the pass
    /// had it), and whether its reply came while it was.
    in_pass: Vec<bool>,
    replied: Vec<bool>,
    /// Per client: when its current request's write started (the generator's clock).
    pub sent_at: Vec<Ns>,
}

impl EventLoop {
    pub fn new(threads: usize, clients: usize, read_share: f64, rearm: Rearm) -> EventLoop {
        EventLoop {
            read_ppm: (read_share.clamp(0.0, 1.0) * 1e6).round() as u64,
            rearm,
            threads: vec![Thread::default(); threads],
            in_pass: vec![false; clients],
            replied: vec![false; clients],
            sent_at: vec![0; clients],
        }
    }

    /// The thread that owns client `c`'s connection.
    pub fn owner(&self, c: usize) -> usize {
        c % self.threads.len()
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
        let clients = (0..self.sent_at.len()).filter(|&c| self.owner(c) == g);
        let pass = clients.map(Step::Write).collect();
        self.begin(g, pass)
    }

    /// Client c's reply is ready: Some(step) when its thread was asleep (it wakes to a new
    /// pass), None when a pass is under way (the reply waits for a later one).
    pub fn reply(&mut self, c: usize) -> Option<Step> {
        let g = self.owner(c);
        if self.in_pass[c] {
            // linked where the pass has it: the next pass reads it there
            self.replied[c] = true;
            return None;
        }
        self.threads[g].ready.push_back(Step::Read(c));
        if self.threads[g].busy {
            return None;
        }
        let pass = self.threads[g].ready.drain(..).collect();
        Some(self.begin(g, pass))
    }

    /// Thread g finished its current step: the next one of its pass, or the next pass (what
    /// is on the ready list now; under `Modify` after this pass's connections, turned), or
    /// sleep.
    pub fn done(&mut self, g: usize) -> Step {
        let t = &mut self.threads[g];
        let step = t.pass[t.pos];
        if let (Rearm::Readd, Step::Read(c)) = (self.rearm, step) {
            t.ready.push_back(Step::Write(c)); // EPOLL_CTL_ADD of a writable connection
        }
        t.pos += 1;
        if t.pos < t.pass.len() {
            return t.pass[t.pos];
        }
        let mut next = Vec::new();
        if self.rearm == Rearm::Modify {
            for &s in &t.pass {
                match s {
                    Step::Read(c) => next.push(Step::Write(c)),
                    Step::Write(c) if self.replied[c] => next.push(Step::Read(c)),
                    _ => {}
                }
                if let Step::Read(c) | Step::Write(c) = s {
                    self.in_pass[c] = false;
                    self.replied[c] = false;
                }
            }
        }
        next.extend(t.ready.drain(..));
        if next.is_empty() {
            t.busy = false;
            t.pass.clear();
            return Step::Idle;
        }
        self.begin(g, next)
    }

    /// A pass of `pass` begins on thread g: its first step (Idle, asleep, if it is empty).
    fn begin(&mut self, g: usize, pass: Vec<Step>) -> Step {
        if pass.is_empty() {
            self.threads[g].busy = false;
            return Step::Idle;
        }
        if self.rearm == Rearm::Modify {
            for &s in &pass {
                if let Step::Read(c) | Step::Write(c) = s {
                    self.in_pass[c] = true;
                }
            }
        }
        let t = &mut self.threads[g];
        t.pass = pass;
        t.pos = 0;
        t.busy = true;
        t.pass[0]
    }

    /// The step thread g is running (Idle between passes).
    pub fn step_of(&self, g: usize) -> Step {
        let t = &self.threads[g];
        if t.busy {
            t.pass[t.pos]
        } else {
            Step::Idle
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readd_passes_take_steps_in_the_order_they_became_ready() {
        let mut ev = EventLoop::new(2, 4, 0.5, Rearm::Readd);
        // thread 0 owns clients 0 and 2
        assert_eq!(ev.start(0), Step::Write(0));
        assert_eq!(ev.done(0), Step::Write(2));
        assert_eq!(ev.done(0), Step::Idle);
        assert_eq!(ev.reply(2), Some(Step::Read(2)));
        assert_eq!(ev.reply(0), None); // mid-pass: joins the ready list
                                       // 2's write was re-armed after 0's reply came: the next pass reads 0 first
        assert_eq!(ev.done(0), Step::Read(0));
        assert_eq!(ev.done(0), Step::Write(2));
        // 0's write, re-armed during that pass, is the pass after
        assert_eq!(ev.done(0), Step::Write(0));
        assert_eq!(ev.done(0), Step::Idle);
        assert_eq!(ev.step_of(0), Step::Idle);
    }

    #[test]
    fn modify_passes_start_with_the_last_pass_connections_in_its_order() {
        let mut ev = EventLoop::new(2, 4, 0.5, Rearm::Modify);
        assert_eq!(ev.start(0), Step::Write(0));
        assert_eq!(ev.done(0), Step::Write(2));
        assert_eq!(ev.reply(0), None); // 0 is in the pass: read there in the next
                                       // 0 now readable at its place; 2 not (no reply yet): dropped from the list
        assert_eq!(ev.done(0), Step::Read(0));
        // 2 joins the list's tail
        assert_eq!(ev.reply(2), None);
        // the last pass's read is now a write, ahead of 2's reply that came meanwhile
        // (Readd would read 2 first: its reply came before 0 was re-armed)
        assert_eq!(ev.done(0), Step::Write(0));
        assert_eq!(ev.done(0), Step::Read(2));
        // 0's reply has not come: dropped; 2's read is now a write
        assert_eq!(ev.done(0), Step::Write(2));
        assert_eq!(ev.done(0), Step::Idle);
        // asleep, a reply wakes the thread to a pass of its own
        assert_eq!(ev.reply(0), Some(Step::Read(0)));
    }

    #[test]
    fn a_thread_without_clients_sleeps() {
        let mut ev = EventLoop::new(3, 2, 0.5, Rearm::Readd);
        assert_eq!(ev.start(2), Step::Idle);
        assert_eq!(ev.step_of(2), Step::Idle);
    }

    #[test]
    fn the_parts_split_the_work() {
        let ev = EventLoop::new(1, 1, 0.25, Rearm::Readd);
        assert_eq!((ev.read_part(1000), ev.write_part(1000)), (250, 750));
        assert_eq!((ev.read_part(1), ev.write_part(1)), (1, 1));
    }
}
