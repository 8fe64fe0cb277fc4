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
