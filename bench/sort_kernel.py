#!/usr/bin/env python3
"""Argsort kernel benchmark (issue 3): 16,777,216 random u32 keys -> (value, index) in key order.

insitu `fast` (parallel LSD radix) and `bitonic` (NASCENT's network) against numpy `argsort`, polars
`arg_sort` and pyarrow `sort_indices`, on the same keys, in one run. Peers are installed into a private venv
under target/bench/venv. Usage: bench/sort_kernel.py [--n 16777216]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench")
VENV = os.path.join(WORK, "venv")
PY = os.path.join(VENV, "bin", "python")

PEERS = r'''
import json, sys, time
import numpy as np, polars as pl, pyarrow as pa, pyarrow.compute as pc
keys = np.fromfile(sys.argv[1], dtype="<u4")
def best(f, n=3):
    b = 1e9
    for _ in range(n):
        t = time.perf_counter(); r = f(); b = min(b, time.perf_counter() - t)
    return b, r
out = {}
out["numpy argsort (default)"], a = best(lambda: np.argsort(keys))
out["numpy argsort (stable)"], s = best(lambda: np.argsort(keys, kind="stable"))
out["polars arg_sort"], p = best(lambda: pl.Series(keys).arg_sort())
out["pyarrow sort_indices"], q = best(lambda: pc.sort_indices(pa.array(keys)))
# Every peer must return a valid argsort: same sorted keys as numpy's stable one.
ref = keys[s]
assert (keys[a] == ref).all() and (keys[p.to_numpy()] == ref).all() and (keys[q.to_numpy()] == ref).all()
print(json.dumps({"peers": out, "versions": {"numpy": np.__version__, "polars": pl.__version__, "pyarrow": pa.__version__}}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16_777_216)
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    if not os.path.exists(PY):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    subprocess.run([PY, "-m", "pip", "install", "-q", "numpy", "polars", "pyarrow"], check=True)
    keys = os.path.join(WORK, "keys_u32.bin")
    out = subprocess.run(["cargo", "bench", "-q", "-p", "insitu-kernels", "--bench", "argsort", "--", str(a.n), keys],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    ours = json.loads(out.strip().splitlines()[-1])
    peers = json.loads(subprocess.run([PY, "-c", PEERS, keys], check=True, capture_output=True, text=True).stdout)
    times = {"insitu fast (radix)": ours["fast_s"], "insitu bitonic": ours["bitonic_s"], **peers["peers"]}
    best_peer = min(v for k, v in peers["peers"].items())
    rows = ["| contender | best of runs (s) | Mkeys/s | time vs insitu fast |", "|---|---:|---:|---:|"]
    for k, v in times.items():
        rows.append(f"| {k} | {v:.3f} | {a.n / v / 1e6:.0f} | {v / ours['fast_s']:.2f}x |")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    v = peers["versions"]
    text = (f"## {stamp} — commit {commit} — argsort kernel (issue 3)\n\n"
            f"{a.n:,} random u32 keys, (value, index) out; numpy {v['numpy']}, polars {v['polars']}, pyarrow {v['pyarrow']}; "
            f"{os.cpu_count()} cores. fast vs best peer: {best_peer / ours['fast_s']:.2f}x (aim: 3x).\n\n" + "\n".join(rows) + "\n")
    print(text)
    with open(os.path.join(ROOT, "bench", "RESULTS.md"), "a") as f:
        f.write("\n" + text)


if __name__ == "__main__":
    main()
