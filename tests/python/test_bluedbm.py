"""BlueDBM's file system and applications from Python (ISCA '15 §4, §7): string search, nearest neighbours
and graph traversal on a two-node appliance, every placement against a reference computed here (numpy,
and faiss or scipy where installed)."""

from __future__ import annotations

import collections
import json
import random
import os
import subprocess

import numpy as np
import pytest

import insitu

PAGE = 8192


@pytest.fixture
def appliance(tmp_path):
    a = insitu.Array.create(tmp_path / "app", devices=2, profile="bluedbm", capacity="256MiB", topology="line")
    yield a
    a.close()


def overlapping(hay: bytes, needle: bytes) -> list:
    out, i = [], hay.find(needle)
    while i >= 0:
        out.append(i)
        i = hay.find(needle, i + 1)
    return out


def test_string_search_agrees_on_every_placement(appliance, tmp_path):
    rng = random.Random(3)
    hay = bytes(rng.choice(b"ab\n") for _ in range(200_000))
    info = appliance.fs_put("hay", hay)
    assert info["size"] == len(hay) and info["nodes"] == [0, 1]
    # Measured and modeled as every command is: each page programmed once, on the profile's watts.
    rep = appliance.last_report
    assert rep.op == "fs put" and rep.result == info and rep.bytes["flash_program"] == info["pages"] * PAGE
    assert rep.modeled["profile"] == "bluedbm" and rep.modeled_energy_j > 0
    assert appliance.fs_get("hay") == hay
    assert appliance.last_report.op == "fs get" and appliance.last_report.bytes["flash_read"] == info["pages"] * PAGE
    # From a file and to a file, streamed: the same bytes.
    (tmp_path / "hay").write_bytes(hay)
    assert appliance.fs_put("hay2", tmp_path / "hay", node=1) == {**info, "name": "hay2", "nodes": [1]}
    assert appliance.fs_get("hay2", out=tmp_path / "back") is None and (tmp_path / "back").read_bytes() == hay
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(insitu.errors.NotFoundError):
        appliance.fs_get("nope", out=tmp_path / "none")
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "no file, not even a partial one"
    appliance.fs_rm("hay2")
    assert [f["name"] for f in appliance.fs_ls()] == ["hay"]
    want = overlapping(hay, b"abba")
    for placement in ["isp", "host", "remote-host", "host-dram"]:
        offsets, r = appliance.fs_search("hay", "abba", placement, offsets=True)
        assert offsets == want, placement
        assert r["count"] == len(want) and r["cost"]["modeled_s"] > 0
        # Modeled time and energy at the top, as the CLI's --json has them: every node draws at least
        # its idle power; the in-store search leaves both hosts idle.
        m = r["modeled"]
        assert m == r["cost"]["modeled"] and m["time_s"] == r["cost"]["modeled_s"] and m["nodes"] == 2
        assert m["energy_j"] == pytest.approx(m["host_energy_j"] + m["device_energy_j"])
        assert m["energy_j"] > 2 * m["time_s"] * (80.0 + 20.0), "above the 2 nodes' idle 100 W (bluedbm)"
        if placement == "isp":
            assert m["host_energy_j"] == pytest.approx(2 * m["time_s"] * 80.0)
        lines = {hay.count(b"\n", 0, o) for o in want}
        assert r["lines"] == len(lines)
    with pytest.raises(insitu.errors.InvalidArgumentError, match="empty"):
        appliance.fs_search("hay", b"")
    # Threads as the CLI takes them, 1 to 1024 (0 ran on one and said so only in the result).
    for threads in [0, 2000]:
        with pytest.raises(insitu.errors.InvalidArgumentError, match="threads must be 1 to 1024"):
            appliance.fs_search("hay", "abba", "host", threads=threads)


def test_nearest_neighbours_match_numpy_and_faiss(appliance):
    rng = np.random.default_rng(5)
    items = rng.integers(0, 256, size=(200, PAGE), dtype=np.uint8)
    appliance.fs_put("items", items.tobytes())
    queries = items[[17, 150]].copy()
    queries[0, ::97] ^= 0xFF  # a near duplicate of item 17
    bits = np.unpackbits(items, axis=1)
    ref = [np.lexsort((np.arange(200), (np.unpackbits(q) != bits).sum(axis=1)))[:5] for q in queries]
    ref_d = [(np.unpackbits(q) != bits).sum(axis=1)[r] for q, r in zip(queries, ref)]
    for placement in ["isp", "host", "remote-host", "host-dram"]:
        idx, dist, r = appliance.knn("items", queries, k=5, placement=placement)
        assert idx.shape == (2, 5)
        assert (idx == np.array(ref)).all() and (dist == np.array(ref_d)).all(), placement
    one_idx, one_dist, _ = appliance.knn("items", queries[0], k=3)
    assert list(one_idx) == list(ref[0][:3])
    # A query file, by its path (as the CLI takes it), not the path's own bytes.
    qfile = appliance.path + ".queries"
    queries.tofile(qfile)
    try:
        from pathlib import Path

        for q in [qfile, Path(qfile)]:
            idx, _, _ = appliance.knn("items", q, k=5)
            assert (idx == np.array(ref)).all()
    finally:
        os.remove(qfile)
    idx, _, r = appliance.knn("items", queries, k=1, lsh=8)
    assert list(idx[:, 0]) == [17, 150] and r["compared"] < 40
    # A tenth of the items on flash instead of DRAM (§7.1): the same answer, those pages read.
    idx, dist, r = appliance.knn("items", queries, k=5, placement="host-dram", flash_share=0.1)
    assert (idx == np.array(ref)).all() and r["cost"]["pages"] > 0
    # A count out of its range is a bad argument, as any other.
    with pytest.raises(insitu.errors.InvalidArgumentError, match="knn: a whole-number argument"):
        appliance.knn("items", queries, k=-1)


def test_nearest_neighbours_match_faiss(appliance):
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(6)
    items = rng.integers(0, 256, size=(120, PAGE), dtype=np.uint8)
    appliance.fs_put("items", items.tobytes())
    queries = rng.integers(0, 256, size=(3, PAGE), dtype=np.uint8)
    index = faiss.IndexBinaryFlat(PAGE * 8)
    index.add(items)
    d, i = index.search(queries, 4)
    for placement in ["isp", "host"]:
        idx, dist, _ = appliance.knn("items", queries, k=4, placement=placement)
        assert (idx == i).all() and (dist == d).all(), placement


def stdlib_pages(n: int) -> np.ndarray:
    """``n`` 8 KiB pages cut from the sources of Python's own standard library: a real text corpus that
    every machine running these tests has (which version's, the references below are computed from it)."""
    import glob
    import os
    import sysconfig

    data = bytearray()
    for f in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py"))):
        with open(f, "rb") as fh:
            data += fh.read()
        if len(data) >= n * PAGE:
            break
    assert len(data) >= n * PAGE, "the standard library holds less text than asked"
    return np.frombuffer(bytes(data[: n * PAGE]), dtype=np.uint8).reshape(n, PAGE)


def hamming_top(items: np.ndarray, queries: np.ndarray, k: int):
    """The numpy reference: each query's ``k`` nearest items by Hamming distance, ties to the lower index."""
    bits = np.unpackbits(items, axis=1)
    out_i, out_d = [], []
    for q in queries:
        d = (np.unpackbits(q) != bits).sum(axis=1)
        order = np.lexsort((np.arange(len(items)), d))[:k]
        out_i.append(order)
        out_d.append(d[order])
    return np.array(out_i), np.array(out_d)


def agrees_with_faiss(items, queries, k, idx, dist):
    """faiss.IndexBinaryFlat's top ``k`` (when faiss is installed): the same distances, and the same items
    at every distance below the k-th (faiss orders ties its own way)."""
    try:
        import faiss
    except ImportError:
        return
    index = faiss.IndexBinaryFlat(PAGE * 8)
    index.add(items)
    fd, fi = index.search(queries, k)
    assert (fd == dist).all()
    for row, frow, d in zip(idx, fi, dist):
        below = d < d[-1]
        assert set(row[below]) == set(frow[below])


def near_duplicates(pages: np.ndarray, seed: int) -> np.ndarray:
    """Each page with 1% of its bytes replaced by letters: a near duplicate of it."""
    rng = np.random.default_rng(seed)
    out = pages.copy()
    for q in out:
        at = rng.choice(PAGE, PAGE // 100, replace=False)
        q[at] = rng.integers(ord("a"), ord("z") + 1, size=len(at), dtype=np.uint8)
    return out


def test_near_duplicate_pages_of_a_real_corpus_are_found_on_every_placement(appliance):
    # 256 pages of Python's standard library; queries: near duplicates of three of them, and a page of
    # the same corpus that is not among the items.
    pages = stdlib_pages(257)
    items = pages[:256]
    appliance.fs_put("lib", items.tobytes())
    queries = np.concatenate([near_duplicates(items[[3, 100, 200]], 1), pages[256:257]])
    want_i, want_d = hamming_top(items, queries, 5)
    assert list(want_i[:3, 0]) == [3, 100, 200], "each near duplicate is nearest its page"
    for placement in ["isp", "host", "remote-host", "host-dram"]:
        idx, dist, _ = appliance.knn("lib", queries, k=5, placement=placement)
        assert (idx == want_i).all() and (dist == want_d).all(), placement
    agrees_with_faiss(items, queries, 5, want_i, want_d)


def test_binary_codes_of_real_vectors_match_numpy_and_faiss(appliance):
    # Real vectors: the byte histograms of the corpus' pages (256 dimensions); their codes: the sign bits
    # of 65,536 seeded Gaussian projections (SimHash), a page each. Queries: the codes of near duplicates.
    pages = stdlib_pages(160)
    hist = lambda p: np.stack([np.bincount(x, minlength=256) for x in p]).astype(np.float32)  # noqa: E731
    proj = np.random.default_rng(11).standard_normal((256, PAGE * 8), dtype=np.float32)
    code = lambda p: np.packbits((hist(p) - hist(pages).mean(axis=0)) @ proj > 0, axis=1)  # noqa: E731
    items = code(pages)
    appliance.fs_put("codes", items.tobytes())
    queries = code(near_duplicates(pages[[5, 80, 150]], 2))
    want_i, want_d = hamming_top(items, queries, 4)
    assert list(want_i[:, 0]) == [5, 80, 150], "a near duplicate's code is nearest its page's"
    for placement in ["isp", "host"]:
        idx, dist, _ = appliance.knn("codes", queries, k=4, placement=placement)
        assert (idx == want_i).all() and (dist == want_d).all(), placement
    one, d1, _ = appliance.knn("codes", queries[0], k=1, placement="host-dram")
    assert list(one) == [5] and list(d1) == [want_d[0, 0]]
    agrees_with_faiss(items, queries, 4, want_i, want_d)


def test_graph_traversal_matches_a_reference(appliance):
    rng = random.Random(9)
    n = 300
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(900)]
    g = appliance.put_graph(np.array(edges), "g", vertices=n)
    assert g["vertices"] == n and g["pages"] == n
    adj = collections.defaultdict(set)
    for u, v in edges:
        if u != v:
            adj[u].add(v)
            adj[v].add(u)
    start = edges[0][0]
    level = {start: 0}
    q = collections.deque([start])
    while q:
        u = q.popleft()
        for v in sorted(adj[u]):
            if v not in level:
                level[v] = level[u] + 1
                q.append(v)
    for placement in ["isp", "host", "remote-host", "host-dram"]:
        got, r = appliance.bfs("g", start, placement)
        assert got == level, placement
        m = r["modeled"]
        assert m["time_s"] == r["modeled_s"] and m["nodes"] == 2, placement
        # Both nodes at least idle (100 W each on bluedbm), and some device reading pages: more than that.
        assert m["energy_j"] > 2 * m["time_s"] * (80.0 + 20.0), placement
    got, _ = appliance.bfs("g", start, "host-dram", flash_share=0.5)
    assert got == level
    with pytest.raises(insitu.errors.InvalidArgumentError, match="bfs: a whole-number argument"):
        appliance.bfs("g", -1)
    places = ["isp", "host", "remote-host", "host-dram"]
    walks = [appliance.walk("g", start, walks=3, length=8, placement=p)[0] for p in places]
    assert all(w == walks[0] for w in walks), "the placements took different walks"
    for w in walks[0]:
        assert w[0] == start
        assert all(b in adj[a] for a, b in zip(w, w[1:]))


def test_a_graph_from_an_edge_file_is_the_graph_of_its_edges(appliance, tmp_path):
    rng = random.Random(11)
    n = 120
    edges = np.array([(rng.randrange(n), rng.randrange(n)) for _ in range(400)], dtype="<u4")
    (tmp_path / "g.txt").write_text("".join(f"{u} {v}\n" for u, v in edges))
    edges.tofile(tmp_path / "g.bin")
    edges.tofile(tmp_path / "g.edges")
    a = appliance.put_graph(np.array(edges), "mem", vertices=n)
    b = appliance.put_graph(tmp_path / "g.txt", "text", vertices=n)
    c = appliance.put_graph(str(tmp_path / "g.bin"), "bin", vertices=n)
    d = appliance.put_graph(tmp_path / "g.edges", "named", vertices=n, format="u32le")
    assert {k: v for k, v in a.items() if k != "name"} == {k: v for k, v in b.items() if k != "name"}
    assert (b["pages"], b["arcs"]) == (c["pages"], c["arcs"]) == (d["pages"], d["arcs"])
    start = int(edges[0][0])
    want, _ = appliance.bfs("mem", start)
    for g in ["text", "bin", "named"]:
        assert appliance.bfs(g, start)[0] == want, g
    with pytest.raises(FileNotFoundError):
        appliance.put_graph(tmp_path / "none.txt", "x")
    with pytest.raises(insitu.errors.InvalidArgumentError, match="text or u32le"):
        appliance.put_graph(tmp_path / "g.bin", "x", format="csv")
    with pytest.raises(insitu.errors.InvalidArgumentError, match="in memory"):
        appliance.put_graph(edges, "x", format="text")
    # Vertex ids are integers: floats are refused, not cut to whole ids.
    with pytest.raises(insitu.errors.InvalidArgumentError, match="integer vertex ids, not float64"):
        appliance.put_graph(np.array([[0.5, 1.2]]), "x")


def test_bfs_reaches_what_scipy_reaches(appliance):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    csgraph = pytest.importorskip("scipy.sparse.csgraph")
    rng = random.Random(10)
    n = 200
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(300)]
    appliance.put_graph(np.array(edges), "g", vertices=n)
    start = edges[0][0]
    level, _ = appliance.bfs("g", start)
    rows = [u for u, v in edges if u != v]
    cols = [v for u, v in edges if u != v]
    m = scipy_sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    order = csgraph.breadth_first_order(m, start, directed=False, return_predecessors=False)
    assert set(order.tolist()) == set(level)


def test_a_files_pages_are_known_and_read_by_one_node_over_the_network(appliance, tmp_path, cli):
    data = np.random.default_rng(8).integers(0, 256, 300_001, dtype=np.uint8).tobytes()
    appliance.fs_put("f", data)
    pages = appliance.fs_pages("f")
    assert pages.shape == (-(-len(data) // PAGE), 6) and set(pages[:, 0]) == {0, 1}
    assert len({tuple(p) for p in pages}) == len(pages), "every page has its own physical address"
    costs = {}
    for via in ["isp", "host"]:
        for node in [0, 1]:
            got, cost = appliance.fs_get_via("f", via, node=node)
            assert got == data, (via, node)
            remote = int((pages[:, 0] != node).sum())
            assert cost["pages"] == len(pages) and cost["local_pages"] == len(pages) - remote
            assert cost["network_bytes"] >= remote * PAGE and cost["modeled_s"] > 0
            costs[(via, node)] = cost
    assert costs[("host", 0)]["pcie_up_bytes"] >= len(data) and costs[("isp", 0)]["pcie_up_bytes"] == 0
    none, _ = appliance.fs_get_via("f", "host", node=1, out=tmp_path / "f")
    assert none is None and (tmp_path / "f").read_bytes() == data
    with pytest.raises(insitu.errors.InvalidArgumentError, match="isp or host"):
        appliance.fs_get_via("f", "carrier-pigeon")
    appliance.close()

    # The CLI names the same pages and models the same read.
    path = str(tmp_path / "app")
    sh = lambda *a: subprocess.run([cli, "--data", path, *a], check=True, capture_output=True, text=True)  # noqa: E731
    assert sh("fs", "pages", "f").stdout.split("\n")[: len(pages)] == [" ".join(map(str, p)) for p in pages]
    r = json.loads(sh("--json", "fs", "get", "f", "--via", "isp", "--from", "1", "-o", str(tmp_path / "g")).stdout)
    assert r["result"]["via"]["modeled_s"] == costs[("isp", 1)]["modeled_s"]
    assert r["result"]["modeled"] == costs[("isp", 1)]["modeled"] and r["result"]["modeled"]["energy_j"] > 0

    # Both fronts list and collect alike (their results are shaped in one place).
    listed = json.loads(sh("--json", "fs", "ls").stdout)["result"]["files"]
    with insitu.Array.open(path) as a:
        assert a.fs_ls() == listed and listed[0]["nodes"] == [0, 1]
        before = a.fs_gc()["stats"]["free_blocks"]
        a.fs_rm("f")
        gc = a.fs_gc()
        # The file's blocks were its chips' write points, all their pages now dead: collecting erases them.
        assert gc["erased_blocks"] == len({tuple(p[:5]) for p in pages})
        assert gc["stats"]["free_blocks"] == before + gc["erased_blocks"] and gc["stats"]["dead_pages"] == 0
        assert gc["discarded_pages"] == 0, "no dead page is left beside live ones"
        assert a.fs_ls() == []
    cli_gc = json.loads(sh("--json", "fs", "gc").stdout)["result"]
    assert sorted(cli_gc) == sorted(gc) and cli_gc["erased_blocks"] == 0


def test_the_storage_networks_routes_and_bench_agree_with_the_cli(tmp_path, cli):
    def run(*args):
        out = subprocess.run([cli, "--json", "net", *args], check=True, capture_output=True, text=True).stdout
        return json.loads(out)["result"]

    r = insitu.net_routes("ring", nodes=5, lanes=2)
    assert r == {**run("routes", "--topology", "ring", "--nodes", "5", "--lanes", "2"), "text": r["text"]}
    # A ring's shortest routes, counted here: min(|i - j|, 5 - |i - j|) hops, diameter 2.
    assert r["nodes"] == 5 and r["diameter"] == 2 and len(r["pairs"]) == 20
    for p in r["pairs"]:
        d = abs(p["src"] - p["dst"])
        assert p["hops"] == min(d, 5 - d) and len(p["routes"]) == r["endpoints"]
    assert insitu.net_routes()["nodes"] == 4, "a shape has 4 nodes by default, as in the CLI"
    bad = tmp_path / "bad.toml"
    bad.write_text("nodes = 2\n[[link]]\na = 0\nb = 7\n")
    with pytest.raises(insitu.errors.InvalidArgumentError, match="node 7"):
        insitu.net_routes(bad)

    work = tmp_path / "work"
    work.mkdir()
    args = dict(nodes=2, topology="line", size="16MiB", reads=400)
    b = insitu.net_bench(**args, work=work)
    c = run("bench", "--nodes", "2", "--topology", "line", "--size", "16MiB", "--reads", "400", "--work", str(work))
    # The same reads by the same paths: the same simulated bandwidths; wall times are this machine's.
    assert [(x["path"], x["reads"], x["modeled_gb_s"]) for x in b["rows"]] == [
        (x["path"], x["reads"], x["modeled_gb_s"]) for x in c["rows"]
    ]
    assert len(b["rows"]) == 5 and all(x["pages_per_s"] > 0 for x in b["rows"])
    assert "ISP-remote" in b["text"]
    assert list(work.iterdir()) == [], "the NAND images go with the run"
    with pytest.raises(insitu.errors.InvalidArgumentError, match="2 nodes"):
        insitu.net_bench(nodes=1, topology="line", size="16MiB", reads=10, work=work)


def test_a_put_that_cannot_fit_is_refused_and_fsck_reads_the_file_system(appliance, tmp_path):
    data = bytes(random.Random(5).choice(b"xyz") for _ in range(50_000))
    appliance.fs_put("small", data)
    # A file larger than the appliance's flash (a sparse one: nothing is read) is refused before a page is
    # written.
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(1 << 30)
    with pytest.raises(insitu.errors.DeviceFullError, match="the file system is full"):
        appliance.fs_put("big", big)
    assert [f["name"] for f in appliance.fs_ls()] == ["small"]
    report = appliance.fsck()
    assert report["ok"], report
    assert any("file system: 1 file(s), 7 page(s) read back" in n for n in report["notes"]), report


def test_the_listing_needs_no_node_and_reads_need_only_their_own(tmp_path):
    path = tmp_path / "app"
    with insitu.Array.create(path, devices=2, profile="bluedbm", capacity="256MiB", topology="line") as a:
        a.fs_put("here", b"x" * 20_000, node=0)
        a.fs_put("there", b"y" * 20_000, node=1)
    (path / "dev1").rename(tmp_path / "dev1.away")
    with insitu.Array.open(path) as a:
        assert [f["name"] for f in a.fs_ls()] == ["here", "there"]
        assert a.fs_get("here") == b"x" * 20_000
        with pytest.raises(insitu.errors.OfflineError, match="device 1"):
            a.fs_get("there")
        with pytest.raises(insitu.errors.OfflineError, match="takes no change while a node is offline"):
            a.fs_put("more", b"z", node=0)
    (tmp_path / "dev1.away").rename(path / "dev1")
    with insitu.Array.open(path) as a:
        assert a.fs_get("there") == b"y" * 20_000
