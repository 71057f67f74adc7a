"""A tour of insitu from Python: a table sorted and shuffled inside the devices, lists intersected inside
a device, a log searched in storage, records sorted by a Self-Sorting SSD as they are written, and a
BlueDBM appliance of two nodes searching, matching and traversing in its in-store processors, each with
what it cost here and on the profile.

Run it after `make python`:  .venv/bin/python examples/python_tour.py [DIR]
"""

import sys
import tempfile

import numpy as np
import pyarrow as pa

import insitu

where = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="insitu-tour-")
rng = np.random.default_rng(42)
n = 200_000
orders = pa.table(
    {
        "o_id": rng.permutation(n).astype(np.int64),
        "o_cust": rng.integers(0, 5_000, n, dtype=np.int32),
        "o_total": rng.random(n) * 1000,
        "o_note": pa.array([f"note {i % 97}" for i in range(n)]),
    }
)

with insitu.Array.create(f"{where}/array", devices=4, profile="smartssd") as arr:
    # NASCENT: each device sorts its part of the table; the host merges the sorted parts when asked.
    print(arr.put_table(orders, "orders", key="o_id"), end="\n\n")
    name, report = arr.sort("orders", "o_id")
    print(report, end="\n\n")
    top = arr.get_table(name, merged=True)
    assert top["o_id"].to_pylist()[:5] == [0, 1, 2, 3, 4]

    # PSACS: the devices hash-partition the table by customer; partitions stay on the devices.
    name, report = arr.shuffle("orders", "o_cust", partitions=64)
    print(report, end="\n\n")
    part = arr.shuffle_read(name, 7)
    print(f"partition 7: {part.num_rows} rows of {len(set(part['o_cust'].to_pylist()))} customers\n")

    # Smart SSD list intersection: only the common IDs cross the host link.
    a = np.unique(rng.integers(0, 2**32, 500_000, dtype=np.uint64)).astype(np.uint32)
    b = np.union1d(np.unique(rng.integers(0, 2**32, 50_000, dtype=np.uint64)).astype(np.uint32), a[::100])
    arr.put_list(a, "a", entry_size=64)
    arr.put_list(b, "b", entry_size=64)
    ids, report = arr.intersect(["a", "b"])
    assert np.array_equal(ids, np.intersect1d(a, b))
    print(report, end="\n\n")

    # Search inside the devices, then on the host: the same count, different bytes over the link.
    log = b"".join(b"GET /item/%d 200\n" % i if i % 13 else b"GET /item/%d 503\n" % i for i in range(300_000))
    arr.put("access.log", log)
    inside, r_dev = arr.search("access.log", " 503")
    outside, r_host = arr.search("access.log", " 503", placement="host")
    assert inside == outside == log.count(b" 503")
    print(f"{inside} errors; device->host bytes: in storage {r_dev.bytes['device_to_host']:,}, "
          f"on the host {r_host.bytes['device_to_host']:,}")
    print(f"modeled on {r_dev.modeled['profile']}: {r_dev.modeled_time_s * 1e3:.2f} ms in storage, "
          f"{r_host.modeled_time_s * 1e3:.2f} ms on the host")

# Self-Sorting SSD: the drive indexes each record as it is written; reads of the same blocks return the
# records in key order, and the index answers range queries without a scan.
recs = rng.integers(0, 256, (50_000, 100), dtype=np.uint8)  # 100-byte records, their first 10 bytes the key
with insitu.Array.create(f"{where}/drive", devices=1, profile="smartssd") as drive:
    drive.selfsort_config(record_size=100, key_size=10, sort_on_write=True)
    print(drive.selfsort_write(recs.tobytes()), end="\n\n")
    back = drive.selfsort_read()
    assert back == b"".join(sorted((r.tobytes() for r in recs), key=lambda r: r[:10]))
    n, report = drive.selfsort_range(b"\x00", b"\x0f", count=True)
    assert n == int((recs[:, 0] < 0x10).sum())
    print(f"{n} records with keys 00..0f, from the index; modeled on {report.modeled['profile']}: "
          f"{report.modeled_time_s * 1e6:.1f} µs")

# BlueDBM: two nodes cabled by a storage network; files striped over their flash by physical page, and the
# in-store processors search, match and traverse them, only results going to a host.
with insitu.Array.create(f"{where}/appliance", devices=2, profile="bluedbm", capacity="1GiB", topology="line") as app:
    app.fs_put("log", log)
    n, r = app.fs_search("log", " 503")
    _, h = app.fs_search("log", " 503", placement="remote-host")
    assert n == log.count(b" 503")
    print(f"\nBlueDBM search: {n} matches; modeled {r['cost']['modeled_s'] * 1e3:.2f} ms in the in-store processors, "
          f"{h['cost']['modeled_s'] * 1e3:.2f} ms by a host reading through the network")
    items = rng.integers(0, 256, (2_000, 8192), dtype=np.uint8)       # 8 KiB items, one flash page each
    app.fs_put("items", items.tobytes())
    idx, dist, r = app.knn("items", items[42], k=3)
    assert idx[0] == 42 and dist[0] == 0
    print(f"nearest items to item 42 by Hamming distance: {idx.tolist()} at {dist.tolist()}")
    edges = rng.integers(0, 5_000, (20_000, 2))
    app.put_graph(edges, "g")
    levels, r = app.bfs("g", int(edges[0, 0]))
    print(f"BFS from vertex {int(edges[0, 0])}: {len(levels)} vertices reached in {max(levels.values())} levels; "
          f"modeled {r['modeled_s'] * 1e3:.2f} ms")
