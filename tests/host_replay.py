"""Whether this host can run replay's host tests: one reason why not, or None."""

from __future__ import annotations

import os

from replay.cgroupfs import detect_layout
from sim.errors import HostError


def unavailable(io: bool = False) -> str | None:
    """Root, a cgroup layout (with the block IO controller when `io`), our own cgroup
    writable in every hierarchy."""
    if os.geteuid() != 0:
        return "replay needs root"
    try:
        layout = detect_layout(io=io)
    except HostError as err:
        return str(err)
    for key in layout.keys:
        if not os.access(layout.own_dir(key), os.W_OK):
            return f"{layout.own_dir(key)} is not writable"
    return None
