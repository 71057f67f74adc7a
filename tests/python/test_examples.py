"""The runnable examples of the README work (and check their own answers)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("script", ["python_tour.py", "ray_tour.py"])
def test_example_runs(script, tmp_path):
    if script.startswith("ray"):
        pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / script), str(tmp_path)], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    assert "modeled" in run.stdout
