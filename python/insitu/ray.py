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
import shutil
import socket
import uuid
import warnings
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import _insitu
from .array import Array as _EmbeddedArray
from .array import PathLike, Size, _size
from .errors import ArrayExistsError, InvalidArgumentError, NoArrayError, OfflineError

__all__ = ["Array"]

PLACEMENT = "ray.json"


def _get(refs: List[Any]) -> List[Any]:
    """``ray.get`` with a device actor's own error (``ArrayExistsError``, ``NoArrayError``...) raised as it is."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, Exception) and not isinstance(e.cause, ray.exceptions.RayError):
            raise e.cause from None
        raise
    except ray.exceptions.RayActorError as e:
        raise OfflineError(f"a device actor did not start ({type(e).__name__})") from None


@ray.remote
class DeviceActor:
    """One device, served where this actor runs. Threaded (``max_concurrency``), so a device can answer
    its peers while it answers its host; commands from one sender still arrive in order (one message in
    flight per sender).

    Every start of the actor is a new incarnation: Ray restarts a dead actor, which recovers its device
    (crash recovery, as after a power cut), but what its senders had in flight there (open writes, device
    memory) is gone, so messages meant for an earlier incarnation are refused and the host must reopen."""

    def __init__(self, directory: str, device: int, profile: str, capacity: Optional[int], create: bool):
        self.device, self.directory, self.incarnation = device, directory, uuid.uuid4().hex
        self.server: Any = None
        self.formatted = False
        # A failure to start is kept and raised by every call (a task's error reaches the driver as it is;
        # a constructor's would only say the actor died).
        self.failed: Optional[Exception] = None
        try:
            # Ray 2.60's implementation of this property reads its own deprecated `actor_id`, which warns
            # on every actor start; the property itself is the supported way to ask.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                restarted = ray.get_runtime_context().was_current_actor_reconstructed
            if create and not restarted:
                if os.path.exists(directory):
                    raise ArrayExistsError(f"device {device}: {directory} exists already on {socket.gethostname()}")
                os.makedirs(os.path.dirname(directory) or ".", exist_ok=True)
                _insitu.DeviceServer.format(directory, device, profile, capacity)
                self.formatted = True
            elif not os.path.exists(os.path.join(directory, "device.json")):
                raise NoArrayError(f"device {device}: no device directory at {directory} on {socket.gethostname()}")
            self.server = _insitu.DeviceServer(directory)
        except Exception as e:
            self.failed = e

    def _check(self) -> None:
        if self.failed is not None:
            raise self.failed

    def where(self) -> Dict[str, Any]:
        self._check()
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "incarnation": self.incarnation,
        }

    def set_peers(self, peers: Dict[int, Tuple[Any, str, str]]) -> None:
        """``{device: (actor, node, incarnation)}`` of the other devices."""
        self._check()
        self.server.set_peers(
            [(i, _sender(h, i, node, inc, peer=True)) for i, (h, node, inc) in peers.items() if i != self.device]
        )

    def handle(self, message: bytes, incarnation: str) -> bytes:
        if incarnation != self.incarnation:
            raise _Restarted(self.incarnation)
        self._check()
        return self.server.handle(message)

    def destroy(self) -> None:
        """Removes the device directory this actor formatted (a create that failed half-way)."""
        if not self.formatted:
            return
        try:
            if self.server is not None:
                self.server.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


class _Restarted(Exception):
    """A message for an earlier incarnation of a device actor."""


def _sender(actor: Any, device: int, node: Optional[str], incarnation: str, peer: bool = False):
    """``send(message) -> reply`` to incarnation ``incarnation`` of a device actor; a dead or restarted
    actor raises OfflineError naming its node (the host names the device; a peer is named here)."""
    who = (f"peer device {device}'s actor" if peer else "its actor") + (f" on node {node}" if node else "")

    def send(message: bytes) -> bytes:
        try:
            return ray.get(actor.handle.remote(message, incarnation))
        except ray.exceptions.RayActorError as e:
            raise OfflineError(f"{who} died ({type(e).__name__})") from None
        except ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, _Restarted):
                raise OfflineError(f"{who} restarted and recovered its device: reopen the array") from None
            raise

    return send


def _check_placement(slots: List[Dict[str, Any]], num_cpus: float) -> None:
    """Refuses, by device and by what it needs, a placement the Ray cluster can never meet: an actor Ray
    cannot place waits for ever rather than fail. A node id no alive node has, a custom resource no alive
    node has, or more CPUs asked of a node than it has (``num_cpus`` for each device placed there)."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    by_id = {n["NodeID"]: n for n in nodes}
    need: Dict[str, List[int]] = {}
    for i, slot in enumerate(slots):
        if slot.get("node"):
            if slot["node"] not in by_id:
                raise OfflineError(
                    f"device {i} lives on Ray node {slot['node']}, which is not alive in this cluster "
                    f"({len(nodes)} alive node(s)): start that node, or open the array where it is"
                )
            need.setdefault(slot["node"], []).append(i)
        elif slot.get("resource"):
            holders = [n["NodeID"] for n in nodes if n.get("Resources", {}).get(slot["resource"], 0) > 0]
            if not holders:
                have = sorted({r for n in nodes for r in n.get("Resources", {}) if not r.startswith("node:")})
                raise OfflineError(
                    f"device {i} is placed by the custom resource {slot['resource']!r}, which no alive node of "
                    f"the Ray cluster has (they have: {', '.join(have)}): start Ray with it, e.g. "
                    f"ray.init(resources={{{slot['resource']!r}: 1}})"
                )
            if len(holders) == 1:
                need.setdefault(holders[0], []).append(i)
    for node, devices in need.items():
        cpus = by_id[node].get("Resources", {}).get("CPU", 0.0)
        if num_cpus * len(devices) > cpus + 1e-9:
            raise OfflineError(
                f"device(s) {', '.join(map(str, devices))} cannot all be placed on Ray node {node}: each device "
                f"actor asks num_cpus={num_cpus:g}, {num_cpus * len(devices):g} in all, and the node has {cpus:g} "
                f"CPU(s); ask less (num_cpus={cpus / len(devices):.2g}) or place fewer devices there"
            )


def _destroy(actors: List[Any]) -> None:
    """Removes the device directories the actors formatted (a create that failed), as far as they answer."""
    for a in actors:
        try:
            ray.get(a.destroy.remote(), timeout=30)
        except Exception:
            pass


def _kill(actors: List[Any]) -> None:
    for a in actors:
        try:
            ray.kill(a)
        except Exception:  # an actor already gone
            pass


class Array(_EmbeddedArray):
    """An array whose devices are Ray actors (see the module's documentation). The same methods as
    :class:`insitu.Array`."""

    def __init__(self, inner, recovered, actors: List[Any], placement: Dict[str, Any]):
        super().__init__(inner, recovered)
        self._placement = placement
        self._adopt(actors)

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
    def _start(
        path: str, slots: List[Dict[str, Any]], placement: Dict[str, Any], create: bool, timeout: float
    ) -> List[Any]:
        """Starts one actor per device, pinned to its slot; waits until every device is open and knows its
        peers, at most ``timeout`` seconds for them to start. Fills each slot's ``at``: node, host, pid,
        incarnation. Nothing is left running on failure."""
        _check_placement(slots, placement["num_cpus"])
        actors: List[Any] = []
        started = actors
        try:
            for i, slot in enumerate(slots):
                opts: Dict[str, Any] = {"max_restarts": -1, "max_concurrency": 8, "num_cpus": placement["num_cpus"]}
                if slot["node"]:
                    opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(slot["node"], soft=False)
                if slot["resource"]:
                    opts["resources"] = {slot["resource"]: 0.001}
                directory = os.path.join(path, f"dev{i}")
                actor = DeviceActor.options(**opts).remote(
                    directory, i, placement["profile"], placement["capacity"], create
                )
                actors.append(actor)
            refs = [a.where.remote() for a in actors]
            ready, waiting = ray.wait(refs, num_returns=len(refs), timeout=timeout)
            if waiting:
                late = [i for i, r in enumerate(refs) if r in waiting]
                started = [a for a, r in zip(actors, refs) if r not in waiting]
                raise OfflineError(
                    f"device(s) {', '.join(map(str, late))} did not start within {timeout:g} s: the Ray cluster "
                    f"has not placed their actors (each asks num_cpus={placement['num_cpus']:g} on its node or "
                    "custom resource; see ray status). Nothing is left running"
                )
            where = _get(refs)
            for slot, w in zip(slots, where):
                slot["at"] = w
            peers = {i: (a, s["at"]["node"], s["at"]["incarnation"]) for i, (a, s) in enumerate(zip(actors, slots))}
            _get([a.set_peers.remote(peers) for a in actors])
        except BaseException:
            # Only actors that started can remove what they made: one never placed would be waited for.
            if create:
                _destroy(started)
            _kill(actors)
            raise
        return actors

    @staticmethod
    def _connect(actors: List[Any], slots: List[Dict[str, Any]]):
        def connect(device: int):
            if device >= len(actors):
                raise OfflineError(f"no actor for device {device}")
            at = slots[device]["at"]
            return _sender(actors[device], device, at["node"], at["incarnation"])

        return connect

    def _adopt(self, actors: List[Any]) -> None:
        self._actors = actors
        # An array dropped without close() stops its actors too (they hold each other's handles).
        self._finalizer = weakref.finalize(self, _kill, list(actors))

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
        topology: Optional[str] = None,
        lanes: int = 1,
        start_timeout: float = 120.0,
    ) -> "Array":
        """Creates an array of ``devices_per_node`` devices on every alive node (or on every custom
        resource of ``resources``), each a Ray actor that formats its own directory under ``path`` on
        its node; opens it. With ``topology`` (``ring``, ``line``, ``mesh``, ``full`` or a TOML file),
        the devices are the nodes of a BlueDBM appliance cabled by it, as for :meth:`insitu.Array.create`:
        the storage network's pages then cross between the actors. A placement the cluster cannot meet
        (CPUs or resources it lacks) is refused at once; actors not started within ``start_timeout``
        seconds fail the create with :class:`~insitu.OfflineError`, leaving nothing behind."""
        if not ray.is_initialized():
            ray.init()
        path = os.path.abspath(os.fspath(path))
        if os.path.exists(os.path.join(path, "array.json")):
            raise ArrayExistsError(f"an array already exists at {path}")
        slots = cls._slots(devices_per_node, resources)
        cap = None if capacity is None else _insitu.parse_size(str(capacity))
        placement = {"profile": profile, "capacity": cap, "num_cpus": num_cpus, "devices": slots}
        actors = cls._start(path, slots, placement, create=True, timeout=start_timeout)
        try:
            inner = _insitu._Array.create(
                path, len(slots), profile, _size(capacity), _size(stripe_unit), cls._connect(actors, slots),
                topology, lanes,
            )
        except BaseException:
            _destroy(actors)
            _kill(actors)
            raise
        saved = dict(placement, devices=[{"node": s["node"], "resource": s["resource"]} for s in slots])
        with open(os.path.join(path, PLACEMENT), "w") as f:
            json.dump(saved, f, indent=1)
        return cls(inner, None, actors, placement)

    @classmethod
    def open(  # type: ignore[override]
        cls,
        path: PathLike,
        *,
        wait: float = 5.0,
        start_timeout: float = 120.0,
        host_profile: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> "Array":
        """Opens the array at ``path``: starts every device's actor on the node recorded for it (refused at
        once if the cluster lacks that node or resource; :class:`~insitu.OfflineError` if they do not start
        within ``start_timeout`` seconds). ``host_profile`` as for :meth:`insitu.Array.open`."""
        if not ray.is_initialized():
            ray.init()
        path = os.path.abspath(os.fspath(path))
        try:
            with open(os.path.join(path, PLACEMENT)) as f:
                placement = json.load(f)
        except FileNotFoundError:
            raise NoArrayError(f"no Ray array at {path} (no {PLACEMENT}; create one with insitu.ray.Array.create)")
        slots = placement["devices"]
        placement.setdefault("num_cpus", 1.0)
        actors = cls._start(path, slots, placement, create=False, timeout=start_timeout)
        try:
            host = host_profile or os.environ.get("INSITU_HOST_PROFILE")
            inner, recovered = _insitu._Array.open(
                path, float(wait), cls._connect(actors, slots), None if host is None else os.fspath(host)
            )
        except BaseException:
            _kill(actors)
            raise
        return cls(inner, json.loads(recovered) if recovered else None, actors, placement)

    def close(self) -> None:
        """Closes the array (every device checkpoints) and stops the device actors."""
        try:
            self._inner.close()
        finally:
            _kill(self._actors)
            self._finalizer.detach()
            self._actors = []

    def reopen(self) -> None:
        """Reconnects after a device actor died (Ray restarted it and it recovered its device): closes
        what is left and opens the array again."""
        try:
            self.close()
        except Exception:
            pass
        again = type(self).open(self.path)
        again._finalizer.detach()
        self.__dict__.update(again.__dict__)
        self._adopt(self._actors)

    @property
    def placement(self) -> List[Dict[str, Any]]:
        """Where every device runs: its node id (and custom resource), host name and actor pid."""
        return [dict(s) for s in self._placement["devices"]]

    def __repr__(self) -> str:
        if self.closed:
            return f"<insitu.ray.Array {self.path} (closed)>"
        nodes = len({s.get("at", {}).get("node") for s in self._placement["devices"]})
        return f"<insitu.ray.Array {self.path}: {len(self._actors)} device actors on {nodes} node(s)>"
