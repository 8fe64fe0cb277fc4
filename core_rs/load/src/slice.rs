//! EEVDF custom slices on the host: `sched_attr.sched_runtime` of a fair task (Linux 6.12+).
//!
//! What the kernel does with it (kernel/sched/syscalls.c, 6.12+; commit 857b158dc5e8 "sched/eevdf:
//! Use sched_attr::sched_runtime to set request/slice suggestion"):
//!
//! * `__setscheduler_params`, for a fair policy: a non-zero `sched_runtime` sets
//!   `se.custom_slice = 1` and `se.slice = clamp(sched_runtime, 0.1 ms, 100 ms)`; zero puts
//!   the task back on `sysctl_sched_base_slice`. No error for a value out of range: it is clamped.
//! * `get_params` (sched_getattr) of a fair task reports `sched_runtime = se.slice`. Before 6.12
//!   a fair task's `sched_runtime` is ignored on the way in and reported as 0 on the way out, so
//!   reading it back is how this code tells a kernel that took the slice from one that did not.
//!
//! Inheritance (kernel/sched/core.c, 6.12+): `__sched_fork` no longer sets `se.slice` (the same
//! commit removed `p->se.slice = sysctl_sched_base_slice;` from it), so a child made by fork or
//! clone — a process or a thread — keeps the `se.slice` and `se.custom_slice` that
//! `dup_task_struct` copied from its parent. `sched_fork` resets them to the base slice only
//! under `sched_reset_on_fork` (SCHED_FLAG_RESET_ON_FORK), which `set_own` clears. exec does
//! not touch the scheduling attributes (fs/exec.c `begin_new_exec` has no sched call; sched(7):
//! policy and attributes are preserved across execve), so a wrapper that sets its own slice and
//! then execs a server gives the server, and every process and thread it starts, that slice.

/// `struct sched_attr` as include/uapi/linux/sched/types.h lays it out, SCHED_ATTR_SIZE_VER1
/// (56 bytes: the utilization clamps included; they are unused without their flags).
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

const SCHED_ATTR_SIZE_VER1: u32 = 56;
const _: () = assert!(std::mem::size_of::<SchedAttr>() == SCHED_ATTR_SIZE_VER1 as usize);

/// The fair policies (kernel/sched/sched.h `fair_policy`): SCHED_NORMAL, SCHED_BATCH, SCHED_IDLE.
fn fair_policy(policy: u32) -> bool {
    [libc::SCHED_OTHER, libc::SCHED_BATCH, libc::SCHED_IDLE].contains(&(policy as i32))
}

fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EINVAL) => "EINVAL".into(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::E2BIG) => "E2BIG".into(),
        Some(libc::ENOSYS) => "ENOSYS".into(),
        _ => "error".into(),
    }
}

fn get_own() -> Result<SchedAttr, String> {
    let mut attr = SchedAttr::default();
    // SAFETY: sched_getattr(2) writes at most `size` (56) bytes into the attr we own; tid 0 is
    // the calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            SCHED_ATTR_SIZE_VER1,
            0,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("sched_getattr failed: {} ({e})", errno_name(&e)));
    }
    Ok(attr)
}

/// Give the calling thread the custom slice `ns` (sched_attr.sched_runtime), keeping its fair
/// policy and nice value, and check that the kernel took it. Threads and processes it starts
/// afterwards inherit it (see the module's notes); threads that already exist keep theirs.
pub fn set_own(ns: u64) -> Result<(), String> {
    let now = get_own()?;
    if !fair_policy(now.sched_policy) {
        return Err(format!(
            "--slice-ns {ns}: this process runs under scheduling policy {}, not a fair one (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE): \
             custom slices are for fair tasks",
            now.sched_policy
        ));
    }
    let attr = SchedAttr {
        size: SCHED_ATTR_SIZE_VER1,
        sched_policy: now.sched_policy,
        // 0: no SCHED_FLAG_RESET_ON_FORK, so that children inherit the slice
        sched_flags: 0,
        sched_nice: now.sched_nice,
        sched_runtime: ns,
        ..SchedAttr::default()
    };
    // SAFETY: sched_setattr(2) reads `size` bytes of the attr we own; tid 0 is this thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "--slice-ns {ns}: sched_setattr(sched_runtime = {ns}) failed: {} ({e})",
            errno_name(&e)
        ));
    }
    let got = get_own()?.sched_runtime;
    let want = clamp(ns);
    if got != want {
        return Err(format!(
            "--slice-ns {ns}: the kernel kept a slice of {got} ns, not {want}: custom slices need Linux 6.12 or later \
             (sched_getattr reports a fair task's se.slice from 6.12 on, 0 before)"
        ));
    }
    Ok(())
}

/// What `__setscheduler_params` makes of a non-zero sched_runtime: clamp_t(u64, runtime,
/// NSEC_PER_MSEC/10, NSEC_PER_MSEC*100).
pub fn clamp(ns: u64) -> u64 {
    ns.clamp(100_000, 100_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_is_the_kernels_range() {
        // syscalls.c: NSEC_PER_MSEC/10 (HZ=1000 * 10) to NSEC_PER_MSEC*100 (HZ=100 / 10)
        assert_eq!(clamp(1), 100_000);
        assert_eq!(clamp(300_000), 300_000);
        assert_eq!(clamp(u64::MAX), 100_000_000);
    }
}
