#!/usr/bin/env python3
"""Python API overhead (issue 10): TPC-H lineitem SF1 read back into a pyarrow.Table with
`insitu.Array.get_table` (4 smartssd devices) vs `pyarrow.parquet.read_table` of the same data, side by side,
interleaved, in one run. Also splits insitu's time into the host operator (its report's wall time: reading the
parts over the command set and decoding them into Arrow) and what the Python front adds on top.

Builds a release wheel of the package into target/bench/venv (with tpchgen-cli and pyarrow) first; data goes
under target/bench. Usage: bench/python_api.py [--sf 1] [--runs 5]
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys

from common import PY, ROOT, VENV, WORK, append_results, ensure_venv, tpch

INNER = r'''
import json, shutil, sys, time
import pyarrow.parquet as pq
import insitu
src, data, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
shutil.rmtree(data, ignore_errors=True)
with insitu.Array.create(data, devices=4, profile="smartssd", capacity="4GiB") as arr:
    arr.put_table(src, "lineitem", key="l_partkey")
    t = arr.get_table("lineitem"); p = pq.read_table(src)  # warm both
    # The same rows; string views come back as strings (what insitu stores) and without Parquet's field ids.
    assert t.num_rows == p.num_rows and t.column_names == p.column_names
    keys = [("l_orderkey", "ascending"), ("l_linenumber", "ascending")]
    assert t.sort_by(keys).equals(p.cast(t.schema).sort_by(keys))
    out = {"insitu": [], "operator": [], "pyarrow": [], "rows": t.num_rows, "bytes": t.nbytes}
    del t, p
    for _ in range(runs):
        t0 = time.perf_counter(); t = arr.get_table("lineitem"); out["insitu"].append(time.perf_counter() - t0)
        out["operator"].append(arr.last_report.wall_s); del t
        t0 = time.perf_counter(); p = pq.read_table(src); out["pyarrow"].append(time.perf_counter() - t0); del p
print(json.dumps(out))
'''


def install_wheel():
    """Builds the package's release wheel and installs it into target/bench/venv."""
    wheels = os.path.join(WORK, "wheels")
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run([os.path.join(VENV, "bin", "maturin"), "build", "--release", "-q", "-o", wheels], cwd=ROOT, check=True)
    wheel = glob.glob(os.path.join(wheels, "insitu-*.whl"))[0]
    subprocess.run([PY, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", wheel], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", default="1")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    ensure_venv("tpchgen-cli", "pyarrow", "numpy", "maturin>=1.9.4,<2")
    install_wheel()
    src = tpch(a.sf)
    run = subprocess.run([PY, "-c", INNER, src, os.path.join(WORK, "array-python"), str(a.runs)],
                         capture_output=True, text=True, cwd=WORK)
    if run.returncode != 0:
        sys.exit(f"the benchmark failed:\n{run.stderr[-4000:]}")
    import json
    r = json.loads(run.stdout.strip().splitlines()[-1])
    med = {k: statistics.median(r[k]) for k in ["insitu", "operator", "pyarrow"]}
    gb = r["bytes"] / 1e9
    rows = [
        "| contender | median s | best s | GB/s (Arrow bytes) | vs pyarrow |",
        "|---|---:|---:|---:|---:|",
        f"| `insitu.Array.get_table` (4 smartssd) | {med['insitu']:.3f} | {min(r['insitu']):.3f} | {gb / med['insitu']:.2f} | {med['pyarrow'] / med['insitu']:.2f}x |",
        f"| of which the host operator (report wall) | {med['operator']:.3f} | {min(r['operator']):.3f} | - | - |",
        f"| `pyarrow.parquet.read_table` | {med['pyarrow']:.3f} | {min(r['pyarrow']):.3f} | {gb / med['pyarrow']:.2f} | 1.00x |",
    ]
    overhead = med["insitu"] - med["operator"]
    body = (f"### TPC-H lineitem SF{a.sf} into a pyarrow.Table ({r['rows']:,} rows, {gb:.2f} GB of Arrow data), "
            f"median of {a.runs}, interleaved\n\n" + "\n".join(rows) + "\n\n"
            f"The Python front adds {overhead * 1e3:.1f} ms ({100 * overhead / med['insitu']:.1f}% of the call) over "
            "the host operator: the Arrow C stream hand-over and building the report.\n")
    append_results("Python API: get_table vs pyarrow.parquet.read_table (issue 10)", body)


if __name__ == "__main__":
    sys.exit(main())
