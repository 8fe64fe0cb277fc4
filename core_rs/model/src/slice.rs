//! Custom EEVDF slices (Linux 6.12+): a task's request size `se->slice` set through
//! `sched_setattr(sched_attr.sched_runtime)`, and the shortest slice of a queue that group
//! entities and RUN_TO_PARITY take from it.
//!
//! - syscalls.c `__setparam_fair`: sched_runtime ≠ 0 sets `custom_slice` and
//!   slice = clamp(sched_runtime, 0.1 ms, 100 ms); 0 goes back to base_slice. The kernel
//!   clamps silently; a scenario asking for a slice outside the range is refused instead, so
//!   that a typo does not turn into a different experiment. 6.6 – 6.11 have no custom slices
//!   (sched_runtime is ignored for SCHED_OTHER), so a scenario giving one needs 6.12+.
//! - fair.c `cfs_rq_min_slice`: min over the running entity (while queued) and the tree
//!   (delayed entities included), ~0 for an empty queue.
//! - `enqueue_task_fair` / `dequeue_entities` (6.12+): every group entity on the task's path
//!   takes the shortest slice of the queue it represents (`se->slice = slice; slice =
//!   cfs_rq_min_slice(cfs_rq)` walking up), a group entity newly enqueued also becomes
//!   `custom_slice` so placement keeps that slice.
//!
//! The kernel keeps the minimum in the tree's augmented data (`min_slice`, refreshed when the
//! tree changes); the model re-reads the queue, which is the same value except right after a
//! queued group entity's slice changed and before its tree path was touched again.

use crate::cfs_rq::{RqId, SeId};
use crate::error::{Result, SpecError};
use crate::node::Node;
use crate::spec::NodeSpec;

/// `NSEC_PER_MSEC / 10`: the shortest custom slice (syscalls.c).
pub const MIN_SLICE_NS: u64 = 100_000;
/// `NSEC_PER_MSEC * 100`: the longest custom slice.
pub const MAX_SLICE_NS: u64 = 100_000_000;

/// `[kernel] sched_runtime_ns` (workload → ns) names workloads, in range, on a release that
/// has custom slices.
pub fn check_slices(spec: &NodeSpec) -> Result<()> {
    for name in &spec.kernel.cpu_clock_readers {
        if !spec.workloads.iter().any(|w| w.name() == name) {
            return Err(SpecError::new(
                format!("workloads.{name}.reads_cpu_clock"),
                "no workload of that name",
            ));
        }
    }
    for (name, &ns) in &spec.kernel.sched_runtime_ns {
        let field = format!("workloads.{name}.sched_runtime_ns");
        if !spec.workloads.iter().any(|w| w.name() == name) {
            return Err(SpecError::new(field, "no workload of that name"));
        }
        if ns == 0 {
            continue; // sched_runtime = 0: base_slice, as without it
        }
        if !(MIN_SLICE_NS..=MAX_SLICE_NS).contains(&ns) {
            return Err(SpecError::new(
                field,
                format!(
                    "must be 0 (base_slice) or in [{MIN_SLICE_NS}, {MAX_SLICE_NS}] ns, the range sched_setattr clamps a slice to (got {ns})"
                ),
            ));
        }
        let eevdf = spec.kernel.scheduler == crate::spec::SchedulerKind::Eevdf;
        if !eevdf || !spec.kernel.features()?.custom_slices {
            return Err(SpecError::new(
                field,
                "custom slices need kernel.scheduler = \"eevdf\" and kernel.version 6.12 or later (before 6.12 sched_setattr ignores sched_runtime for SCHED_OTHER)",
            ));
        }
    }
    Ok(())
}

impl Node {
    /// `cfs_rq_min_slice`: the shortest slice queued on `rq` — over the tree, and the running
    /// entity when `with_curr` (set_next_entity takes the entity off the tree and clears curr
    /// before `set_protect_slice` reads it, so that read leaves the picked entity out).
    /// u64::MAX for nothing queued.
    pub(crate) fn min_slice(&self, rq: RqId, with_curr: bool) -> u64 {
        let r = &self.rqs[rq];
        let curr = r.curr.filter(|&c| with_curr && self.ses[c].on_rq);
        if !self.tun.custom_slices {
            // Every queued slice is base_slice.
            let any = curr.is_some() || !r.timeline.is_empty();
            return if any { self.tun.base_slice } else { u64::MAX };
        }
        let tree = r.timeline.iter().map(|&(_, s)| self.ses[s].slice);
        tree.chain(curr.map(|c| self.ses[c].slice)).min().unwrap_or(u64::MAX)
    }

    /// A task's slice from its workload's `sched_runtime_ns` (0 or absent: base_slice, reset at
    /// every placement).
    pub(crate) fn set_task_slice(&mut self, se: SeId, sched_runtime_ns: u64) {
        let s = &mut self.ses[se];
        s.custom_slice = sched_runtime_ns != 0;
        s.slice = if s.custom_slice {
            sched_runtime_ns
        } else {
            self.tun.base_slice
        };
    }

    /// A group entity on a task's path takes the shortest slice of the queue it represents
    /// (`se->slice = slice` in enqueue_task_fair / dequeue_entities); `newly_queued`: the
    /// first loop's `se->custom_slice = 1` before enqueue_entity places it.
    pub(crate) fn take_child_slice(&mut self, gse: SeId, newly_queued: bool) {
        let crate::cfs_rq::SeKind::Group(grq) = self.ses[gse].kind else {
            return;
        };
        let slice = self.min_slice(grq, true);
        if slice == u64::MAX {
            return; // an empty child queue (a throttled group's unthrottle walks from it)
        }
        let s = &mut self.ses[gse];
        s.slice = slice;
        if newly_queued {
            s.custom_slice = true;
        }
    }
}

impl Node {
    /// The slice state is one the kernel could be in (for `check_invariants`): a task's slice
    /// is its custom one (in range) or base_slice (0 before its first placement); a group
    /// entity's is one of the slices its tasks can have; a running entity's protection never
    /// reaches past its deadline (set_protect_slice, update_protect_slice and
    /// cancel_protect_slice all keep vprot ≤ deadline; a renewal only moves the deadline on).
    pub(crate) fn check_slices(&self) -> std::result::Result<(), String> {
        if !self.eevdf() {
            return Ok(());
        }
        let base = self.tun.base_slice;
        let mut custom: Vec<u64> = vec![];
        for (i, s) in self.ses.iter().enumerate() {
            if let crate::cfs_rq::SeKind::Task(t) = s.kind {
                if s.custom_slice {
                    if !(MIN_SLICE_NS..=MAX_SLICE_NS).contains(&s.slice) {
                        return Err(format!("task {t}: custom slice {} out of range", s.slice));
                    }
                    custom.push(s.slice);
                } else if s.slice != 0 && s.slice != base {
                    return Err(format!("se {i} (task {t}): slice {} but no custom slice", s.slice));
                }
            }
        }
        for (i, s) in self.ses.iter().enumerate() {
            let group = matches!(s.kind, crate::cfs_rq::SeKind::Group(_));
            if group && s.slice != 0 && s.slice != base && !custom.contains(&s.slice) {
                return Err(format!("group se {i}: slice {} is no task's slice", s.slice));
            }
            let running = self.rqs[s.parent_rq].curr == Some(i) && s.on_rq;
            if running && s.vprot > s.deadline {
                return Err(format!("se {i}: vprot {} past its deadline {}", s.vprot, s.deadline));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::TaskState;
    use crate::workload::TaskId;
    use serde_json::json;

    const BASE: u64 = 700_000; // one CPU: factor 1
    const SHORT: u64 = 300_000;

    /// One CPU at HZ 1000, cgroup `a` with hog `h` (base slice) and hog `s` (0.3 ms slice),
    /// and with `b` a hog of its own in cgroup `b`. Tasks: h = 0, s = 1 (b's = 2).
    fn node(version: &str, features: serde_json::Value, b: bool) -> Node {
        let mut cgroups = vec![json!({"name": "a"})];
        let mut workloads = vec![
            json!({"kind": "hog", "name": "h", "cgroup": "a", "threads": 1}),
            json!({"kind": "hog", "name": "s", "cgroup": "a", "threads": 1}),
        ];
        if b {
            cgroups.push(json!({"name": "b"}));
            workloads.push(json!({"kind": "hog", "name": "hb", "cgroup": "b", "threads": 1}));
        }
        let spec = json!({"topology": {"cores_per_socket": 1},
            "kernel": {"scheduler": "eevdf", "version": version, "hz": 1000,
                       "sched_features": features, "sched_runtime_ns": {"s": SHORT}},
            "cgroups": cgroups, "workloads": workloads});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        n.run_until(0).unwrap();
        n
    }

    /// Lengths (ns) of the run segments on CPU 0 of two hogs `r` in one cgroup on one CPU at
    /// HZ 250 (base slice 0.7 ms), the hogs reading their CPU clock or not, seen in 10 µs steps.
    fn segments(readers: bool) -> Vec<u64> {
        let spec = json!({"topology": {"cores_per_socket": 1},
            "kernel": {"scheduler": "eevdf", "version": "6.18.44", "hz": 250,
                       "cpu_clock_readers": if readers { vec!["r"] } else { vec![] }},
            "cgroups": [{"name": "a"}],
            "workloads": [{"kind": "hog", "name": "r", "cgroup": "a", "threads": 2}]});
        let mut n = Node::from_json(&spec.to_string()).unwrap();
        let (mut last, mut since, mut out) = (None, 0, Vec::new());
        for step in 0..10_000u64 {
            let t = step * 10_000;
            n.run_until(t).unwrap();
            let c = n.cpus[0].curr;
            if c != last {
                if last.is_some() && since > 0 {
                    out.push(t - since);
                }
                (last, since) = (c, t);
            }
        }
        out
    }

    #[test]
    fn a_task_that_reads_its_cpu_clock_is_preempted_when_its_slice_ends() {
        // task_sched_runtime() runs update_curr at each clock_gettime(CLOCK_THREAD_CPUTIME_ID):
        // the protection (to the deadline, a base slice) is seen to end when it ends, so
        // two such hogs alternate every 0.7 ms; hogs that never look are preempted at the
        // first tick after it, every 4 ms. On this host (6.18.44, HZ 250, base slice 1.4 ms)
        // experiments/pingpong.py's sides, whose burn loop reads time.thread_time, were
        // switched out after 1.398 – 1.402 ms (docs/model.md, "Slices that end exactly").
        let median = |mut v: Vec<u64>| {
            v.sort_unstable();
            v[v.len() / 2]
        };
        let exact = median(segments(true));
        assert!(
            (690_000..=710_000).contains(&exact),
            "readers: median run {exact} ns, not the 0.7 ms slice"
        );
        let ticked = median(segments(false));
        assert!(
            (3_990_000..=4_010_000).contains(&ticked),
            "others: median run {ticked} ns, not a 4 ms tick"
        );
    }

    #[test]
    fn a_reader_kept_by_the_pick_looks_again_when_the_pick_would_change() {
        // Once a reader's protection is over and the pick keeps it, each read reschedules and
        // each pick returns it until it turns ineligible or an entity with an earlier
        // deadline turns eligible: `v_until_pick_changes` is that distance (it planned a look
        // every nanosecond before: the randomised invariant test ran 180x slower). Checked
        // against the pick itself, curr's vruntime moved by x − 1 and by x, at every 37 µs of
        // 40 ms of h and s (and b) in both releases that protect differently.
        let mut checked = 0;
        for (version, b) in [("6.18", false), ("6.18", true), ("6.12", true)] {
            let mut n = node(version, json!({"DELAY_DEQUEUE": false}), b);
            for k in 1..1100u64 {
                n.run_until(k * 37_000).unwrap();
                n.update_curr(0);
                let Some(t) = n.cpus[0].curr else { continue };
                let path: Vec<_> = std::iter::successors(Some(n.tasks[t].se), |&e| n.parent_se(e)).collect();
                for g in path {
                    let rq = n.ses[g].parent_rq;
                    if n.rqs[rq].nr_running < 2 || n.pick_eevdf(rq, false) != Some(g) {
                        continue;
                    }
                    let x = n.v_until_pick_changes(rq, g);
                    assert!(x > 0, "{version} t={}: the pick keeps curr but x = {x}", n.now);
                    if x >= i64::MAX / 4 {
                        continue;
                    }
                    let v = n.ses[g].vruntime;
                    n.ses[g].vruntime = v + x - 1;
                    assert_eq!(
                        n.pick_eevdf(rq, false),
                        Some(g),
                        "{version} t={}: changed before x = {x}",
                        n.now
                    );
                    n.ses[g].vruntime = v + x;
                    assert_ne!(
                        n.pick_eevdf(rq, false),
                        Some(g),
                        "{version} t={}: unchanged at x = {x}",
                        n.now
                    );
                    n.ses[g].vruntime = v;
                    checked += 1;
                }
            }
        }
        assert!(checked > 500, "only {checked} states checked");
    }

    #[test]
    fn a_wakeup_renews_only_the_levels_on_the_wakees_path() {
        // enqueue_task_fair runs update_curr on the wakee's queues only (enqueue_entity, then
        // update_cfs_group's reweight above it): a wakeup in group b reaches the root queue,
        // where a's entity runs, but not a's own queue, where the running task's used-up
        // slice waits for the tick; a wakeup in a renews it there.
        let mut n = node("6.18", json!({"DELAY_DEQUEUE": false}), true);
        n.run_until(2_000_000).unwrap();
        // run until a task of a (h or s) is on the CPU
        let mut t = 2_000_000;
        while n.cpus[0].curr.is_none_or(|c| c == 2) {
            t += 50_000;
            n.run_until(t).unwrap();
        }
        n.update_curr(0);
        let c = n.cpus[0].curr.unwrap();
        let (se, ga) = (n.tasks[c].se, n.parent_se(n.tasks[c].se).unwrap());
        // its slice in a's queue used up, unseen (the tick has not come)
        n.ses[se].deadline = n.ses[se].vruntime - 1;
        let used_up = n.ses[se].deadline;
        let ga_deadline = n.ses[ga].deadline;
        n.eevdf_renew_for_wakeup(0, 2); // hb, in b
        assert_eq!(n.ses[se].deadline, used_up, "a wakeup in b renewed a's own queue");
        // the root level was looked at: a's entity keeps or renews its deadline as update_curr would
        assert!(n.ses[ga].deadline >= ga_deadline);
        let other = 1 - c; // the other task of a
        n.eevdf_renew_for_wakeup(0, other);
        assert_eq!(
            n.ses[se].deadline,
            n.ses[se].vruntime + n.vslice(se),
            "a wakeup in a renews it"
        );
    }

    /// `t` blocks (not delayed: DELAY_DEQUEUE off in these tests) and the CPU picks again.
    fn block(n: &mut Node, t: TaskId) {
        n.dequeue_task(t, true);
        n.tasks[t].state = TaskState::Sleeping;
        n.schedule(0);
    }

    /// s asleep, h running alone and just picked (vprot = its deadline): then s wakes with
    /// `vlag` as its saved lag. Returns whether s preempted, and h's entity.
    fn wake_short_beside_protected_hog(version: &str, features: serde_json::Value, vlag: i64) -> (Node, bool) {
        let mut n = node(version, features, false);
        n.run_until(3_000_000).unwrap();
        let (h, s) = (0, 1);
        // s sleeps; h sleeps too and wakes alone, so it is picked with nothing else queued
        block(&mut n, s);
        block(&mut n, h);
        n.try_to_wake_up(h);
        assert_eq!(n.cpus[0].curr, Some(h));
        let sh = n.tasks[h].se;
        // picked alone: min slice of the others is ~0, so the whole deadline is protected
        assert_eq!(n.ses[sh].vprot, n.ses[sh].deadline);
        n.run_until(n.now + 100_000).unwrap();
        n.update_curr(0);
        n.ses[n.tasks[s].se].vlag = vlag;
        n.try_to_wake_up(s);
        let preempted = n.cpus[0].curr == Some(s);
        (n, preempted)
    }

    #[test]
    fn a_short_slice_waker_preempts_a_protected_hog_only_with_preempt_short() {
        // s wakes with zero lag: place_entity puts it at V (= h's vruntime, h alone), deadline
        // V + 0.3 ms; h's deadline is further (picked ≤ 0.7 ms − 0.1 ms ago... ≥ v + 0.1 ms)
        // and protected. PREEMPT_SHORT (shorter slice): the pick ignores h's protection and s
        // wins; without it RUN_TO_PARITY keeps h. 6.12's do_preempt_short: s eligible and its
        // deadline earlier → cancel, then the (protected) pick finds h unprotected.
        for version in ["6.12", "6.18"] {
            for (on, want) in [(true, true), (false, false)] {
                let f = json!({"PREEMPT_SHORT": on, "DELAY_DEQUEUE": false});
                let (n, preempted) = wake_short_beside_protected_hog(version, f, 0);
                let (sh, ss) = (n.tasks[0].se, n.tasks[1].se);
                assert_eq!(preempted, want, "{version} PREEMPT_SHORT={on}");
                if !preempted {
                    // still protected, s queued with the hand-worked placement
                    assert!(n.ses[sh].vruntime < n.ses[sh].vprot);
                    assert_eq!(n.ses[ss].vruntime, n.ses[sh].vruntime);
                    assert_eq!(n.ses[ss].deadline, n.ses[ss].vruntime + SHORT as i64);
                    assert!(n.ses[ss].deadline < n.ses[sh].deadline);
                }
            }
        }
    }

    #[test]
    fn a_short_waker_that_loses_cuts_the_protection_to_the_shortest_slice() {
        // s wakes ineligible (saved lag −0.2 ms: v_s = V + 0.2 ms × (W + w)/W = V + 0.4 ms).
        // 6.18: the unprotected pick still takes h; RUN_TO_PARITY then sets
        // vprot = min(vprot, v_h + cfs_rq_min_slice = 0.3 ms) (update_protect_slice).
        // 6.12: do_preempt_short needs an eligible waker: h keeps its whole deadline.
        let f = json!({"DELAY_DEQUEUE": false});
        let (n, preempted) = wake_short_beside_protected_hog("6.18", f.clone(), -200_000);
        let (sh, ss) = (n.tasks[0].se, n.tasks[1].se);
        assert!(!preempted);
        let v_h = n.ses[sh].vruntime;
        assert_eq!(n.ses[ss].vruntime, v_h + 400_000);
        assert_eq!(n.ses[sh].vprot, n.ses[sh].deadline.min(v_h + SHORT as i64));
        assert!(n.ses[sh].vprot < n.ses[sh].deadline, "the cut must bind here");
        let (n, preempted) = wake_short_beside_protected_hog("6.12", f, -200_000);
        let sh = n.tasks[0].se;
        assert!(!preempted);
        assert_eq!(n.ses[sh].vprot, n.ses[sh].deadline);
    }

    #[test]
    fn run_to_parity_protects_only_the_shortest_slice_queued() {
        // Both runnable. 6.17+ set_protect_slice at h's pick: min(0.7 ms, s's 0.3 ms) ≠ h's
        // slice → vprot = min(deadline, v + 0.3 ms); at s's pick its own slice is the shortest
        // → vprot = deadline. 6.12: always the deadline. Every pick of 40 ms checked, and in
        // 6.18 h never runs past its protection by more than the tick that notices it.
        for version in ["6.18", "6.12"] {
            let mut n = node(version, json!({}), false);
            let (sh, ss) = (n.tasks[0].se, n.tasks[1].se);
            let (mut picks_h, mut picks_s, mut longest_h) = (0, 0, 0u64);
            for k in 1..=4000u64 {
                n.run_until(k * 10_000).unwrap();
                let Some(t) = n.cpus[0].curr else { continue };
                let se = n.tasks[t].se;
                let s = &n.ses[se];
                if t == 0 {
                    longest_h = longest_h.max(s.sum_exec - s.prev_sum_exec);
                }
                if !(s.prev_sum_exec == s.sum_exec && n.tasks[t].last_ran == n.now) {
                    continue;
                }
                let want = if se == sh && version == "6.18" {
                    s.deadline.min(s.vruntime + SHORT as i64)
                } else {
                    s.deadline
                };
                assert_eq!(s.vprot, want, "{version} task {t}");
                *(if se == sh { &mut picks_h } else { &mut picks_s }) += 1;
            }
            assert!(picks_h > 5 && picks_s > 5, "{version}: {picks_h} {picks_s}");
            assert_eq!(n.ses[ss].slice, SHORT);
            assert_eq!(n.ses[sh].slice, BASE);
            // h's runs: 6.18 ends them at the first 1 ms tick past 0.3 ms; 6.12 at the tick
            // where its 0.7 ms slice is used up (tick-checked: up to 1 ms either way).
            assert!(
                longest_h <= 1_000_000 + 300_000,
                "{version}: h ran {longest_h} ns at once"
            );
        }
    }

    #[test]
    fn a_cancelled_protection_in_6_12_reschedules_at_the_tick_curr_turns_ineligible() {
        // did_preempt_short (6.12 update_curr): PREEMPT_SHORT, protection gone (the stash is
        // not the deadline) and curr not eligible → resched. Two nice-0 entities: curr at
        // v_c behind the other at v_o is eligible until v_c > V = (v_c + v_o)/2, i.e. after
        // v_o − v_c + 1 ns more of running; the next tick after that (or the deadline's, if
        // earlier) is when the model plans to look.
        let mut n = node("6.12", json!({"DELAY_DEQUEUE": false}), false);
        let tick = n.tun.tick_ns;
        for k in 1..2000u64 {
            n.run_until(k * 37_000).unwrap();
            n.update_curr(0);
            let c = n.cpus[0].curr.unwrap();
            let (sc, so) = (n.tasks[c].se, n.tasks[1 - c].se);
            let (vc, vo) = (n.ses[sc].vruntime, n.ses[so].vruntime);
            let rq = n.ses[sc].parent_rq;
            if vo <= vc || n.ses[sc].deadline <= vc {
                continue;
            }
            let (to_ineligible, to_deadline) = ((vo - vc + 1) as u64, (n.ses[sc].deadline - vc) as u64);
            n.ses[sc].vprot = i64::MIN; // cancelled
            assert!(!n.protection_over(rq, sc), "eligible: not yet");
            assert_eq!(n.v_until_protection_over(rq, sc), vo - vc + 1);
            let first = to_ineligible.min(to_deadline);
            assert_eq!(n.eevdf_next_tick(0), (n.now + first).div_ceil(tick) * tick);
            // with the stash intact (protected to the deadline) only the deadline counts
            n.ses[sc].vprot = n.ses[sc].deadline;
            assert_eq!(n.eevdf_next_tick(0), (n.now + to_deadline).div_ceil(tick) * tick);
            return;
        }
        panic!("never found curr behind the other");
    }

    #[test]
    fn a_group_entity_takes_the_shortest_slice_of_its_queue() {
        // enqueue_task_fair / dequeue_entities (6.12+): a's entity on the root queue has the
        // min slice of a's queue: 0.3 ms while s is queued there, base when only h is; b's
        // entity stays base. A newly enqueued group entity is custom_slice (kept at placement).
        let mut n = node("6.18", json!({"DELAY_DEQUEUE": false}), true);
        n.run_until(5_000_000).unwrap();
        let rq_a = n.ses[n.tasks[0].se].parent_rq;
        let rq_b = n.ses[n.tasks[2].se].parent_rq;
        let (ga, gb) = (n.rqs[rq_a].gse.unwrap(), n.rqs[rq_b].gse.unwrap());
        assert_eq!(n.min_slice(rq_a, true), SHORT);
        assert_eq!((n.ses[ga].slice, n.ses[gb].slice), (SHORT, BASE));
        assert!(n.ses[ga].custom_slice);
        if n.cpus[0].curr == Some(1) {
            n.dequeue_task(1, true);
            n.tasks[1].state = TaskState::Sleeping;
            n.schedule(0);
        } else {
            block(&mut n, 1);
        }
        assert_eq!(n.min_slice(rq_a, true), BASE);
        assert_eq!(n.ses[ga].slice, BASE, "s left: a's entity is back to base");
        n.try_to_wake_up(1);
        assert_eq!(n.ses[ga].slice, SHORT);
        // a's deadline on the root queue follows: renewed slices of a are 0.3 ms long
        for k in 1..200u64 {
            n.run_until(5_000_000 + k * 50_000).unwrap();
            n.check_invariants().unwrap();
        }
        let vs = n.vslice(ga);
        assert_eq!(vs, crate::cfs::calc_delta_fair(SHORT, n.ses[ga].weight));
    }

    fn spec(version: &str, ns: u64) -> serde_json::Value {
        json!({"topology": {"cores_per_socket": 1},
               "kernel": {"scheduler": "eevdf", "version": version,
                          "sched_runtime_ns": {"svc": ns}},
               "cgroups": [{"name": "a"}],
               "workloads": [{"kind": "hog", "name": "svc", "cgroup": "a", "threads": 1}]})
    }

    #[test]
    fn out_of_range_or_too_old_slices_are_refused_naming_the_field() {
        for (version, ns, ok) in [
            ("6.12", 100_000, true),
            ("6.18", 100_000_000, true),
            ("6.6", 0, true),
            ("6.12", 99_999, false),
            ("6.12", 100_000_001, false),
            ("6.6", 300_000, false),
            ("6.11", 300_000, false),
        ] {
            let r = Node::from_json(&spec(version, ns).to_string());
            match (r, ok) {
                (Ok(_), true) => {}
                (Err(e), false) => assert_eq!(e.field, "workloads.svc.sched_runtime_ns", "{version} {ns}"),
                (r, _) => panic!("{version} {ns}: {:?}", r.err()),
            }
        }
        let mut s = spec("6.12", 300_000);
        s["kernel"]["sched_runtime_ns"] = json!({"nope": 300_000});
        let e = Node::from_json(&s.to_string())
            .err()
            .expect("an unknown workload is refused");
        assert_eq!(e.field, "workloads.nope.sched_runtime_ns");
    }
}
