#!/usr/bin/env python3
"""Table sort benchmark (issue 3): TPC-H lineitem sorted by l_partkey, table at rest -> sorted table at rest.

Contenders, round-robin in one run: insitu (4 smartssd devices, device placement; host placement for
reference), DuckDB (CREATE TABLE s AS SELECT * FROM lineitem ORDER BY l_partkey on a native table,
2 threads) and Polars (read Parquet, sort, write Parquet). Then the scaling of insitu's device sort with the
table size (SF 0.01 -> 0.1 -> 1, i.e. 10x and 100x), in device memory and forced out of core.
Data (tpchgen-cli) and peers go under target/bench. Usage: bench/table_sort.py [--sf 1] [--runs 3]
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
import sys, time, duckdb, polars as pl
src, which, db = sys.argv[1], sys.argv[2], sys.argv[3]
if which == "duckdb-load":
    con = duckdb.connect(db); con.execute("SET threads=2"); con.execute("SET enable_progress_bar=false")
    con.execute("DROP TABLE IF EXISTS lineitem"); con.execute("DROP TABLE IF EXISTS s")
    con.execute(f"CREATE TABLE lineitem AS SELECT * FROM read_parquet('{src}')"); con.execute("CHECKPOINT")
elif which == "duckdb":
    con = duckdb.connect(db); con.execute("SET threads=2"); con.execute("SET enable_progress_bar=false")
    con.execute("DROP TABLE IF EXISTS s"); con.execute("CHECKPOINT")
    t = time.perf_counter()
    con.execute("CREATE TABLE s AS SELECT * FROM lineitem ORDER BY l_partkey"); con.execute("CHECKPOINT")
    print(time.perf_counter() - t)
elif which == "polars":
    t = time.perf_counter()
    pl.read_parquet(src).sort("l_partkey").write_parquet(db)
    print(time.perf_counter() - t)
'''






def lineitem(sf):
    return tpch(sf)


def array_with(path, name, devices=4):
    data = os.path.join(WORK, f"array-{name}")
    if os.path.exists(data):
        shutil.rmtree(data)
    run([INSITU, "--data", data, "init", "--devices", str(devices), "--profile", "smartssd", "--capacity", "4GiB"])
    run([INSITU, "--data", data, "put-table", path, "--name", "lineitem", "--key", "l_partkey"])
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", default="1")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    ensure_venv("tpchgen-cli", "duckdb", "polars", "pyarrow")
    src = lineitem(a.sf)
    data = array_with(src, "sort")
    db = os.path.join(WORK, "duck.db")
    run([PY, "-c", PEERS, src, "duckdb-load", db])
    times = {k: [] for k in ["insitu sort (device)", "insitu sort (host)", "DuckDB CTAS ORDER BY", "Polars read+sort+write"]}
    modeled = {}
    for i in range(a.runs):
        for placement, label in [("device", "insitu sort (device)"), ("host", "insitu sort (host)")]:
            out = f"s{i}{placement}"
            t = time.perf_counter()
            r = insitu(data, "sort", "lineitem", "--key", "l_partkey", "--placement", placement, "--out", out)
            times[label].append(time.perf_counter() - t)
            modeled[label] = (r["modeled"]["time_s"], r["host_cpu_s"], r["device_cpu_s"])
            run([INSITU, "--data", data, "rm", out])
        times["DuckDB CTAS ORDER BY"].append(float(run([PY, "-c", PEERS, src, "duckdb", db]).strip().splitlines()[-1]))
        times["Polars read+sort+write"].append(float(run([PY, "-c", PEERS, src, "polars", os.path.join(WORK, "pl.parquet")]).strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in times.items()}
    best_peer = min(med["DuckDB CTAS ORDER BY"], med["Polars read+sort+write"])
    rows = ["| contender | median s | best s | vs best peer | host / device CPU s | modeled s (smartssd x4) |", "|---|---:|---:|---:|---:|---:|"]
    for k, v in times.items():
        m = modeled.get(k)
        extra = f"{m[1]:.2f} / {m[2]:.2f} | {m[0]:.3f}" if m else "- | -"
        rows.append(f"| {k} | {med[k]:.3f} | {min(v):.3f} | {best_peer / med[k]:.2f}x | {extra} |")
    text = (f"### TPC-H lineitem SF{a.sf} sorted by l_partkey, at rest to at rest (median of {a.runs})\n\n"
            + "\n".join(rows)
            + "\n\ninsitu's time is the `insitu sort` command (process start, array open, sort, shuffle, commit); "
              "DuckDB's is the CTAS plus checkpoint on a native table; Polars' is read, sort and write of Parquet.\n")
    # Scaling: SF 0.01, 0.1, 1 (x10, x100), in device memory and out of core (16 MiB sort budget).
    srows = ["| SF | rows | device sort s | ns per row | out of core (16 MiB budget) s | ns per row |", "|---:|---:|---:|---:|---:|---:|"]
    for sf in ["0.01", "0.1", a.sf]:
        d = array_with(lineitem(sf), f"scale{sf}")
        r = insitu(d, "sort", "lineitem", "--key", "l_partkey", "--out", "x")
        r2 = insitu(d, "sort", "lineitem", "--key", "l_partkey", "--out", "y", "--memory-budget", "16MiB")
        n = r["result"]["rows"]
        srows.append(f"| {sf} | {n} | {r['wall_s']:.3f} | {r['wall_s'] / n * 1e9:.0f} | {r2['wall_s']:.3f} | {r2['wall_s'] / n * 1e9:.0f} |")
        shutil.rmtree(d)
    text += "\n### insitu device sort as the table grows (4 smartssd devices)\n\n" + "\n".join(srows) + "\n"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    commit = run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).strip()
    report = f"## {stamp} — commit {commit} — table sort (issue 3)\n\n{os.cpu_count()} cores.\n\n" + text
    print(report)
    with open(os.path.join(ROOT, "bench", "RESULTS.md"), "a") as f:
        f.write("\n" + report)
    shutil.rmtree(data)


if __name__ == "__main__":
    main()
