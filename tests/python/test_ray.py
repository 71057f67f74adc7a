"""The Ray backend on a local Ray cluster: two "nodes" simulated by custom resources, two device actors on
each. Every operator gives the embedded array's answer; devices stay where they were placed; a device actor
killed mid-operation fails that operation cleanly (never a partial answer, never a hang), and the array is
whole again once it is reopened."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pyarrow as pa
import pytest

ray = pytest.importorskip("ray")

import insitu  # noqa: E402
import insitu.ray as iray  # noqa: E402
from conftest import orders  # noqa: E402

NODES = ["node_a", "node_b"]


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        num_cpus=4,
        resources={n: 100 for n in NODES},
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def make(path, capacity="64MiB"):
    return iray.Array.create(
        path, devices_per_node=2, profile="tiny", resources=NODES, capacity=capacity, num_cpus=0.25
    )


def test_every_operator_answers_as_embedded(cluster, tmp_path):
    t = orders(4000)
    a = np.unique(np.random.default_rng(1).integers(0, 2**32, 30_000, dtype=np.uint64)).astype(np.uint32)
    b = np.union1d(np.unique(np.random.default_rng(2).integers(0, 2**32, 4_000, dtype=np.uint64)), a[::11]).astype(
        np.uint32
    )
    log = b"".join(b"req %d ok\n" % i if i % 17 else b"req %d FAIL\n" % i for i in range(40_000))
    selfsort_records = np.random.default_rng(3).integers(0, 256, (900, 64), dtype=np.uint8)
    answers = []
    embedded = insitu.Array.create(tmp_path / "embedded", devices=4, profile="tiny", capacity="64MiB")
    served = make(tmp_path / "ray")
    for arr in [embedded, served]:
        got = {}
        arr.put_table(t, "o", key="id")
        for placement in ["device", "host"]:
            name, report = arr.sort("o", "id", placement=placement, out=f"s_{placement}")
            got[f"sort {placement}"] = arr.get_table(name, merged=True)
            got[f"sort {placement} cost"] = (report.bytes, report.ops)
        got["parts"] = arr.get_table("o")
        out, _ = arr.shuffle("o", "cust", 8)
        got["partitions"] = [arr.shuffle_read(out, p).sort_by("id") for p in range(8)]
        arr.put_list(a, "a", entry_size=8)
        arr.put_list(b, "b", entry_size=8)
        got["ids"] = arr.intersect(["a", "b"])[0]
        arr.put("log", log)
        got["search"] = arr.search("log", "FAIL", offsets=True)[0]
        got["get"] = arr.get("log")
        got["ls"] = arr.ls()
        # The Self-Sorting SSD's firmware answers through the actor as in process (device 3: on node_b),
        # its records in blocks below its command LBA that no object holds.
        base = arr.selfsort_stats(device=3)["command_lba"] - 64
        recs, r = arr.selfsort_sort(
            selfsort_records.tobytes(), method="self-sort-command", record_size=64, key_size=8,
            device=3, base_lba=base,
        )
        got["selfsort"] = (recs, r.modeled_time_s)
        answers.append(got)
    e, r = answers
    assert r["sort device"].equals(t.sort_by("id")) and r["sort host"].equals(e["sort host"])
    # The same work crosses the same paths, whichever transport carries the commands.
    assert r["sort device cost"] == e["sort device cost"] and r["sort host cost"] == e["sort host cost"]
    assert r["parts"].equals(e["parts"])
    assert all(x.equals(y) for x, y in zip(r["partitions"], e["partitions"]))
    np.testing.assert_array_equal(r["ids"], np.intersect1d(a, b))
    assert r["search"] == e["search"] and len(r["search"]) == log.count(b"FAIL")
    assert r["get"] == log and r["ls"] == e["ls"]
    want = b"".join(sorted((rec.tobytes() for rec in selfsort_records), key=lambda rec: rec[:8]))
    assert r["selfsort"][0] == want and r["selfsort"] == e["selfsort"]
    embedded.close()
    served.close()


def test_devices_stay_on_their_nodes_across_opens(cluster, tmp_path):
    arr = make(tmp_path / "a")
    assert [s["resource"] for s in arr.placement] == ["node_a", "node_a", "node_b", "node_b"]
    pids = {s["at"]["pid"] for s in arr.placement}
    assert len(pids) == 4, "one actor (process) per device"
    arr.put("x", b"on four devices" * 10_000)
    arr.close()
    saved = json.loads((tmp_path / "a" / "ray.json").read_text())
    assert [d["resource"] for d in saved["devices"]] == ["node_a", "node_a", "node_b", "node_b"]
    for i in range(4):
        assert (tmp_path / "a" / f"dev{i}" / "device.json").exists()
    with iray.Array.open(tmp_path / "a") as again:
        assert again.get("x") == b"on four devices" * 10_000
        assert again.fsck()["ok"]
    with pytest.raises(insitu.ArrayExistsError):
        make(tmp_path / "a")
    with pytest.raises(insitu.NoArrayError):
        iray.Array.open(tmp_path / "nothing")


def test_a_killed_device_actor_fails_the_operation_cleanly(cluster, tmp_path):
    arr = make(tmp_path / "a", capacity="256MiB")
    kept = os.urandom(1 << 20)
    arr.put("kept", kept)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(96 << 20))
    outcome, started = {}, threading.Event()

    def tell(done, total):
        if done > total // 4:
            started.set()

    def put_big():
        try:
            outcome["report"] = arr.put("big", big, progress=tell)
        except insitu.InsituError as e:
            outcome["error"] = e
        finally:
            started.set()

    th = threading.Thread(target=put_big)
    th.start()
    # A quarter of the way through the write, device 1's actor dies (Ray restarts it: it recovers its
    # device, and the write's open transaction on it is gone).
    assert started.wait(timeout=120)
    ray.kill(arr._actors[1], no_restart=False)
    th.join(timeout=120)
    assert not th.is_alive(), "the operation hung"
    assert "error" in outcome, "the write went on as if nothing happened"
    assert "device 1" in str(outcome["error"]), outcome["error"]
    # Until reopened, the lost device is named; then the array is whole.
    arr.reopen()
    assert arr.get("kept") == kept
    assert "big" not in [o["name"] for o in arr.ls()], "a failed write left an object"
    arr.put("big", big)
    assert arr.get("big") == big.read_bytes()
    assert arr.fsck()["ok"], arr.fsck()
    arr.close()


def test_a_dead_actor_is_named_with_its_node(cluster, tmp_path):
    arr = make(tmp_path / "a")
    arr.put("x", b"y" * 100_000)
    ray.kill(arr._actors[2], no_restart=True)
    with pytest.raises(insitu.OfflineError, match="device 2: lost its device server: its actor on node [0-9a-f]+ died"):
        arr.get("x")
    arr.reopen()
    assert arr.get("x") == b"y" * 100_000
    arr.close()


def test_a_restarted_actor_is_not_taken_for_the_old_one(cluster, tmp_path):
    arr = make(tmp_path / "a")
    arr.put("x", b"z" * 50_000)
    ray.kill(arr._actors[0], no_restart=False)
    # Ray brings the actor back and it recovers its device, but what the host had open there is gone:
    # the host is told to reopen rather than carry on with a device that forgot its work.
    with pytest.raises(insitu.OfflineError, match="device 0: .*(died|restarted and recovered its device)"):
        for _ in range(50):
            arr.get("x")
    arr.reopen()
    assert arr.get("x") == b"z" * 50_000
    arr.close()


def test_create_refuses_existing_device_directories_and_leaves_nothing(cluster, tmp_path):
    (tmp_path / "a" / "dev3").mkdir(parents=True)
    (tmp_path / "a" / "dev3" / "mine.txt").write_text("not a device")
    with pytest.raises(insitu.ArrayExistsError, match="device 3: .*dev3 exists already"):
        make(tmp_path / "a")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["dev3"]
    assert (tmp_path / "a" / "dev3" / "mine.txt").read_text() == "not a device"


def test_a_placement_the_cluster_cannot_meet_is_refused_at_once_not_waited_for(cluster, tmp_path):
    """Ray waits for ever for an actor it cannot place: create and open refuse such a placement by device,
    naming what is missing, and leave nothing behind."""
    import time

    t0 = time.monotonic()
    with pytest.raises(insitu.OfflineError, match="custom resource 'rack9', which no alive node"):
        iray.Array.create(tmp_path / "a", devices_per_node=1, profile="tiny", resources=["rack9"], num_cpus=0.25)
    # Both "nodes" are one machine of 4 CPUs: 4 devices at 2 CPUs each cannot all start.
    with pytest.raises(insitu.OfflineError, match="cannot all be placed on Ray node .*num_cpus=2.*8 in all"):
        iray.Array.create(tmp_path / "b", devices_per_node=2, profile="tiny", resources=NODES, num_cpus=2)
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
    # An array recorded on a resource the cluster no longer has: open refuses it, and it is still whole.
    arr = make(tmp_path / "c")
    arr.put("x", b"kept")
    arr.close()
    placement = json.loads((tmp_path / "c" / "ray.json").read_text())
    moved = dict(placement, devices=[dict(d, resource="gone") for d in placement["devices"]])
    (tmp_path / "c" / "ray.json").write_text(json.dumps(moved))
    with pytest.raises(insitu.OfflineError, match="'gone', which no alive node"):
        iray.Array.open(tmp_path / "c")
    (tmp_path / "c" / "ray.json").write_text(json.dumps(placement))
    again = iray.Array.open(tmp_path / "c")
    assert again.get("x") == b"kept"
    again.close()


def test_a_bluedbm_appliance_answers_as_embedded(cluster, tmp_path):
    """BlueDBM's nodes as actors on two Ray nodes: the storage network's pages cross between the actors, and
    every application answers, and models, as in one process."""
    rng = np.random.default_rng(5)
    hay = bytes(rng.choice(np.frombuffer(b"ab\n", np.uint8), 300_000))
    items = rng.integers(0, 256, (64, 8192), dtype=np.uint8)
    edges = rng.integers(0, 500, (3000, 2))
    start = int(edges[0, 0])
    embedded = insitu.Array.create(
        tmp_path / "embedded", devices=2, profile="bluedbm", capacity="256MiB", topology="line"
    )
    served = iray.Array.create(
        tmp_path / "ray", devices_per_node=1, profile="bluedbm", resources=NODES, capacity="256MiB",
        num_cpus=0.25, topology="line",
    )
    assert [d["resource"] for d in served.placement] == NODES
    answers = []
    for arr in [embedded, served]:
        got = {}
        arr.fs_put("hay", hay)
        for placement in ["isp", "host", "remote-host", "host-dram"]:
            n, r = arr.fs_search("hay", "abba", placement, node=1)
            got[f"search {placement}"] = (n, r["lines"], r["cost"]["modeled_s"])
        arr.fs_put("items", items.tobytes())
        idx, dist, r = arr.knn("items", items[[3, 9]], k=4, placement="remote-host")
        got["knn"] = (idx.tolist(), dist.tolist(), r["cost"]["modeled_s"])
        arr.put_graph(edges, "g")
        levels, r = arr.bfs("g", start, "isp", node=1)
        got["bfs"] = (levels, r["modeled_s"])
        got["get"] = arr.fs_get("hay")
        answers.append(got)
    e, r = answers
    overlapping = sum(hay.startswith(b"abba", i) for i in range(len(hay)))
    assert r["get"] == hay and r["search isp"][0] == overlapping
    assert r == e
    embedded.close()
    served.close()
