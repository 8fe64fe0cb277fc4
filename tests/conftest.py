"""Shared fixtures.  The schema and CLI-error tests need no Rust core; the others run the
Python front on tests/fake_core.py instead of sim._core."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # plain `pytest` (not `python -m pytest`) from anywhere
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_core import FakeNode  # noqa: E402


@pytest.fixture
def fake_core(monkeypatch: pytest.MonkeyPatch) -> list[FakeNode]:
    """Make NodeEnvironment build FakeNodes; yields the list of nodes built."""
    import sim.environment

    built: list[FakeNode] = []

    def make(spec_json: str) -> FakeNode:
        node = FakeNode(spec_json)
        built.append(node)
        return node

    monkeypatch.setattr(sim.environment, "_core_node", make)
    return built


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session", autouse=True)
def session_cgroup():
    """The session's own cgroup (tests/host_replay.py enter_session_cgroup): on a host whose
    cgroup hierarchies other containers share, what replay leaves (or not) is ours to judge."""
    from host_replay import enter_session_cgroup, leave_session_cgroup

    made = enter_session_cgroup()
    yield
    if made:
        for line in leave_session_cgroup(made):
            print(f"\nsession cgroup: {line}", file=sys.stderr)


@pytest.fixture
def outside_session():
    """The test runs where the session started, not in its own cgroup (autogroups apply only
    to tasks in the root cpu cgroup)."""
    from host_replay import outside_session_cgroup

    with outside_session_cgroup():
        yield
