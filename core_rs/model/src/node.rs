//! One simulated node: its CPUs, cgroup tree, tasks, workloads and the event loop that ties
//! them together. The fair-class logic lives in `cfs.rs`, placement and balancing in
//! `balance.rs`; this file owns the state and the loop.

use crate::cfs_rq::{CfsRq, RqId, Se, SeId, SeKind};
use crate::cgroup::{CgId, Cgroup, ROOT};
use crate::dist::Dist;
use crate::error::{Result, SpecError};
use crate::events::{Event, EventQueue, Ns};
use crate::rng::Rng;
use crate::spec::{check_knob, NodeSpec, WorkloadSpec};
use crate::stats::{Series, ServiceStats};
use crate::topology::{CpuId, Topology};
use crate::tunables::{Tunables, NICE_0_LOAD, WEIGHT_IDLEPRIO};
use crate::workload::{Bursty, Client, ClosedLoop, Effects, Hog, Next, OpenLoop, TaskId, Workload, START};

/// A think time that is there at all (a constant 0 is none).
fn thinking(think: &Option<Dist>) -> Option<Dist> {
    match think {
        Some(Dist::Constant { value_ns: 0 }) | None => None,
        Some(d) => Some(d.clone()),
    }
}

/// Fixed-point speed: SPEED_ONE is a CPU running at full speed.
/// What a run may keep of its measurements: its sampled series, and its latency records,
/// each at most 1 GiB (Python copies them once more into numpy arrays). A run that would
/// pass it stops with an error naming why, rather than the process dying on an allocation.
pub const MEMORY_BUDGET: u64 = 1 << 30;
/// A completed request's latency and completion time.
const RECORD_BYTES: u64 = 16;
/// The random stream id (+ workload index) that draws a pool's connection owners: apart from
/// the node's (0), the workloads' (1, 2, ...) and the idle exits' (cpuidle.rs, 1 << 40).
const POOL_OWNERS_STREAM: u64 = 1 << 41;
/// How often (in events) the run checks its latency records against MEMORY_BUDGET.
const BUDGET_CHECK_EVENTS: u64 = 1 << 16;

pub const SPEED_SHIFT: u32 = 20;
pub const SPEED_ONE: u64 = 1 << SPEED_SHIFT;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Never started (a workload's thread before its fork).
    New,
    Sleeping,
    /// Queued on a CPU, waiting.
    Runnable,
    Running,
}

#[derive(Debug, Clone)]
pub struct Task {
    pub cg: CgId,
    pub se: SeId,
    /// The CPU it runs or is queued on, or last ran on.
    pub cpu: CpuId,
    pub state: TaskState,
    /// CPU work left in the current phase, in ns at speed 1.0.
    pub remaining: u64,
    /// SCHED_IDLE policy (openEuler switches qos_level=-1 tasks to it).
    pub idle_policy: bool,
    /// When it last became runnable without running (for run-queue wait).
    pub wait_start: Ns,
    /// It became runnable by a wakeup and has not run since (its wait goes to `runqlat`).
    pub woken: bool,
    /// When it last got a CPU.
    pub last_ran: Ns,
    /// The kernel's `se.exec_start`: update_curr moves it to the clock while the task runs,
    /// so off the CPU it says when the task last ran — the clock `task_hot` measures the
    /// migration cost from (lb_groups.rs `held_hot`).
    pub exec_start: Ns,
    /// When it was last switched in (a pick of the task already running is no switch): the
    /// start of its run segment (stats.rs `run_preempted`, `run_blocked`).
    pub switched_in: Ns,
    pub wl: usize,
    pub slot: u32,
    /// Position in its CPU's `tasks` list while runnable or running.
    pub pos: usize,
    /// NUMA node its memory lives on (set where it first runs, within cpuset.mems).
    pub home_node: Option<usize>,
    /// Killed (cgroup.kill, the OOM killer): it never runs again.
    pub dead: bool,
    /// Sleeping on memory.high (a memory stall for PSI).
    pub memstall: bool,
    /// What it has woken (`last_wakee`, `wakee_flips`, `wakee_flip_decay_ts`) for `wake_wide`
    /// (balance.rs).
    pub wakee: crate::balance::Wakee,
    /// It reads its own CPU clock while it computes (clock_gettime(CLOCK_THREAD_CPUTIME_ID)
    /// → `task_sched_runtime` → `update_curr`): its queue sees the end of its slice or
    /// protection when it happens, not at the next tick (slice.rs).
    pub reads_cpu_clock: bool,
    /// CPU it owes for wakeups it made across CPUs just before it blocked
    /// (remote_wakeup.rs): added to its work when it is next woken.
    pub owed: u64,
}

#[derive(Debug, Clone)]
pub struct Cpu {
    pub curr: Option<TaskId>,
    /// Time up to which the running task's progress and vruntime are settled.
    pub clock: Ns,
    pub speed: u64,
    /// Work done below one unit (2^-SPEED_SHIFT ns) by the running task: kept so that
    /// progress does not depend on how often it is settled.
    pub progress_rem: u64,
    /// An observer (`observe_curr`) settled time since the last `update_curr`, which still
    /// owes the min_vruntime update and the silo refill for it.
    pub observed: bool,
    /// The running task is about to block after waking others (`cpu_event`): a wakeup here
    /// only marks need_resched.
    pub blocking: bool,
    pub gen: u64,
    /// Time of the pending Cpu event for `gen` (Ns::MAX if none).
    pub next_event: Ns,
    /// The tick at which the running task's slice is next checked (Ns::MAX if none).
    pub resched_at: Ns,
    /// Runnable or running tasks on this CPU, in no particular order.
    pub tasks: Vec<TaskId>,
    /// cfs_rqs throttled on this CPU because online work is runnable (qos_level = -1).
    pub qos_throttled: Vec<RqId>,
    /// Offline cfs_rqs kept off this CPU because its SMT sibling runs online work.
    pub expelled: Vec<RqId>,
    pub balance_gen: u64,
    /// Next periodic balance per domain level of this CPU.
    pub next_balance: Vec<Ns>,
    /// `sd->last_balance` per domain level: when this CPU last balanced it (the next is due
    /// an interval later, an idle CPU's interval being the short one).
    pub last_balance: Vec<Ns>,
    /// `sd->nr_balance_failed` per domain level of this CPU (lb_groups.rs).
    pub nr_balance_failed: Vec<u32>,
    pub balance_armed: bool,
    /// `idle_for_wake` and `truly_idle` as last counted into `Node::llc_idle` (balance.rs).
    pub idle_counted: crate::balance::IdleFlags,
    /// The root cfs_rq's PELT util_avg (`cpu_util_cfs`, sis_util.rs).
    pub util: crate::sis_util::CpuUtil,
    /// In, out of or leaving its idle state (cpuidle.rs).
    pub idle_state: crate::cpuidle::IdleState,
    /// Taken away by the hypervisor (steal.rs): its task makes no progress, is charged
    /// nothing, and a schedule waits.
    pub stalled: bool,
}

pub struct Node {
    pub topo: Topology,
    pub tun: Tunables,
    pub now: Ns,
    pub cgroups: Vec<Cgroup>,
    pub rqs: Vec<CfsRq>,
    pub ses: Vec<Se>,
    pub tasks: Vec<Task>,
    pub cpus: Vec<Cpu>,
    pub workloads: Vec<Workload>,
    pub workload_names: Vec<String>,
    /// Workloads whose tasks were killed (`cgroup.kill`): their timers are ignored.
    pub killed: Vec<bool>,
    pub services: Vec<ServiceStats>,
    pub service_names: Vec<String>,
    pub queue: EventQueue,
    pub events: u64,
    /// What the run may keep of its measurements (MEMORY_BUDGET; smaller in tests).
    pub memory_budget: u64,
    /// ns each CPU ran each (leaf) cgroup's tasks: cpu * ncgroups + cg.
    pub cpu_busy: Vec<u64>,
    pub series: Series,
    pub sample_interval: Ns,
    pub idle_kick_pending: bool,
    /// PELT shares: when idle CPUs' blocked averages are next decayed (`nohz.next_blocked`).
    pub next_blocked: Ns,
    /// `nohz.next_balance`: before this an LLC with several busy CPUs does not kick the NOHZ
    /// balancer (lb_groups.rs).
    pub nohz_next_balance: Ns,
    /// The task whose finished work is waking others, while its effects apply (balance.rs
    /// `wake_affine`): None for wakeups from timers, IO and the node.
    pub waker: Option<crate::balance::Waker>,
    /// The message the task being woken receives (workload.rs `Sent`), while it is placed:
    /// `try_to_wake_up` charges it once it knows the CPU (`charge_crossing`).
    pub crossing: Option<crate::workload::Sent>,
    /// CPUs with nothing running.
    pub nr_idle_cpus: usize,
    /// Per LLC (socket): how many of its CPUs are idle for placement (balance.rs).
    pub llc_idle: Vec<crate::balance::LlcIdle>,
    /// Fixed-point speeds without a contention profile (cfs.rs `speed_table`).
    pub speeds: [u64; 4],
    /// PSI state per (cgroup, CPU): cgroup * ncpus + cpu.
    pub psi_cpu: Vec<crate::psi::PsiCpu>,
    /// Time of the last PSI average update.
    pub psi_last: Ns,
    /// Optional trace of (time, cpu, nr_running) at every change, for checks in tests.
    pub trace: Option<Vec<(Ns, CpuId, u32)>>,
    /// Optional trace of (time, cpu, running task) at every switch, for checks in tests.
    pub run_trace: Option<Vec<(Ns, CpuId, Option<TaskId>)>>,
    /// The workloads' effects buffer, kept between events; boxed so that taking it out for
    /// an event and putting it back moves a pointer, not the buffer's nine `Vec`s.
    pub(crate) eff: Option<Box<Effects>>,
    /// `detach_tasks`' candidates, kept between balances (lb_groups.rs): no allocation per pass.
    pub(crate) lb_cands: Vec<TaskId>,
    /// Memory cgroups (node_memory.rs), when the spec gives the node's memory.
    pub memory: Option<crate::memcg::Memory>,
    /// Processes (tasks) each workload lost to the OOM killer.
    pub oom_kills: Vec<u64>,
    /// The block device and the egress link (node_io.rs), when the spec gives them.
    pub disk: Option<crate::disk::Disk>,
    pub net: Option<crate::net::Net>,
    /// Clock, resctrl, perf counters and (with profiles) LLC / memory contention.
    pub hw: crate::contention::Hardware,
    /// The CPUs' idle state and its exit latencies (cpuidle.rs); None: none.
    pub cpuidle: Option<crate::cpuidle::Cpuidle>,
    /// What a wakeup across CPUs costs its ends (remote_wakeup.rs); None: nothing.
    pub remote_wakeup: Option<crate::remote_wakeup::RemoteWakeupSpec>,
    /// The stalls the hypervisor makes (steal.rs); None: none.
    pub steal: Option<crate::steal::Steal>,
    /// NI_RANDOM's die and counts (newidle.rs); None: the feature is off.
    pub newidle: Option<crate::newidle::Newidle>,
}

impl Node {
    pub fn from_json(text: &str) -> Result<Node> {
        Node::new(&NodeSpec::from_json(text)?)
    }

    pub fn new(spec: &NodeSpec) -> Result<Node> {
        spec.validate()?;
        let topo = Topology::build(&spec.topology)?;
        let ncpus = topo.ncpus;
        let tun = Tunables::new(&spec.kernel, ncpus);
        let names: Vec<String> = spec.workloads.iter().map(|w| w.name().to_string()).collect();
        let hw = crate::contention::Hardware::new(
            &spec.hardware,
            &topo,
            spec.topology.cores_per_socket,
            &names,
            tun.tick_ns,
        );
        let nnodes = topo.nnodes;
        let mut cgroups = vec![Cgroup::new(String::new(), None, 1024, false, 0, ncpus, nnodes)];
        for c in &spec.cgroups {
            let parent = cgroups.iter().position(|g| g.name == c.parent).unwrap_or(ROOT);
            let id = cgroups.len();
            cgroups[parent].children.push(id);
            // An idle group's shares read WEIGHT_IDLEPRIO (sched_group_set_idle).
            let shares = if c.idle == 1 { 3 } else { c.shares };
            let mut g = Cgroup::new(
                c.name.clone(),
                Some(parent),
                shares,
                c.idle == 1,
                c.qos_level,
                ncpus,
                nnodes,
            );
            g.depth = cgroups[parent].depth + 1;
            cgroups.push(g);
        }
        // Autogroups after the scenario's cgroups (whose ids are their index + 1 throughout).
        let mut placement: Vec<Option<CgId>> = vec![None; spec.workloads.len()];
        for (i, session) in crate::autogroup::sessions(spec).into_iter().enumerate() {
            let Some(session) = session else { continue };
            let name = crate::autogroup::group_name(&session);
            let id = match cgroups.iter().position(|g| g.autogroup && g.name == name) {
                Some(id) => id,
                None => {
                    let mut g = Cgroup::new(
                        name,
                        Some(ROOT),
                        crate::autogroup::AUTOGROUP_SHARES,
                        false,
                        0,
                        ncpus,
                        nnodes,
                    );
                    g.depth = 1;
                    g.autogroup = true;
                    let id = cgroups.len();
                    cgroups[ROOT].children.push(id);
                    cgroups.push(g);
                    id
                }
            };
            placement[i] = Some(id);
        }
        let ncg = cgroups.len();
        let mut rqs = Vec::with_capacity(ncg * ncpus);
        let mut ses = Vec::new();
        for (cg, g) in cgroups.iter().enumerate() {
            for cpu in 0..ncpus {
                let gse = if cg == ROOT {
                    None
                } else {
                    let parent_rq = g.parent.unwrap() * ncpus + cpu;
                    ses.push(Se::new(SeKind::Group(cg * ncpus + cpu), parent_rq, NICE_0_LOAD));
                    Some(ses.len() - 1)
                };
                rqs.push(CfsRq::new(
                    cg,
                    cpu,
                    gse,
                    tun.scheduler == crate::spec::SchedulerKind::Eevdf,
                ));
            }
        }
        let domains_per_cpu: Vec<usize> = topo.domains.iter().map(|d| d.len()).collect();
        let cpus = (0..ncpus)
            .map(|c| Cpu {
                curr: None,
                clock: 0,
                speed: SPEED_ONE,
                progress_rem: 0,
                observed: false,
                blocking: false,
                gen: 0,
                next_event: Ns::MAX,
                resched_at: Ns::MAX,
                tasks: vec![],
                qos_throttled: vec![],
                expelled: vec![],
                balance_gen: 0,
                next_balance: vec![0; domains_per_cpu[c]],
                last_balance: vec![0; domains_per_cpu[c]],
                nr_balance_failed: vec![0; domains_per_cpu[c]],
                balance_armed: false,
                idle_counted: crate::balance::IdleFlags::BOTH,
                util: crate::sis_util::CpuUtil::default(),
                // idle at the start: in the idle state, if the node has one
                idle_state: if spec.cpuidle.is_some() {
                    crate::cpuidle::IdleState::Halted(0)
                } else {
                    crate::cpuidle::IdleState::Awake
                },
                stalled: false,
            })
            .collect();
        let llc_idle = crate::balance::LlcIdle::all_idle(&topo);
        let speeds = Node::speed_table(&topo);
        let mut node = Node {
            topo,
            tun,
            now: 0,
            cgroups,
            rqs,
            ses,
            tasks: vec![],
            cpus,
            workloads: vec![],
            workload_names: vec![],
            killed: vec![],
            services: vec![],
            service_names: vec![],
            queue: EventQueue::with_cpus(ncpus),
            events: 0,
            memory_budget: MEMORY_BUDGET,
            cpu_busy: vec![0; ncpus * ncg],
            series: Series::default(),
            sample_interval: spec.sample_interval_ns,
            idle_kick_pending: false,
            next_blocked: 0,
            nohz_next_balance: 0,
            waker: None,
            crossing: None,
            nr_idle_cpus: ncpus,
            llc_idle,
            speeds,
            psi_cpu: vec![Default::default(); ncpus * ncg],
            psi_last: 0,
            trace: None,
            run_trace: None,
            eff: Some(Box::default()),
            lb_cands: vec![],
            memory: None,
            oom_kills: vec![],
            disk: None,
            net: None,
            hw,
            cpuidle: spec
                .cpuidle
                .as_ref()
                .map(|c| crate::cpuidle::Cpuidle::new(c, spec.seed)),
            remote_wakeup: spec.remote_wakeup,
            steal: spec
                .steal
                .as_ref()
                .map(|s| crate::steal::Steal::new(s, spec.seed, ncpus)),
            newidle: None,
        };
        if node.tun.feat.ni_random {
            node.newidle = Some(crate::newidle::Newidle::new(
                spec.seed,
                node.topo.domains.iter().map(|d| d.len()),
            ));
        }
        // Each group's CFS period timer phase (bandwidth.rs `start_cfs_bandwidth`): pinned, or
        // drawn for every group in creation order from stream 0, the node's own (workloads use
        // 1..), so a quota on one group does not move another's phase.
        let mut phases = Rng::stream(spec.seed, 0);
        for g in &mut node.cgroups[1..] {
            g.bw.origin = spec.kernel.cfs_period_phase_ns.unwrap_or_else(|| phases.next_u64());
        }
        node.init_memory(spec);
        node.init_io(spec)?;
        node.refresh_cgroup_flags();
        for (i, c) in spec.cgroups.iter().enumerate() {
            let field = format!("cgroups[{i}].cpu.cfs_quota_us");
            let (quota, period, burst) =
                crate::spec::bandwidth_ns(&field, c.cfs_quota_us, c.cfs_period_us, c.cfs_burst_us)?;
            if quota.is_some() || period != crate::bandwidth::DEFAULT_PERIOD || burst > 0 {
                node.check_quota_hierarchy(i + 1, quota, period)?;
                node.set_bandwidth(i + 1, quota, period, burst);
            }
        }
        for (i, c) in spec.cgroups.iter().enumerate() {
            // Start from the parent's sets (v1 would start empty), then apply the spec's.
            node.init_cpuset(i + 1, c.cpuset_cpus.as_deref(), c.cpuset_mems.as_deref())?;
        }
        for (i, w) in spec.workloads.iter().enumerate() {
            let cg = match placement[i] {
                Some(autogroup) => autogroup,
                None => node.cgroup_id(w.cgroup()).expect("validated"),
            };
            node.add_workload(i, w, cg, spec.seed);
            if spec.kernel.cpu_clock_readers.contains(w.name()) {
                for t in node.tasks.iter_mut().filter(|t| t.wl == i) {
                    t.reads_cpu_clock = true;
                }
            }
            if let Some(&ns) = spec.kernel.sched_runtime_ns.get(w.name()) {
                for se in node
                    .tasks
                    .iter()
                    .filter(|t| t.wl == i)
                    .map(|t| t.se)
                    .collect::<Vec<_>>()
                {
                    node.set_task_slice(se, ns);
                }
            }
            node.oom_kills.push(0);
            if !node.cgroups[cg].cpus.iter().any(|&c| c) {
                return Err(SpecError::new(
                    format!("workloads[{i}].cgroup"),
                    format!("cgroup {:?} has an empty cpuset.cpus", w.cgroup()),
                ));
            }
        }
        node.init_resctrl(&spec.hardware.resctrl)?;
        if node.sample_interval > 0 {
            node.queue.push(0, Event::Sample);
        }
        node.queue.push(crate::psi::psi_period(node.tun.tick_ns), Event::Psi);
        node.start_steal();
        Ok(node)
    }

    pub fn ncpus(&self) -> usize {
        self.topo.ncpus
    }

    /// A cgroup by its path ("" is the root); autogroups have none (autogroup.rs).
    pub fn cgroup_id(&self, name: &str) -> Result<CgId> {
        let reported = &self.cgroups[..self.nr_reported_cgroups()];
        reported.iter().position(|g| g.name == name).ok_or_else(|| {
            let known: Vec<&str> = reported[1..].iter().map(|g| g.name.as_str()).collect();
            SpecError::new(
                "cgroup",
                format!("no cgroup named {name:?} (known: {})", known.join(", ")),
            )
        })
    }

    /// The cgroups results report: the root and the scenario's, before the autogroups.
    pub fn nr_reported_cgroups(&self) -> usize {
        self.cgroups.iter().take_while(|g| !g.autogroup).count()
    }

    /// ns each CPU ran each reported cgroup's own tasks (cpu * reported + cg): an autogroup's
    /// tasks count to the root, whose cpuacct counts them in the kernel.
    pub fn cpu_busy_reported(&self) -> Vec<u64> {
        let (ncg, nrep) = (self.cgroups.len(), self.nr_reported_cgroups());
        let mut out = vec![0; self.ncpus() * nrep];
        for (i, &ns) in self.cpu_busy.iter().enumerate() {
            let (cpu, cg) = (i / ncg, i % ncg);
            out[cpu * nrep + if cg < nrep { cg } else { ROOT }] += ns;
        }
        out
    }

    /// CPU time (ns, since time 0) of a workload's tasks, wherever they run: the measure of a
    /// workload in the root cgroup, whose autogroup no cgroup reports. Settle first.
    pub fn workload_usage(&self, name: &str) -> Result<u64> {
        let wl = self
            .workload_names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| SpecError::new("workload", format!("no workload named {name:?}")))?;
        Ok(self
            .tasks
            .iter()
            .filter(|t| t.wl == wl)
            .map(|t| self.ses[t.se].sum_exec)
            .sum())
    }

    pub fn service_id(&self, name: &str) -> Result<usize> {
        self.service_names.iter().position(|n| n == name).ok_or_else(|| {
            SpecError::new(
                "service",
                format!("no service named {name:?} (known: {})", self.service_names.join(", ")),
            )
        })
    }

    fn new_task(&mut self, cg: CgId, wl: usize, slot: u32, cpu: CpuId) -> TaskId {
        let id = self.tasks.len();
        let rq = cg * self.ncpus() + cpu;
        self.ses.push(Se::new(SeKind::Task(id), rq, NICE_0_LOAD));
        let se = self.ses.len() - 1;
        self.tasks.push(Task {
            cg,
            se,
            cpu,
            state: TaskState::New,
            remaining: 0,
            idle_policy: false,
            wait_start: 0,
            woken: false,
            last_ran: 0,
            exec_start: 0,
            switched_in: 0,
            wl,
            slot,
            pos: usize::MAX,
            home_node: None,
            dead: false,
            memstall: false,
            wakee: crate::balance::Wakee::default(),
            reads_cpu_clock: false,
            owed: 0,
        });
        self.cgroups[cg].nr_tasks += 1;
        self.apply_task_policy(id);
        id
    }

    fn add_workload(&mut self, idx: usize, w: &WorkloadSpec, cg: CgId, seed: u64) {
        let ncpus = self.ncpus();
        let rng = Rng::stream(seed, idx as u64 + 1);
        // Sleeping service threads start spread over the CPUs, as a long-running server's
        // threads would be; their first wakeup places them from there.
        let spread = self.tasks.len();
        let (workload, start) = match w {
            WorkloadSpec::Hog { threads, start_ns, .. } => {
                let threads = (0..*threads).map(|k| self.new_task(cg, idx, k, 0)).collect();
                (Workload::Hog(Hog { threads }), *start_ns)
            }
            WorkloadSpec::ClosedLoop {
                clients,
                fanout,
                service,
                think,
                workers,
                dispatch,
                replies,
                shape,
                client_cpu,
                delay,
                rounds,
                exchange,
                cross_cpu,
                client_threads,
                event_loop,
                start_ns,
                ..
            } => {
                let n = workers.unwrap_or(clients * fanout);
                let threads = (0..n)
                    .map(|k| self.new_task(cg, idx, k, (spread + k as usize) % ncpus))
                    .collect();
                // the load generator's task per client: slots after the server's threads
                let generators = client_threads.unwrap_or(*clients);
                let generator = match client_cpu {
                    Some(_) => (0..generators)
                        .map(|c| self.new_task(cg, idx, n + c, (spread + (n + c) as usize) % ncpus))
                        .collect(),
                    None => Vec::new(),
                };
                self.service_names.push(w.name().to_string());
                self.services.push(ServiceStats::default());
                let think = thinking(think);
                let cl = ClosedLoop {
                    svc: self.services.len() - 1,
                    fanout: *fanout,
                    threads,
                    clients: (0..*clients).map(|_| Client::new()).collect(),
                    service: service.clone(),
                    think,
                    client_cpu: client_cpu.clone(),
                    generator,
                    delay: delay.clone(),
                    rng,
                    pool: workers.map(|w| {
                        let pool = match dispatch {
                            crate::spec::Dispatch::Queue => crate::workload::Pool::queue(w),
                            crate::spec::Dispatch::Connection => {
                                // (a stream of its own: the workload's draws stay as without it)
                                let mut owners = Rng::stream(seed, POOL_OWNERS_STREAM + idx as u64);
                                crate::workload::Pool::by_connection(w, *clients as usize, &mut owners)
                            }
                        };
                        Box::new(match replies {
                            crate::spec::Replies::Each => pool,
                            crate::spec::Replies::Pass => pool.replying_by_pass(),
                        })
                    }),
                    shape: crate::shape::Shape::build(shape, n as usize),
                    rounds: crate::shape::Rounds::build(
                        rounds.unwrap_or(1),
                        *exchange == crate::spec::Exchange::Stream,
                        *clients as usize,
                        n as usize,
                    )
                    .map(Box::new),
                    cross: cross_cpu.map(|cost| {
                        Box::new(crate::workload::Crossing {
                            cost,
                            cpu_of: Vec::new(),
                        })
                    }),
                    ev: event_loop.filter(|_| client_cpu.is_some()).map(|e| {
                        Box::new(crate::event_loop::EventLoop::new(
                            client_threads.unwrap_or(*clients) as usize,
                            *clients as usize,
                            e.read_share,
                            e.rearm,
                        ))
                    }),
                    replies: Vec::new(),
                    gen_pool: client_threads
                        .filter(|_| client_cpu.is_some() && event_loop.is_none())
                        .map(|g| {
                            // (its clients wait for the first free thread: an event loop's own
                            // are event_loop.rs's)
                            Box::new(crate::workload::Pool::queue(g))
                        }),
                };
                (Workload::ClosedLoop(cl), *start_ns)
            }
            WorkloadSpec::Bursty {
                steady_threads,
                burst_threads,
                every_ns,
                length_ns,
                start_ns,
                ..
            } => {
                let n = steady_threads + burst_threads;
                let ts: Vec<TaskId> = (0..n)
                    .map(|k| self.new_task(cg, idx, k, (spread + k as usize) % ncpus))
                    .collect();
                self.service_names.push(w.name().to_string());
                self.services.push(ServiceStats::default());
                let (steady, burst) = ts.split_at(*steady_threads as usize);
                let b = Bursty {
                    svc: self.services.len() - 1,
                    steady: steady.to_vec(),
                    burst: burst.to_vec(),
                    every: *every_ns,
                    length: *length_ns,
                    outstanding: 0,
                    issued_at: 0,
                    pending: false,
                };
                (Workload::Bursty(b), *start_ns)
            }
            WorkloadSpec::MemoryHog {
                threads,
                bytes,
                chunk_bytes,
                touch_ns_per_page,
                mode,
                hang_ns,
                oom_score_adj,
                start_ns,
                ..
            } => {
                let ts: Vec<TaskId> = (0..*threads).map(|k| self.new_task(cg, idx, k, 0)).collect();
                if let Some(m) = self.memory.as_mut() {
                    for &t in &ts {
                        m.oom_score_adj.insert(t, *oom_score_adj);
                    }
                }
                let m = crate::workload::MemoryHog {
                    held: vec![0; ts.len()],
                    threads: ts,
                    bytes: *bytes,
                    chunk: *chunk_bytes,
                    touch_ns_per_page: *touch_ns_per_page,
                    mode: *mode,
                    hang_ns: *hang_ns,
                };
                (Workload::MemoryHog(m), *start_ns)
            }
            WorkloadSpec::FileServer {
                clients,
                service,
                think,
                working_set_bytes,
                file_bytes,
                disk_latency_ns,
                disk_bytes_per_s,
                start_ns,
                ..
            } => {
                let ts: Vec<TaskId> = (0..*clients)
                    .map(|k| self.new_task(cg, idx, k, (spread + k as usize) % ncpus))
                    .collect();
                self.service_names.push(w.name().to_string());
                self.services.push(ServiceStats::default());
                let think = thinking(think);
                let disk_ns = disk_latency_ns
                    + ((*file_bytes as u128) * 1_000_000_000 / (*disk_bytes_per_s).max(1) as u128) as u64;
                let f = crate::workload::FileServer {
                    svc: self.services.len() - 1,
                    cg,
                    threads: ts,
                    clients: (0..*clients).map(|_| Client::new()).collect(),
                    service: service.clone(),
                    think,
                    rng,
                    working_set: *working_set_bytes,
                    file_bytes: *file_bytes,
                    disk_ns,
                    disk_latency_ns: *disk_latency_ns,
                    disk_free_at: 0,
                    cached: 0,
                    hits: 0,
                    misses: 0,
                    space: None,
                    resident: vec![],
                    seen_epoch: None,
                    reading: vec![0; *clients as usize],
                    node_disk: self.disk.is_some(),
                };
                let mut f = f;
                if let Some(m) = self.memory.as_mut() {
                    // its files on its cgroup's LRU, as replay makes them: working_set / file_size
                    let n = (working_set_bytes / (*file_bytes).max(1)).max(1) as u32;
                    f.space = Some(m.cache.register(cg, n, *file_bytes));
                }
                (Workload::FileServer(f), *start_ns)
            }
            WorkloadSpec::Duty {
                max_threads,
                cores,
                period_ns,
                start_ns,
                ..
            } => {
                let ts: Vec<TaskId> = (0..*max_threads)
                    .map(|k| self.new_task(cg, idx, k, (spread + k as usize) % ncpus))
                    .collect();
                let n = ts.len();
                (
                    Workload::Duty(crate::workload::Duty {
                        threads: ts,
                        cores: *cores,
                        period: *period_ns,
                        busy: vec![false; n],
                        pending: vec![0; n],
                        memory: 0,
                    }),
                    *start_ns,
                )
            }
            WorkloadSpec::Analytics {
                threads,
                working_set_bytes,
                work_ns,
                fault_penalty,
                start_ns,
                ..
            } => {
                let ts: Vec<TaskId> = (0..*threads).map(|k| self.new_task(cg, idx, k, 0)).collect();
                self.service_names.push(w.name().to_string());
                self.services.push(ServiceStats::default());
                let n = ts.len();
                let a = crate::workload::Analytics {
                    svc: self.services.len() - 1,
                    cg,
                    threads: ts,
                    share: working_set_bytes / *threads as u64,
                    work: *work_ns,
                    fault_penalty: *fault_penalty,
                    swapped: vec![0.0; n],
                    started_at: vec![0; n],
                    loaded: vec![0; n],
                    task_running: vec![false; n],
                };
                (Workload::Analytics(a), *start_ns)
            }
            WorkloadSpec::CacheWriter {
                threads,
                chunk_bytes,
                write_ns_per_page,
                start_ns,
                ..
            } => {
                let ts: Vec<TaskId> = (0..*threads).map(|k| self.new_task(cg, idx, k, 0)).collect();
                let chunks = crate::workload::WRITER_FILE_BYTES.div_ceil((*chunk_bytes).max(1)) as u32;
                let space = match self.memory.as_mut() {
                    Some(m) => ts.iter().map(|_| m.cache.register(cg, chunks, *chunk_bytes)).collect(),
                    None => vec![],
                };
                (
                    Workload::CacheWriter(crate::workload::CacheWriter {
                        at: vec![0; ts.len()],
                        threads: ts,
                        chunk: *chunk_bytes,
                        write_ns_per_page: *write_ns_per_page,
                        space,
                        chunks,
                        disk: self.disk.is_some(),
                    }),
                    *start_ns,
                )
            }
            WorkloadSpec::Dd {
                op,
                direct,
                block_bytes,
                bytes,
                threads,
                random,
                cpu_ns_per_block,
                start_ns,
                ..
            } => {
                let ts: Vec<TaskId> = (0..*threads)
                    .map(|k| self.new_task(cg, idx, k, (spread + k as usize) % ncpus))
                    .collect();
                self.service_names.push(w.name().to_string());
                self.services.push(ServiceStats::default());
                let dir = match op {
                    crate::spec::DdOp::Read => crate::disk::Dir::Read,
                    crate::spec::DdOp::Write => crate::disk::Dir::Write,
                };
                // a read is never buffered here: readahead makes it the reader's own IO
                let direct = *direct || dir == crate::disk::Dir::Read;
                // A block's CPU: the syscall (≈ 10 µs) and filling the buffer from /dev/zero
                // (≈ 0.4 µs a page: replay measured ≈ 120 µs per 1 MiB direct block on the
                // development host); buffered, the copy into the page cache too (1 µs a page).
                let pages = block_bytes.div_ceil(crate::memcg::PAGE);
                let cpu_ns = cpu_ns_per_block
                    .unwrap_or(if direct { 10_000 + pages * 400 } else { pages * 1_000 })
                    .max(1);
                let n = ts.len();
                let d = crate::workload::Dd {
                    svc: self.services.len() - 1,
                    threads: ts,
                    dir,
                    direct,
                    random: *random,
                    block: *block_bytes,
                    left: vec![bytes.map(|b| b.div_ceil(*block_bytes)); n],
                    cpu_ns,
                    issued_at: vec![0; n],
                };
                (Workload::Dd(d), *start_ns)
            }
            WorkloadSpec::Database {
                clients,
                reads,
                read_bytes,
                service,
                think,
                start_ns,
                ..
            } => {
                let ts: Vec<TaskId> = (0..*clients)
                    .map(|k| self.new_task(cg, idx, k, (spread + k as usize) % ncpus))
                    .collect();
                self.service_names.push(w.name().to_string());
                self.services.push(ServiceStats::default());
                let think = thinking(think);
                let db = crate::workload::Database {
                    svc: self.services.len() - 1,
                    threads: ts,
                    clients: (0..*clients).map(|_| Client::new()).collect(),
                    reads: *reads,
                    read_bytes: *read_bytes,
                    left: vec![0; *clients as usize],
                    service: service.clone(),
                    think,
                    rng,
                };
                (Workload::Database(db), *start_ns)
            }
            WorkloadSpec::Iperf {
                streams,
                rate_bytes_per_s,
                windows_ns,
                start_ns,
                ..
            } => {
                let net = self.net.as_mut().expect("validated: iperf needs a link");
                let flows = (0..*streams).map(|_| net.add_flow(cg, *rate_bytes_per_s)).collect();
                let windows = if windows_ns.is_empty() {
                    vec![(*start_ns, Ns::MAX)]
                } else {
                    windows_ns.iter().map(|&[a, b]| (a, b)).collect()
                };
                (Workload::Iperf(crate::workload::Iperf { flows, windows }), 0)
            }
            WorkloadSpec::OpenLoop {
                rate_per_s,
                workers,
                service,
                backlog,
                shape,
                start_ns,
                ..
            } => {
                let ws: Vec<TaskId> = (0..*workers)
                    .map(|k| self.new_task(cg, idx, k, (spread + k as usize) % ncpus))
                    .collect();
                self.service_names.push(w.name().to_string());
                self.services.push(ServiceStats::default());
                let ol = OpenLoop {
                    svc: self.services.len() - 1,
                    idle: (0..*workers).rev().collect(),
                    serving: vec![0; ws.len()],
                    workers: ws,
                    queue: Default::default(),
                    mean_interarrival_ns: 1e9 / rate_per_s,
                    service: service.clone(),
                    rng,
                    backlog: *backlog as usize,
                    full_since: None,
                    drop_frac: 0.0,
                    shape: crate::shape::Shape::build(shape, *workers as usize),
                };
                (Workload::OpenLoop(ol), *start_ns)
            }
        };
        // Service threads exist from the start but sleep until work arrives; hogs and the
        // steady threads of a bursty service are forked at the start.
        let forked: Vec<TaskId> = match &workload {
            Workload::Hog(h) => h.threads.clone(),
            Workload::MemoryHog(m) => m.threads.clone(),
            Workload::CacheWriter(w) => w.threads.clone(),
            Workload::Analytics(a) => a.threads.clone(),
            Workload::Bursty(b) => b.steady.clone(),
            Workload::Dd(d) => d.threads.clone(),
            _ => vec![],
        };
        let mut is_forked = vec![false; self.tasks.len()];
        for &t in &forked {
            is_forked[t] = true;
        }
        for (task, forked) in self.tasks.iter_mut().zip(is_forked) {
            if task.wl == idx && task.state == TaskState::New && !forked {
                task.state = TaskState::Sleeping;
            }
        }
        self.workloads.push(workload);
        self.workload_names.push(w.name().to_string());
        self.killed.push(false);
        self.queue.push(start, Event::Workload { wl: idx, slot: START });
    }

    /// Change a workload's demand while it runs (a trace player): a duty workload's `cores`,
    /// an open loop's `rate_per_s` (from its next arrival on).
    pub fn set_workload(&mut self, name: &str, key: &str, value: f64) -> Result<()> {
        let wl = self.workload_names.iter().position(|n| n == name).ok_or_else(|| {
            SpecError::new(
                "workload",
                format!("no workload named {name:?} (known: {})", self.workload_names.join(", ")),
            )
        })?;
        match (&mut self.workloads[wl], key) {
            (Workload::Duty(d), "cores") => {
                if !(value.is_finite() && value >= 0.0 && value <= d.threads.len() as f64) {
                    return Err(SpecError::new(
                        key,
                        format!("must be in [0, {}] (got {value})", d.threads.len()),
                    ));
                }
                d.cores = value;
            }
            (Workload::Duty(d), "memory_bytes") => {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(SpecError::new(key, format!("must be >= 0 (got {value})")));
                }
                let (owner, held, want) = (d.threads[0], d.memory, value.round() as u64);
                d.memory = want;
                return self.follow_memory(owner, held, want);
            }
            (Workload::OpenLoop(o), "rate_per_s") => {
                if !(value.is_finite() && value > 0.0) {
                    return Err(SpecError::new(key, format!("must be > 0 (got {value})")));
                }
                // drops while its backlog is full so far count at the old rate
                o.settle_drops(self.now, &mut self.services[o.svc]);
                o.mean_interarrival_ns = 1e9 / value;
            }
            _ => {
                return Err(SpecError::new(
                    key,
                    format!(
                        "workload {name:?} has no run-time {key:?} (duty: cores, memory_bytes; open_loop: rate_per_s)"
                    ),
                ))
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- the event loop

    /// Advance to exactly `t`, processing every event at or before it.
    pub fn run_until(&mut self, t: Ns) -> Result<()> {
        if t < self.now {
            return Err(SpecError::new(
                "run_until",
                format!("time {t} is before now ({})", self.now),
            ));
        }
        self.check_series_budget(t)?;
        while let Some((at, ev)) = self.queue.pop_until(t) {
            self.now = at;
            self.events += 1;
            self.handle(ev);
            if self.events.is_multiple_of(BUDGET_CHECK_EVENTS) {
                self.check_record_budget()?;
            }
        }
        self.now = t;
        Ok(())
    }

    /// Bytes of one sample of the time series (sample()).
    fn sample_row_bytes(&self) -> u64 {
        let ncg = self.cgroups.len() as u64;
        let per_cg = 3 + [self.memory.is_some(), self.disk.is_some(), self.net.is_some()]
            .iter()
            .filter(|&&x| x)
            .count() as u64;
        8 * (1 + ncg * per_cg + self.services.len() as u64)
    }

    /// Refuse, before running, to sample more of the run than MEMORY_BUDGET holds.
    fn check_series_budget(&self, t: Ns) -> Result<()> {
        if self.sample_interval == 0 {
            return Ok(());
        }
        let rows = self.series.t_ns.len() as u64 + (t - self.now) / self.sample_interval + 1;
        let bytes = rows.saturating_mul(self.sample_row_bytes());
        if bytes > self.memory_budget {
            return Err(SpecError::new(
                "sample_interval_ns",
                format!(
                    "sampling every {} ns up to {:.3} s keeps {rows} samples ({} MiB), more than the {} MiB a run may keep; sample less often",
                    self.sample_interval,
                    t as f64 / 1e9,
                    bytes >> 20,
                    self.memory_budget >> 20
                ),
            ));
        }
        Ok(())
    }

    /// Stop a run whose latency records (16 bytes a completed request) pass MEMORY_BUDGET.
    fn check_record_budget(&self) -> Result<()> {
        let records: u64 = self.services.iter().map(|s| s.latencies.len() as u64).sum();
        if records.saturating_mul(RECORD_BYTES) <= self.memory_budget {
            return Ok(());
        }
        let (busiest, s) = (self.service_names.iter().zip(&self.services))
            .max_by_key(|(_, s)| s.latencies.len())
            .expect("records come from services");
        Err(SpecError::new(
            "",
            format!(
                "at {:.3} s the run holds {records} completed requests ({} MiB of latency records; {busiest:?}: {}), more than the {} MiB a run may keep; measure a shorter time or fewer requests",
                self.now as f64 / 1e9,
                (records * RECORD_BYTES) >> 20,
                s.latencies.len(),
                self.memory_budget >> 20
            ),
        ))
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Cpu { cpu, gen } => {
                if self.cpus[cpu].gen == gen {
                    self.cpus[cpu].next_event = Ns::MAX;
                    self.cpu_event(cpu);
                }
            }
            Event::Balance { cpu, gen } => {
                if self.cpus[cpu].balance_gen == gen {
                    self.cpus[cpu].balance_armed = false;
                    self.periodic_balance(cpu);
                }
            }
            Event::IdleKick => {
                self.idle_kick_pending = false;
                self.nohz_idle_balance();
            }
            Event::Workload { wl, slot } => {
                if self.killed[wl] {
                    return;
                }
                self.refresh_view(wl);
                let mut eff = self.eff.take().unwrap_or_default();
                self.workloads[wl].on_timer(wl, slot, self.now, &mut eff, &mut self.services);
                if let Some(s) = eff.sent_by.take() {
                    let task = &self.tasks[s];
                    self.waker = Some(crate::balance::Waker {
                        cpu: task.cpu,
                        task: s,
                        sync: task.state == TaskState::Sleeping,
                    });
                }
                self.apply_effects(&mut eff);
                self.waker = None;
                self.eff = Some(eff);
            }
            Event::Period { cg, gen } => self.period_timer(cg, gen),
            Event::Slack { cg, gen } => self.slack_timer(cg, gen),
            Event::Psi => self.psi_update(),
            Event::LlcRefresh { socket } => self.llc_refresh(socket),
            Event::Stall { cpu } => self.stall(cpu),
            Event::StallEnd { cpu } => self.stall_end(cpu),
            Event::Resume { task } => self.resume(task),
            Event::Disk { gen } => self.disk_event(gen),
            Event::Kupdate => self.kupdate_event(),
            Event::Bwm { gen } => self.bwm_event(gen),
            Event::Sample => {
                self.sample();
                self.queue.push(self.now + self.sample_interval, Event::Sample);
            }
        }
    }

    /// The running task finished its work, or a tick is due at which its slice is checked.
    fn cpu_event(&mut self, cpu: CpuId) {
        if self.idle_exit_done(cpu) {
            return;
        }
        self.update_curr(cpu);
        let Some(t) = self.cpus[cpu].curr else { return };
        if self.tasks[t].remaining == 0 {
            let (wl, slot) = (self.tasks[t].wl, self.tasks[t].slot);
            self.refresh_view(wl);
            let mut eff = self.eff.take().unwrap_or_default();
            let next = self.workloads[wl].on_done(wl, slot, self.now, &mut eff, &mut self.services);
            match next {
                Next::Compute(w) => {
                    self.tasks[t].remaining = w;
                    // a message it runs on into is received here, on this CPU
                    if let Some(m) = eff.sent.iter().find(|m| m.to == t).copied() {
                        self.charge_crossing(m, cpu);
                    }
                    // The tick due now still happens: a task whose work ends exactly on
                    // ticks must not escape the slice check (it would never be preempted).
                    if self.now >= self.cpus[cpu].resched_at && self.slice_check(cpu) {
                        self.schedule(cpu);
                        self.maybe_kick_idle(cpu);
                    } else {
                        self.reprogram(cpu);
                    }
                }
                Next::Sleep if eff.charges.is_empty() && eff.cache.is_empty() => {
                    // A task wakes its partners before it blocks (a pipe write, then the
                    // read): they are enqueued while it is still current on this CPU, and a
                    // wakeup preemption here is only need_resched, served by the block's
                    // `schedule`. (With memory to charge first, the old order: the charge
                    // may give the sleeper more work.)
                    self.cpus[cpu].blocking = true;
                    // a wakeup from a task that then blocks is a sync wakeup (WF_SYNC: pipe
                    // and socket writes), as it wakes its partner before the read
                    self.waker = Some(crate::balance::Waker {
                        cpu,
                        task: t,
                        sync: true,
                    });
                    self.apply_effects(&mut eff);
                    self.waker = None;
                    self.cpus[cpu].blocking = false;
                    self.dequeue_task(t, true);
                    self.tasks[t].state = TaskState::Sleeping;
                    self.schedule(cpu);
                }
                Next::Sleep => {
                    self.dequeue_task(t, true);
                    self.tasks[t].state = TaskState::Sleeping;
                    self.schedule(cpu);
                }
            }
            // a task that runs on wakes others without WF_SYNC
            if self.cpus[cpu].curr == Some(t) {
                self.waker = Some(crate::balance::Waker {
                    cpu,
                    task: t,
                    sync: false,
                });
            }
            self.apply_effects(&mut eff);
            self.waker = None;
            self.eff = Some(eff);
        } else if (self.now >= self.cpus[cpu].resched_at && self.slice_check(cpu)) || self.bandwidth_exhausted(cpu) {
            // Slices are checked only at the tick planned for them: an event that is only a
            // silo refill must not re-decide (or re-weigh) anything the tick would not.
            self.schedule(cpu);
            self.maybe_kick_idle(cpu);
        } else {
            self.reprogram(cpu);
        }
    }

    fn apply_effects(&mut self, eff: &mut Effects) {
        // Memory first: what an allocation costs is added to the work that follows it, or
        // delays it (memory.high), or ends the task (OOM).
        let mut costs = self.apply_charges(eff);
        for (at, wl, slot) in eff.timers.drain(..) {
            self.queue.push(at, Event::Workload { wl, slot });
        }
        for (t, work) in std::mem::take(&mut eff.forks) {
            if self.tasks[t].dead {
                continue;
            }
            self.tasks[t].remaining = work;
            if !self.after_charge(t, &mut costs) {
                self.wake_up_new(t);
            }
        }
        let wakes = std::mem::take(&mut eff.wakes);
        for &(t, work) in &wakes {
            if self.tasks[t].dead {
                continue;
            }
            self.tasks[t].remaining = work;
            if !self.after_charge(t, &mut costs) {
                self.crossing = eff.sent.iter().find(|m| m.to == t).copied();
                self.try_to_wake_up(t);
                self.crossing = None;
            }
        }
        eff.wakes = wakes;
        eff.wakes.clear();
        eff.sent.clear();
        eff.sent_by = None;
        self.submit_io(eff);
        // the running task that allocated before its next piece of work (on_done)
        while let Some(&(t, _, _)) = costs.first() {
            if self.tasks[t].dead {
                costs.remove(0);
            } else {
                self.after_charge(t, &mut costs);
            }
        }
    }

    /// Message `m` reaches its receiver, which runs it on `cpu`: if the sender last ran on
    /// another CPU the receiver's work grows by the crossing's cost (spec.rs `CrossCpu`).
    /// Decided where the receiver is placed (or runs on); a later migration before it runs
    /// does not change it.
    pub(crate) fn charge_crossing(&mut self, m: crate::workload::Sent, cpu: CpuId) {
        let s = &mut self.services[m.svc];
        s.exchanges += 1;
        if self.tasks[m.from].cpu != cpu {
            s.crossed += 1;
            self.tasks[m.to].remaining += m.cost;
        }
    }

    /// The next event of `cpu`: completion of the running task's work or the tick at which
    /// its slice runs out, whichever is first.
    ///
    /// The plan is made from accounting settled up to now (`observe_curr`, which decides
    /// nothing): a CPU can be reprogrammed by something that did not account its running task
    /// (a period timer unthrottling another group, `queue_changed`), and planning from the
    /// stale silo, sum_exec or progress would put the tick later than the kernel's. In the
    /// kernel these ticks do not depend on who looked last: `scheduler_tick` →
    /// `task_tick_fair` → `entity_tick` → `update_curr` → `account_cfs_rq_runtime` →
    /// `__account_cfs_rq_runtime` notices a spent silo at the first tick after it runs out
    /// and pulls (`assign_cfs_rq_runtime`) or reschedules then; and the readers of cpu.stat
    /// (`cpu_cfs_stat_show`) and cpuacct pull nothing. Without this, a sample taken before an
    /// unrelated reprogram moved that tick, and with it the pull and the burst counted at the
    /// next `__refill_cfs_bandwidth_runtime`.
    pub(crate) fn reprogram(&mut self, cpu: CpuId) {
        self.observe_curr(cpu);
        let at = match self.cpus[cpu].curr {
            // a stalled CPU has no events of its own: its stall's end reprograms it
            _ if self.cpus[cpu].stalled => Ns::MAX,
            None => self.idle_exit_at(cpu).unwrap_or(Ns::MAX),
            Some(t) => {
                let speed = self.cpus[cpu].speed;
                let need = ((self.tasks[t].remaining as u128) << SPEED_SHIFT)
                    .saturating_sub(self.cpus[cpu].progress_rem as u128);
                let done = self
                    .now
                    .saturating_add(crate::arith::div_ceil(need, speed).min(u64::MAX as u128 / 2) as u64);
                let resched = self.next_resched_tick(cpu).min(self.next_shares_tick(cpu));
                self.cpus[cpu].resched_at = resched;
                done.min(resched).min(self.next_bandwidth_tick(cpu))
            }
        };
        let c = &mut self.cpus[cpu];
        if at == c.next_event {
            return;
        }
        c.gen += 1;
        c.next_event = at;
        if at != Ns::MAX {
            let gen = c.gen;
            self.queue.set_cpu_timer(cpu, at, gen);
        } else {
            self.queue.cancel_cpu_timer(cpu);
        }
    }

    fn sample(&mut self) {
        for cpu in 0..self.ncpus() {
            self.observe_curr(cpu);
        }
        self.series.t_ns.push(self.now);
        // Cumulative since time 0: reset_stats (end of warm-up) must not bend the series.
        // Reported cgroups only (autogroups count in the root's hierarchical figures).
        let nrep = self.nr_reported_cgroups();
        let usage = self.hierarchical(|g| g.usage_total_ns);
        self.series.usage_ns.extend(&usage[..nrep]);
        for g in &self.cgroups[..nrep] {
            self.series.nr_throttled.push(g.bw.stat.nr_throttled);
            self.series.throttled_ns.push(g.bw.stat.throttled_time);
        }
        if let Some(m) = &self.memory {
            self.series.memory_bytes.extend(m.cgs[..nrep].iter().map(|c| c.usage));
        }
        if self.disk.is_some() || self.net.is_some() {
            self.settle_io();
            let (io, tx) = self.io_totals();
            if self.disk.is_some() {
                self.series.io_bytes.extend(&io[..nrep]);
            }
            if self.net.is_some() {
                self.series.net_bytes.extend(&tx[..nrep]);
            }
        }
        // Completions are cumulative since time 0, independent of reset_stats.
        for s in &self.services {
            self.series.completed.push(s.total_completed);
        }
    }

    /// A per-cgroup counter summed over each cgroup's subtree (cgroup ids are topological).
    pub fn hierarchical(&self, f: impl Fn(&Cgroup) -> u64) -> Vec<u64> {
        let mut v: Vec<u64> = self.cgroups.iter().map(f).collect();
        for cg in (1..self.cgroups.len()).rev() {
            let p = self.cgroups[cg].parent.unwrap();
            v[p] += v[cg];
        }
        v
    }

    /// Settle every running task and fold pressure times, so that counters read now are exact.
    pub fn settle(&mut self) {
        for cpu in 0..self.ncpus() {
            self.observe_curr(cpu);
        }
        for cg in 0..self.cgroups.len() {
            self.psi_collect(cg);
        }
        self.fold_memstall();
        self.settle_io();
        self.settle_drops();
    }

    /// Count the requests open loops have dropped up to now (their backlog full).
    pub fn settle_drops(&mut self) {
        for w in &mut self.workloads {
            if let Workload::OpenLoop(o) = w {
                o.settle_drops(self.now, &mut self.services[o.svc]);
            }
        }
    }

    pub fn reset_stats(&mut self) {
        self.settle();
        for g in &mut self.cgroups {
            g.stats = Default::default();
            g.cpu_stat_base = g.bw.stat;
            g.psi_base = g.psi.total;
            g.mem_psi_base = g.mem_psi.total;
        }
        for t in 0..self.tasks.len() {
            if self.tasks[t].state == TaskState::Runnable {
                self.tasks[t].wait_start = self.now;
            }
        }
        for s in &mut self.services {
            let total = s.total_completed;
            *s = ServiceStats {
                total_completed: total,
                ..Default::default()
            };
        }
        for b in &mut self.cpu_busy {
            *b = 0;
        }
        let now = self.now;
        for r in &mut self.rqs {
            r.nr_time = [0; crate::cfs_rq::NR_BUCKETS];
            r.nr_since = now;
        }
        self.reset_io_stats();
    }

    /// Per CPU, the ns since the last reset that `cgroup` had k of its tasks (its
    /// descendants' included) runnable there, k = 0 … NR_BUCKETS − 1 (the last: that many or
    /// more): the group's queue on each CPU, as a trace of its threads' wakeups, switches and
    /// sleeps counts it on the host (replay/runqlat.py `Accumulator`).
    pub fn runnable_time(&mut self, cgroup: &str) -> Result<Vec<Vec<u64>>> {
        self.settle();
        let cg = self.cgroup_id(cgroup)?;
        let now = self.now;
        let n = self.ncpus();
        Ok((0..n).map(|c| self.rqs[cg * n + c].nr_time_at(now).to_vec()).collect())
    }

    pub(crate) fn note_nr(&mut self, cpu: CpuId) {
        if let Some(tr) = self.trace.as_mut() {
            tr.push((self.now, cpu, self.cpus[cpu].tasks.len() as u32));
        }
    }

    // ---------------------------------------------------------------- knobs

    /// Write a knob the way its kernel file takes it: as text ("512", "-1", "0-3,6").
    pub fn write(&mut self, cgroup: &str, knob: &str, text: &str) -> Result<()> {
        let cg = self.cgroup_id(cgroup)?;
        if cg == ROOT && crate::spec::ROOT_KNOBS.contains(&knob) {
            return self.write_root_knob(knob, text);
        }
        if cg == ROOT {
            return Err(SpecError::new(
                knob,
                format!(
                    "the root cgroup's knobs are not writable (node-wide files: {})",
                    crate::spec::ROOT_KNOBS.join(", ")
                ),
            ));
        }
        // the *_device files take "MAJ:MIN VALUE"; the node has one disk
        let text = match (knob.ends_with("_device"), text.trim().split_once(' ')) {
            (true, Some((dev, v))) if dev.contains(':') => v,
            _ => text,
        };
        match knob {
            "cpuset.cpus" => self.set_cpuset_cpus(cg, text),
            "cpuset.mems" => self.set_cpuset_mems(cg, text),
            _ => {
                let v: i64 = text
                    .trim()
                    .parse()
                    .map_err(|_| SpecError::new(knob, format!("expects an integer (got {text:?})")))?;
                self.write_knob(cgroup, knob, v)
            }
        }
    }

    /// Read a knob as its kernel file shows it ("cpu.pressure" of the root "" is the node's
    /// /proc/pressure/cpu).
    pub fn read(&mut self, cgroup: &str, knob: &str) -> Result<String> {
        let cg = self.cgroup_id(cgroup)?;
        match knob {
            "cpu.pressure" => {
                self.settle();
                Ok(self.pressure_text(cg))
            }
            "memory.pressure" => Ok(self.memory_pressure_text(cg)),
            k if cg == ROOT && crate::spec::ROOT_KNOBS.contains(&k) => self.read_root_knob(k),
            "cpuset.cpus" => Ok(crate::cpuset::format_list(&self.cgroups[cg].cpus)),
            "cpuset.mems" => Ok(crate::cpuset::format_list(&self.cgroups[cg].mems)),
            _ => self.read_knob(cgroup, knob).map(|v| v.to_string()),
        }
    }

    /// Write an integer knob (cpu.*).
    pub fn write_knob(&mut self, cgroup: &str, knob: &str, value: i64) -> Result<()> {
        let cg = self.cgroup_id(cgroup)?;
        if cg == ROOT {
            return Err(SpecError::new(knob, "the root cgroup's knobs are not writable"));
        }
        check_knob(knob, knob, value)?;
        self.settle();
        match knob {
            "cgroup.kill" => self.kill_subtree(cg),
            k if k.starts_with("memory.") => self.write_memory_knob(cg, k, value)?,
            k if k.starts_with("blkio.") || k.starts_with("net") => self.set_io_knob(cg, k, value)?,
            "cpu.shares" => {
                if self.cgroups[cg].idle {
                    // sched_group_set_shares returns -EINVAL for an idle group.
                    return Err(SpecError::new(
                        knob,
                        "cannot be written while cpu.idle is 1 (the kernel returns EINVAL)",
                    ));
                }
                self.cgroups[cg].shares = value as u64;
                self.requeue_subtree(cg, |_| {});
            }
            "cpu.idle" => {
                let idle = value == 1;
                // sched_group_set_idle: shares become WEIGHT_IDLEPRIO, and NICE_0_LOAD again
                // when idle is cleared (the old value is not restored).
                self.requeue_subtree(cg, |g| {
                    if g[cg].idle != idle {
                        g[cg].shares = if idle { 3 } else { 1024 };
                    }
                    g[cg].idle = idle;
                });
            }
            "cpu.qos_level" => {
                self.requeue_subtree(cg, |g| g[cg].qos_level = value);
            }
            _ => self.write_bandwidth_knob(cg, knob, value)?,
        }
        Ok(())
    }

    pub fn read_knob(&self, cgroup: &str, knob: &str) -> Result<i64> {
        let cg = self.cgroup_id(cgroup)?;
        let g = &self.cgroups[cg];
        match knob {
            "cpu.shares" => Ok(g.shares as i64),
            "cpu.idle" => Ok(g.idle as i64),
            "cpu.qos_level" => Ok(g.qos_level),
            // write-only in the kernel; reading gives 0 here so that every knob reads
            "cgroup.kill" => Ok(0),
            k if k.starts_with("memory.") => self.read_memory_knob(cg, k),
            k if k.starts_with("blkio.") || k.starts_with("net") => self.read_io_knob(cg, k),
            _ => self.read_bandwidth_knob(cg, knob).ok_or_else(|| {
                SpecError::new(
                    knob,
                    format!("unknown knob {knob:?} (known: {})", crate::spec::KNOBS.join(", ")),
                )
            }),
        }
    }

    /// Take every runnable task of a subtree off its CPU, change the cgroup, put them back:
    /// the same bookkeeping the kernel does around `sched_group_set_idle` / set_shares,
    /// done the simple way because knob writes are rare next to scheduling events.
    fn requeue_subtree(&mut self, cg: CgId, change: impl FnOnce(&mut Vec<Cgroup>)) {
        let in_subtree: Vec<bool> = (0..self.cgroups.len()).map(|g| self.is_descendant(g, cg)).collect();
        let mut moved: Vec<TaskId> = vec![];
        for t in 0..self.tasks.len() {
            if in_subtree[self.tasks[t].cg] {
                self.finish_delayed_task(t); // its weight or group may change below
            }
            let st = self.tasks[t].state;
            if in_subtree[self.tasks[t].cg] && (st == TaskState::Runnable || st == TaskState::Running) {
                if st == TaskState::Running {
                    self.preempt_off_cpu(self.tasks[t].cpu);
                }
                self.dequeue_task(t, false);
                moved.push(t);
            }
        }
        // Lift qos and expeller throttles: they are re-decided at the next pick.
        for cpu in 0..self.ncpus() {
            self.unthrottle_qos(cpu);
            for grq in std::mem::take(&mut self.cpus[cpu].expelled) {
                self.unthrottle(grq, crate::cfs_rq::Throttle::EXPELLED);
            }
        }
        change(&mut self.cgroups);
        self.refresh_cgroup_flags();
        for t in 0..self.tasks.len() {
            if in_subtree[self.tasks[t].cg] {
                self.apply_task_policy(t);
            }
        }
        for &t in &moved {
            let cpu = self.tasks[t].cpu;
            self.enqueue_task(t, cpu, crate::cfs::Enqueue::Migrate);
        }
        for cpu in 0..self.ncpus() {
            self.schedule(cpu);
        }
    }

    /// `cgroup.kill` (cgroup v2, Linux >= 5.14): SIGKILL every task of the subtree. Its tasks
    /// leave their CPUs for good and the workloads they belong to stop (no more requests,
    /// arrivals or forks); what they completed stays in the stats. koordlet's eviction kills
    /// a pod's containers the same way (through the CRI).
    fn kill_subtree(&mut self, cg: CgId) {
        let in_subtree: Vec<bool> = (0..self.cgroups.len()).map(|g| self.is_descendant(g, cg)).collect();
        self.settle_drops();
        for t in 0..self.tasks.len() {
            if !in_subtree[self.tasks[t].cg] {
                continue;
            }
            self.killed[self.tasks[t].wl] = true;
            if let Workload::OpenLoop(o) = &mut self.workloads[self.tasks[t].wl] {
                o.full_since = None; // a dead server drops nothing more: it is gone
            }
            self.take_off(t);
        }
        for cpu in 0..self.ncpus() {
            self.unthrottle_qos(cpu);
            self.schedule(cpu);
        }
    }

    /// A task dies: off its CPU and run queue for good; its anonymous memory is freed.
    pub(crate) fn take_off(&mut self, t: TaskId) {
        self.memstall(t, false);
        let st = self.tasks[t].state;
        if st == TaskState::Running {
            self.preempt_off_cpu(self.tasks[t].cpu);
        }
        if matches!(st, TaskState::Runnable | TaskState::Running) {
            self.dequeue_task(t, false);
        }
        self.finish_delayed_task(t);
        self.tasks[t].state = TaskState::Sleeping;
        self.tasks[t].remaining = 0;
        self.tasks[t].dead = true;
        if let Some(m) = self.memory.as_mut() {
            m.release(t);
        }
    }

    /// Runnable or running tasks in a cgroup's subtree.
    pub fn nr_running_in(&self, cg: CgId) -> u32 {
        self.tasks
            .iter()
            .filter(|t| matches!(t.state, TaskState::Runnable | TaskState::Running) && self.is_descendant(t.cg, cg))
            .count() as u32
    }

    /// Tasks (threads of workloads) in a cgroup's subtree.
    pub fn nr_tasks_in(&self, cg: CgId) -> u32 {
        self.tasks.iter().filter(|t| self.is_descendant(t.cg, cg)).count() as u32
    }

    /// How many CPUs a cgroup's tasks may run on (its cpuset.cpus).
    pub(crate) fn allowed_cpus(&self, cg: CgId) -> usize {
        self.cgroups[cg].cpus.iter().filter(|&&c| c).count()
    }

    pub fn is_descendant(&self, mut g: CgId, ancestor: CgId) -> bool {
        loop {
            if g == ancestor {
                return true;
            }
            match self.cgroups[g].parent {
                Some(p) => g = p,
                None => return false,
            }
        }
    }

    fn refresh_cgroup_flags(&mut self) {
        for cg in 0..self.cgroups.len() {
            let parent_offline = self.cgroups[cg]
                .parent
                .map(|p| self.cgroups[p].offline)
                .unwrap_or(false);
            self.cgroups[cg].offline = parent_offline || self.cgroups[cg].qos_level < 0;
        }
    }

    /// openEuler switches tasks of a qos_level = -1 cgroup to SCHED_IDLE (weight 3).
    fn apply_task_policy(&mut self, t: TaskId) {
        let idle = self.cgroups[self.tasks[t].cg].offline;
        self.tasks[t].idle_policy = idle;
        let se = self.tasks[t].se;
        self.reweight_se_avg(se, if idle { WEIGHT_IDLEPRIO } else { NICE_0_LOAD });
        self.ses[se].weight = if idle { WEIGHT_IDLEPRIO } else { NICE_0_LOAD };
    }
}

impl Node {
    /// Internal consistency of the bookkeeping (for tests): idle-CPU count, per-queue counts,
    /// task positions. Returns the first violation found.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let idle = self.cpus.iter().filter(|c| c.curr.is_none()).count();
        if idle != self.nr_idle_cpus {
            return Err(format!("nr_idle_cpus {} but {idle} CPUs idle", self.nr_idle_cpus));
        }
        self.check_llc_idle()?;
        self.check_slices()?;
        self.check_psi_oncpu()?;
        self.check_task_avgs()?;
        for (i, r) in self.rqs.iter().enumerate() {
            let queued = r.timeline.len() as u32 + r.curr.filter(|&s| self.ses[s].on_rq).is_some() as u32;
            if queued != r.nr_running {
                return Err(format!(
                    "rq {i}: nr_running {} but {queued} entities queued",
                    r.nr_running
                ));
            }
            // load and the part its group entities weigh (the root's PELT average holds the
            // rest: lb_groups.rs `cpu_load`), from the queued entities
            let queued_ses = r
                .timeline
                .iter()
                .map(|&(_, s)| s)
                .chain(r.curr.filter(|&s| self.ses[s].on_rq));
            let (mut load, mut group_load) = (0u64, 0u64);
            for s in queued_ses {
                load += self.ses[s].weight;
                if matches!(self.ses[s].kind, crate::cfs_rq::SeKind::Group(_)) {
                    group_load += self.ses[s].weight;
                }
            }
            if (load, group_load) != (r.load, r.group_load) {
                return Err(format!(
                    "rq {i}: load {} (groups {}) but its queued entities weigh {load} (groups {group_load})",
                    r.load, r.group_load
                ));
            }
            if r.curr_seen_at > self.now {
                // the kernel's last update_curr on a queue (eevdf.rs `unseen_curr_v`) is past
                return Err(format!(
                    "rq {i}: last seen at {} after now {}",
                    r.curr_seen_at, self.now
                ));
            }
        }
        for (cpu, c) in self.cpus.iter().enumerate() {
            for (pos, &t) in c.tasks.iter().enumerate() {
                if self.tasks[t].pos != pos || self.tasks[t].cpu != cpu {
                    return Err(format!("task {t} misplaced in CPU {cpu}'s list"));
                }
                // task_hot's clock (lb_groups.rs `held_hot`): when it last ran, never ahead
                if self.tasks[t].exec_start > self.now {
                    return Err(format!(
                        "task {t}: exec_start {} after now {}",
                        self.tasks[t].exec_start, self.now
                    ));
                }
            }
            // a balance is never recorded ahead of the clock, and the next is after the last
            for (d, (&last, &next)) in c.last_balance.iter().zip(&c.next_balance).enumerate() {
                if last > self.now || (last > 0 && next < last) {
                    return Err(format!(
                        "CPU {cpu} domain {d}: last balance {last}, next {next}, now {}",
                        self.now
                    ));
                }
            }
            match (c.idle_state, c.curr) {
                (crate::cpuidle::IdleState::Halted(_), Some(_)) => return Err(format!("CPU {cpu} halted but running")),
                (crate::cpuidle::IdleState::Exiting(at), curr)
                    if curr.is_some() || c.next_event != at || at < self.now =>
                {
                    return Err(format!(
                        "CPU {cpu} leaving idle at {at} (now {}) but runs {curr:?}, next event {}",
                        self.now, c.next_event
                    ));
                }
                _ => {}
            }
            if let Some(t) = c.curr {
                if self.tasks[t].state != TaskState::Running || self.tasks[t].cpu != cpu {
                    return Err(format!(
                        "CPU {cpu} runs task {t} in state {:?} on CPU {}",
                        self.tasks[t].state, self.tasks[t].cpu
                    ));
                }
            }
        }
        Ok(())
    }
}
