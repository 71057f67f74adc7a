"""insitu on a Ray cluster: every device a Ray actor pinned to the node that holds its data, the same
operators as the embedded array, and what happens when a device's actor dies.

Run it after `make python`:  .venv/bin/python examples/ray_tour.py [DIR]
On a real cluster (RAY_ADDRESS set, or `ray start` on this machine) devices go on every alive node;
without one, a local Ray instance simulates two nodes with custom resources.
"""

import os
import sys
import tempfile

import numpy as np
import pyarrow as pa
import ray

import insitu
import insitu.ray as iray

where = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="insitu-ray-tour-")
if os.environ.get("RAY_ADDRESS"):
    ray.init()
    place = {}  # devices_per_node devices on every alive node, pinned by node id
else:
    ray.init(num_cpus=2, resources={"node_a": 1, "node_b": 1}, include_dashboard=False, log_to_driver=False)
    place = {"resources": ["node_a", "node_b"], "num_cpus": 0.25}

rng = np.random.default_rng(7)
n = 100_000
orders = pa.table({"o_id": rng.permutation(n), "o_cust": rng.integers(0, 1000, n), "o_total": rng.random(n)})

arr = iray.Array.create(f"{where}/array", devices_per_node=2, profile="smartssd", capacity="1GiB", **place)
for d in arr.placement:
    print(f"device on node {d['at']['node'][:12]}... ({d['at']['host']}, pid {d['at']['pid']})")
arr.put_table(orders, "orders", key="o_id")
name, report = arr.sort("orders", "o_id")  # every device actor sorts its part at once
print(report, end="\n\n")
assert arr.get_table(name, merged=True)["o_id"].to_pylist()[:3] == [0, 1, 2]
out, report = arr.shuffle("orders", "o_cust", partitions=32)  # partitions stay in the device actors
print(report, end="\n\n")
print(f"partition 5: {arr.shuffle_read(out, 5).num_rows} rows gathered from every device\n")

# A device's actor dies: the next operation that needs it fails, naming the device and its node; Ray
# restarts the actor, which recovers its device; reopen() reconnects, and nothing stored is lost.
ray.kill(arr._actors[1], no_restart=False)
try:
    arr.get_table("orders")
except insitu.OfflineError as e:
    print(f"as expected: {e}")
arr.reopen()
assert arr.get_table("orders").num_rows == n
print("reopened: every row is there")
arr.close()
