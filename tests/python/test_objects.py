"""Blobs, search and list intersection from Python, against Python's and numpy's own answers."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import insitu


def test_put_get_round_trip_striped_and_on_one_device(arr, tmp_path):
    data = bytes(range(256)) * 40_000  # 10 MB: several stripe units
    r = arr.put("striped", data)
    assert r.result["size"] == len(data) and r.op == "put"
    assert arr.get("striped") == data
    assert arr.last_report.bytes["device_to_host"] == len(data)
    arr.put("one", memoryview(data[:1000]), device=2)
    assert arr.get("one") == data[:1000]
    assert [o["devices"] for o in arr.ls() if o["name"] == "one"] == [[2]]
    f = tmp_path / "f.bin"
    f.write_bytes(data[:12345])
    arr.put("file", f)
    assert arr.get("file") == data[:12345]


def test_put_takes_any_buffer_and_refuses_what_is_neither_bytes_nor_a_path(arr):
    ids = np.arange(1000, dtype=np.uint32)
    arr.put("ids", ids)
    assert np.frombuffer(arr.get("ids"), dtype=np.uint32).tolist() == ids.tolist()
    with pytest.raises(insitu.InvalidArgumentError, match="got int"):
        arr.put("five", 5)
    for bad in (10.5, "10.5", True):
        with pytest.raises(insitu.InvalidArgumentError, match="a length is a whole number of bytes"):
            arr.lba_read(0, bad)
    assert len(arr.lba_read(0, np.int64(4096))) == len(arr.lba_read(0, "4KiB")) == 4096


def test_progress_is_shown_only_when_asked(arr, tmp_path, capfd):
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * (9 << 20))
    arr.put("quiet", f)
    assert capfd.readouterr().err == ""
    arr.put("loud", f, progress=True)
    assert arr.get("loud", progress=True) == f.read_bytes()
    err = capfd.readouterr().err
    assert "put loud" in err and "get loud" in err


def test_a_progress_callback_that_raises_stops_the_operation_and_leaves_nothing(arr, tmp_path, capfd):
    """The first exception a progress callback raises stops the put (nothing stored, the name still
    free) or the get (no file written), and is raised as it is: not printed once per call while the
    operation goes on."""
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(1 << 20) * 12)
    calls = []

    def stop_at_4mib(done, total):
        calls.append(done)
        if done >= 4 << 20:
            raise ValueError("enough")

    with pytest.raises(ValueError, match="enough"):
        arr.put("big", f, progress=stop_at_4mib)
    assert "big" not in [o["name"] for o in arr.ls()]
    assert max(calls) < f.stat().st_size, "it stopped before the end"
    with pytest.raises(TypeError):
        arr.put("big", f, progress=lambda done: None)
    assert "big" not in [o["name"] for o in arr.ls()]
    arr.put("big", f)
    assert arr.get("big") == f.read_bytes()
    calls.clear()
    with pytest.raises(ValueError, match="enough"):
        arr.get("big", out=tmp_path / "back", progress=stop_at_4mib)
    assert not (tmp_path / "back").exists()
    assert "Traceback" not in capfd.readouterr().err
    # Ctrl-C while it runs: KeyboardInterrupt, and nothing stored.
    with pytest.raises(KeyboardInterrupt):
        arr.put("interrupted", f, progress=lambda done, total: os.kill(os.getpid(), signal.SIGINT))
    assert "interrupted" not in [o["name"] for o in arr.ls()]


def test_ctrl_c_stops_a_put_without_a_progress_callback(arr, tmp_path):
    # No callback: the put still looks for Ctrl-C as its work goes. It reads a FIFO that a thread feeds:
    # 8 MiB, then SIGINT, then more, 64 MiB in all (the array holds it), until the put stops reading.
    # Nothing is stored; a put that saw the signal only once done would have stored it all.
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)
    sent, written = threading.Event(), []

    def feed():
        chunk = os.urandom(1 << 20)
        try:
            with open(fifo, "wb") as w:
                for i in range(64):
                    w.write(chunk)
                    w.flush()
                    written.append(i)
                    if i == 7:
                        os.kill(os.getpid(), signal.SIGINT)
                        sent.set()
        except BrokenPipeError:
            pass
        finally:
            sent.set()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    with pytest.raises(KeyboardInterrupt):
        arr.put("interrupted", fifo)
    assert sent.is_set()
    feeder.join(timeout=60)
    assert len(written) < 64, "the put read to the end"
    assert "interrupted" not in [o["name"] for o in arr.ls()]
    arr.put("after", b"the array goes on")
    assert arr.get("after") == b"the array goes on"


def test_get_writes_to_a_file_whole_or_not_at_all(arr, tmp_path):
    data = bytes(range(256)) * 5000
    arr.put("blob", data)
    assert arr.get("blob", out=tmp_path / "back") is None
    assert (tmp_path / "back").read_bytes() == data
    assert arr.last_report.result["size"] == len(data)
    with pytest.raises(insitu.NotFoundError):
        arr.get("nope", out=tmp_path / "none")
    assert not (tmp_path / "none").exists(), "no file, not even a partial one"
    with pytest.raises(insitu.InvalidArgumentError, match="is a directory"):
        arr.get("blob", out=tmp_path)
    # A folder that does not exist is a file error, as Python's own: FileNotFoundError, errno, filename.
    with pytest.raises(FileNotFoundError) as e:
        arr.get("blob", out=tmp_path / "no" / "such" / "f")
    assert e.value.errno == 2 and e.value.filename == str(tmp_path / "no" / "such" / "f")


def test_rm_and_not_found(arr):
    arr.put("x", b"abc")
    arr.rm("x")
    assert arr.ls() == []
    with pytest.raises(insitu.NotFoundError, match='no object named "x"'):
        arr.get("x")
    with pytest.raises(LookupError):
        arr.rm("x")


@pytest.mark.parametrize("placement", ["device", "host"])
def test_search_counts_like_python(arr, placement):
    text = b"".join(b"line %d ERROR\n" % i if i % 7 == 0 else b"line %d ok\n" % i for i in range(20_000))
    arr.put("log", text)
    count, report = arr.search("log", "ERROR", placement)
    assert count == text.count(b"ERROR")
    offsets, _ = arr.search("log", b"ERROR", placement, offsets=True)
    expected, at = [], text.find(b"ERROR")
    while at >= 0:
        expected.append(at)
        at = text.find(b"ERROR", at + 1)
    assert offsets == expected
    if placement == "device":
        # Only the answer crosses the host link, not the text.
        assert report.bytes["device_to_host"] < len(text) // 100


def sorted_ids(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.unique(rng.integers(0, 2**32, size=n, dtype=np.uint64)).astype(np.uint32)


@pytest.mark.parametrize("placement", ["device", "host", "auto"])
def test_intersect_matches_numpy(arr, placement):
    a, b, c = sorted_ids(20_000, 1), sorted_ids(5_000, 2), sorted_ids(9_000, 3)
    planted = a[::9]
    b = np.union1d(b, planted)
    c = np.union1d(c, planted[::2])
    for name, ids in [("a", a), ("b", b), ("c", c)]:
        arr.put_list(ids, name, entry_size=16)
    ids, report = arr.intersect(["a", "b"], placement)
    assert ids.dtype == np.uint32
    np.testing.assert_array_equal(ids, np.intersect1d(a, b))
    ids3, _ = arr.intersect(["a", "b", "c"], placement)
    np.testing.assert_array_equal(ids3, np.intersect1d(np.intersect1d(a, b), c))
    count, _ = arr.intersect(["a", "b", "c"], placement, count_only=True)
    assert count == len(ids3)
    assert report.result["count"] == len(ids)
    if placement == "auto":
        # Auto takes the placement it modeled faster, and that run's report gives the same time.
        auto = report.result["auto"]
        chosen = min(("host", auto["host_ms"]), ("device", auto["device_ms"]), key=lambda x: x[1])
        assert report.result["placement"] == chosen[0] or auto["host_ms"] == auto["device_ms"]
        assert report.modeled["time_s"] * 1e3 == pytest.approx(chosen[1], rel=0.02)
    # Whole entries of the first list, as `insitu intersect -o` writes them: an entry a row, its ID first.
    rows, _ = arr.intersect(["a", "b"], placement, entries=True)
    assert rows.shape == (len(ids), 16) and rows.dtype == np.uint8
    np.testing.assert_array_equal(rows[:, :4].copy().view("<u4").ravel(), ids)
    if placement == "device":
        host_rows, _ = arr.intersect(["a", "b"], "host", entries=True)
        np.testing.assert_array_equal(rows, host_rows)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="count_only and entries"):
        arr.intersect(["a", "b"], placement, count_only=True, entries=True)
    # One string is not a list of names (it would be taken letter by letter).
    with pytest.raises(insitu.errors.InvalidArgumentError, match="not one string"):
        arr.intersect("ab", placement)


def test_put_list_reads_a_file_of_ids_as_the_cli_does(arr, tmp_path):
    rng = np.random.default_rng(5)
    a = np.unique(rng.integers(0, 50_000, 4000)).astype("<u4")
    b = np.unique(rng.integers(0, 50_000, 9000)).astype("<u4")
    a.tofile(tmp_path / "a.bin")
    (tmp_path / "b.txt").write_text("\n".join(map(str, b)) + "\n")
    a.tofile(tmp_path / "a.ids")
    arr.put_list(tmp_path / "a.bin", "a")
    arr.put_list(str(tmp_path / "b.txt"), "b")
    arr.put_list(tmp_path / "a.ids", "a2", format="u32le")
    ids, _ = arr.intersect(["a", "b"])
    np.testing.assert_array_equal(ids, np.intersect1d(a, b))
    ids, _ = arr.intersect(["a2", "b"])
    np.testing.assert_array_equal(ids, np.intersect1d(a, b))
    with pytest.raises(insitu.InvalidArgumentError, match="cannot tell how its IDs are written"):
        arr.put_list(tmp_path / "a.ids", "x")
    with pytest.raises(insitu.InvalidArgumentError, match="format"):
        arr.put_list(tmp_path / "a.ids", "x", format="csv")
    with pytest.raises(insitu.InvalidArgumentError, match="in memory"):
        arr.put_list(a, "x", format="text")
    with pytest.raises(FileNotFoundError):
        arr.put_list(tmp_path / "none.bin", "x")
    assert sorted(o["name"] for o in arr.ls()) == ["a", "a2", "b"]


def test_put_list_refuses_bad_ids(arr):
    with pytest.raises(insitu.InvalidArgumentError, match="sorted without duplicates; ID 3 at position 2"):
        arr.put_list(np.array([1, 5, 3]), "u")
    with pytest.raises(insitu.InvalidArgumentError, match="a duplicate of"):
        arr.put_list([1, 5, 5], "d")
    with pytest.raises(insitu.InvalidArgumentError, match=r"\[0, 2\*\*32\)"):
        arr.put_list([1, 2**32], "big")
    with pytest.raises(insitu.InvalidArgumentError, match="integers"):
        arr.put_list(np.array([1.5, 2.5]), "f")
    with pytest.raises(insitu.InvalidArgumentError, match="multiple of 4"):
        arr.put_list([1, 2], "s", entry_size=6)
    assert arr.ls() == []


def test_model_intersect_favours_the_device_for_long_lists_and_low_ratios():
    m = insitu.model_intersect("50MB", "50MB", entry_size=256, ratio=0.01)
    assert m["faster"] == "device" and m["device_ms"] < m["host_ms"]
    for side in ["host", "device"]:
        stages = sum(st[f"{side}_ms"] or 0 for st in m["stages"])
        assert stages == pytest.approx(m[f"{side}_ms"])
    assert "smartssd-2016" in m["text"]
    names = [p["name"] for p in insitu.profiles()]
    assert {"smartssd", "smartssd-2016", "bluedbm", "tiny"} <= set(names)


def test_a_missing_file_raises_what_python_would(arr, tmp_path):
    import errno
    import pickle

    missing = tmp_path / "nope.bin"
    # `except FileNotFoundError` catches it, as it would for open(); it is an insitu error too.
    with pytest.raises(FileNotFoundError) as e:
        arr.put("x", missing)
    assert isinstance(e.value, insitu.errors.MissingFileError) and isinstance(e.value, insitu.FileError)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)
    assert str(e.value) == f"{missing}: No such file or directory (os error 2)", "the CLI's message"
    back = pickle.loads(pickle.dumps(e.value))  # as Ray carries it
    assert (type(back), back.errno, back.filename, str(back)) == (
        type(e.value),
        e.value.errno,
        e.value.filename,
        str(e.value),
    )
    with pytest.raises(FileNotFoundError):
        arr.put_table(tmp_path / "missing.parquet", "t")
    # A folder where a file is wanted is refused by name before anything is opened.
    with pytest.raises(insitu.InvalidArgumentError, match="is a directory, not a file"):
        arr.put("x", tmp_path)
    assert arr.ls() == []
