"""Tables from Python: Arrow round trips of every stored type, NASCENT's sort and PSACS's shuffle on
every placement, checked against pyarrow and duckdb."""

from __future__ import annotations

import datetime
import decimal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import insitu
from conftest import orders


def sorted_rows(t: pa.Table, by: str = "id") -> pa.Table:
    return t.sort_by(by)


def every_type() -> pa.Table:
    n = 9
    d0 = datetime.date(2024, 2, 28)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "b": pa.array([True, False, None] * 3, pa.bool_()),
            "i8": pa.array([-128, 127, None, 0, 1, -1, 5, 6, 7], pa.int8()),
            "i16": pa.array([-32768, 32767, 0, None, 1, 2, 3, 4, 5], pa.int16()),
            "i32": pa.array([-(2**31), 2**31 - 1, 0, 1, None, 2, 3, 4, 5], pa.int32()),
            "u8": pa.array([0, 255, 1, 2, 3, None, 4, 5, 6], pa.uint8()),
            "u16": pa.array([0, 65535, 1, 2, 3, 4, None, 5, 6], pa.uint16()),
            "u32": pa.array([0, 2**32 - 1, 1, 2, 3, 4, 5, None, 6], pa.uint32()),
            "u64": pa.array([0, 2**64 - 1, 1, 2, 3, 4, 5, 6, None], pa.uint64()),
            "f32": pa.array([1.5, -0.0, float("inf"), None, 2.25, 3, 4, 5, 6], pa.float32()),
            "f64": pa.array([1e300, -1e-300, None, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6], pa.float64()),
            "d32": pa.array([d0 + datetime.timedelta(days=i) if i != 4 else None for i in range(n)], pa.date32()),
            "d64": pa.array([d0 + datetime.timedelta(days=i) for i in range(n)], pa.date64()),
            "ts": pa.array([datetime.datetime(2024, 1, 1, 12, i) for i in range(n)], pa.timestamp("us", tz="UTC")),
            "tsn": pa.array([i * 10**9 + 7 if i != 2 else None for i in range(n)], pa.timestamp("ns")),
            "dec": pa.array(
                [decimal.Decimal("12345.67"), decimal.Decimal("-0.01"), None] + [decimal.Decimal(i) for i in range(6)],
                pa.decimal128(10, 2),
            ),
            "s": pa.array(["", "héllo", None, "a" * 300, "x", "y", "z", "w", "v"], pa.string()),
            "bin": pa.array([b"", b"\x00\xff", None, b"abc", b"d", b"e", b"f", b"g", b"h"], pa.binary()),
            "fixed": pa.array([bytes([i]) * 3 if i != 1 else None for i in range(n)], pa.binary(3)),
        }
    )


@pytest.mark.parametrize("devices", [1, 3])
def test_every_type_round_trips(make_array, devices):
    arr = make_array(devices=devices)
    t = every_type()
    arr.put_table(t, "t", key="id")
    back = arr.get_table("t")
    assert back.schema == t.schema
    assert sorted_rows(back).equals(t)
    # Partitioned by hash, the rows come back the same.
    arr.put_table(t, "h", key="id", partition="hash:s")
    assert sorted_rows(arr.get_table("h")).equals(t)


def test_string_views_and_large_types_come_back_as_their_stored_types(arr):
    t = pa.table({"k": pa.array([2, 1], pa.int32()), "s": pa.array(["b", "a"], pa.large_string())})
    arr.put_table(t, "t", key="k")
    back = arr.get_table("t")
    assert back.schema.field("s").type == pa.string()
    assert back.sort_by("k")["s"].to_pylist() == ["a", "b"]


def test_unsupported_type_is_refused_by_name(arr):
    t = pa.table({"k": [1, 2], "l": pa.array([[1], [2, 3]], pa.list_(pa.int64()))})
    with pytest.raises(insitu.InvalidArgumentError, match='column "l" has type List'):
        arr.put_table(t, "t", key="k")
    assert arr.ls() == []


def test_put_table_takes_files_and_any_arrow_stream(arr, tmp_path):
    t = orders(500)
    path = tmp_path / "orders.parquet"
    pq.write_table(t, path)
    arr.put_table(path, "from_file", key="id")
    arr.put_table(t.to_reader(max_chunksize=64), "from_reader", key="id")
    arr.put_table(duckdb.sql("select * from t"), "from_duckdb", key="id")
    for name in ["from_file", "from_reader", "from_duckdb"]:
        assert sorted_rows(arr.get_table(name)).equals(sorted_rows(t)), name
    with pytest.raises(insitu.InvalidArgumentError, match="expected Arrow data"):
        arr.put_table({"id": [1]}, "dict", key="id")
    with pytest.raises(insitu.FileError):
        arr.put_table(tmp_path / "missing.parquet", "missing")


def test_schema_and_field_metadata_come_back(arr, tmp_path):
    # What pandas keeps (its index and dtypes) and a field's own metadata survive a put, a sort and a get,
    # from a pyarrow table and from a Parquet file alike.
    t = orders(300)
    fields = [f.with_metadata({b"unit": b"cents"}) if f.name == "id" else f for f in t.schema]
    schema = pa.schema(fields, metadata={b"pandas": b'{"index_columns": []}', b"origin": b"test"})
    t = t.cast(schema)
    path = tmp_path / "meta.parquet"
    pq.write_table(t, path)
    arr.put_table(t, "meta", key="id")
    arr.put_table(path, "meta_file", key="id")
    out, _ = arr.sort("meta", "id")
    for name in ["meta", "meta_file", out]:
        got = arr.get_table(name)
        assert got.schema.metadata == schema.metadata, name
        assert got.schema.field("id").metadata == {b"unit": b"cents"}, name


@pytest.mark.parametrize("placement", ["device", "host", "host-accel"])
@pytest.mark.parametrize("algo", ["fast", "bitonic"])
def test_sort_matches_duckdb_on_every_placement(arr, placement, algo):
    t = orders(3000)
    arr.put_table(t, "orders", key="id")
    out, report = arr.sort("orders", "id", placement=placement, algo=algo, out=f"s_{placement}_{algo}")
    assert out == f"s_{placement}_{algo}" and report.result["rows"] == 3000
    merged = arr.get_table(out, merged=True)
    expected = duckdb.sql("select * from t order by id").arrow()
    if isinstance(expected, pa.RecordBatchReader):
        expected = expected.read_all()
    assert merged.equals(expected.cast(merged.schema))
    # Each device's part on its own is sorted (a part is a batch of the table read back, in device order).
    parts = arr.get_table(out).to_batches()
    assert len(parts) == 4 and sum(p.num_rows for p in parts) == 3000
    for p in parts:
        ids = p["id"].to_pylist()
        assert ids == sorted(ids)
    assert arr.last_report is not None and arr.last_report.op == "get-table"


def test_sort_by_string_key_with_ties(arr):
    t = orders(2000)
    with pytest.raises(insitu.InvalidArgumentError, match='key column "note" has a null'):
        arr.put_table(t, "o", key="note")
    t = t.set_column(3, "note", pc.fill_null(t["note"], ""))
    arr.put_table(t, "o", key="note")
    out, _ = arr.sort("o", "note")
    merged = arr.get_table(out, merged=True)
    keys = merged["note"].to_pylist()
    nonnull = [k for k in keys if k is not None]
    assert nonnull == sorted(nonnull)
    assert merged.num_rows == t.num_rows
    assert sorted_rows(merged).equals(sorted_rows(t))


@pytest.mark.parametrize("placement", ["device", "host"])
def test_sort_by_any_column_matches_duckdb_nulls_last(make_array, placement):
    arr = make_array(devices=3)
    t = every_type()
    arr.put_table(t, "t", key="id")
    for col in t.column_names:
        if col in ("id", "dec"):
            continue
        out, report = arr.sort("t", col, placement=placement, out=f"by_{col}")
        assert report.result["extracted"] is True, col
        merged = arr.get_table(out, merged=True)
        expected = duckdb.sql(f'select "{col}" from t order by "{col}" asc nulls last').arrow()
        if isinstance(expected, pa.RecordBatchReader):
            expected = expected.read_all()
        # Compared as Arrow arrays (nanosecond timestamps have no Python datetime).
        assert merged[col].combine_chunks().equals(expected[col].combine_chunks().cast(merged[col].type)), col
        assert sorted_rows(merged).equals(t), col
    with pytest.raises(insitu.InvalidArgumentError, match="128-bit decimal"):
        arr.sort("t", "dec", placement=placement)


def test_get_table_merged_refuses_unsorted(arr):
    arr.put_table(orders(10), "o", key="id")
    with pytest.raises(insitu.InvalidArgumentError, match="not a sort's output"):
        arr.get_table("o", merged=True)


@pytest.mark.parametrize("placement", ["device", "host-sort", "host-bucket"])
def test_shuffle_partitions_cover_the_table_once(arr, placement):
    t = orders(4000)
    arr.put_table(t, "o", key="id")
    out, report = arr.shuffle("o", "cust", 16, placement=placement, out=f"sh_{placement}")
    assert report.result["partitions"] == 16
    parts = [arr.shuffle_read(out, p) for p in range(16)]
    assert arr.last_report.op == "shuffle-read"
    assert sum(p.num_rows for p in parts) == t.num_rows
    seen = {}
    for i, p in enumerate(parts):
        for c in set(p["cust"].to_pylist()):
            assert seen.setdefault(c, i) == i, f"customer {c} in partitions {seen[c]} and {i}"
    assert sorted_rows(pa.concat_tables(parts)).equals(sorted_rows(t))


def test_shuffle_placements_agree_partition_by_partition(arr):
    t = orders(3000)
    arr.put_table(t, "o", key="id")
    outs = [arr.shuffle("o", ["cust"], 8, placement=p, out=p)[0] for p in ["device", "host-sort", "host-bucket"]]
    # Stored as they are (PSACS as evaluated): the same partitions, every record byte on the devices.
    plain, report = arr.shuffle("o", ["cust"], 8, out="plain", compression="none")
    assert report.result["compression"] == "none"
    assert report.result["stored_bytes"] == report.result["raw_bytes"]
    outs.append(plain)
    for p in range(8):
        got = [sorted_rows(arr.shuffle_read(o, p)) for o in outs]
        assert all(got[0].equals(g) for g in got[1:]), p
    with pytest.raises(insitu.InvalidArgumentError, match="compression"):
        arr.shuffle("o", ["cust"], 8, out="bad", compression="zstd")
    # An option the placement does not use is said as a warning, and kept in the report.
    with pytest.warns(RuntimeWarning, match=r"threads \(2\) are the host baselines'"):
        _, report = arr.shuffle("o", ["cust"], 8, out="threads", threads=2)
    assert len(report.warnings) == 1


def test_shuffle_read_out_of_range(arr):
    arr.put_table(orders(100), "o", key="id")
    out, _ = arr.shuffle("o", "cust", 4)
    with pytest.raises(insitu.InvalidArgumentError, match="partitions 0 to 3"):
        arr.shuffle_read(out, 4)


def test_group_counts_match_duckdb(arr):
    """A shuffle partition holds whole groups: per-partition group counts add up to duckdb's."""
    t = orders(2500)
    arr.put_table(t, "o", key="id")
    out, _ = arr.shuffle("o", "cust", 8)
    counts = {}
    for p in range(8):
        part = arr.shuffle_read(out, p)
        for row in part.group_by("cust").aggregate([("id", "count")]).to_pylist():
            counts[row["cust"]] = row["id_count"]
    expected = dict(duckdb.sql("select cust, count(*) from t group by cust").fetchall())
    assert counts == expected
    assert pc.sum(t["price"]).as_py() == pytest.approx(
        sum(pc.sum(arr.shuffle_read(out, p)["price"]).as_py() or 0 for p in range(8))
    )
