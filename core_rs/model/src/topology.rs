//! sockets → NUMA nodes → physical cores → SMT threads, with logical CPUs numbered the way
//! Linux numbers them on x86 (all first threads, then all second threads), unless the spec
//! lists the siblings explicitly. The LLC is the socket.

use crate::error::{Result, SpecError};
use crate::spec::TopologySpec;
use std::sync::Arc;

pub type CpuId = usize;

#[derive(Debug, Clone)]
pub struct Topology {
    pub ncpus: usize,
    /// Physical core of each logical CPU.
    pub core_of: Vec<usize>,
    /// Logical CPUs of each physical core (SMT siblings).
    pub core_cpus: Vec<Vec<CpuId>>,
    pub socket_of: Vec<usize>,
    pub numa_of: Vec<usize>,
    /// Number of NUMA nodes.
    pub nnodes: usize,
    /// Logical CPUs of each socket (= LLC), ascending.
    pub socket_cpus: Vec<Vec<CpuId>>,
    pub smt_speed: f64,
    /// Speed of a task whose memory is on another NUMA node.
    pub numa_remote_speed: f64,
    /// Scheduling domains of each CPU from the smallest span up (SMT, LLC, NUMA/node-wide),
    /// as in the kernel's sd hierarchy; a level whose span equals the level below is dropped.
    pub domains: Vec<Vec<Domain>>,
}

/// CPUs, shared between the domains that have them.
pub type Span = Arc<[CpuId]>;
pub type Groups = Arc<[Span]>;

#[derive(Debug, Clone)]
pub struct Domain {
    pub level: DomainLevel,
    /// CPUs in the domain, ascending.
    pub span: Span,
    /// The child groups the domain balances between (each a span of the level below).
    pub groups: Groups,
    /// Index into `groups` of the group holding the owning CPU.
    pub local_group: usize,
    /// Physical cores in each group (`sg->cores`), counted once here rather than at every
    /// balance.
    pub group_cores: Arc<[u64]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainLevel {
    Smt,
    Llc,
    Numa,
}

impl DomainLevel {
    /// imbalance_pct from sd_init (kernel-and-anchors.md §A5): SMT 110, MC 117, NUMA 117.
    pub fn imbalance_pct(self) -> u64 {
        match self {
            DomainLevel::Smt => 110,
            _ => 117,
        }
    }
}

impl Topology {
    pub fn build(t: &TopologySpec) -> Result<Topology> {
        let ncores = (t.sockets * t.cores_per_socket) as usize;
        let tpc = t.threads_per_core as usize;
        let ncpus = ncores * tpc;
        let mut core_cpus: Vec<Vec<CpuId>> = match &t.siblings {
            None => (0..ncores)
                .map(|c| (0..tpc).map(|k| c + k * ncores).collect())
                .collect(),
            Some(groups) => {
                if groups.len() != ncores {
                    return Err(SpecError::new(
                        "topology.siblings",
                        format!("lists {} cores; the topology has {ncores}", groups.len()),
                    ));
                }
                let mut seen = vec![false; ncpus];
                for (i, g) in groups.iter().enumerate() {
                    if g.len() != tpc {
                        return Err(SpecError::new(
                            format!("topology.siblings[{i}]"),
                            format!("has {} CPUs; threads_per_core is {tpc}", g.len()),
                        ));
                    }
                    for &c in g {
                        let c = c as usize;
                        if c >= ncpus || seen[c] {
                            return Err(SpecError::new(
                                format!("topology.siblings[{i}]"),
                                format!("CPU {c} is out of range 0..{ncpus} or listed twice"),
                            ));
                        }
                        seen[c] = true;
                    }
                }
                groups.iter().map(|g| g.iter().map(|&c| c as usize).collect()).collect()
            }
        };
        for g in &mut core_cpus {
            g.sort_unstable();
        }
        let cores_per_node = (t.cores_per_socket / t.numa_nodes_per_socket) as usize;
        let mut core_of = vec![0; ncpus];
        let mut socket_of = vec![0; ncpus];
        let mut numa_of = vec![0; ncpus];
        for (core, cpus) in core_cpus.iter().enumerate() {
            for &c in cpus {
                core_of[c] = core;
                socket_of[c] = core / t.cores_per_socket as usize;
                numa_of[c] = core / cores_per_node;
            }
        }
        let socket_cpus: Vec<Vec<CpuId>> = (0..t.sockets as usize)
            .map(|s| (0..ncpus).filter(|&c| socket_of[c] == s).collect())
            .collect();
        let mut topo = Topology {
            ncpus,
            core_of,
            core_cpus,
            socket_of,
            numa_of,
            nnodes: (t.sockets * t.numa_nodes_per_socket) as usize,
            socket_cpus,
            smt_speed: t.smt_speed,
            numa_remote_speed: t.numa_remote_speed,
            domains: vec![],
        };
        topo.domains = topo.build_domains();
        Ok(topo)
    }

    /// Every CPU's domains. Spans and group lists are shared by the CPUs of a core, a socket
    /// and the node (`Arc`), so the whole is O(ncpus) in time and memory, not O(ncpus²):
    /// 8192 CPUs (NR_CPUS) would otherwise hold a GiB of copies.
    fn build_domains(&self) -> Vec<Vec<Domain>> {
        let (ncores, nsockets) = (self.core_cpus.len(), self.socket_cpus.len());
        let core_span: Vec<Span> = self.core_cpus.iter().map(|c| Span::from(c.as_slice())).collect();
        let socket_span: Vec<Span> = self.socket_cpus.iter().map(|c| Span::from(c.as_slice())).collect();
        let all: Span = (0..self.ncpus).collect();
        // Groups are the spans of the level below, in the order their first CPU comes.
        let distinct = |cpus: &[CpuId], key: &dyn Fn(CpuId) -> usize, n: usize, spans: &[Span]| -> Groups {
            let mut seen = vec![false; n];
            let mut out = vec![];
            for &c in cpus {
                if !std::mem::replace(&mut seen[key(c)], true) {
                    out.push(spans[key(c)].clone());
                }
            }
            out.into()
        };
        let smt_groups: Vec<Groups> = self
            .core_cpus
            .iter()
            .map(|cpus| cpus.iter().map(|&c| Span::from([c].as_slice())).collect())
            .collect();
        let llc_groups: Vec<Groups> = self
            .socket_cpus
            .iter()
            .map(|cpus| distinct(cpus, &|c| self.core_of[c], ncores, &core_span))
            .collect();
        let numa_groups = distinct(&all, &|c| self.socket_of[c], nsockets, &socket_span);
        // Physical cores of each group, shared like the groups themselves.
        let cores_of = |groups: &Groups| -> Arc<[u64]> {
            groups
                .iter()
                .map(|g| {
                    let mut cores: Vec<usize> = g.iter().map(|&c| self.core_of[c]).collect();
                    cores.sort_unstable();
                    cores.dedup();
                    cores.len() as u64
                })
                .collect()
        };
        let smt_cores: Vec<Arc<[u64]>> = smt_groups.iter().map(cores_of).collect();
        let llc_cores: Vec<Arc<[u64]>> = llc_groups.iter().map(cores_of).collect();
        let numa_cores = cores_of(&numa_groups);
        (0..self.ncpus)
            .map(|cpu| {
                let (core, socket) = (self.core_of[cpu], self.socket_of[cpu]);
                let mut out: Vec<Domain> = vec![];
                let mut lower = 1;
                for (level, span, groups, group_cores) in [
                    (DomainLevel::Smt, &core_span[core], &smt_groups[core], &smt_cores[core]),
                    (
                        DomainLevel::Llc,
                        &socket_span[socket],
                        &llc_groups[socket],
                        &llc_cores[socket],
                    ),
                    (DomainLevel::Numa, &all, &numa_groups, &numa_cores),
                ] {
                    if span.len() <= lower {
                        continue;
                    }
                    let local_group = groups.iter().position(|g| g.contains(&cpu)).unwrap_or(0);
                    lower = span.len();
                    out.push(Domain {
                        level,
                        span: span.clone(),
                        groups: groups.clone(),
                        local_group,
                        group_cores: group_cores.clone(),
                    });
                }
                out
            })
            .collect()
    }

    pub fn siblings(&self, cpu: CpuId) -> &[CpuId] {
        &self.core_cpus[self.core_of[cpu]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(sockets: u32, cores: u32, tpc: u32) -> TopologySpec {
        TopologySpec {
            sockets,
            numa_nodes_per_socket: 1,
            cores_per_socket: cores,
            threads_per_core: tpc,
            smt_speed: 0.6,
            numa_remote_speed: 0.75,
            siblings: None,
        }
    }

    #[test]
    fn linux_numbering_pairs_c_with_c_plus_ncores() {
        let t = Topology::build(&spec(2, 24, 2)).unwrap();
        assert_eq!(t.ncpus, 96);
        assert_eq!(t.siblings(0), &[0, 48]);
        assert_eq!(t.siblings(71), &[23, 71]);
        assert_eq!(t.socket_of[24], 1);
        assert_eq!(t.socket_of[48 + 24], 1);
        let d: Vec<DomainLevel> = t.domains[5].iter().map(|d| d.level).collect();
        assert_eq!(d, vec![DomainLevel::Smt, DomainLevel::Llc, DomainLevel::Numa]);
        assert_eq!(t.domains[5][1].span.len(), 48);
        assert_eq!(t.domains[5][1].groups.len(), 24);
        assert_eq!(t.domains[5][2].groups.len(), 2);
        // sg->cores: the two threads of a core are one core; a socket's group has 24.
        assert_eq!(&*t.domains[5][0].group_cores, &[1, 1]);
        assert_eq!(&*t.domains[5][1].group_cores, &[1; 24]);
        assert_eq!(&*t.domains[5][2].group_cores, &[24, 24]);
    }

    #[test]
    fn explicit_siblings_are_checked() {
        let mut s = spec(1, 2, 2);
        s.siblings = Some(vec![vec![0, 1], vec![2, 2]]);
        let e = Topology::build(&s).unwrap_err();
        assert!(e.field.contains("siblings[1]"), "{e}");
        s.siblings = Some(vec![vec![0, 1], vec![2, 3]]);
        let t = Topology::build(&s).unwrap();
        assert_eq!(t.siblings(1), &[0, 1]);
    }

    #[test]
    fn single_socket_no_smt_has_one_domain() {
        let t = Topology::build(&spec(1, 8, 1)).unwrap();
        assert_eq!(t.domains[0].len(), 1);
        assert_eq!(t.domains[0][0].level, DomainLevel::Llc);
    }
}
