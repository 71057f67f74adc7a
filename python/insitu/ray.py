"""The Ray backend: the same ``Array``, with every device a Ray actor pinned to the node that holds its data.

Each device actor formats and owns its device directory on its node and answers the typed device protocol
(messages of command frames, in order); the host-side operators run unchanged in the driver over that
transport. What crosses the network is what the operator moves: commands and results, table parts when a
table is stored or read back, a shuffle partition gathered by ``shuffle_read`` (bulk bytes go through Ray's
object store). A sort or a shuffle runs inside every device actor at once and leaves its output there.

Placement: by default ``devices_per_node`` devices on every alive node, each pinned to its node by node id
(``NodeAffinitySchedulingStrategy``, not soft: a device never moves away from its data). With
``resources=["rack0", "rack1"]``, devices are placed by custom resources instead (``devices_per_node`` on
each), which is also how tests simulate several nodes on one machine. Where each device lives is recorded in
``ray.json`` beside the array's catalog, so ``Array.open`` pins every device back to its node.

A device actor that dies fails the operator in flight with an :class:`~insitu.OfflineError` naming the device
and its node (nothing partial is returned). Ray restarts the actor, which recovers its device (crash
recovery, as after a power cut); ``Array.reopen()`` then reconnects and the array is whole again.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Dict, List, Optional, Sequence

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import _insitu
from .array import Array as _EmbeddedArray
from .array import PathLike, Size, _size
from .errors import InvalidArgumentError, OfflineError

__all__ = ["Array"]

PLACEMENT = "ray.json"


@ray.remote
class DeviceActor:
    """One device, served where this actor runs. Threaded (``max_concurrency``), so a device can answer
    its peers while it answers its host; commands from one sender still arrive in order (one message in
    flight per sender)."""

    def __init__(self, directory: str, device: int, profile: str, capacity: Optional[int]):
        if not os.path.exists(os.path.join(directory, "device.json")):
            os.makedirs(os.path.dirname(directory) or ".", exist_ok=True)
            _insitu.DeviceServer.format(directory, device, profile, capacity)
        # Opening recovers the device: after a crash of this actor, what was committed is back.
        self.server = _insitu.DeviceServer(directory)
        self.device = device

    def where(self) -> Dict[str, Any]:
        return {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(), "pid": os.getpid()}

    def set_peers(self, peers: Dict[int, Any]) -> None:
        self.server.set_peers([(i, _sender(h, i, None)) for i, h in peers.items() if i != self.device])

    def handle(self, message: bytes) -> bytes:
        return self.server.handle(message)

    def close(self) -> None:
        self.server.close()


def _sender(actor: Any, device: int, node: Optional[str]):
    """``send(message) -> reply`` to a device actor; a dead actor raises OfflineError naming its node
    (the host names the device)."""

    def send(message: bytes) -> bytes:
        try:
            return ray.get(actor.handle.remote(message))
        except ray.exceptions.RayActorError as e:
            where = f" on node {node}" if node else ""
            raise OfflineError(f"its actor{where} died ({type(e).__name__})") from None

    return send


class Array(_EmbeddedArray):
    """An array whose devices are Ray actors (see the module's documentation). The same methods as
    :class:`insitu.Array`."""

    def __init__(self, inner, recovered, path: str, actors: List[Any], placement: Dict[str, Any]):
        super().__init__(inner, recovered)
        self._actors = actors
        self._placement = placement

    # --- placement ---

    @staticmethod
    def _slots(devices_per_node: int, resources: Optional[Sequence[str]]) -> List[Dict[str, Any]]:
        if devices_per_node < 1:
            raise InvalidArgumentError(f"devices_per_node must be at least 1, got {devices_per_node}")
        if resources:
            return [{"resource": r, "node": None} for r in resources for _ in range(devices_per_node)]
        nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
        if not nodes:
            raise OfflineError("the Ray cluster has no alive node")
        return [{"resource": None, "node": n} for n in nodes for _ in range(devices_per_node)]

    @staticmethod
    def _start(path: str, slots: List[Dict[str, Any]], profile: str, capacity: Optional[int], cpus: float) -> List[Any]:
        actors = []
        for i, slot in enumerate(slots):
            opts: Dict[str, Any] = {"max_restarts": -1, "max_concurrency": 8, "num_cpus": cpus}
            if slot["node"]:
                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(slot["node"], soft=False)
            if slot["resource"]:
                opts["resources"] = {slot["resource"]: 0.001}
            actors.append(DeviceActor.options(**opts).remote(os.path.join(path, f"dev{i}"), i, profile, capacity))
        # Every device knows its peers (device-to-device copies), once all have started.
        ray.get([a.set_peers.remote(dict(enumerate(actors))) for a in actors])
        return actors

    @classmethod
    def _connect(cls, actors: List[Any], slots: List[Dict[str, Any]]):
        where = ray.get([a.where.remote() for a in actors])
        for slot, w in zip(slots, where):
            slot["at"] = w

        def connect(device: int):
            if device >= len(actors):
                raise OfflineError(f"no actor for device {device}")
            return _sender(actors[device], device, slots[device]["at"]["node"])

        return connect

    # --- opening and closing ---

    @classmethod
    def create(  # type: ignore[override]
        cls,
        path: PathLike,
        devices_per_node: int = 2,
        profile: str = "smartssd",
        *,
        resources: Optional[Sequence[str]] = None,
        capacity: Optional[Size] = None,
        stripe_unit: Optional[Size] = None,
        num_cpus: float = 1.0,
    ) -> "Array":
        """Creates an array of ``devices_per_node`` devices on every alive node (or on every custom
        resource of ``resources``), each a Ray actor that formats its own directory under ``path`` on
        its node; opens it."""
        if not ray.is_initialized():
            ray.init()
        path = os.path.abspath(os.fspath(path))
        if os.path.exists(os.path.join(path, "array.json")):
            from .errors import ArrayExistsError

            raise ArrayExistsError(f"an array already exists at {path}")
        slots = cls._slots(devices_per_node, resources)
        cap = None if capacity is None else _insitu.parse_size(str(capacity))
        actors = cls._start(path, slots, profile, cap, num_cpus)
        try:
            connect = cls._connect(actors, slots)
            inner = _insitu._Array.create(path, len(slots), profile, _size(capacity), _size(stripe_unit), connect)
        except BaseException:
            for a in actors:
                ray.kill(a)
            raise
        placement = {"profile": profile, "capacity": cap, "num_cpus": num_cpus, "devices": slots}
        saved = dict(placement, devices=[{"node": s["node"], "resource": s["resource"]} for s in slots])
        with open(os.path.join(path, PLACEMENT), "w") as f:
            json.dump(saved, f, indent=1)
        return cls(inner, None, path, actors, placement)

    @classmethod
    def open(cls, path: PathLike, *, wait: float = 5.0) -> "Array":  # type: ignore[override]
        """Opens the array at ``path``: starts every device's actor on the node recorded for it."""
        if not ray.is_initialized():
            ray.init()
        path = os.path.abspath(os.fspath(path))
        try:
            with open(os.path.join(path, PLACEMENT)) as f:
                placement = json.load(f)
        except FileNotFoundError:
            from .errors import NoArrayError

            raise NoArrayError(f"no Ray array at {path} (no {PLACEMENT}; create one with insitu.ray.Array.create)")
        slots = placement["devices"]
        actors = cls._start(path, slots, placement["profile"], placement["capacity"], placement.get("num_cpus", 1.0))
        try:
            connect = cls._connect(actors, slots)
            inner, recovered = _insitu._Array.open(path, float(wait), connect)
        except BaseException:
            for a in actors:
                ray.kill(a)
            raise
        return cls(inner, json.loads(recovered) if recovered else None, path, actors, placement)

    def close(self) -> None:
        """Closes the array (every device checkpoints) and stops the device actors."""
        try:
            self._inner.close()
        finally:
            for a in self._actors:
                ray.kill(a)
            self._actors = []

    def reopen(self) -> None:
        """Reconnects after a device actor died (Ray restarted it and it recovered its device): closes
        what is left and opens the array again."""
        try:
            self.close()
        except Exception:
            pass
        again = type(self).open(self.path)
        self.__dict__.update(again.__dict__)

    @property
    def placement(self) -> List[Dict[str, Any]]:
        """Where every device runs: its node id (and custom resource), host name and actor pid."""
        return [dict(s) for s in self._placement["devices"]]

    def __repr__(self) -> str:
        if self.closed:
            return f"<insitu.ray.Array {self.path} (closed)>"
        nodes = len({s.get("at", {}).get("node") for s in self._placement["devices"]})
        return f"<insitu.ray.Array {self.path}: {len(self._actors)} device actors on {nodes} node(s)>"
