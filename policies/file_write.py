"""A write to a cgroup (or resctrl) file by its name, for the files rubik writes that the
simulator has no `Knob` for yet (memory.qos_level, memory.soft_limit_in_bytes,
memory.force_empty, resctrl schemata and tasks): a decision can still say exactly what the
agent writes, and `knob_write` turns it into a `KnobWrite` where the knob table has the file."""

from __future__ import annotations

from dataclasses import dataclass

from policies.cgroup import Knob, KnobWrite


@dataclass(frozen=True)
class FileWrite:
    """One file an agent writes: the cgroup (or resctrl group), the file's name, the text."""

    cgroup: str
    file: str
    value: str

    def knob_write(self) -> KnobWrite | None:
        """The same write as a KnobWrite, or None if the file is not in the knob table."""
        knob = next((k for k in Knob if k.v1 == self.file), None)
        if knob is None:
            return None
        return KnobWrite(self.cgroup, knob, self.value if knob.values.text else int(self.value))

    def __str__(self) -> str:
        return f"{self.cgroup}/{self.file} = {self.value}"
