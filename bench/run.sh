#!/usr/bin/env bash
# Whole-system benchmarks of insitu against peer tools, side by side in one run. Appends dated results to
# bench/RESULTS.md. Installs what it needs (ripgrep via apt; Python peers into target/bench/venv) and builds
# the release binary first.
#   bench/run.sh [speed|storage|sort-kernel|table-sort|nascent|shuffle|psacs|intersect|repro-intersect|selfsort|repro-selfsort|repro-bluedbm-net|repro-bluedbm-apps|repro-all|bluedbm-reads|bluedbm-apps|python|ray|all] [options of that suite]
#   bench/run.sh compare --baseline OLD/insitu   (this build vs another, side by side: a regression check)
set -euo pipefail
cd "$(dirname "$0")/.."
suite="${1:-all}"
[ $# -gt 0 ] && shift
cargo build --release -p insitu-cli
case "$suite" in
  storage)
    if ! command -v rg >/dev/null; then
      echo "installing ripgrep (apt)"
      (apt-get update -qq && apt-get install -y -qq ripgrep) >/dev/null
    fi
    python3 bench/bench.py "$@" ;;
  speed) python3 bench/speed.py "$@" ;;
  sort-kernel) python3 bench/sort_kernel.py "$@" ;;
  table-sort) python3 bench/table_sort.py "$@" ;;
  shuffle) python3 bench/shuffle.py "$@" ;;
  intersect) python3 bench/intersect.py "$@" ;;
  selfsort) python3 bench/selfsort.py "$@" ;;
  bluedbm-apps)
    if ! command -v rg >/dev/null; then
      echo "installing ripgrep (apt)"
      (apt-get update -qq && apt-get install -y -qq ripgrep) >/dev/null
    fi
    python3 bench/bluedbm_apps.py "$@" ;;
  python) python3 bench/python_api.py "$@" ;;
  ray) python3 bench/ray_backend.py "$@" ;;
  repro-selfsort)
    out=$(./target/release/insitu repro selfsort --out target/repro-out "$@")
    echo "$out"
    printf '\n## %s — commit %s — insitu repro selfsort (issue 14)\n\n%s\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$out" >> bench/RESULTS.md ;;
  repro-bluedbm-net)
    out=$(./target/release/insitu repro bluedbm-net --out target/repro-out "$@")
    echo "$out"
    printf '\n## %s — commit %s — insitu repro bluedbm-net (issue 9)\n\n```\n%s\n```\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$out" >> bench/RESULTS.md ;;
  repro-bluedbm-apps)
    out=$(./target/release/insitu repro bluedbm-apps --out target/repro-out --work target/insitu-repro "$@")
    echo "$out"
    printf '\n## %s — commit %s — insitu repro bluedbm-apps (issue 15)\n\n```\n%s\n```\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$out" >> bench/RESULTS.md ;;
  bluedbm-reads)
    out=$(./target/release/insitu net bench --work target/insitu-bench "$@")
    echo "$out"
    printf '\n## %s — commit %s — insitu net bench (issue 9)\n\n```\n%s\n```\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$out" >> bench/RESULTS.md ;;
  compare) python3 bench/compare.py "$@" ;;
  repro-all)
    # Every paper's figures into target/repro-out (tables, plots, REPORT.md); the report goes into RESULTS.md.
    # tpchgen-cli comes from the bench venv, put on the PATH for the repro.
    [ -x target/bench/venv/bin/tpchgen-cli ] || { python3 -m venv target/bench/venv && target/bench/venv/bin/pip install -q tpchgen-cli; }
    rm -rf target/repro-out
    PATH="$PWD/target/bench/venv/bin:$PATH" ./target/release/insitu repro all --out target/repro-out "$@" >/dev/null
    printf '\n## %s — commit %s — insitu repro all %s (issue 13)\n\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$*" >> bench/RESULTS.md
    sed -e '1,/^| paper | figure | verdict |/{/^| paper | figure | verdict |/!d}' -e '/^<details>/,/^<\/details>/d' -e '/^!\[/d' target/repro-out/REPORT.md | sed -e 's/^### /#### /' -e 's/^## /### /' >> bench/RESULTS.md
    echo "report: target/repro-out/REPORT.md" ;;
  repro-intersect)
    out=$(./target/release/insitu repro intersect --out target/repro-out "$@")
    echo "$out"
    printf '\n## %s — commit %s — insitu repro intersect (issue 5)\n\n%s\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$out" >> bench/RESULTS.md ;;
  psacs)
    [ -f target/bench/tpch-psacs/customer.parquet ] || target/bench/venv/bin/tpchgen-cli parquet -s 1 \
      --tables=lineitem,partsupp,orders,customer --output-dir=target/bench/tpch-psacs
    out=$(./target/release/insitu repro psacs --tpch target/bench/tpch-psacs --out target/repro-out "$@")
    echo "$out"
    printf '\n## %s — commit %s — insitu repro psacs (issue 4)\n\n%s\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$out" >> bench/RESULTS.md ;;
  nascent)
    out=$(./target/release/insitu repro nascent --out target/repro-out "$@")
    echo "$out"
    printf '\n## %s — commit %s — insitu repro nascent (issue 3)\n\n%s\n' "$(date '+%Y-%m-%d %H:%M')" "$(git rev-parse --short HEAD)" "$out" >> bench/RESULTS.md ;;
  all)
    "$0" speed && "$0" storage && "$0" sort-kernel && "$0" table-sort && "$0" nascent && "$0" shuffle && "$0" psacs && "$0" intersect && "$0" repro-intersect && "$0" selfsort && "$0" repro-selfsort && "$0" repro-bluedbm-net && "$0" repro-bluedbm-apps && "$0" bluedbm-reads && "$0" bluedbm-apps && "$0" python && "$0" ray ;;
  *) echo "unknown suite $suite (speed, storage, sort-kernel, table-sort, nascent, shuffle, psacs, intersect, repro-intersect, selfsort, repro-selfsort, repro-bluedbm-net, repro-bluedbm-apps, repro-all, bluedbm-reads, bluedbm-apps, python, ray, compare, all)"; exit 2 ;;
esac
