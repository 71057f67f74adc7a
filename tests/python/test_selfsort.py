"""The Self-Sorting SSD from Python (Cavazos Quero, Lee, Kim, §III): an index configured, written, generated
and read back in key order; queries; the four sorting methods of §IV-C. Every answer is checked against a
plain sort or scan of the records done here, and against the CLI on the same array."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

import insitu

SIZE, KEY = 100, 10


def records(n: int, seed: int = 5, size: int = SIZE, distinct: int = 0) -> bytes:
    """``n`` records of ``size`` bytes, a random 10-byte key first (from ``distinct`` keys when given, so
    some repeat), each tagged with its number."""
    rng = random.Random(seed)
    keys = [rng.randbytes(KEY) for _ in range(distinct)] if distinct else None
    out = bytearray()
    for i in range(n):
        key = rng.choice(keys) if keys else rng.randbytes(KEY)
        tag = f"#{i:07d}".encode()
        out += key + rng.randbytes(size - KEY - len(tag)) + tag
    return bytes(out)


def split(data: bytes, size: int = SIZE) -> list:
    return [data[i : i + size] for i in range(0, len(data), size)]


def host_sort(data: bytes, size: int = SIZE) -> bytes:
    """A stable sort by the key bytes: records of equal keys keep their written order (the firmware orders
    them by LBA)."""
    return b"".join(sorted(split(data, size), key=lambda r: r[:KEY]))


@pytest.fixture
def drive(tmp_path):
    a = insitu.Array.create(tmp_path / "drive", devices=1, profile="tiny", capacity="32MiB")
    yield a
    a.close()


def test_the_four_methods_return_a_host_sort(drive, tmp_path):
    data = records(1500)
    want = host_sort(data)
    assert want != data
    modeled = {}
    for method in ["self-sort-write", "self-sort-command", "merge-sort", "active-sort"]:
        got, r = drive.selfsort_sort(data, method=method)
        assert got == want, method
        assert r.result["count"] == 1500 and r.modeled_time_s > 0, method
        modeled[method] = r.modeled_time_s
    # From a file to a file, as the CLI does: the same bytes, the same modeled time (counted work).
    src, out = tmp_path / "in.rec", tmp_path / "out.rec"
    src.write_bytes(data)
    none, r = drive.selfsort_sort(src, method="self-sort-command", out=out)
    assert none is None and out.read_bytes() == want
    assert r.modeled_time_s == modeled["self-sort-command"]


def test_an_index_written_generated_read_and_queried(drive):
    data = records(2000, distinct=300)
    want = split(host_sort(data))
    drive.selfsort_config(SIZE, KEY)
    drive.selfsort_write(data[: 1000 * SIZE])
    drive.selfsort_write(data[1000 * SIZE :], at_record=1000)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="generate"):
        drive.selfsort_read()
    seen = []
    r = drive.selfsort_generate(chunk=256, progress=lambda done, total: seen.append((done, total)))
    assert r.result["commands"] == 8 and seen[-1] == (2000, 2000)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert drive.selfsort_read() == b"".join(want)
    assert drive.last_report.result["count"] == 2000

    keys = [r[:KEY] for r in split(data)]
    lo, hi = min(keys), max(keys)
    got, r = drive.selfsort_min()
    assert split(got) == [w for w in want if w[:KEY] == lo] and r.result["count"] == keys.count(lo)
    got, _ = drive.selfsort_max()
    assert split(got) == [w for w in want if w[:KEY] == hi]
    a, b = sorted(keys)[500], sorted(keys)[1500]
    got, r = drive.selfsort_range(a, b)
    assert split(got) == [w for w in want if a <= w[:KEY] <= b]
    n, _ = drive.selfsort_range(a, b, count=True)
    assert n == r.result["count"] == len(split(got))
    # A prefix bound: every key starting with the byte.
    p = keys[7][:1]
    n, _ = drive.selfsort_select(p, count=True)
    assert n == sum(k.startswith(p) for k in keys)
    got, _ = drive.selfsort_select(keys[7])
    assert split(got) == [w for w in want if w[:KEY] == keys[7]]

    stats = drive.selfsort_stats()
    (index,) = stats["indexes"]
    assert index["indexed"] == 2000 and index["complete"] and index["config"]["record_size"] == SIZE
    assert drive.last_report.result == stats, "its report is kept, as every call's is"


def test_sort_on_write_through_either_interface_survives_a_reopen(tmp_path):
    data = records(800, seed=9)
    path = tmp_path / "drive"
    with insitu.Array.create(path, devices=1, profile="tiny", capacity="32MiB") as a:
        a.selfsort_config(SIZE, KEY, sort_on_write=True, via="vendor")
        a.selfsort_write(data, via="vendor")
        assert a.selfsort_read() == host_sort(data)
        # A second index on the same device, through the command block, records after the first's.
        a.selfsort_config(SIZE, KEY, sort_on_write=True, index=2, base_lba=1024)
        a.selfsort_write(data[: 100 * SIZE], index=2)
        a.selfsort_flush()
    with insitu.Array.open(path) as a:
        assert a.selfsort_read() == host_sort(data)
        assert a.selfsort_read(index=2) == host_sort(data[: 100 * SIZE])
        a.selfsort_drop(index=2)
        assert [i["config"]["id"] for i in a.selfsort_stats()["indexes"]] == [1]


def test_the_cli_and_python_give_the_same_answers(tmp_path, cli):
    data = records(1200, seed=11)
    src = tmp_path / "in.rec"
    src.write_bytes(data)
    path = tmp_path / "drive"
    sh = lambda *a: subprocess.run(  # noqa: E731
        [cli, "--json", "--data", str(path), *a], check=True, capture_output=True, text=True
    ).stdout
    with insitu.Array.create(path, devices=1, profile="tiny", capacity="32MiB") as a:
        py_sorted, py_report = a.selfsort_sort(src, method="active-sort")
    out = tmp_path / "cli.rec"
    cli_report = json.loads(sh("selfsort", "sort", str(src), "-o", str(out), "--method", "active-sort"))
    assert out.read_bytes() == py_sorted == host_sort(data)
    assert cli_report["modeled"]["time_s"] == py_report.modeled_time_s
    # An index the CLI made, queried from Python, and the other way round.
    sh("selfsort", "config", "--record-size", str(SIZE), "--key-size", str(KEY), "--index", "3", "--base-lba", "2048")
    sh("selfsort", "write", str(src), "--index", "3")
    sh("selfsort", "generate", "--index", "3")
    key = data[:KEY]
    got = tmp_path / "cli-blocks"
    sh("lba", "read", "0", "--at", "2048", "--len", str(len(data)), "-o", str(got))
    with insitu.Array.open(path) as a:
        assert a.selfsort_read(index=3) == host_sort(data)
        # The block interface reads the range in key order, from either front.
        assert a.lba_read(2048, len(data)) == got.read_bytes() == host_sort(data)
        n, _ = a.selfsort_select(key, count=True, index=3)
    cli_n = json.loads(sh("selfsort", "select", "--key", key.hex(), "--count", "--index", "3"))["result"]["count"]
    assert n == cli_n == sum(r[:KEY] == key for r in split(data))


def test_bad_input_is_refused_by_name(drive, tmp_path):
    # The firmware refuses the configuration (as a drive answers a command with an error status): a bad
    # argument, so a ValueError too, as the host's own checks are.
    with pytest.raises(insitu.errors.InvalidArgumentError, match="ends past the 10-byte record"):
        drive.selfsort_config(10, 11)
    with pytest.raises(ValueError, match="no index 7 on this device"):
        drive.selfsort_generate(index=7, via="vendor")
    with pytest.raises(insitu.errors.InvalidArgumentError, match="block.*vendor"):
        drive.selfsort_config(SIZE, KEY, via="smoke-signal")
    drive.selfsort_config(SIZE, KEY)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="not a whole, non-zero number of 100-byte"):
        drive.selfsort_write(b"x" * 150)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="the selected key is 11 bytes, longer than the index's 10-byte keys"):
        drive.selfsort_select(b"k" * 11)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="key is bytes or str"):
        drive.selfsort_select(12)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="unknown method"):
        drive.selfsort_sort(records(10), method="bubble-sort")
    with pytest.raises(insitu.errors.InvalidArgumentError, match="unknown record format"):
        drive.selfsort_sort(records(10), format="csv")
    with pytest.raises(insitu.errors.FileError, match="missing.rec"):
        drive.selfsort_sort(tmp_path / "missing.rec")
    with pytest.raises(insitu.errors.InvalidArgumentError, match="another layout is the fixed format"):
        drive.selfsort_sort(records(10), format="gensort", record_size=50, key_size=10)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="give one"):
        drive.selfsort_range(b"a", b"b", count=True, out=tmp_path / "counted")
    # A failed sort to a file leaves nothing behind, not even its partial file.
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(insitu.errors.InvalidArgumentError):
        drive.selfsort_sort(b"x" * 150, out=tmp_path / "never.rec")
    with pytest.raises(insitu.errors.InvalidArgumentError):
        drive.selfsort_range(b"b", b"a", out=tmp_path / "never.rec")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_records_from_files_and_layouts_by_size(drive, tmp_path):
    data = records(700, seed=13, size=48)
    src = tmp_path / "recs"
    src.write_bytes(data)
    # A record size alone means the fixed format (its key first, 10 bytes).
    got, r = drive.selfsort_sort(src, method="merge-sort", record_size=48, key_size=KEY)
    assert got == host_sort(data, 48) and r.result["count"] == 700
    drive.selfsort_config(48, KEY, index=2, base_lba=512)
    drive.selfsort_write(src, index=2)
    drive.selfsort_generate(index=2)
    assert drive.selfsort_read(index=2) == host_sort(data, 48)


def test_the_block_interface_reads_back_trims_and_serves_active_reads(drive, tmp_path):
    block = drive.selfsort_stats()["page_size"]
    rng = random.Random(2)
    data = rng.randbytes(3 * block + 17)
    drive.lba_write(data, 100)
    assert drive.lba_read(100, len(data)) == data
    # The last block was padded with zeros; a trimmed block reads as zeros.
    assert drive.lba_read(103, block) == data[3 * block :] + bytes(block - 17)
    drive.lba_trim(101, block)
    assert drive.lba_read(100, 3 * block) == data[:block] + bytes(block) + data[2 * block : 3 * block]
    with pytest.raises(insitu.errors.InvalidArgumentError, match="whole blocks"):
        drive.lba_trim(100, block + 1)
    # An index's range read through the block interface comes back in key order (§III-D).
    recs = records(300, seed=4)
    drive.selfsort_config(SIZE, KEY, sort_on_write=True, base_lba=200)
    drive.selfsort_write(recs)
    assert drive.lba_read(200, len(recs)) == host_sort(recs)
    src = tmp_path / "blocks"
    src.write_bytes(data)
    drive.lba_write(src, 400)
    out = tmp_path / "back"
    assert drive.lba_read(400, len(data), out=out) is None and out.read_bytes() == data
    assert drive.lba_read(400, "1KiB") == data[:1024]
