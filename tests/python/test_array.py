"""The array's life from Python: create, open, lock, close, errors (classes and the CLI's messages), the
CLI and Python on one array, reports, and the GIL released while operators run."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import numpy as np
import pytest

import insitu
from conftest import orders


def test_create_open_close(tmp_path):
    path = tmp_path / "a"
    with insitu.Array.create(path, devices=3, profile="tiny") as arr:
        assert arr.config["devices"] == 3 and arr.config["profile"]["name"] == "tiny"
        arr.put("x", b"kept")
        assert "3 x tiny" in repr(arr)
    assert arr.closed and "closed" in repr(arr)
    arr.close()  # twice is fine
    with pytest.raises(insitu.InvalidArgumentError, match="is closed"):
        arr.get("x")
    with insitu.Array.open(path) as again:
        assert again.get("x") == b"kept"
        assert again.recovered["removed_orphans"] == []


def test_error_classes(tmp_path, arr):
    with pytest.raises(insitu.NoArrayError, match="no array at") as e:
        insitu.Array.open(tmp_path / "nowhere")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, insitu.InsituError)
    with pytest.raises(insitu.ArrayExistsError):
        insitu.Array.create(arr.path, devices=1, profile="tiny")
    with pytest.raises(insitu.InvalidArgumentError, match="unknown profile"):
        insitu.Array.create(tmp_path / "b", profile="no-such-profile")
    # A capacity that cannot be is the caller's mistake, as a bad name is.
    with pytest.raises(insitu.InvalidArgumentError, match="smaller than one erase block"):
        insitu.Array.create(tmp_path / "b", devices=1, profile="tiny", capacity=100)
    with pytest.raises(insitu.InvalidArgumentError, match="no raw flash partition"):
        arr.fs_put("f", b"abc")
    # A profile file by its pathlib.Path, as by its name.
    from pathlib import Path

    toml = Path(__file__).resolve().parents[2] / "profiles" / "tiny.toml"
    insitu.Array.create(tmp_path / "p", devices=1, profile=toml).close()
    assert not (tmp_path / "b").exists()
    with pytest.raises(insitu.InvalidArgumentError, match="invalid object name"):
        arr.put("../escape", b"x")
    arr.put("x", b"1")
    with pytest.raises(insitu.AlreadyExistsError):
        arr.put("x", b"2")
    # A file Arrow or Parquet refuses is a format error, named by its path.
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("k,v\n1,a\n2\n")
    with pytest.raises(insitu.FormatError, match="bad.csv"):
        arr.put_table(bad_csv, "bad", key="k")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(insitu.FormatError, match="bad.parquet"):
        arr.put_table(tmp_path / "bad.parquet", "bad", key="k")
    with pytest.raises(insitu.InvalidArgumentError, match='placement "gpu": expected one of device, host, host-accel'):
        arr.sort("t", "k", placement="gpu")
    with pytest.raises(insitu.InvalidArgumentError, match="64 parsecs"):
        arr.sort("t", "k", memory_budget="64 parsecs")
    # A whole number out of range is refused by name, not by the conversion's bare OverflowError.
    with pytest.raises(insitu.InvalidArgumentError, match="create: a whole-number argument"):
        insitu.Array.create(tmp_path / "c", devices=-1, profile="tiny")
    # Named by the method called (put), not the native one under it (put_bytes).
    with pytest.raises(insitu.InvalidArgumentError, match="^put: a whole-number argument"):
        arr.put("neg", b"x", device=-1)
    with pytest.raises(insitu.InvalidArgumentError, match="net_routes: a whole-number argument"):
        insitu.net_routes("ring", nodes=-1)
    # Messages name Python's keyword arguments, not the CLI's flags.
    with pytest.raises(insitu.InvalidArgumentError, match=r"^invalid argument: entry_size must be a multiple of 4"):
        arr.put_list(np.array([1, 2, 3], dtype=np.uint32), "l", entry_size=3)
    # A pattern is str or bytes: an int (which bytes() takes as that many zeros) is refused.
    for bad in (5, 3.0, None):
        with pytest.raises(insitu.InvalidArgumentError, match="the pattern is str or bytes"):
            arr.search("x", bad)


def test_create_warns_when_the_devices_could_outgrow_the_disk(tmp_path):
    # Flash images are sparse; 2 devices of 8 TiB could take 16 TiB as they fill, more than the disk has.
    with pytest.warns(RuntimeWarning, match="can take up to 17592186044416 bytes of disk"):
        a = insitu.Array.create(tmp_path / "big", devices=2, profile="tiny", capacity="8TiB")
    a.close()


def test_device_full_keeps_what_was_stored(tmp_path):
    with insitu.Array.create(tmp_path / "small", devices=1, profile="tiny", capacity="1MiB") as arr:
        arr.put("first", b"a" * 1000)
        with pytest.raises(insitu.DeviceFullError, match="device full"):
            arr.put("big", b"b" * (4 << 20))
        assert arr.get("first") == b"a" * 1000
        assert [o["name"] for o in arr.ls()] == ["first"]
        assert arr.fsck()["ok"]


def test_device_memory_budget_too_small_is_named(arr):
    arr.put_table(orders(5000), "o", key="id")
    with pytest.raises(insitu.InsituError, match="memory"):
        arr.sort("o", "id", memory_budget=1024)
    assert "o.sorted" not in [o["name"] for o in arr.ls()]


def test_a_second_open_is_locked_out(arr, tmp_path):
    # Open in this process: said at once, whatever the wait (a notebook cell run again waited for itself).
    start = time.monotonic()
    with pytest.raises(insitu.LockedError, match="already open in this process"):
        insitu.Array.open(arr.path, wait=5)
    assert time.monotonic() - start < 2
    # Closed, it opens again; and a relative path is the array's wherever the process goes after.
    arr.close()
    here = os.getcwd()
    os.chdir(os.path.dirname(arr.path))
    try:
        again = insitu.Array.open(os.path.basename(arr.path))
    finally:
        os.chdir(here)
    with again:
        assert os.path.isabs(again.path)
        again.put("after-cd", b"x")
        assert again.get("after-cd") == b"x"


def test_errors_pickle_with_their_class_and_message(arr):
    with pytest.raises(insitu.NotFoundError) as e:
        arr.get("nope")
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is insitu.NotFoundError and str(back) == str(e.value)


def test_messages_are_the_clis(tmp_path, cli):
    path = tmp_path / "a"
    insitu.Array.create(path, devices=2, profile="tiny").close()
    run = subprocess.run([cli, "--data", str(path), "get", "nope"], capture_output=True, text=True)
    assert run.returncode != 0
    with insitu.Array.open(path) as arr:
        with pytest.raises(insitu.NotFoundError) as e:
            arr.get("nope")
    assert str(e.value) in run.stderr


def test_cli_and_python_share_an_array(tmp_path, cli):
    path, t = tmp_path / "a", orders(2000)
    with insitu.Array.create(path, devices=3, profile="tiny") as arr:
        arr.put_table(t, "o", key="id")
        py_sorted, _ = arr.sort("o", "id", out="by_python")
    src = tmp_path / "o.parquet"
    pq.write_table(t, src)
    sh = lambda *a: subprocess.run([cli, "--data", str(path), *a], check=True, capture_output=True)  # noqa: E731
    sh("put-table", str(src), "--name", "o_cli", "--key", "id")
    sh("sort", "o_cli", "--key", "id", "--out", "by_cli")
    sh("get-table", "by_python", "--merged", "-o", str(tmp_path / "py.parquet"))
    with insitu.Array.open(path) as arr:
        by_cli = arr.get_table("by_cli", merged=True)
        assert by_cli.equals(pq.read_table(tmp_path / "py.parquet"))
        assert by_cli.equals(t.sort_by("id"))


def test_reports_model_the_same_work_the_same(make_array):
    t = orders(3000)
    puts, sorts = [], []
    for name in ["one", "two"]:
        a = make_array(devices=2, name=name)
        puts.append(a.put_table(t, "o", key="id"))
        sorts.append(a.sort("o", "id")[1])
    # Storing is priced from counted bytes alone: the same to the last digit.
    assert puts[0].modeled == puts[1].modeled and puts[0].modeled_time_s > 0
    # So is sorting: its device time is counted work priced by the profile's kernels, not CPU time.
    one, two = sorts
    assert one.modeled == two.modeled
    assert one.bytes == two.bytes and one.ops == two.ops
    assert one.modeled_time_s > 0 and one.modeled_energy_j > 0
    d = one.to_dict()
    keys = {"op", "headline", "result", "wall_s", "host_cpu_s", "device_cpu_s", "bytes", "ops", "modeled"}
    assert set(d) == keys | {"measured_phases"}
    assert d["measured_phases"] and all("name" in p and "wall_s" in p for p in d["measured_phases"])
    assert d["result"]["rows"] == 3000
    assert "modeled" in str(one) and "measured" in str(one) and one.headline in str(one)
    assert repr(one).startswith("<Report 'sort (device): 3000 rows")


def test_operators_release_the_gil(arr):
    """While an operator runs in one thread, Python code runs in another: the longest pause of a loop in the
    main thread is far shorter than the operator's call."""
    data = os.urandom(1 << 20) * 24
    arr.put("big", data)
    calls = []
    done = threading.Event()

    def work():
        for _ in range(3):
            t0 = time.perf_counter()
            arr.search("big", b"\x00\x01\x02\x03", "host")
            calls.append(time.perf_counter() - t0)
        done.set()

    th = threading.Thread(target=work)
    th.start()
    last, gap = time.perf_counter(), 0.0
    while not done.is_set():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    th.join()
    # Holding the GIL, the worker would stop this loop for a whole call.
    assert gap < 0.5 * max(calls), (gap, calls)


def test_threads_share_one_array(arr):
    errors = []

    def put(i):
        try:
            arr.put(f"obj{i}", bytes([i]) * 10_000)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert all(arr.get(f"obj{i}") == bytes([i]) * 10_000 for i in range(8))


def test_messages_name_keyword_arguments_not_flags():
    from insitu import _insitu

    w = _insitu._in_python_words
    assert w("--entry-size must be a multiple of 4") == "entry_size must be a multiple of 4"
    assert w("(raise --memory-budget to 4 MiB)") == "(raise memory_budget to 4 MiB)"
    assert w("no array at /x (create one with `insitu init`)") == "no array at /x (create one with `insitu.Array.create`)"
    assert w("try --profile bluedbm, or --threads.") == "try profile bluedbm, or threads."
    # Not flags: inside words, a bare --, digits; nor inside quotes or a command.
    assert w("a--b and -- alone and x --7") == "a--b and -- alone and x --7"
    assert w('no object named "--backup-old" (--device 2)') == 'no object named "--backup-old" (device 2)'
    assert w("run `insitu fsck --repair` or use --wait") == "run `insitu fsck --repair` or use wait"
    # The CLI's commands as this package's calls.
    assert w("make an appliance with `insitu init --nodes N --topology T`") == (
        "make an appliance with `insitu.Array.create(path, devices=N, topology=T)`"
    )
    assert w("use --placement host, or --ids-only or --count-only") == (
        "use placement host, or entries=False or count_only=True"
    )
    assert w("run `insitu selfsort generate` first") == "run `Array.selfsort_generate` first"


def test_host_work_is_modeled_on_the_host_asked_for(tmp_path, cli, monkeypatch):
    """host_profile= (or INSITU_HOST_PROFILE, as the CLI reads it) models host work on another host: the
    same figures as the CLI's --host-profile, and the array's own host otherwise."""
    path = tmp_path / "a"
    t = pa.table({"k": np.arange(3000, 0, -1, dtype=np.int64), "v": np.arange(3000, dtype=np.int64)})
    with insitu.Array.create(path, devices=2, profile="tiny") as arr:
        arr.put_table(t, "t", key="k")
        _, own = arr.sort("t", "k", placement="host", out="own")
    with insitu.Array.open(path, host_profile="skylake-sp-44") as arr:
        _, other = arr.sort("t", "k", placement="host", out="other")
    assert own.modeled["host"] != other.modeled["host"] == "skylake-sp-44"
    monkeypatch.setenv("INSITU_HOST_PROFILE", "skylake-sp-44")
    with insitu.Array.open(path) as arr:
        _, env = arr.sort("t", "k", placement="host", out="env")
    run = subprocess.run(
        [cli, "--json", "--data", str(path), "sort", "t", "--key", "k", "--placement", "host", "--out", "cli"],
        capture_output=True, text=True, check=True,
    )
    by_cli = json.loads(run.stdout)
    assert env.modeled["host"] == by_cli["modeled"]["host"] == "skylake-sp-44"
    assert env.modeled["time_s"] == pytest.approx(by_cli["modeled"]["time_s"]) == pytest.approx(other.modeled["time_s"])
