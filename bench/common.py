"""Shared helpers of the bench/ scripts: paths, running commands, the private venv of Python peers, and
appending dated sections to RESULTS.md."""
import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench")
VENV = os.path.join(WORK, "venv")
PY = os.path.join(VENV, "bin", "python")
INSITU = os.path.join(ROOT, "target", "release", "insitu")


def run(cmd, **kw):
    """Runs a command, failing loudly (with what it said on stderr); returns its stdout."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed (exit {r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


def insitu(data, *args):
    """Runs `insitu --json --data DATA ARGS` and parses its report."""
    return json.loads(run([INSITU, "--json", "--data", data, *args]).strip().splitlines()[-1])


def ensure_venv(*packages):
    """Installs the Python peers into target/bench/venv (never into the system)."""
    os.makedirs(WORK, exist_ok=True)
    if not os.path.exists(PY):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    subprocess.run([PY, "-m", "pip", "install", "-q", *packages], check=True)


def append_results(title, body):
    """Prints and appends a dated section to bench/RESULTS.md."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    commit = run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).strip()
    report = f"## {stamp} — commit {commit} — {title}\n\n{os.cpu_count()} cores.\n\n{body}\n"
    print(report)
    with open(os.path.join(ROOT, "bench", "RESULTS.md"), "a") as f:
        f.write("\n" + report)


def tpch(sf, table="lineitem"):
    """The TPC-H table at scale factor `sf` as Parquet under target/bench (made by tpchgen-cli once)."""
    d = os.path.join(WORK, f"tpch-sf{sf}")
    path = os.path.join(d, f"{table}.parquet")
    if not os.path.exists(path):
        os.makedirs(d, exist_ok=True)
        run([os.path.join(VENV, "bin", "tpchgen-cli"), "parquet", "-s", str(sf), f"--tables={table}", f"--output-dir={d}"])
    return path
