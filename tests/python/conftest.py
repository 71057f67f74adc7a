"""Fixtures of the Python tests: arrays in temporary directories, small tables, the CLI binary."""

from __future__ import annotations

import os
import pathlib
import random
import shutil

import pyarrow as pa
import pytest

import insitu

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def make_array(tmp_path):
    """Creates arrays (closed at the end of the test): ``make_array(devices=4, profile="tiny")``."""
    made = []

    def make(devices: int = 4, profile: str = "tiny", capacity="64MiB", name="arr") -> insitu.Array:
        a = insitu.Array.create(tmp_path / name, devices=devices, profile=profile, capacity=capacity)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


@pytest.fixture
def arr(make_array) -> insitu.Array:
    return make_array()


def orders(n: int, seed: int = 7) -> pa.Table:
    """``n`` rows of an orders-like table with a unique, shuffled key."""
    rng = random.Random(seed)
    keys = list(range(n))
    rng.shuffle(keys)
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "cust": pa.array([rng.randrange(50) for _ in range(n)], pa.int32()),
            "price": pa.array([rng.random() * 100 for _ in range(n)], pa.float64()),
            "note": pa.array([f"n{rng.randrange(1000)}" if rng.random() > 0.1 else None for _ in range(n)]),
        }
    )


@pytest.fixture
def cli() -> str:
    """The `insitu` binary built by `cargo test`/`cargo build` (INSITU_BIN overrides)."""
    path = os.environ.get("INSITU_BIN") or shutil.which("insitu") or str(REPO / "target" / "debug" / "insitu")
    if not os.path.exists(path):
        pytest.skip("no insitu binary: run `cargo build -p insitu-cli` (make test builds it)")
    return path
