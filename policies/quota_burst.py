"""rubik's quotaBurst service (../shared/reference/rubik.md §4.1; rubik
`pkg/services/quotaburst/quotaburst.go`): the pod annotation `volcano.sh/quota-burst-time`
(µs, an integer >= 0) goes into cpu.cfs_burst_us of each container, then the pod gets the
burst times the number of containers that took it.

A cgroup takes the burst only if its cpu.cfs_burst_us exists, its quota and period read as
integers, quota < period × NumCPU (an unlimited, -1, quota passes this check but then fails
the next) and quota >= burst. A container that refuses is logged and skipped; the pod's own
write is tried even when no container took it (a pod burst of 0). Only a bad annotation is an
error of AddPod.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.file_write import FileWrite

ANNOTATION = "volcano.sh/quota-burst-time"
BURST, QUOTA, PERIOD = "cpu.cfs_burst_us", "cpu.cfs_quota_us", "cpu.cfs_period_us"


class QuotaBurstError(ValueError):
    """A bad `volcano.sh/quota-burst-time` annotation."""


def _int64(text: str) -> int | None:
    try:
        v = int(text.strip(), 10)
    except ValueError:
        return None
    return v if -(2**63) <= v < 2**63 else None


def parse_burst(text: str) -> int:
    """parseQuotaBurst: a base-10 int64 >= 0."""
    v = _int64(text)
    if v is None:
        raise QuotaBurstError(f"{ANNOTATION}: not an integer (µs): {text!r}")
    if v < 0:
        raise QuotaBurstError(f"{ANNOTATION}: quota burst value should be positive (got {v})")
    return v


def refusal(burst: int, files: Mapping[str, str] | None, ncpus: int) -> str | None:
    """setQuotaBurst's checks on one cgroup (`files`: its readable files' text; None: the
    cgroup is gone): why the burst is not written, or None."""
    files = files or {}
    if BURST not in files:
        return f"{BURST} missing"
    quota = _int64(files[QUOTA]) if QUOTA in files else None
    period = _int64(files[PERIOD]) if PERIOD in files else None
    if quota is None or period is None:
        return "quota or period unreadable"
    if quota >= period * ncpus:
        return f"quota {quota} µs is the whole node ({ncpus} × period {period} µs) or more"
    if quota < burst:
        return f"burst {burst} µs above quota {quota} µs"
    return None


def pod_writes(
    pod: str, containers: list[str], annotation: str | None, files: Mapping[str, Mapping[str, str]], ncpus: int
) -> list[FileWrite]:
    """setPodQuotaBurst: the writes for a pod (nothing without the annotation)."""
    if not annotation:
        return []
    burst = parse_burst(annotation)
    out = [FileWrite(cg, BURST, str(burst)) for cg in containers if refusal(burst, files.get(cg), ncpus) is None]
    pod_burst = burst * len(out)
    if refusal(pod_burst, files.get(pod), ncpus) is None:
        out.append(FileWrite(pod, BURST, str(pod_burst)))
    return out


def same(old_annotation: str | None, new_annotation: str | None, old_ids: list[str], new_ids: list[str]) -> bool:
    """UpdatePod's `same`: the annotation, the number of containers and their ids unchanged."""
    return old_annotation == new_annotation and len(old_ids) == len(new_ids) and set(new_ids) <= set(old_ids)
