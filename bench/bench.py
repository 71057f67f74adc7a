#!/usr/bin/env python3
"""insitu whole-system benchmarks (issue 2): get vs cat, search vs ripgrep/grep, FTL write amplification.

Every contender runs in the same session on the same warm file, alternating, several times; the table
shows the median wall time (and the best), throughput and ratios. Data lives under target/bench (never git).
Usage: bench/run.sh [--size 1GiB] [--runs 7] [--devices 4] [--no-wa]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSITU = os.path.join(ROOT, "target", "release", "insitu")
WORK = os.path.join(ROOT, "target", "bench")
NEEDLE = "in-storage computing"


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def timed(cmd, shell=False):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, shell=shell, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode not in (0, 1):  # grep/rg exit 1 on no match
        sys.exit(f"benchmark command failed: {cmd}\n{r.stderr}")
    return dt, r.stdout


def bench(contenders, runs):
    """contenders: list of (label, cmd, shell). Runs them round-robin; returns {label: (times, last stdout)}."""
    res = {label: ([], "") for label, _, _ in contenders}
    for _ in range(runs):
        for label, cmd, shell in contenders:
            dt, out = timed(cmd, shell)
            res[label][0].append(dt)
            res[label] = (res[label][0], out)
    return res


def parse_size(s):
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "": 1}
    num = "".join(c for c in s if c.isdigit() or c == ".")
    return int(float(num) * units[s[len(num):].strip().lower()])


def machine():
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}"


def table(rows, headers):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--no-wa", action="store_true", help="skip the write-amplification benchmark")
    a = ap.parse_args()
    size = parse_size(a.size)
    os.makedirs(WORK, exist_ok=True)
    text = os.path.join(WORK, "corpus.txt")
    data = os.path.join(WORK, "array")
    if not os.path.exists(text) or os.path.getsize(text) != size:
        print(f"generating {a.size} of text ...", flush=True)
        sh([INSITU, "gen", "text", "--size", a.size, "-o", text])
    if os.path.exists(data):
        shutil.rmtree(data)
    cap = str(max(size // a.devices * 2, 256 << 20))
    sh([INSITU, "--data", data, "init", "--devices", str(a.devices), "--profile", "smartssd", "--capacity", cap])
    sh([INSITU, "--data", data, "put", text, "--name", "corpus"])
    sh(["sh", "-c", f"cat {text} > /dev/null"])  # warm the page cache
    gib = size / 2**30
    sections = []

    # get vs cat
    r = bench([
        ("cat FILE > /dev/null", f"cat {text} > /dev/null", True),
        ("insitu get -o /dev/null", [INSITU, "--data", data, "get", "corpus", "-o", "/dev/null"], False),
    ], a.runs)
    cat_t = statistics.median(r["cat FILE > /dev/null"][0])
    rows = []
    for label, (ts, _) in r.items():
        m = statistics.median(ts)
        rows.append([label, f"{m:.3f}", f"{min(ts):.3f}", f"{gib / m:.2f}", f"{cat_t / m:.2f}x"])
    sections.append(f"### get vs cat ({a.size}, {a.devices} devices, warm cache, median of {a.runs})\n\n"
                    + table(rows, ["contender", "median s", "best s", "GiB/s", "throughput vs cat"]))

    # search
    r = bench([
        ("insitu search (device)", [INSITU, "--json", "--data", data, "search", "corpus", NEEDLE], False),
        ("insitu search (host)", [INSITU, "--json", "--data", data, "search", "corpus", NEEDLE, "--placement", "host"], False),
        ("rg -F -c", ["rg", "-F", "-c", NEEDLE, text], False),
        ("grep -F -c", ["grep", "-F", "-c", NEEDLE, text], False),
    ], a.runs)
    rg_t = statistics.median(r["rg -F -c"][0])
    rows = []
    for label, (ts, out) in r.items():
        m = statistics.median(ts)
        if label.startswith("insitu"):
            j = json.loads(out)
            count = j["result"]["count"]
            extra = f"{j['host_cpu_s']:.3f} / {j['device_cpu_s']:.3f} | {j['modeled']['time_s']:.4f}"
        else:
            count = f"{out.strip()} lines"
            extra = "- | -"
        rows.append([label, count, f"{m:.3f}", f"{min(ts):.3f}", f"{gib / m:.2f}", f"{rg_t / m:.2f}x", extra])
    sections.append(f"### search {NEEDLE!r} ({a.size}, {a.devices} smartssd devices, median of {a.runs})\n\n"
                    + table(rows, ["contender", "matches", "median s", "best s", "GiB/s", "throughput vs rg",
                                   "host / device CPU s", "modeled s (smartssd)"])
                    + "\n\ninsitu counts occurrences; rg and grep -c count matching lines (a line can hold two).")

    if not a.no_wa:
        print("write amplification (about a minute) ...", flush=True)
        out = sh(["cargo", "bench", "-q", "-p", "insitu-flash", "--bench", "write_amplification"], cwd=ROOT).stdout
        tbl = "\n".join(l for l in out.splitlines() if l.startswith("|"))
        sections.append("### FTL write amplification, uniform random 4 KiB overwrites (256 MiB device, 7% spare, greedy GC)\n\n" + tbl)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    report = f"## {stamp} — commit {commit}\n\nMachine: {machine()}\n\n" + "\n\n".join(sections) + "\n"
    print(report)
    path = os.path.join(ROOT, "bench", "RESULTS.md")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("# Benchmark results\n\nNewest first is not guaranteed: each run appends a dated section. "
                    "Produced by `make bench` (bench/run.sh).\n\n")
    with open(path, "a") as f:
        f.write("\n" + report)


if __name__ == "__main__":
    main()
