#!/usr/bin/env python3
"""Emulator speed (issue 12): every operator at rest -> at rest beside the best peer in memory, and beside the
memory-bandwidth limit of its bytes, side by side in one run (contenders interleaved, medians).

- put-table of TPC-H lineitem (Parquet) vs DuckDB's CREATE TABLE AS SELECT * FROM read_parquet + CHECKPOINT;
  peak RSS of each.
- sort by l_partkey, table at rest -> sorted table at rest (4 smartssd devices, device placement) vs Polars
  `df.sort` of the table already in memory.
- shuffle on l_orderkey into 1024 partitions (device placement, columnar LZ4) vs Polars hash + sort in memory.
- intersect 10K x 10M and 10M x 10M IDs at rest, whole CLI call, count only, vs numpy `fromfile` +
  `searchsorted` / `intersect1d`.
- the limit: a plain memcpy (numpy, warm destination) of the operator's bytes (the table's Arrow size, or
  the lists' bytes).

With --sf10, instead: put-table of SF10 (vs DuckDB's load) and sort of SF10, one run each, time and peak RSS.
Data under target/bench.
Usage: bench/speed.py [--runs 5] [--sf10]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from common import INSITU, PY, WORK, append_results, ensure_venv, run, tpch

PEERS = r'''
import sys, time
which, src = sys.argv[1], sys.argv[2]
if which == "duckdb-load":
    import duckdb, os
    db = sys.argv[3]
    if os.path.exists(db): os.remove(db)
    con = duckdb.connect(db); con.execute("SET threads=2"); con.execute("SET enable_progress_bar=false")
    t = time.perf_counter()
    con.execute(f"CREATE TABLE lineitem AS SELECT * FROM read_parquet('{src}')"); con.execute("CHECKPOINT")
    print(time.perf_counter() - t)
elif which == "polars-sort":
    import polars as pl
    df = pl.read_parquet(src)
    t = time.perf_counter()
    s = df.sort("l_partkey")
    print(time.perf_counter() - t)
elif which == "polars-shuffle":
    import polars as pl
    df = pl.read_parquet(src)
    t = time.perf_counter()
    s = df.with_columns((pl.col("l_orderkey").hash() % 1024).alias("pid")).sort("pid")
    print(time.perf_counter() - t)
elif which == "numpy-search":
    import numpy as np
    t = time.perf_counter()
    a = np.fromfile(src, dtype="<u4"); b = np.fromfile(sys.argv[3], dtype="<u4")
    i = np.searchsorted(b, a); i[i == len(b)] = 0
    n = int(np.count_nonzero(b[i] == a))
    print(time.perf_counter() - t, n)
elif which == "numpy-intersect":
    import numpy as np
    t = time.perf_counter()
    a = np.fromfile(src, dtype="<u4"); b = np.fromfile(sys.argv[3], dtype="<u4")
    n = len(np.intersect1d(a, b, assume_unique=True))
    print(time.perf_counter() - t, n)
elif which == "arrow-bytes":
    import pyarrow.parquet as pq
    print(pq.read_table(src).nbytes)
elif which == "memcpy":
    import numpy as np
    n = int(sys.argv[3]); a = np.ones(n, dtype=np.uint8); b = np.zeros(n, dtype=np.uint8)
    ts = []
    for _ in range(5):
        t = time.perf_counter(); np.copyto(b, a); ts.append(time.perf_counter() - t)
    print(sorted(ts)[2])
'''


def timed(cmd):
    """Runs a command; returns (wall seconds, its peak RSS in bytes, stdout). The disk is synced first, so
    no contender's time includes writing back what the one before it left dirty (a sync or a commit flushes
    the whole disk's write cache, not only its own file's)."""
    os.sync()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        # wait4 gives this child's own peak RSS (getrusage of children gives the largest child so far).
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise SystemExit(f"{cmd[:4]} failed: {err.read().decode()[-400:]}")
        return wall, usage.ru_maxrss * 1024, out.read().decode()


def peer(*args):
    os.sync()
    return float(run([PY, "-c", PEERS, *args]).split()[0])


def sf10():
    src10 = tpch("10")
    duck = os.path.join(WORK, "speed-duck.db")
    d10 = os.path.join(WORK, "array-speed-sf10")
    shutil.rmtree(d10, ignore_errors=True)
    run([INSITU, "--data", d10, "init", "--devices", "4", "--profile", "smartssd", "--capacity", "12GiB"])
    wp, rp, _ = timed([INSITU, "--data", d10, "put-table", src10, "--name", "lineitem", "--key", "l_partkey"])
    wd, rd, _ = timed([PY, "-c", PEERS, "duckdb-load", src10, duck])
    os.remove(duck)
    ws, rs, _ = timed([INSITU, "--data", d10, "sort", "lineitem", "--key", "l_partkey", "--out", "sorted"])
    shutil.rmtree(d10)
    text = ("### TPC-H lineitem SF10, 4 smartssd devices, one run each\n\n"
            "| work | wall s | peak RSS GiB |\n|---|---:|---:|\n"
            f"| insitu put-table | {wp:.2f} | {rp / 2**30:.2f} |\n"
            f"| DuckDB CTAS + CHECKPOINT | {wd:.2f} | {rd / 2**30:.2f} |\n"
            f"| insitu sort by l_partkey (device) | {ws:.2f} | {rs / 2**30:.2f} |\n")
    append_results("emulator speed, SF10 (issue 12)", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sf10", action="store_true")
    a = ap.parse_args()
    ensure_venv("tpchgen-cli", "duckdb", "polars", "pyarrow", "numpy")
    if a.sf10:
        return sf10()
    src = tpch("1")
    arrow_bytes = int(run([PY, "-c", PEERS, "arrow-bytes", src]).strip())
    data = os.path.join(WORK, "array-speed")
    shutil.rmtree(data, ignore_errors=True)
    run([INSITU, "--data", data, "init", "--devices", "4", "--profile", "smartssd", "--capacity", "4GiB"])
    run([INSITU, "--data", data, "put-table", src, "--name", "lineitem", "--key", "l_partkey"])
    lists = os.path.join(WORK, "array-speed-lists")
    shutil.rmtree(lists, ignore_errors=True)
    run([INSITU, "--data", lists, "init", "--devices", "1", "--profile", "smartssd", "--capacity", "1GiB"])
    files = {}
    for name, n1, n2 in [("s", 10_000, 10_000_000), ("l", 10_000_000, 10_000_000)]:
        p1, p2 = os.path.join(WORK, f"speed-{name}1.u32"), os.path.join(WORK, f"speed-{name}2.u32")
        run([INSITU, "gen", "lists", "--size1", str(n1), "--size2", str(n2), "--ratio", "0.01", "--out1", p1, "--out2", p2])
        run([INSITU, "--data", lists, "put-list", p1, "--name", f"{name}1"])
        run([INSITU, "--data", lists, "put-list", p2, "--name", f"{name}2"])
        files[name] = (p1, p2, os.path.getsize(p1) + os.path.getsize(p2))
    duck = os.path.join(WORK, "speed-duck.db")
    t = {k: [] for k in ["put", "put-duck", "sort", "sort-pl", "shuffle", "shuffle-pl", "s-dev", "s-host", "s-np", "l-dev", "l-host", "l-np"]}
    rss = {}
    counts = {}
    for i in range(a.runs):
        w, r, _ = timed([INSITU, "--data", data, "put-table", src, "--name", "again", "--key", "l_partkey"])
        t["put"].append(w)
        rss["put"] = max(rss.get("put", 0), r)
        run([INSITU, "--data", data, "rm", "again"])
        w, r, _ = timed([PY, "-c", PEERS, "duckdb-load", src, duck])
        t["put-duck"].append(w)
        rss["put-duck"] = max(rss.get("put-duck", 0), r)
        w, r, _ = timed([INSITU, "--data", data, "sort", "lineitem", "--key", "l_partkey", "--out", "sorted"])
        t["sort"].append(w)
        rss["sort"] = max(rss.get("sort", 0), r)
        run([INSITU, "--data", data, "rm", "sorted"])
        t["sort-pl"].append(peer("polars-sort", src))
        w, r, _ = timed([INSITU, "--data", data, "shuffle", "lineitem", "--key", "l_orderkey", "--partitions", "1024", "--out", "parts"])
        t["shuffle"].append(w)
        rss["shuffle"] = max(rss.get("shuffle", 0), r)
        run([INSITU, "--data", data, "rm", "parts"])
        t["shuffle-pl"].append(peer("polars-shuffle", src))
        for name, peer_op in [("s", "numpy-search"), ("l", "numpy-intersect")]:
            # Each contender first reads its files once, untimed: the Polars peers just before can take
            # enough memory to push the lists out of the page cache, and whoever ran first then read them
            # from the disk while the others found them in memory.
            for placement in ["device", "host"]:
                run([INSITU, "--data", lists, "intersect", f"{name}1", f"{name}2", "--count-only", "--placement", placement])
            run([PY, "-c", PEERS, peer_op, files[name][0], files[name][1]])
            for placement in ["device", "host"]:
                w, _, out = timed([INSITU, "--json", "--data", lists, "intersect", f"{name}1", f"{name}2", "--count-only", "--placement", placement])
                t[f"{name}-{'dev' if placement == 'device' else 'host'}"].append(w)
                counts[(name, placement)] = out.split('"count":')[1].split(",")[0].split("}")[0].strip()
            os.sync()
            out = run([PY, "-c", PEERS, peer_op, files[name][0], files[name][1]]).split()
            t[f"{name}-np"].append(float(out[0]))
            counts[(name, "numpy")] = out[1]
    for name in ["s", "l"]:
        found = {counts[(name, p)] for p in ["device", "host", "numpy"]}
        if len(found) != 1:
            raise SystemExit(f"intersection counts disagree: {counts}")
    med = {k: statistics.median(v) for k, v in t.items() if v}
    limit_table = peer("memcpy", "-", str(arrow_bytes))
    limit = {"s": peer("memcpy", "-", str(files["s"][2])), "l": peer("memcpy", "-", str(files["l"][2]))}
    gb = arrow_bytes / 1e9
    rows = ["| work | insitu (median s) | best peer (median s) | insitu vs peer | memcpy of its bytes (s) | insitu / memcpy | peak RSS insitu / peer |",
            "|---|---:|---:|---:|---:|---:|---:|"]

    def row(work, ours, theirs, peer_name, lim, rss_pair=None):
        r = f"{rss_pair[0] / 2**30:.2f} / {rss_pair[1] / 2**30:.2f} GiB" if rss_pair else "-"
        rows.append(f"| {work} | {med[ours]:.3f} | {med[theirs]:.3f} ({peer_name}) | {med[theirs] / med[ours]:.2f}x | {lim:.3f} | {med[ours] / lim:.1f}x | {r} |")

    row(f"put-table SF1 ({gb:.2f} GB as Arrow)", "put", "put-duck", "DuckDB CTAS + CHECKPOINT", limit_table, (rss["put"], rss["put-duck"]))
    row("sort by l_partkey, at rest -> at rest (device)", "sort", "sort-pl", "Polars df.sort in memory", limit_table, (rss["sort"], 0))
    row("shuffle on l_orderkey, 1024 partitions (device, LZ4)", "shuffle", "shuffle-pl", "Polars hash + sort in memory", limit_table, (rss["shuffle"], 0))
    row("intersect 10K x 10M, count, whole CLI call (device)", "s-dev", "s-np", "numpy fromfile + searchsorted", limit["s"])
    row("intersect 10K x 10M, count, whole CLI call (host)", "s-host", "s-np", "numpy fromfile + searchsorted", limit["s"])
    row("intersect 10M x 10M, count, whole CLI call (device)", "l-dev", "l-np", "numpy fromfile + intersect1d", limit["l"])
    row("intersect 10M x 10M, count, whole CLI call (host)", "l-host", "l-np", "numpy fromfile + intersect1d", limit["l"])
    text = (f"### TPC-H lineitem SF1 and ID lists at rest, 4 smartssd devices (lists: 1), median of {a.runs}, interleaved\n\n"
            + "\n".join(rows)
            + "\n\n'insitu vs peer' is the peer's time over insitu's (above 1: insitu is faster). insitu's times are whole "
              "CLI calls (process start, array open, commit with its syncs); the Polars peers' are the operation alone on a "
              "table already in memory. Before the intersections each contender reads its lists once, untimed, so all "
              "find them in the page cache. The memcpy column copies the operator's bytes once (warm destination). Peak RSS of "
              "the Polars peers is not measured (0).\n")
    append_results("emulator speed (issue 12)", text)
    shutil.rmtree(data)
    shutil.rmtree(lists)
    if os.path.exists(duck):
        os.remove(duck)


if __name__ == "__main__":
    main()
