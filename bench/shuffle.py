#!/usr/bin/env python3
"""Shuffle benchmark (issue 4): TPC-H lineitem SF1 shuffled on l_orderkey into 1024 partitions, table at rest
to partitions at rest, 4 devices, side by side in one run: insitu device placement, insitu host-sort and
host-bucket (2 threads), Polars (hash column + partition_by, in memory), DuckDB (COPY ... TO dir
(FORMAT parquet, PARTITION_BY (pid)), 2 threads). Then insitu's throughput as P grows from 16 to 65,536.
Usage: bench/shuffle.py [--sf 1] [--runs 3]
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from common import INSITU, PY, ROOT, WORK, append_results, ensure_venv, insitu, run, tpch

PEERS = r'''
import sys, time, shutil, os, duckdb, polars as pl
src, which, out = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(out, ignore_errors=True)
if which == "polars":
    t = time.perf_counter()
    df = pl.read_parquet(src).with_columns((pl.col("l_orderkey").hash() % 1024).alias("pid"))
    parts = df.partition_by("pid", as_dict=True)
    os.makedirs(out)
    for k, p in parts.items():
        p.write_parquet(os.path.join(out, f"p{k[0]}.parquet"))
    print(time.perf_counter() - t)
else:
    con = duckdb.connect(); con.execute("SET threads=2"); con.execute("SET enable_progress_bar=false")
    con.execute(f"CREATE TABLE lineitem AS SELECT * FROM read_parquet('{src}')")
    t = time.perf_counter()
    con.execute(f"COPY (SELECT *, hash(l_orderkey) % 1024 AS pid FROM lineitem) TO '{out}' (FORMAT parquet, PARTITION_BY (pid))")
    print(time.perf_counter() - t)
'''






def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", default="1")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    ensure_venv("tpchgen-cli", "duckdb", "polars", "pyarrow")
    src = tpch(a.sf)
    data = os.path.join(WORK, "array-shuffle")
    shutil.rmtree(data, ignore_errors=True)
    run([INSITU, "--data", data, "init", "--devices", "4", "--profile", "smartssd", "--capacity", "4GiB"])
    run([INSITU, "--data", data, "put-table", src, "--name", "lineitem", "--key", "l_orderkey"])
    labels = ["insitu shuffle (device)", "insitu host-sort x2", "insitu host-bucket x2", "Polars partition_by", "DuckDB COPY PARTITION_BY"]
    times = {k: [] for k in labels}
    cpu = {}
    for i in range(a.runs):
        for placement, label in [("device", labels[0]), ("host-sort", labels[1]), ("host-bucket", labels[2])]:
            out = f"s{i}{placement}"
            t = time.perf_counter()
            r = insitu(data, "shuffle", "lineitem", "--key", "l_orderkey", "--partitions", "1024", "--placement", placement, "--threads", "2", "--out", out)
            times[label].append(time.perf_counter() - t)
            cpu[label] = (r["host_cpu_s"], r["device_cpu_s"], r["modeled"]["time_s"], r["result"]["compression_ratio"])
            run([INSITU, "--data", data, "rm", out])
        times[labels[3]].append(float(run([PY, "-c", PEERS, src, "polars", os.path.join(WORK, "pl-parts")]).strip().splitlines()[-1]))
        times[labels[4]].append(float(run([PY, "-c", PEERS, src, "duckdb", os.path.join(WORK, "duck-parts")]).strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in times.items()}
    best_peer = min(med[labels[3]], med[labels[4]])
    rows = ["| contender | median s | best s | vs best peer | host / device CPU s | modeled s (smartssd x4) | LZ4 ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
    for k in labels:
        c = cpu.get(k)
        extra = f"{c[0]:.2f} / {c[1]:.2f} | {c[2]:.3f} | {c[3]:.2f}x" if c else "- | - | -"
        rows.append(f"| {k} | {med[k]:.3f} | {min(times[k]):.3f} | {best_peer / med[k]:.2f}x | {extra} |")
    text = (f"### TPC-H lineitem SF{a.sf} shuffled on l_orderkey into 1024 partitions, at rest to at rest (median of {a.runs})\n\n"
            + "\n".join(rows) + "\n")
    srows = ["| partitions | device shuffle s | MB/s | host-sort x2 s |", "|---:|---:|---:|---:|"]
    mb = insitu(data, "ls")["result"]["objects"][0]["size"] / 1e6
    for p in [16, 256, 1024, 4096, 65536]:
        r = insitu(data, "shuffle", "lineitem", "--key", "l_orderkey", "--partitions", str(p), "--out", f"p{p}")
        h = insitu(data, "shuffle", "lineitem", "--key", "l_orderkey", "--partitions", str(p), "--placement", "host-sort", "--threads", "2", "--out", f"h{p}")
        srows.append(f"| {p} | {r['wall_s']:.3f} | {mb / r['wall_s']:.0f} | {h['wall_s']:.3f} |")
        run([INSITU, "--data", data, "rm", f"p{p}"])
        run([INSITU, "--data", data, "rm", f"h{p}"])
    text += "\n### insitu shuffle throughput as P grows (4 smartssd devices)\n\n" + "\n".join(srows) + "\n"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    commit = run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).strip()
    report = f"## {stamp} — commit {commit} — shuffle (issue 4)\n\n{os.cpu_count()} cores.\n\n" + text
    print(report)
    with open(os.path.join(ROOT, "bench", "RESULTS.md"), "a") as f:
        f.write("\n" + report)
    shutil.rmtree(data)


if __name__ == "__main__":
    main()
