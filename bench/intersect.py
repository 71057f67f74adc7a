#!/usr/bin/env python3
"""List intersection benchmark (issue 5): u32 ID lists, (a) 10M x 10M with 1% common, (b) 10K x 10M.
insitu's kernel, its device and host placements (the `insitu intersect --ids-only` command, process start
included) vs numpy intersect1d(assume_unique=True), numpy searchsorted (skewed case) and pyroaring `&` on
prebuilt bitmaps (construction reported apart), on the same lists, in one run.
Usage: bench/intersect.py
"""
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

from common import INSITU, PY, ROOT, VENV, WORK, append_results, ensure_venv, insitu, run

PEERS = r'''
import json, sys, time, numpy as np, pyroaring
a = np.fromfile(sys.argv[1], dtype="<u4"); b = np.fromfile(sys.argv[2], dtype="<u4")
def best(f, n=5):
    r = None; t = 1e9
    for _ in range(n):
        s = time.perf_counter(); r = f(); t = min(t, time.perf_counter() - s)
    return t, r
out = {}
out["numpy intersect1d"], x = best(lambda: np.intersect1d(a, b, assume_unique=True))
small, large = (a, b) if len(a) <= len(b) else (b, a)
def ss():
    i = np.searchsorted(large, small); i[i == len(large)] = 0
    return small[large[i] == small]
out["numpy searchsorted"], y = best(ss)
tc, (ba, bb) = best(lambda: (pyroaring.BitMap(a), pyroaring.BitMap(b)), 3)
out["pyroaring &"], z = best(lambda: ba & bb)
out["pyroaring construction"] = tc
assert len(x) == len(y) == len(z)
print(json.dumps({"times": out, "common": int(len(x))}))
'''




def main():
    os.makedirs(WORK, exist_ok=True)
    ensure_venv("numpy", "pyroaring")
    data = os.path.join(WORK, "array-intersect")
    shutil.rmtree(data, ignore_errors=True)
    run([INSITU, "--data", data, "init", "--devices", "1", "--profile", "smartssd", "--capacity", "1GiB"])
    sections = []
    for label, n1, n2 in [("10M x 10M, 1% common", 10_000_000, 10_000_000), ("10K x 10M", 10_000, 10_000_000)]:
        p1, p2 = os.path.join(WORK, "l1.bin"), os.path.join(WORK, "l2.bin")
        run([INSITU, "gen", "lists", "--size1", str(n1), "--size2", str(n2), "--ratio", "0.01", "--out1", p1, "--out2", p2])
        for p, n in [(p1, "a"), (p2, "b")]:
            run([INSITU, "--data", data, "put-list", p, "--name", n])
        k = json.loads(run(["cargo", "bench", "-q", "-p", "insitu-kernels", "--bench", "intersect", "--", p1, p2], cwd=ROOT).strip().splitlines()[-1])
        peers = json.loads(run([PY, "-c", PEERS, p1, p2]).strip())
        times = {"insitu kernel": k["kernel_s"]}
        for placement in ["device", "host"]:
            best = 1e9
            for _ in range(3):
                t = time.perf_counter()
                r = json.loads(run([INSITU, "--json", "--data", data, "intersect", "a", "b", "--ids-only", "--placement", placement]))
                best = min(best, time.perf_counter() - t)
                assert r["result"]["count"] == peers["common"] == k["common"]
            times[f"insitu intersect --placement {placement} (command)"] = best
        times.update(peers["times"])
        fastest_peer = min(v for kk, v in peers["times"].items() if kk != "pyroaring construction")
        rows = ["| contender | best s | kernel vs it |", "|---|---:|---:|"]
        for kk, v in times.items():
            rows.append(f"| {kk} | {v:.4f} | {v / k['kernel_s']:.2f}x |")
        sections.append(f"### {label} ({peers['common']} common)\n\nkernel vs fastest peer: {fastest_peer / k['kernel_s']:.2f}x\n\n" + "\n".join(rows))
        for n in ["a", "b"]:
            run([INSITU, "--data", data, "rm", n])
    # Real data: the inverted index of the Python standard library's files, and the 100 most frequent term
    # pairs (all pairs of the 15 terms in the most documents), device vs host placement.
    import sysconfig
    corpus = sysconfig.get_paths()["stdlib"]
    run([INSITU, "--data", data, "index-text", corpus, "--name", "py", "--max-terms", "2000"])
    table = json.loads(run([INSITU, "--data", data, "get", "py"]))
    top = [t for t, _ in table[:15]]
    pairs = [(x, y) for i, x in enumerate(top) for y in top[i + 1:]][:100]
    totals = {}
    for placement in ["device", "host"]:
        wall = modeled = link = 0.0
        counts = []
        for x, y in pairs:
            t = time.perf_counter()
            r = json.loads(run([INSITU, "--json", "--data", data, "intersect", f"py.{x}", f"py.{y}", "--ids-only", "--placement", placement]))
            wall += time.perf_counter() - t
            modeled += r["modeled"]["time_s"]
            link += r["bytes"]["device_to_host"]
            counts.append(r["result"]["count"])
        totals[placement] = (wall, modeled, link, counts)
    assert totals["device"][3] == totals["host"][3], "placements disagree"
    rows = ["| placement | wall s (100 commands) | modeled s (smartssd) | bytes over the host link |", "|---|---:|---:|---:|"]
    for p, (w, m, l, _) in totals.items():
        rows.append(f"| {p} | {w:.2f} | {m:.4f} | {int(l):,} |")
    sections.append(f"### The 100 most frequent term pairs of an inverted index of {corpus} ({len(table)} terms kept)\n\n" + "\n".join(rows))
    shutil.rmtree(data)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    commit = run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).strip()
    report = f"## {stamp} — commit {commit} — list intersection (issue 5)\n\n{os.cpu_count()} cores. Times are best of runs; 'kernel vs it' is each contender's time over the insitu kernel's.\n\n" + "\n\n".join(sections) + "\n"
    print(report)
    with open(os.path.join(ROOT, "bench", "RESULTS.md"), "a") as f:
        f.write("\n" + report)


if __name__ == "__main__":
    main()
