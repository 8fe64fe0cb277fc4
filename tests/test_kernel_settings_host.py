"""replay.host_kernel on this host: what must hold of any Linux kernel's reading, and HZ
measured from jiffies agreeing with the kernel config's CONFIG_HZ where both exist."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from replay.host_kernel import HZ_CHOICES, hz_from_config, measure_hz, parse_config, parse_version, read_host_kernel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads a Linux kernel")


def test_this_hosts_reading() -> None:
    hk = read_host_kernel()
    assert hk.hz.value in HZ_CHOICES
    assert parse_version(hk.release.value) >= (2, 6)
    assert hk.version.value == ".".join(map(str, parse_version(hk.release.value)))
    enabled = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if enabled.exists():
        assert hk.autogroup.value == (enabled.read_text().strip() == "1")
    assert hk.preempt.value in {"none", "voluntary", "full", "lazy", "rt", "unknown"}
    for name, s in hk.items():
        assert s.source, f"{name} has no source"


def test_measured_hz_agrees_with_the_config() -> None:
    import gzip

    config = None
    for p in (Path(f"/boot/config-{os.uname().release}"), Path("/proc/config.gz")):
        if p.exists():
            data = p.read_bytes()
            config = parse_config((gzip.decompress(data) if p.suffix == ".gz" else data).decode())
            break
    timer_list = Path("/proc/timer_list")
    if config is None or hz_from_config(config) is None or not timer_list.exists():
        pytest.skip("needs both the kernel config and /proc/timer_list")
    try:
        timer_list.read_text()
    except OSError as e:
        pytest.skip(f"/proc/timer_list: {e}")
    got = measure_hz(timer_list.read_text)
    assert got is not None and got.value == hz_from_config(config), got


def test_colosim_host_kernel_prints_the_table_and_a_valid_kernel_toml() -> None:
    proc = subprocess.run([sys.executable, "-m", "sim", "host-kernel"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "| hz " in proc.stdout and "source" in proc.stdout
    toml = proc.stdout[proc.stdout.index("\n[kernel]") :]
    kernel = tomllib.loads(toml)["kernel"]
    assert kernel["hz"] in HZ_CHOICES and isinstance(kernel["autogroup"], bool)


def test_debugfs_read_privately_agrees_with_the_release_defaults() -> None:
    """The opt-in reading (debugfs mounted in a child's own mount namespace) against the
    defaults replay assumes without it: the kernel's own base slice and feature bitmask are the
    independent truth for default_base_slice and FEATURES. The host's mounts stay as they were."""
    import shutil

    from replay.cgroupfs import HostError
    from replay.host_kernel import FEATURES, default_base_slice, read_in_private_debugfs

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    mounts = Path("/proc/self/mounts").read_text()
    try:
        private = read_in_private_debugfs()
    except HostError as e:
        pytest.skip(str(e))
    assert Path("/proc/self/mounts").read_text().count(" debugfs ") == mounts.count(" debugfs "), "host mounts unchanged"
    plain = read_host_kernel()
    if not private.base_slice_ns.source.startswith("debugfs"):
        pytest.skip("debugfs shows no base slice here")
    version = parse_version(plain.release.value)
    if plain.base_slice_ns.source.startswith("default"):
        assert private.base_slice_ns.value == default_base_slice(version, os.cpu_count() or 1)
    if plain.version.value in FEATURES and private.sched_features.source.startswith("debugfs"):
        assert private.sched_features.value == dict(FEATURES[plain.version.value]), "this kernel runs features.h's defaults"
