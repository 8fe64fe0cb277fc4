"""What the ablation scripts share (rounds_ablation.py, cross_cpu_ablation.py): a suite's
fidelity.json from the command line, and `colosim fidelity --repredict` of a changed copy of it.
Nothing runs on the host."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def suite_from_command_line(description: str, default_out: str) -> tuple[dict[str, Any], Path]:
    """The suite document named on the command line, and the output folder (made)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("suite", type=Path, help="a fidelity.json that kept alone_measured")
    ap.add_argument("--out", type=Path, default=Path(default_out))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return json.loads(args.suite.read_text()), args.out


def repredict(doc: dict[str, Any], out: Path, k: int) -> dict[str, Any]:
    """Variant `k`: `doc` written to OUT/k.json, calibrated and predicted again into OUT/k."""
    (out / f"{k}.json").write_text(json.dumps(doc))
    cmd = [sys.executable, "-m", "sim", "fidelity", "--repredict", str(out / f"{k}.json"), "--out", str(out / str(k))]
    subprocess.run(cmd, check=True, capture_output=True)
    return json.loads((out / str(k) / "fidelity.json").read_text())
