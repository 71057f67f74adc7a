#!/usr/bin/env python3
"""Self-Sorting SSD benchmark (issue 14): fixed-size records at rest -> the records read back in key order.

8,000,000 records of 128 bytes (1 GB) with 10-byte random keys, made by `insitu gen records`. Contenders,
round-robin in one run:
  - insitu self-sort on one `smartssd` device: `insitu selfsort sort FILE -o OUT` with sort-on-write (the
    records written through the block interface into an indexed range, then read back by active reads)
    and with sort-on-command (written, then generate commands, then active reads); the whole command,
    process start and array open included;
  - DuckDB external sort with a 256 MB memory limit: `CREATE TABLE s AS SELECT * FROM t ORDER BY key`
    plus checkpoint, on a native table `t` loaded beforehand (key and payload as BLOBs: the issue's
    form), and the same with the key split into UBIGINT + USMALLINT (integers DuckDB compares faster),
    2 threads;
  - numpy: the records file read, lexsort of the keys (as big-endian integers) and a gather, written out
    (at rest to at rest); and the argsort + gather alone (in memory), as the issue asks.
Data and peers go under target/bench. Usage: bench/selfsort.py [--records 8000000] [--runs 3]
"""
import argparse
import os
import shutil
import statistics
import time

from common import INSITU, PY, WORK, append_results, ensure_venv, insitu, run

RECORD = 128
KEY = 10

PEERS = r'''
import os, sys, time
import numpy as np
src, which, work = sys.argv[1], sys.argv[2], sys.argv[3]
R, K = 128, 10
def keys(a):
    k = a[:, :K]
    hi = k[:, :8].copy().view(">u8").ravel()
    lo = k[:, 8:10].copy().view(">u2").ravel()
    return hi, lo
if which == "duckdb-load":
    import duckdb, pyarrow as pa
    a = np.fromfile(src, dtype=np.uint8).reshape(-1, R)
    hi, lo = keys(a)
    def fixed(cols, width):
        buf = pa.py_buffer(np.ascontiguousarray(cols))
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(a), [None, buf]).cast(pa.binary())
    payload = fixed(a[:, K:], R - K)
    t_blob = pa.table({"key": fixed(a[:, :K], K), "payload": payload})
    t_int = pa.table({"k1": pa.array(hi.astype(np.uint64)), "k2": pa.array(lo.astype(np.uint16)), "payload": payload})
    db = os.path.join(work, "selfsort.duckdb")
    if os.path.exists(db):
        os.remove(db)
    con = duckdb.connect(db); con.execute("SET threads=2"); con.execute("SET enable_progress_bar=false")
    con.execute("CREATE TABLE t AS SELECT * FROM t_blob")
    con.execute("CREATE TABLE ti AS SELECT * FROM t_int"); con.execute("CHECKPOINT")
elif which in ("duckdb", "duckdb-int"):
    import duckdb
    con = duckdb.connect(os.path.join(work, "selfsort.duckdb"))
    con.execute("SET threads=2"); con.execute("SET memory_limit='256MB'"); con.execute("SET enable_progress_bar=false")
    con.execute(f"SET temp_directory='{os.path.join(work, 'duck-tmp')}'")
    con.execute("DROP TABLE IF EXISTS s"); con.execute("CHECKPOINT")
    t = time.perf_counter()
    if which == "duckdb":
        con.execute("CREATE TABLE s AS SELECT * FROM t ORDER BY key")
    else:
        con.execute("CREATE TABLE s AS SELECT * FROM ti ORDER BY k1, k2")
    con.execute("CHECKPOINT")
    el = time.perf_counter() - t
    n = con.execute("SELECT count(*) FROM s").fetchone()[0]
    first = con.execute("SELECT * FROM s ORDER BY rowid LIMIT 1").fetchone()
    key = first[0].hex() if which == "duckdb" else f"{first[0]:016x}{first[1]:04x}"
    con.execute("DROP TABLE s"); con.execute("CHECKPOINT")
    print(el, n, key)
elif which == "numpy":
    t = time.perf_counter()
    a = np.fromfile(src, dtype=np.uint8).reshape(-1, R)
    t_in = time.perf_counter()
    hi, lo = keys(a)
    idx = np.lexsort((lo, hi))
    out = a[idx]
    t_sorted = time.perf_counter()
    out.tofile(os.path.join(work, "numpy.out"))
    el = time.perf_counter() - t
    print(el, t_sorted - t_in)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=8_000_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    work = os.path.join(WORK, "selfsort")
    os.makedirs(work, exist_ok=True)
    ensure_venv("duckdb", "numpy", "pyarrow")
    src = os.path.join(work, f"records-{a.records}.bin")
    if not os.path.exists(src):
        run([INSITU, "gen", "records", "--format", "fixed", "--record-size", str(RECORD), "--key-size", str(KEY),
             "--count", str(a.records), "-o", src])
    run([PY, "-c", PEERS, src, "duckdb-load", work])
    data = os.path.join(work, "array")
    # Sparse images: room for the records and an image slot (1/32 of the capacity) for the index.
    gib = max(8, (a.records * 16 * 32 >> 30) + 1)

    # One device for every run, as DuckDB keeps one database file: a run starts with the last run's records
    # in the device (as DuckDB's file holds the blocks of the table it dropped), and the command trims its
    # range before its clock starts, so the device is empty for the job. The records start at rest on the host.
    if os.path.exists(data):
        shutil.rmtree(data)
    run([INSITU, "--data", data, "init", "--devices", "1", "--profile", "smartssd", "--capacity", f"{gib}GiB"])
    out = os.path.join(work, "insitu.out")
    labels = ["insitu self-sort (write + active read)", "insitu self-sort (write, generate, active read)",
              "DuckDB CTAS ORDER BY key (BLOB, 256 MB)", "DuckDB CTAS ORDER BY k1, k2 (integers, 256 MB)",
              "numpy read + lexsort + gather + write"]
    times = {k: [] for k in labels}
    in_memory = []
    modeled = {}
    reference = None
    for i in range(a.runs):
        for method, label in [("self-sort-write", labels[0]), ("self-sort-command", labels[1])]:
            if os.path.exists(out):
                os.remove(out)  # as DuckDB drops `s` before its clock starts
            t = time.perf_counter()
            r = insitu(data, "selfsort", "sort", src, "-o", out, "--method", method, "--format", "fixed",
                       "--record-size", str(RECORD), "--key-size", str(KEY))
            times[label].append(time.perf_counter() - t)
            assert r["result"]["count"] == a.records, r["result"]
            modeled[label] = (r["modeled"]["time_s"], r["host_cpu_s"], r["device_cpu_s"])
        firsts = []
        for which, label in [("duckdb", labels[2]), ("duckdb-int", labels[3])]:
            el, n, first = run([PY, "-c", PEERS, src, which, work]).split()
            assert int(n) == a.records
            times[label].append(float(el))
            firsts.append(first)
        el, mem = run([PY, "-c", PEERS, src, "numpy", work]).split()
        times[labels[4]].append(float(el))
        in_memory.append(float(mem))
        # The three agree: insitu's output is numpy's, byte for byte; DuckDB's first key is theirs.
        if reference is None:
            same = os.path.getsize(out) == os.path.getsize(os.path.join(work, "numpy.out"))
            with open(out, "rb") as f1, open(os.path.join(work, "numpy.out"), "rb") as f2:
                while same:
                    b1, b2 = f1.read(1 << 24), f2.read(1 << 24)
                    same = b1 == b2
                    if not b1:
                        break
                f1.seek(0)
                first = f1.read(KEY)
            assert same, "insitu's sorted records differ from numpy's"
            assert firsts == [first.hex()] * 2, (firsts, first.hex())
            reference = True
    med = {k: statistics.median(v) for k, v in times.items()}
    duck, numpy_ = med[labels[2]], med[labels[4]]
    mem = statistics.median(in_memory)
    rows = ["| contender | median s | best s | DuckDB / this | numpy / this | host / device CPU s | modeled s (smartssd) |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for k, v in times.items():
        m = modeled.get(k)
        extra = f"{m[1]:.2f} / {m[2]:.2f} | {m[0]:.3f}" if m else "- | -"
        rows.append(f"| {k} | {med[k]:.3f} | {min(v):.3f} | {duck / med[k]:.2f}x | {numpy_ / med[k]:.2f}x | {extra} |")
    rows.append(f"| numpy lexsort + gather alone (in memory) | {mem:.3f} | {min(in_memory):.3f} | {duck / mem:.2f}x | "
                f"{numpy_ / mem:.2f}x | - | - |")
    size = a.records * RECORD
    text = (f"### {a.records} records of {RECORD} bytes ({size / 1e9:.2f} GB), {KEY}-byte random keys, at rest to "
            f"read back in key order (median of {a.runs})\n\n" + "\n".join(rows)
            + "\n\ninsitu's time is the whole `insitu selfsort sort` command (process start, array open, the range "
              "left by the last run trimmed, records written into the device's indexed range, active reads back to "
              "a file, the index saved at close), one device for every run as DuckDB keeps one database file; "
              "DuckDB's is the CTAS plus "
              "checkpoint on a native table with 256 MB of memory; numpy's reads the file, sorts and writes the "
              "output. Outputs checked equal (insitu vs numpy byte for byte; DuckDB's first key).\n")
    append_results("self-sorting SSD (issue 14)", text)
    shutil.rmtree(data)
    for f in [out, os.path.join(work, "numpy.out")]:
        if os.path.exists(f):
            os.remove(f)


if __name__ == "__main__":
    main()
