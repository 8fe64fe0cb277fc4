"""`colosim-load` for a pip-installed colosim: the console script (and `python -m replay.load`).

A wheel carries one Rust library, the extension `sim._core`, and no second binary; the
extension holds colosim-load's code (core_rs/load) as `load_main`, which this runs with the
arguments and the exit status of the binary. Replay starts it as it starts the binary (see
replay.workloads.load_command) and signals it the same way: SIGINT and SIGTERM end it at once
(Python's SIGINT handler would wait for the Rust call to return), SIGKILL as ever; at the
deadline the Rust code writes the result and returns.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import signal
import sys
from pathlib import Path
from types import ModuleType


def _core() -> ModuleType:
    """`sim._core` without running sim/__init__.py, whose imports (numpy, pydantic, ...) take
    a quarter of a second by which every workload would start late."""
    if "sim" in sys.modules:
        from sim import _core

        return _core
    spec = importlib.util.find_spec("sim")  # finds the package, does not import it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_core{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader("sim._core", str(path))
                found = importlib.util.spec_from_loader("sim._core", loader)
                if found is None:
                    continue
                module = importlib.util.module_from_spec(found)
                loader.exec_module(module)
                return module
    raise ImportError("colosim-load: the extension sim._core is not built (pip install colosim, or make setup)")


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    args = sys.argv[1:] if argv is None else argv
    return _core().load_main(["colosim-load", *args])


if __name__ == "__main__":
    sys.exit(main())
