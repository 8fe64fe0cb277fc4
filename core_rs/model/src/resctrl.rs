//! resctrl (`/sys/fs/resctrl`, Intel RDT / AMD PQoS) as the kernel has it: control groups
//! (CLOSIDs) with a `schemata` of L3 cache bit masks (CAT) and memory-bandwidth percentages
//! (MBA), task membership, and the rules by which the kernel validates a schemata write
//! (arch/x86/kernel/cpu/resctrl/ctrlmondata.c: `rdtgroup_schemata_write`, `parse_line`,
//! `cbm_validate`, `bw_validate`). What the masks and percentages do to the work is
//! contention.rs's; this file is the filesystem's bookkeeping.

use crate::cgroup::CgId;

/// What `/sys/fs/resctrl/info` reports; the defaults are a Skylake-SP-like part: 11 L3 ways
/// (info/L3/cbm_mask 7ff), min_cbm_bits 1, 16 CLOSIDs, MBA in steps of 10% from 10%.
#[derive(Debug, Clone)]
pub struct ResctrlInfo {
    /// Ways of the L3 (bits of info/L3/cbm_mask).
    pub cbm_len: u32,
    pub min_cbm_bits: u32,
    pub num_closids: usize,
    pub bandwidth_gran: u32,
    pub min_bandwidth: u32,
    /// L3 domains (one per socket).
    pub domains: usize,
}

impl ResctrlInfo {
    pub fn cbm_mask(&self) -> u32 {
        ((1u64 << self.cbm_len) - 1) as u32
    }
}

/// One control group: its name ("" is the root group) and per-domain controls.
#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    /// L3 CBM per domain.
    pub l3: Vec<u32>,
    /// MB percent per domain (already rounded up to the granularity).
    pub mb: Vec<u32>,
}

/// Monitoring counters of a group per L3 domain (mon_data/mon_L3_XX).
#[derive(Debug, Clone, Default)]
pub struct MonCounters {
    pub mbm_total_bytes: f64,
    pub mbm_local_bytes: f64,
}

/// resctrl's state: groups in creation order (index 0 the root group, CLOSID 0), and which
/// cgroup subtrees each group's tasks come from.
#[derive(Debug, Clone)]
pub struct Resctrl {
    pub info: ResctrlInfo,
    pub groups: Vec<Group>,
    pub mon: Vec<Vec<MonCounters>>,
    /// (cgroup, group index, sequence): the group a cgroup subtree's tasks belong to; the
    /// assignment made last wins, as the last pid written to a `tasks` file does.
    assignments: Vec<(CgId, usize, u64)>,
    seq: u64,
    /// Bumped on every change that can move work between groups or change a control.
    pub generation: u64,
}

impl Resctrl {
    pub fn new(info: ResctrlInfo) -> Resctrl {
        let root = Group {
            name: String::new(),
            l3: vec![info.cbm_mask(); info.domains],
            mb: vec![100; info.domains],
        };
        let mon = vec![vec![MonCounters::default(); info.domains]];
        Resctrl {
            info,
            groups: vec![root],
            mon,
            assignments: vec![],
            seq: 0,
            generation: 0,
        }
    }

    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.name == name)
    }

    pub fn names(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.name.clone()).collect()
    }

    /// Write `schemata` to `group`, creating it (mkdir) if absent. The whole write is parsed
    /// first and applied only if valid, as the kernel stages configs before updating domains.
    pub fn write(&mut self, group: &str, schemata: &str) -> Result<(), String> {
        let who = if group.is_empty() {
            "resctrl root group".to_string()
        } else {
            format!("resctrl group {group:?}")
        };
        let idx = match self.group_index(group) {
            Some(i) => Some(i),
            None => {
                check_group_name(group).map_err(|e| format!("{who}: {e}"))?;
                if self.groups.len() >= self.info.num_closids {
                    // rdtgroup_mkdir → closid_alloc: -ENOSPC.
                    return Err(format!(
                        "{who}: no free CLOSID (all {} are in use; the kernel's mkdir fails with ENOSPC)",
                        self.info.num_closids
                    ));
                }
                None
            }
        };
        let (mut l3, mut mb) = match idx {
            Some(i) => (self.groups[i].l3.clone(), self.groups[i].mb.clone()),
            None => (
                vec![self.info.cbm_mask(); self.info.domains],
                vec![100; self.info.domains],
            ),
        };
        parse_schemata(&self.info, schemata, &mut l3, &mut mb).map_err(|e| format!("{who}: {e}"))?;
        match idx {
            Some(i) => {
                self.groups[i].l3 = l3;
                self.groups[i].mb = mb;
            }
            None => {
                self.groups.push(Group {
                    name: group.to_string(),
                    l3,
                    mb,
                });
                self.mon.push(vec![MonCounters::default(); self.info.domains]);
            }
        }
        self.generation += 1;
        Ok(())
    }

    /// The schemata file as the kernel shows it (`show_doms`: "L3:0=7ff;1=7ff").
    pub fn read(&self, group: &str) -> Option<String> {
        let g = &self.groups[self.group_index(group)?];
        let line = |name: &str, vals: &[u32], hex: bool| {
            let doms: Vec<String> = vals
                .iter()
                .enumerate()
                .map(|(d, v)| if hex { format!("{d}={v:x}") } else { format!("{d}={v}") })
                .collect();
            format!("{name}:{}", doms.join(";"))
        };
        Some(format!("{}\n{}", line("L3", &g.l3, true), line("MB", &g.mb, false)))
    }

    /// Every task of `cg`'s subtree joins `group` (now and later).
    pub fn assign(&mut self, group: usize, cg: CgId) {
        self.seq += 1;
        self.assignments.retain(|&(c, _, _)| c != cg);
        self.assignments.push((cg, group, self.seq));
        self.generation += 1;
    }

    /// rmdir: the group's tasks go back to the root group; CLOSIDs above it move down.
    pub fn remove(&mut self, group: usize) {
        self.groups.remove(group);
        self.mon.remove(group);
        self.assignments.retain(|&(_, g, _)| g != group);
        for a in &mut self.assignments {
            if a.1 > group {
                a.1 -= 1;
            }
        }
        self.generation += 1;
    }

    /// The group of a task in cgroup `cg` (whose ancestors `parent` gives): the latest
    /// assignment on the cgroup or one of its ancestors; the root group if none.
    pub fn group_of(&self, mut cg: CgId, parent: impl Fn(CgId) -> Option<CgId>) -> usize {
        if self.assignments.is_empty() {
            return 0;
        }
        let mut best: Option<(u64, usize)> = None;
        loop {
            for &(c, g, s) in &self.assignments {
                if c == cg && best.is_none_or(|(bs, _)| s > bs) {
                    best = Some((s, g));
                }
            }
            match parent(cg) {
                Some(p) => cg = p,
                None => break,
            }
        }
        best.map_or(0, |(_, g)| g)
    }
}

/// A group name is one directory name (rdtgroup_mkdir): not empty, no '/', not "info" or a
/// name the root directory already has.
fn check_group_name(name: &str) -> Result<(), String> {
    if name.contains('/') || name.contains('\n') || name == "." || name == ".." {
        return Err("a group name is one directory name (no '/', not '.' or '..')".into());
    }
    if matches!(
        name,
        "info" | "mon_groups" | "mon_data" | "tasks" | "cpus" | "cpus_list" | "schemata" | "mode" | "size"
    ) {
        return Err(format!("{name:?} is a file or directory resctrl itself has"));
    }
    Ok(())
}

/// Parse a schemata write into `l3`/`mb` (per domain; domains a line does not name keep
/// their value): lines "RES:id=val;id=val", RES "L3" (hex CBM) or "MB" (decimal percent).
pub fn parse_schemata(info: &ResctrlInfo, text: &str, l3: &mut [u32], mb: &mut [u32]) -> Result<(), String> {
    for raw in text.split('\n') {
        if raw.trim().is_empty() {
            continue; // the trailing newline `echo` adds
        }
        let Some((res, doms)) = raw.split_once(':') else {
            return Err(format!("line {raw:?}: missing ':' (lines are like \"L3:0=7ff;1=7ff\")"));
        };
        let res = res.trim();
        if doms.is_empty() {
            return Err(format!("missing '{res}' value"));
        }
        let is_l3 = match res {
            "L3" => true,
            "MB" => false,
            _ => {
                return Err(format!(
                    "unknown or unsupported resource name {res:?} (this node has L3 and MB)"
                ))
            }
        };
        let mut seen = vec![false; info.domains];
        for dom in doms.split(';') {
            if dom.trim().is_empty() {
                continue;
            }
            let Some((id, val)) = dom.split_once('=') else {
                return Err(format!("{res}: missing '=' or non-numeric domain in {dom:?}"));
            };
            let Ok(id) = id.trim().parse::<usize>() else {
                return Err(format!("{res}: missing '=' or non-numeric domain in {dom:?}"));
            };
            if id >= info.domains {
                return Err(format!(
                    "{res}: no L3 domain {id} (domains are 0..{})",
                    info.domains - 1
                ));
            }
            if std::mem::replace(&mut seen[id], true) {
                return Err(format!("{res}: duplicate domain {id}"));
            }
            let val = val.trim();
            if is_l3 {
                l3[id] = cbm_validate(info, val).map_err(|e| format!("L3 domain {id}: {e}"))?;
            } else {
                mb[id] = bw_validate(info, val).map_err(|e| format!("MB domain {id}: {e}"))?;
            }
        }
    }
    Ok(())
}

/// `cbm_validate` (Intel: no sparse masks): hex, non-zero and within cbm_mask, one run of
/// 1-bits, at least min_cbm_bits long.
pub fn cbm_validate(info: &ResctrlInfo, text: &str) -> Result<u32, String> {
    let Ok(val) = u64::from_str_radix(text, 16) else {
        return Err(format!("non-hex character in the mask {text:?}"));
    };
    if (info.min_cbm_bits > 0 && val == 0) || val > info.cbm_mask() as u64 {
        return Err(format!("mask {text} out of range (cbm_mask is {:x})", info.cbm_mask()));
    }
    if val == 0 {
        return Ok(0);
    }
    let first = val.trailing_zeros();
    let run = (val >> first).trailing_ones();
    if val >> (first + run) != 0 {
        return Err(format!("the mask {val:x} has non-consecutive 1-bits"));
    }
    if run < info.min_cbm_bits {
        return Err(format!(
            "need at least {} bits in the mask (got {val:x})",
            info.min_cbm_bits
        ));
    }
    Ok(val as u32)
}

/// `bw_validate`: a decimal percent in [min_bandwidth, 100], rounded up to the granularity.
pub fn bw_validate(info: &ResctrlInfo, text: &str) -> Result<u32, String> {
    let Ok(bw) = text.parse::<u32>() else {
        return Err(format!("invalid MB value {text:?}"));
    };
    if bw < info.min_bandwidth || bw > 100 {
        return Err(format!("MB value {bw} out of range [{},{}]", info.min_bandwidth, 100));
    }
    Ok(bw.div_ceil(info.bandwidth_gran) * info.bandwidth_gran)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ResctrlInfo {
        ResctrlInfo {
            cbm_len: 11,
            min_cbm_bits: 1,
            num_closids: 4,
            bandwidth_gran: 10,
            min_bandwidth: 10,
            domains: 2,
        }
    }

    #[test]
    fn cbm_rules_of_cbm_validate() {
        let i = info();
        assert_eq!(cbm_validate(&i, "7ff"), Ok(0x7ff));
        assert_eq!(cbm_validate(&i, "0f0"), Ok(0xf0));
        // 5 = 0b101: two runs of 1-bits.
        assert!(cbm_validate(&i, "5").unwrap_err().contains("non-consecutive"));
        assert!(cbm_validate(&i, "0").unwrap_err().contains("out of range"));
        assert!(cbm_validate(&i, "fff").unwrap_err().contains("out of range"));
        assert!(cbm_validate(&i, "xyz").unwrap_err().contains("non-hex"));
        let two = ResctrlInfo {
            min_cbm_bits: 2,
            ..info()
        };
        assert!(cbm_validate(&two, "4").unwrap_err().contains("at least 2 bits"));
        assert_eq!(cbm_validate(&two, "c"), Ok(0xc));
    }

    #[test]
    fn mb_rounds_up_to_the_granularity() {
        let i = info();
        assert_eq!(bw_validate(&i, "15"), Ok(20));
        assert_eq!(bw_validate(&i, "30"), Ok(30));
        assert_eq!(bw_validate(&i, "100"), Ok(100));
        assert!(bw_validate(&i, "5").unwrap_err().contains("out of range [10,100]"));
        assert!(bw_validate(&i, "101").unwrap_err().contains("out of range"));
        assert!(bw_validate(&i, "ten").unwrap_err().contains("invalid MB value"));
    }

    #[test]
    fn partial_lines_keep_other_domains_and_bad_writes_change_nothing() {
        let mut r = Resctrl::new(info());
        r.write("be", "L3:1=3\nMB:0=15").unwrap();
        assert_eq!(r.read("be").unwrap(), "L3:0=7ff;1=3\nMB:0=20;1=100");
        let err = r.write("be", "L3:0=f\nMB:1=5").unwrap_err();
        assert!(err.starts_with("resctrl group \"be\": MB domain 1:"), "{err}");
        assert_eq!(r.read("be").unwrap(), "L3:0=7ff;1=3\nMB:0=20;1=100");
        assert!(r
            .write("be", "L2:0=f")
            .unwrap_err()
            .contains("unknown or unsupported resource"));
        assert!(r.write("be", "L3:0=f;0=f").unwrap_err().contains("duplicate domain 0"));
        assert!(r.write("be", "L3:2=f").unwrap_err().contains("no L3 domain 2"));
        assert!(r.write("be", "L3 0=f").unwrap_err().contains("missing ':'"));
    }

    #[test]
    fn closids_run_out() {
        let mut r = Resctrl::new(info()); // 4 CLOSIDs: the root and three more
        for g in ["a", "b", "c"] {
            r.write(g, "").unwrap();
        }
        assert!(r.write("d", "").unwrap_err().contains("no free CLOSID"));
        r.remove(r.group_index("a").unwrap());
        r.write("d", "").unwrap();
        assert_eq!(r.names(), ["", "b", "c", "d"]);
    }

    #[test]
    fn last_assignment_wins_over_the_subtree() {
        let mut r = Resctrl::new(info());
        r.write("a", "").unwrap();
        r.write("b", "").unwrap();
        // cgroups: 0 root, 1 = "kubepods" (child of 0), 2 = "kubepods/be" (child of 1)
        let parent = |c: CgId| [None, Some(0), Some(1)][c];
        r.assign(2, 2);
        r.assign(1, 1);
        assert_eq!(
            r.group_of(2, parent),
            1,
            "the parent's later assignment covers the child"
        );
        r.assign(2, 2);
        assert_eq!(r.group_of(2, parent), 2);
        assert_eq!(r.group_of(1, parent), 1);
        r.remove(1);
        assert_eq!(r.group_of(2, parent), 1, "b is now CLOSID 1");
        assert_eq!(r.group_of(1, parent), 0, "a's tasks went back to the root group");
    }
}
