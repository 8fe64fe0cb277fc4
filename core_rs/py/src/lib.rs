//! `sim._core`: the thin PyO3 face of colosim-core. Coarse calls only (build once, run to a
//! time, read results as bytes). Every user error becomes ValueError/KeyError with the
//! core's message; a panic inside the core becomes RuntimeError instead of aborting Python.

use colosim_core::{Node as CoreNode, SpecError};
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn value_err(e: SpecError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn key_err(e: SpecError) -> PyErr {
    PyKeyError::new_err(e.to_string())
}

/// Run `f`, turning a Rust panic into a Python RuntimeError that says it is our bug.
fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!(
                "internal error in colosim core (please report): {msg}"
            )))
        }
    }
}

fn u64_bytes<'py>(py: Python<'py>, v: &[u64]) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    PyBytes::new(py, &out)
}

#[pyclass(module = "sim._core", unsendable)]
struct Node {
    inner: CoreNode,
    /// Set after a panic: the model's state can no longer be trusted.
    poisoned: bool,
}

impl Node {
    fn check(&self) -> PyResult<()> {
        if self.poisoned {
            return Err(PyRuntimeError::new_err(
                "this Node hit an internal error earlier; build a new one",
            ));
        }
        Ok(())
    }
}

#[pymethods]
impl Node {
    #[new]
    fn new(spec_json: &str) -> PyResult<Self> {
        guarded(|| {
            Ok(Node {
                inner: CoreNode::from_json(spec_json).map_err(value_err)?,
                poisoned: false,
            })
        })
    }

    fn run_until(&mut self, py: Python<'_>, t_ns: u64) -> PyResult<()> {
        self.check()?;
        let inner = &mut self.inner;
        let r = py.allow_threads(|| guarded(|| inner.run_until(t_ns).map_err(value_err)));
        if let Err(e) = &r {
            if e.is_instance_of::<PyRuntimeError>(py) {
                self.poisoned = true;
            }
        }
        r
    }

    fn now(&self) -> u64 {
        self.inner.now
    }

    #[getter]
    fn ncpus(&self) -> usize {
        self.inner.ncpus()
    }

    /// Per logical CPU: (core id, socket, NUMA node), as /sys/devices/system/cpu shows them.
    fn cpu_topology(&self) -> Vec<(usize, usize, usize)> {
        let t = &self.inner.topo;
        (0..t.ncpus)
            .map(|c| (t.core_of[c], t.socket_of[c], t.numa_of[c]))
            .collect()
    }

    fn cgroup_names(&self) -> Vec<String> {
        let n = &self.inner;
        n.cgroups[..n.nr_reported_cgroups()]
            .iter()
            .map(|g| g.name.clone())
            .collect()
    }

    fn service_names(&self) -> Vec<String> {
        self.inner.service_names.clone()
    }

    /// Write a knob as its file takes it: an int (cpu.*) or text ("0-3" for cpuset.*).
    fn write(&mut self, cgroup: &str, knob: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check()?;
        let text: String = if let Ok(s) = value.extract::<String>() {
            s
        } else if let Ok(i) = value.extract::<i64>() {
            if value.is_instance_of::<pyo3::types::PyBool>() {
                return Err(PyValueError::new_err(format!("{knob}: expects an integer, not a bool")));
            }
            i.to_string()
        } else {
            return Err(PyValueError::new_err(format!(
                "{knob}: expects an int or a str (got {})",
                value.get_type().name()?
            )));
        };
        guarded(|| {
            self.inner.cgroup_id(cgroup).map_err(key_err)?;
            self.inner.write(cgroup, knob, &text).map_err(value_err)
        })
    }

    /// Read a knob as its file shows it: int for cpu.*, str for cpuset.*.
    fn read(&mut self, py: Python<'_>, cgroup: &str, knob: &str) -> PyResult<PyObject> {
        self.inner.cgroup_id(cgroup).map_err(key_err)?;
        let text = self.inner.read(cgroup, knob).map_err(value_err)?;
        Ok(
            match (
                knob.starts_with("cpuset.") || knob.ends_with(".pressure"),
                text.parse::<i64>(),
            ) {
                (false, Ok(v)) => v.into_pyobject(py)?.into_any().unbind(),
                _ => text.into_pyobject(py)?.into_any().unbind(),
            },
        )
    }

    /// Change a workload's demand while it runs: ("duty", "cores" or "memory_bytes") or ("open_loop", "rate_per_s").
    fn set_workload(&mut self, name: &str, key: &str, value: f64) -> PyResult<()> {
        self.check()?;
        guarded(|| self.inner.set_workload(name, key, value).map_err(value_err))
    }

    /// What /sys/fs/resctrl/info says (seam20.md).
    fn resctrl_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let hw = &self.inner.hw;
        let i = &hw.resctrl.info;
        let d = PyDict::new(py);
        d.set_item("cbm_mask", format!("{:x}", i.cbm_mask()))?;
        d.set_item("min_cbm_bits", i.min_cbm_bits)?;
        d.set_item("num_closids", i.num_closids)?;
        d.set_item("bandwidth_gran", i.bandwidth_gran)?;
        d.set_item("min_bandwidth", i.min_bandwidth)?;
        d.set_item("l3_domains", (0..i.domains).collect::<Vec<usize>>())?;
        d.set_item("llc_bytes", hw.llc_bytes)?;
        Ok(d)
    }

    /// Write a group's schemata (creating the group), as `echo ... > schemata`.
    fn resctrl_write(&mut self, group: &str, schemata: &str) -> PyResult<()> {
        self.check()?;
        guarded(|| self.inner.resctrl_write(group, schemata).map_err(value_err))
    }

    fn resctrl_read_schemata(&self, group: &str) -> PyResult<String> {
        self.inner.resctrl_group(group).map_err(key_err)?;
        Ok(self.inner.hw.resctrl.read(group).unwrap_or_default())
    }

    /// Every task of `cgroup`'s subtree, present and future, joins `group`.
    fn resctrl_assign(&mut self, group: &str, cgroup: &str) -> PyResult<()> {
        self.check()?;
        self.inner.resctrl_group(group).map_err(key_err)?;
        self.inner.cgroup_id(cgroup).map_err(key_err)?;
        guarded(|| self.inner.resctrl_assign(group, cgroup).map_err(value_err))
    }

    fn resctrl_remove(&mut self, group: &str) -> PyResult<()> {
        self.check()?;
        if !group.is_empty() {
            self.inner.resctrl_group(group).map_err(key_err)?;
        }
        guarded(|| self.inner.resctrl_remove(group).map_err(value_err))
    }

    fn resctrl_groups(&self) -> Vec<String> {
        self.inner.hw.resctrl.names()
    }

    /// mon_data per L3 domain: llc_occupancy (bytes now), mbm_total_bytes, mbm_local_bytes.
    fn resctrl_mon<'py>(&mut self, py: Python<'py>, group: &str) -> PyResult<Bound<'py, PyDict>> {
        self.check()?;
        let g = self.inner.resctrl_group(group).map_err(key_err)?;
        let mon = guarded(|| Ok(self.inner.resctrl_mon(g)))?;
        let d = PyDict::new(py);
        for (dom, (occ, total, local)) in mon.into_iter().enumerate() {
            let e = PyDict::new(py);
            e.set_item("llc_occupancy", occ)?;
            e.set_item("mbm_total_bytes", total)?;
            e.set_item("mbm_local_bytes", local)?;
            d.set_item(dom, e)?;
        }
        Ok(d)
    }

    /// perf_event's cgroup mode over the subtree: cycles, instructions, cache-references, cache-misses.
    fn perf_counters<'py>(&mut self, py: Python<'py>, cgroup: &str) -> PyResult<Bound<'py, PyDict>> {
        self.check()?;
        let id = self.inner.cgroup_id(cgroup).map_err(key_err)?;
        let counts = guarded(|| Ok(self.inner.perf_counters(id)))?;
        let d = PyDict::new(py);
        for (k, v) in counts {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    fn reset_stats(&mut self) -> PyResult<()> {
        self.check()?;
        guarded(|| {
            self.inner.reset_stats();
            Ok(())
        })
    }

    /// The cgroup's wake-to-run delay histogram since the last reset (hierarchical): runqlat's
    /// log2 µs buckets (stats.rs `runqlat_bucket`).
    fn runqlat(&mut self, cgroup: &str) -> PyResult<Vec<u64>> {
        let id = self.inner.cgroup_id(cgroup).map_err(key_err)?;
        let n = &self.inner;
        Ok((0..colosim_core::stats::RUNQLAT_BUCKETS)
            .map(|k| n.hierarchical(|g| g.stats.runqlat[k])[id])
            .collect())
    }

    /// Per CPU, the ns since the last reset the cgroup had k of its tasks runnable there
    /// (hierarchical), k = 0 … 15, the last that many or more (cfs_rq.rs `nr_time`).
    fn runnable_time(&mut self, cgroup: &str) -> PyResult<Vec<Vec<u64>>> {
        self.inner.runnable_time(cgroup).map_err(key_err)
    }

    /// The cgroup's run segments since the last reset (hierarchical), in runqlat's buckets:
    /// `preempted` (switched out runnable), `blocked` (switched out asleep), and
    /// `preempted_wait` (a preempted task's wait until it ran again).
    fn run_segments<'py>(&mut self, py: Python<'py>, cgroup: &str) -> PyResult<Bound<'py, PyDict>> {
        let id = self.inner.cgroup_id(cgroup).map_err(key_err)?;
        let n = &self.inner;
        let d = PyDict::new(py);
        type Pick = fn(&colosim_core::stats::CgroupStats, usize) -> u64;
        let kinds: [(&str, Pick); 3] = [
            ("preempted", |g, k| g.run_preempted[k]),
            ("blocked", |g, k| g.run_blocked[k]),
            ("preempted_wait", |g, k| g.preempted_wait[k]),
        ];
        for (name, pick) in kinds {
            let hist: Vec<u64> = (0..colosim_core::stats::RUNQLAT_BUCKETS)
                .map(|k| n.hierarchical(|g| pick(&g.stats, k))[id])
                .collect();
            d.set_item(name, hist)?;
        }
        Ok(d)
    }

    fn cgroup_stats<'py>(&mut self, py: Python<'py>, cgroup: &str) -> PyResult<Bound<'py, PyDict>> {
        let id = self.inner.cgroup_id(cgroup).map_err(key_err)?;
        self.inner.settle();
        let n = &self.inner;
        let d = PyDict::new(py);
        d.set_item("usage_ns", n.hierarchical(|g| g.stats.usage_ns)[id])?;
        d.set_item("wait_ns", n.hierarchical(|g| g.stats.wait_ns)[id])?;
        d.set_item("nr_switches", n.hierarchical(|g| g.stats.nr_switches)[id])?;
        d.set_item("nr_migrations", n.hierarchical(|g| g.stats.nr_migrations)[id])?;
        d.set_item("nr_running", n.nr_running_in(id))?;
        d.set_item("nr_tasks", n.nr_tasks_in(id))?;
        // cpu.stat (cgroup v1 names; times in ns), since the last reset.
        let st = n.cgroups[id].cpu_stat();
        d.set_item("nr_periods", st.nr_periods)?;
        d.set_item("nr_throttled", st.nr_throttled)?;
        d.set_item("throttled_time", st.throttled_time)?;
        d.set_item("nr_bursts", st.nr_bursts)?;
        d.set_item("burst_time", st.burst_time)?;
        // cpu.pressure totals (ns) since the last reset.
        let g = &n.cgroups[id];
        d.set_item("psi_some_ns", g.psi.total[0] - g.psi_base[0])?;
        d.set_item("psi_full_ns", g.psi.total[1] - g.psi_base[1])?;
        // memcg (bytes; events cumulative, hierarchical as v2's memory.events), when the
        // node's memory is modelled
        if let Some(m) = &n.memory {
            let c = &m.cgs[id];
            d.set_item("memory_current", c.usage)?;
            d.set_item("memory_anon", c.anon)?;
            d.set_item("memory_file", c.file)?;
            d.set_item("memory_swap", c.swap)?;
            d.set_item("memory_peak", c.peak)?;
            d.set_item("memory_events_low", c.events.low)?;
            d.set_item("memory_events_high", c.events.high)?;
            d.set_item("memory_events_max", c.events.max)?;
            d.set_item("memory_events_oom", c.events.oom)?;
            d.set_item("memory_events_oom_kill", c.events.oom_kill)?;
            // memory.pressure SOME and FULL totals (ns) since the last reset
            let g = &n.cgroups[id];
            d.set_item("memory_psi_some_ns", g.mem_psi.total[0] - g.mem_psi_base[0])?;
            d.set_item("memory_psi_full_ns", g.mem_psi.total[1] - g.mem_psi_base[1])?;
        }
        // blkio (bytes and IOs as the device moved them; wait: submission to completion) and
        // the link, since the last reset, when the node has them
        if let Some(io) = n.io_stat(id) {
            d.set_item("io_read_bytes", io.read_bytes.round() as u64)?;
            d.set_item("io_write_bytes", io.write_bytes.round() as u64)?;
            d.set_item("io_read_ios", io.read_ios)?;
            d.set_item("io_write_ios", io.write_ios)?;
            d.set_item("io_wait_ns", io.wait_ns)?;
        }
        if let Some(tx) = n.net_tx(id) {
            d.set_item("net_tx_bytes", tx.round() as u64)?;
        }
        Ok(d)
    }

    /// The node's memory: total, free, swap, global OOM kills; None when not modelled.
    fn memory_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(m) = &self.inner.memory else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("total", m.total)?;
        d.set_item("free", m.free())?;
        d.set_item("available", m.available())?;
        d.set_item("swap_total", m.swap_total)?;
        d.set_item("global_ooms", m.global_ooms)?;
        Ok(Some(d))
    }

    /// Tasks each workload lost to the OOM killer, by workload name.
    fn oom_kills<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, k) in self.inner.workload_names.iter().zip(&self.inner.oom_kills) {
            d.set_item(name, *k)?;
        }
        Ok(d)
    }

    /// CPU ns of a workload's tasks since time 0, wherever they run.
    fn workload_usage(&mut self, name: &str) -> PyResult<u64> {
        self.inner.settle();
        self.inner.workload_usage(name).map_err(key_err)
    }

    fn service_stats<'py>(&mut self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let id = self.inner.service_id(name).map_err(key_err)?;
        self.inner.settle_drops();
        let s = &self.inner.services[id];
        let d = PyDict::new(py);
        d.set_item("started", s.started)?;
        d.set_item("completed", s.completed)?;
        d.set_item("dropped", s.dropped)?;
        // a file server's page-cache hits and misses (0 for other kinds), since the last reset
        d.set_item("hits", s.hits)?;
        d.set_item("misses", s.misses)?;
        // a closed loop's messages with a cross_cpu cost, and those that crossed CPUs
        d.set_item("exchanges", s.exchanges)?;
        d.set_item("crossed", s.crossed)?;
        Ok(d)
    }

    fn service_latencies<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let s = &self.inner.services[self.inner.service_id(name).map_err(key_err)?];
        Ok(u64_bytes(py, &s.latencies))
    }

    fn service_completions<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let s = &self.inner.services[self.inner.service_id(name).map_err(key_err)?];
        Ok(u64_bytes(py, &s.completions))
    }

    fn cpu_busy<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        self.inner.settle();
        u64_bytes(py, &self.inner.cpu_busy_reported())
    }

    fn timeseries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner.series;
        let d = PyDict::new(py);
        d.set_item("t_ns", u64_bytes(py, &s.t_ns))?;
        d.set_item("usage_ns", u64_bytes(py, &s.usage_ns))?;
        d.set_item("completed", u64_bytes(py, &s.completed))?;
        d.set_item("nr_throttled", u64_bytes(py, &s.nr_throttled))?;
        d.set_item("throttled_ns", u64_bytes(py, &s.throttled_ns))?;
        d.set_item("memory_bytes", u64_bytes(py, &s.memory_bytes))?;
        d.set_item("io_bytes", u64_bytes(py, &s.io_bytes))?;
        d.set_item("net_bytes", u64_bytes(py, &s.net_bytes))?;
        Ok(d)
    }

    fn events(&self) -> u64 {
        self.inner.events
    }
}

/// colosim-load in this process (the `colosim-load` console script of a pip-installed
/// colosim): `argv` as the binary gets it, program name first; returns its exit status at
/// the deadline, the result written. The GIL is released for the whole run.
#[pyfunction]
fn load_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.allow_threads(|| colosim_load::run(argv))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Node>()?;
    m.add_function(wrap_pyfunction!(load_main, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // [kernel] sched_features: the features.h names the core takes (acted on, then accepted).
    let names: Vec<&str> = colosim_core::sched_features::MODELLED
        .iter()
        .chain(colosim_core::sched_features::IGNORED.iter())
        .copied()
        .collect();
    m.add("SCHED_FEATURES", names)?;
    Ok(())
}
