#!/usr/bin/env python3
"""This build vs a baseline build of insitu, side by side on the same data (a regression check).

Every operator of the suites in bench/ runs as a whole CLI command with both binaries, alternating, on the
same inputs (each binary on an array it made itself: array formats may differ between builds), several
times; the table gives the medians and new / baseline. With --process, this build also runs over the
process transport (devices in `insitu serve-device` children), to show what crossing a process costs.
Usage: bench/run.sh compare --baseline PATH/TO/OLD/insitu [--runs 5] [--sf 1] [--size 1GiB] [--process]
       [--only sort,shuffle]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import time

from common import INSITU, WORK, append_results, ensure_venv, run, tpch

NEEDLE = "in-storage computing"


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="the insitu binary to compare with")
    ap.add_argument("--label", default="baseline", help="what the baseline is (e.g. a commit)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sf", default="1")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--process", action="store_true", help="also run this build over the process transport")
    ap.add_argument("--only", default="", help="comma-separated words: run only the operations naming one")
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    ensure_venv("tpchgen-cli")
    lineitem = tpch(a.sf)
    text = os.path.join(WORK, "corpus.txt")
    run([INSITU, "gen", "text", "--size", a.size, "-o", text])
    lists = [os.path.join(WORK, f"cmp-{n}.bin") for n in ("small", "large", "big1", "big2")]
    run([INSITU, "gen", "lists", "--size1", "10000", "--size2", "10000000", "--out1", lists[0], "--out2", lists[1]])
    run([INSITU, "gen", "lists", "--size1", "10000000", "--size2", "10000000", "--out1", lists[2], "--out2", lists[3]])

    builds = [(a.label, [a.baseline]), ("this build", [INSITU])]
    if a.process:
        builds.append(("this build, process transport", [INSITU, "--transport", "process"]))
    for label, _ in builds:
        shutil.rmtree(os.path.join(WORK, f"cmp-{label.replace(' ', '_').replace(',', '')}"), ignore_errors=True)
    # Each build's array holds the corpus, two copies of lineitem and the lists, and a run adds a sort's or a
    # shuffle's output: about 12 GB a build at SF1 and 1 GiB (the sparse NAND images' real use). A full disk
    # shows only as a failed command, so say it first.
    need = 12e9 * len(builds) * max(1.0, float(a.sf))
    free = shutil.disk_usage(WORK).free
    if free < need:
        print(f"warning: compare needs about {need / 1e9:.0f} GB free under {WORK}, and {free / 1e9:.0f} GB are",
              flush=True)
    try:
        compare(a, builds, lineitem, text, lists)
    finally:
        # The arrays go whatever happened (a failed command too): they are made again by the next run.
        for label, _ in builds:
            shutil.rmtree(os.path.join(WORK, f"cmp-{label.replace(' ', '_').replace(',', '')}"), ignore_errors=True)


def compare(a, builds, lineitem, text, lists):
    for label, cmd in builds:
        data = os.path.join(WORK, f"cmp-{label.replace(' ', '_').replace(',', '')}")
        shutil.rmtree(data, ignore_errors=True)
        b = cmd[:1] + ["--data", data]
        run(b + ["init", "--devices", "4", "--profile", "smartssd", "--capacity", "8GiB"])
        run(cmd + ["--data", data, "put", text, "--name", "corpus"])
        run(cmd + ["--data", data, "put-table", lineitem, "--name", "li", "--key", "l_partkey"])
        run(cmd + ["--data", data, "put-table", lineitem, "--name", "lo", "--key", "l_orderkey"])
        for p, n in zip(lists, ("s", "l", "b1", "b2")):
            run(cmd + ["--data", data, "put-list", p, "--name", n])

    def ops(cmd, data):
        d = cmd + ["--data", data]
        return [
            ("get 1 object -o /dev/null", [d + ["get", "corpus", "-o", "/dev/null"]]),
            ("search (device)", [d + ["search", "corpus", NEEDLE]]),
            ("search (host)", [d + ["search", "corpus", NEEDLE, "--placement", "host"]]),
            (f"put-table lineitem SF{a.sf}", [d + ["put-table", lineitem, "--name", "x", "--key", "l_partkey"], d + ["rm", "x"]]),
            ("sort (device)", [d + ["sort", "li", "--key", "l_partkey", "--out", "x"], d + ["rm", "x"]]),
            ("sort (host)", [d + ["sort", "li", "--key", "l_partkey", "--placement", "host", "--out", "x"], d + ["rm", "x"]]),
            ("shuffle 1024 (device)", [d + ["shuffle", "lo", "--key", "l_orderkey", "--out", "x"], d + ["rm", "x"]]),
            ("shuffle 1024 (host-sort x2)", [d + ["shuffle", "lo", "--key", "l_orderkey", "--placement", "host-sort", "--threads", "2", "--out", "x"], d + ["rm", "x"]]),
            ("intersect 10K x 10M --count-only (device)", [d + ["intersect", "s", "l", "--count-only"]]),
            ("intersect 10M x 10M --ids-only (device)", [d + ["intersect", "b1", "b2", "--ids-only"]]),
            ("intersect 10M x 10M --ids-only (host)", [d + ["intersect", "b1", "b2", "--ids-only", "--placement", "host"]]),
        ]

    per_build = {label: ops(cmd, os.path.join(WORK, f"cmp-{label.replace(' ', '_').replace(',', '')}")) for label, cmd in builds}
    names = [n for n, _ in per_build[builds[0][0]]]
    wanted = [w for w in a.only.split(",") if w]
    chosen = [i for i, n in enumerate(names) if not wanted or any(w in n for w in wanted)]
    names = [names[i] for i in chosen]
    times = {label: {n: [] for n in names} for label, _ in builds}
    for r in range(a.runs):
        print(f"run {r + 1} of {a.runs}", flush=True)
        for i, n in zip(chosen, names):
            for label, _ in builds:
                steps = per_build[label][i][1]
                times[label][n].append(timed(steps[0]))
                for s in steps[1:]:
                    subprocess.run(s, check=True, capture_output=True)
    heads = ["operation (whole CLI command)"] + [f"{l} median s" for l, _ in builds] + [f"{l} / {a.label}" for l, _ in builds[1:]]
    rows = ["| " + " | ".join(heads) + " |", "|---" + "|---:" * (len(heads) - 1) + "|"]
    for n in names:
        med = {l: statistics.median(times[l][n]) for l, _ in builds}
        base = med[a.label]
        cells = [n] + [f"{med[l]:.3f}" for l, _ in builds] + [f"{med[l] / base:.2f}" for l, _ in builds[1:]]
        rows.append("| " + " | ".join(cells) + " |")
    body = (f"### This build vs {a.label}, side by side (4 smartssd devices, {a.size} corpus, TPC-H SF{a.sf}, median of {a.runs})\n\n"
            + "\n".join(rows)
            + "\n\nRatios below 1 mean this build is faster. Each command includes process start, opening the array "
              "(recovering every device) and closing it.")
    append_results(f"regression check against {a.label}", body)


if __name__ == "__main__":
    main()
