"""An array of emulated computational storage devices, from Python.

Conventions, the same for every method:

- storing and commanding (``put``, ``put_table``, ``put_list``, ``rm``, ``selfsort_config``,
  ``selfsort_write``, ``selfsort_generate``...) returns its :class:`~insitu.Report`;
- an operator (``sort``, ``shuffle``, ``intersect``, ``search``, ``selfsort_sort``, the Self-Sort
  queries) returns ``(result, report)``;
- reading (``get``, ``get_table``, ``shuffle_read``, ``selfsort_read``, ``lba_read``) returns the data, as
  its signature says, and keeps its report in :attr:`Array.last_report`;
- a method given a file ``out`` to write returns ``None`` for the data: the file is written whole or not at
  all (a failure leaves what was there before).

Every operator releases the GIL while it runs. Errors are :mod:`insitu.errors` classes with the CLI's
messages.

A ``progress`` callback is called with ``(done, total)`` as the work goes. An exception it raises, or
Ctrl-C, stops the call that streams bytes (``put`` of a file, ``get``, ``lba_write``, ``lba_read``, the
Self-Sort writes, generate and reads) where it is, and is raised as it is: nothing of a put is stored, no
output file is written; blocks or records already written by ``lba_write`` or a Self-Sort write stay, as on
any block device. Other calls finish their work before a Ctrl-C is seen.
"""

from __future__ import annotations

import functools
import json
import operator
import os
import sys
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _insitu
from .report import Report

PathLike = Union[str, "os.PathLike[str]"]
Size = Union[int, str]


def _size(value: Optional[Size]) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(f"a size is a number of bytes or a string such as '64MiB', got {value!r}")
    return str(value)


def _in_memory(data: Any) -> Optional[bytes]:
    """The bytes of ``data`` held in memory (bytes, bytearray, memoryview, or any object that exposes its
    buffer, such as a numpy array: its bytes as they lie in memory), or ``None`` for a path."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, (str, os.PathLike)):
        return None
    try:
        return memoryview(data).tobytes()
    except TypeError:
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"data is bytes (or an object exposing its buffer, such as a numpy array) or a file's path, "
            f"got {type(data).__name__}"
        ) from None


def _bytes_or_path(data: Union[bytes, bytearray, memoryview, PathLike]) -> Tuple[Optional[bytes], Optional[str]]:
    """``(bytes, None)`` for data in memory, ``(None, path)`` for a file's path: what the native methods that
    take either are given."""
    held = _in_memory(data)
    return (held, None) if held is not None else (None, os.fspath(data))


def _length(value: Size) -> int:
    """A length in bytes: a whole number (numpy's too), or a string such as ``'64MiB'``; a fraction of a
    byte is refused."""
    from .errors import InvalidArgumentError

    refused = InvalidArgumentError(f"a length is a whole number of bytes or a string such as '64MiB', got {value!r}")
    if isinstance(value, str):
        try:
            whole = float(value).is_integer()
        except ValueError:
            whole = True  # a size with a unit: '1.5KiB' is 1536 bytes
        if not whole:
            raise refused
        return _insitu.parse_size(value)
    if isinstance(value, bool):
        raise refused
    try:
        return _insitu.parse_size(str(operator.index(value)))
    except TypeError:
        raise refused from None


def _key(key: Union[bytes, str, None]) -> Optional[bytes]:
    """A Self-Sort key: bytes as they are, a ``str`` as its UTF-8 bytes (the CLI's ``--text``)."""
    if key is None or isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    from .errors import InvalidArgumentError

    raise InvalidArgumentError(f"a key is bytes or str, got {type(key).__name__}")


#: The arrays open in this process, by absolute path (an array's lock is the process's, so a second open
#: here would only wait for the first to close).
_OPEN: "weakref.WeakValueDictionary[str, Array]" = weakref.WeakValueDictionary()


def _not_open_here(path: PathLike) -> str:
    """``path`` made absolute (a relative one broke after ``os.chdir``, as a notebook's ``%cd`` does),
    refused at once when this process has the array there open (re-running a notebook cell that opens it
    waited ``wait`` seconds for itself, then said another process held it)."""
    path = os.path.abspath(os.fspath(path))
    held = _OPEN.get(path)
    if held is not None and not held.closed:
        from .errors import LockedError

        raise LockedError(f"the array at {path} is already open in this process ({held!r}): close() it first")
    return path


def _warn(report: Report) -> None:
    """Says a report's warnings as Python warnings (the CLI prints them on standard error)."""
    import warnings

    for w in report.warnings:
        warnings.warn(w, RuntimeWarning, stacklevel=3)


def _warn_if_disk_short(arr: "Array") -> None:
    """Flash images are sparse: they take disk space as pages are written. Warns, as ``insitu init`` does,
    when the devices could outgrow the file system they are on."""
    import shutil
    import warnings

    c = arr.config
    most = int(c["capacity_bytes"]) * int(c["devices"])
    free = shutil.disk_usage(arr.path).free
    if most > free:
        warnings.warn(
            f"the {c['devices']} device(s) of {c['capacity_bytes']} bytes can take up to {most} bytes of disk "
            f"as they fill, and {free} bytes are free where {arr.path} is: writes will fail with "
            '"No space left on device" once it is full (what is stored stays intact; capacity= makes the '
            "devices smaller)",
            RuntimeWarning,
            stacklevel=3,
        )


def _pattern(value: Union[str, bytes, bytearray, memoryview], what: str) -> bytes:
    """A search pattern: bytes-like as it is, a ``str`` as its UTF-8 bytes; anything else (an int would be
    taken by ``bytes()`` as that many zero bytes) refused."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    from .errors import InvalidArgumentError

    raise InvalidArgumentError(f"the {what} is str or bytes, got {type(value).__name__} {value!r}")


def _whole_numbers(name: str, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Calls native ``f``, a whole number out of its parameter's range (negative, or too large) refused with
    :class:`InvalidArgumentError` naming ``name``, not the conversion's bare ``OverflowError``."""
    try:
        return f(*args, **kwargs)
    except OverflowError as e:
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"{name}: a whole-number argument is out of the range it takes (negative, or too large): {e}"
        ) from None


Progress = Union[bool, Callable[[int, int], None]]


class _Checked:
    """The native array, whose methods take whole numbers of fixed width (a count, a vertex, a node): one
    out of its parameter's range (a negative ``k``, a vertex past 2**32) is refused as every other bad
    argument is, with :class:`InvalidArgumentError`, not the bare ``OverflowError`` of the conversion."""

    __slots__ = ("_native",)

    def __init__(self, native: Any):
        self._native = native

    def __getattr__(self, name: str) -> Any:
        f = getattr(self._native, name)
        if not callable(f):
            return f

        @functools.wraps(f)
        def call(*args: Any, **kwargs: Any) -> Any:
            # Named by the public method the user called (`put`), not the native one it calls (`put_bytes`).
            caller = sys._getframe(1).f_code.co_name
            return _whole_numbers(caller if not caller.startswith(("_", "<")) else name, f, *args, **kwargs)

        return call


def _progress(
    enabled: Progress, what: str, unit: str = "bytes"
) -> Tuple[Optional[Callable[[int, int], None]], Callable[[], None]]:
    """A ``(done, total)`` callback drawing a progress bar (tqdm's when installed) counting ``unit``, and
    its closer; a callable given is called as it is."""
    if callable(enabled):
        return enabled, lambda: None
    if not enabled:
        return None, lambda: None
    try:
        from tqdm import tqdm  # type: ignore[import-not-found]
    except ImportError:
        tqdm = None
    state: Dict[str, Any] = {"bar": None, "shown": -1}

    def update(done: int, total: int) -> None:
        if tqdm is not None:
            if state["bar"] is None:
                state["bar"] = tqdm(
                    total=total or None, desc=what, unit="B" if unit == "bytes" else f" {unit}", unit_scale=True
                )
            state["bar"].update(done - state["bar"].n)
        else:
            pct = 100 * done // total if total else 100
            if pct != state["shown"]:
                state["shown"] = pct
                print(f"\r{what}: {done}/{total} {unit} ({pct}%)", end="", file=sys.stderr, flush=True)

    def close() -> None:
        if state["bar"] is not None:
            state["bar"].close()
        elif state["shown"] >= 0:
            print(file=sys.stderr)

    return update, close


class Array:
    """An array of computational storage devices in a data directory.

    Open arrays hold the directory's lock (as the CLI does while a command runs): close them, or use
    them in a ``with`` block.

    >>> import insitu, pyarrow as pa
    >>> with insitu.Array.create("/tmp/arr", devices=2, profile="tiny") as arr:  # doctest: +SKIP
    ...     arr.put_table(pa.table({"k": [3, 1, 2]}), "t", key="k")
    ...     out, report = arr.sort("t", "k")
    ...     arr.get_table(out, merged=True)["k"].to_pylist()
    [1, 2, 3]
    """

    def __init__(self, inner: "_insitu._Array", recovered: Optional[Dict[str, Any]] = None):
        self._inner = _Checked(inner)
        #: What opening the array recovered: parts of interrupted writes removed, parts quarantined.
        self.recovered: Dict[str, Any] = recovered or {}
        #: The report of the last call that read data (``get``, ``get_table``, ``shuffle_read``,
        #: ``selfsort_read``, ``lba_read``).
        self.last_report: Optional[Report] = None

    # --- opening and closing ---

    @classmethod
    def create(
        cls,
        path: PathLike,
        devices: int = 4,
        profile: Union[str, "os.PathLike[str]"] = "smartssd",
        *,
        capacity: Optional[Size] = None,
        stripe_unit: Optional[Size] = None,
        topology: Optional[Union[str, "os.PathLike[str]"]] = None,
        lanes: int = 1,
        host_profile: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> "Array":
        """Creates an array of ``devices`` devices of ``profile`` (a built-in name, see :func:`profiles`,
        or a TOML file) at ``path`` and opens it. ``capacity`` is per device (default: the profile's);
        ``stripe_unit`` the bytes of an object each device takes in turn (default: the profile's).
        ``host_profile`` as for :meth:`open`.
        With ``topology`` (``ring``, ``line``, ``mesh``, ``full`` or a TOML file) the devices are the nodes
        of a BlueDBM appliance cabled by it (the profile must have a storage network, as ``bluedbm``
        does), ``lanes`` cables between neighbours."""
        # An array open here exists: create says so (ArrayExistsError), as for any array there.
        path = os.path.abspath(os.fspath(path))
        inner = _whole_numbers(
            "create",
            _insitu._Array.create,
            path,
            devices,
            os.fspath(profile),
            _size(capacity),
            _size(stripe_unit),
            None,
            None if topology is None else os.fspath(topology),
            lanes,
        )
        arr = cls(inner)
        _OPEN[path] = arr
        _warn_if_disk_short(arr)
        host = host_profile or os.environ.get("INSITU_HOST_PROFILE")
        if host:
            # The host to model on is an open's, not stored: made, then opened on it.
            arr.close()
            return cls.open(path, host_profile=host)
        return arr

    @classmethod
    def open(
        cls, path: PathLike, *, wait: float = 5.0, host_profile: Optional[Union[str, "os.PathLike[str]"]] = None
    ) -> "Array":
        """Opens the array at ``path``, recovering it after a crash. Waits up to ``wait`` seconds for
        another process holding it. With ``host_profile`` (a built-in host, see :func:`profiles`, or a TOML
        file; default: the ``INSITU_HOST_PROFILE`` environment variable, as the CLI's), host work is
        modeled on that host instead of the one the array's profile names (not stored)."""
        path = _not_open_here(path)
        host = host_profile or os.environ.get("INSITU_HOST_PROFILE")
        inner, recovered = _insitu._Array.open(path, float(wait), None, None if host is None else os.fspath(host))
        arr = cls(inner, json.loads(recovered) if recovered else None)
        _OPEN[path] = arr
        return arr

    def close(self) -> None:
        """Closes the array: devices checkpoint, the lock is released. Closing twice does nothing."""
        self._inner.close()

    def __enter__(self) -> "Array":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def path(self) -> str:
        return os.fspath(self._inner.path)

    @property
    def closed(self) -> bool:
        return self._inner.closed

    @property
    def config(self) -> Dict[str, Any]:
        """Devices, profile, capacity per device, stripe unit."""
        return json.loads(self._inner.config())

    def __repr__(self) -> str:
        if self.closed:
            return f"<insitu.Array {self.path} (closed)>"
        c = self.config
        return f"<insitu.Array {self.path}: {c['devices']} x {c['profile']['name']}>"

    # --- objects ---

    def put(
        self,
        name: str,
        data: Union[bytes, bytearray, memoryview, PathLike],
        *,
        device: Optional[int] = None,
        progress: Progress = False,
    ) -> Report:
        """Stores ``data`` (bytes, or the path of a file) as object ``name``: striped over the devices,
        or whole on ``device``. ``progress=True`` draws a progress bar for a file; a callable is called
        with ``(bytes done, bytes in all)`` instead."""
        held = _in_memory(data)
        if held is not None:
            return Report.from_json(self._inner.put_bytes(name, held, device))
        update, close = _progress(progress, f"put {name}")
        try:
            return Report.from_json(self._inner.put_file(name, os.fspath(data), device, update))
        finally:
            close()

    def get(self, name: str, *, out: Optional[PathLike] = None, progress: Progress = False) -> Optional[bytes]:
        """Object ``name``'s bytes, or ``None`` when written to the file ``out`` (complete, or not there
        at all, as ``insitu get -o``); ``progress`` as for :meth:`put`."""
        update, close = _progress(progress, f"get {name}")
        try:
            data, report = self._inner.get(name, update, None if out is None else os.fspath(out))
        finally:
            close()
        self.last_report = Report.from_json(report)
        return data

    def rm(self, name: str) -> Report:
        """Removes object ``name`` (a blob, table, list or shuffle output)."""
        return Report.from_json(self._inner.rm(name))

    def ls(self) -> List[Dict[str, Any]]:
        """The objects stored: name, kind, size, devices."""
        return Report.from_json(self._inner.ls()).result["objects"]

    # --- tables (NASCENT, PSACS) ---

    def put_table(
        self,
        table: Any,
        name: str,
        key: Optional[str] = None,
        dict: Optional[str] = None,
        *,
        partition: str = "round-robin",
    ) -> Report:
        """Stores a table as ``name``: a ``pyarrow.Table`` (or anything with ``__arrow_c_stream__``:
        a RecordBatchReader, a polars or duckdb result), or the path of a Parquet or CSV file. ``key``
        is the column stored column-wise, the one ``sort`` sorts by (default: the first); ``dict``
        dictionary-encodes it; ``partition`` is ``round-robin`` or ``hash:COLUMN``."""
        if isinstance(table, (str, os.PathLike)):
            return Report.from_json(self._inner.put_table_file(os.fspath(table), name, key, dict, partition))
        return Report.from_json(self._inner.put_table_arrow(table, name, key, dict, partition))

    def get_table(self, name: str, *, merged: bool = False) -> "pyarrow.Table":  # noqa: F821
        """Table ``name`` as a ``pyarrow.Table`` (zero-copy from the buffers read back). Parts come in
        device order; ``merged=True`` k-way merges a sort's output into one key order."""
        import pyarrow as pa

        stream, report = self._inner.get_table(name, merged)
        self.last_report = Report.from_json(report)
        return pa.table(stream)

    def sort(
        self,
        name: str,
        key: str,
        out: Optional[str] = None,
        placement: str = "device",
        *,
        algo: str = "fast",
        memory_budget: Optional[Size] = None,
    ) -> Tuple[str, Report]:
        """NASCENT's sort of table ``name`` by column ``key``, inside every device (``device``), on the
        host (``host``) or on one accelerator beside it (``host-accel``). The column stored column-wise
        at ``put_table`` sorts at once; any other is first pulled out of every row (one more pass over
        the rows), nulls last. Returns the sorted table's name (default ``NAME.sorted``) and the report."""
        r = Report.from_json(self._inner.sort(name, key, out, placement, algo, _size(memory_budget)))
        _warn(r)
        return r.result["out"], r

    def shuffle(
        self,
        name: str,
        key: Union[str, Sequence[str]],
        partitions: int,
        out: Optional[str] = None,
        placement: str = "device",
        *,
        threads: int = 1,
        hash: str = "zigzag-fold",
        layout: str = "column",
        memory_budget: Optional[Size] = None,
        compression: str = "lz4",
    ) -> Tuple[str, Report]:
        """PSACS's shuffle of table ``name`` by ``key`` (a column or several) into ``partitions``
        partitions, inside the devices (``device``) or on the host (``host-sort``, ``host-bucket``).
        Each chunk is LZ4 compressed, or stored as it is with ``compression="none"`` (PSACS as
        evaluated). Partitions stay on the devices: read one with :meth:`shuffle_read`. Returns the output's name
        (default ``NAME.shuffled``) and the report."""
        keys = [key] if isinstance(key, str) else list(key)
        r = Report.from_json(
            self._inner.shuffle(
                name, keys, partitions, out, placement, threads, hash, layout, _size(memory_budget), compression
            )
        )
        _warn(r)
        return r.result["out"], r

    def shuffle_read(self, name: str, partition: int) -> "pyarrow.Table":  # noqa: F821
        """Partition ``partition`` of shuffle output ``name``, gathered from every device."""
        import pyarrow as pa

        stream, report = self._inner.shuffle_read(name, partition)
        self.last_report = Report.from_json(report)
        return pa.table(stream)

    # --- lists (Smart SSD list intersection) ---

    def put_list(
        self, ids: Any, name: str, entry_size: int = 4, *, device: int = 0, format: Optional[str] = None
    ) -> Report:
        """Stores sorted, distinct IDs (a numpy array or any sequence of integers in [0, 2**32), or the
        path of a file of them, as ``insitu put-list`` reads it) as list ``name`` on ``device``; each
        entry is ``entry_size`` bytes (the ID and a payload). A file's ``format`` is ``"u32le"``
        (little-endian 32-bit integers) or ``"text"`` (decimal integers); by default its extension says
        (``.bin``/``.u32``, ``.txt``/``.csv``/``.tsv``)."""
        import numpy as np

        from .errors import InvalidArgumentError

        if isinstance(ids, (str, os.PathLike)):
            return Report.from_json(self._inner.put_list_file(os.fspath(ids), name, format, entry_size, device))
        if format is not None:
            raise InvalidArgumentError("format= is for a file of IDs; these IDs are in memory")

        a = np.asarray(ids)
        if a.ndim != 1:
            raise InvalidArgumentError(f"IDs must be one-dimensional, got shape {a.shape}")
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise InvalidArgumentError(f"IDs must be integers, got dtype {a.dtype}")
        if a.size and (int(a.min()) < 0 or int(a.max()) > 0xFFFFFFFF):
            raise InvalidArgumentError("IDs must be in [0, 2**32)")
        data = np.ascontiguousarray(a, dtype="<u4").tobytes()
        return Report.from_json(self._inner.put_list(data, name, entry_size, device))

    def intersect(
        self, names: Sequence[str], placement: str = "device", count_only: bool = False, entries: bool = False
    ) -> Tuple[Any, Report]:
        """Intersects the lists ``names`` inside the device (``device``), on the host (``host``), or
        where its modeled cost is lower (``auto``: each placement's counted work at 1% matches, priced as
        a run's report prices it). Returns the common IDs (a numpy ``uint32`` array), or their number with
        ``count_only``, or with ``entries`` the first list's whole entries of them (a ``uint8`` array of
        one row an entry, its ID in the first 4 bytes, as ``insitu intersect -o`` writes them), and the
        report."""
        import numpy as np

        if isinstance(names, (str, bytes)):
            from .errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"names: a sequence of list names, not one string ({names!r}): intersect(['a', 'b'])"
            )

        count, ids, report = self._inner.intersect(list(names), placement, count_only, entries)
        r = Report.from_json(report)
        if count_only:
            return count, r
        if entries:
            width = int(r.result["entry_size"])
            return np.frombuffer(ids, dtype=np.uint8).reshape(count, width), r
        return np.frombuffer(ids, dtype="<u4").astype(np.uint32), r

    # --- search (BlueDBM) ---

    def search(
        self,
        name: str,
        pattern: Union[str, bytes],
        placement: str = "device",
        *,
        offsets: bool = False,
    ) -> Tuple[Any, Report]:
        """Counts the occurrences of ``pattern`` in object ``name``, inside the devices or on the host.
        Returns the count (or, with ``offsets``, the list of byte offsets) and the report."""
        p = _pattern(pattern, "pattern")
        r = Report.from_json(self._inner.search(name, p, placement, offsets))
        return (r.result["offsets"] if offsets else r.result["count"]), r

    # --- BlueDBM: the appliance's file system and applications (ISCA '15 §4, §7) ---

    def fs_put(self, name: str, data: Union[bytes, PathLike], *, node: Optional[int] = None) -> Dict[str, Any]:
        """Stores ``data`` (bytes, or a file's path: streamed, never whole in memory) as file ``name`` of
        the appliance's file system, its pages striped over the nodes or kept on ``node``. Returns
        ``{"name", "size", "pages", "nodes"}``; the report (measured, modeled) is in :attr:`last_report`."""
        result, report = self._inner.fs_put(name, *_bytes_or_path(data), node)
        self.last_report = Report.from_json(report)
        return json.loads(result)

    def fs_get(self, name: str, *, out: Optional[PathLike] = None) -> Optional[bytes]:
        """File ``name`` of the appliance's file system, every page checked: its bytes, or ``None`` when
        written to the file ``out`` (complete, or not there at all). The report is in :attr:`last_report`."""
        data, report = self._inner.fs_get(name, None if out is None else os.fspath(out))
        self.last_report = Report.from_json(report)
        return data

    def fs_get_via(
        self, name: str, via: str = "isp", *, node: int = 0, out: Optional[PathLike] = None
    ) -> Tuple[Optional[bytes], Dict[str, Any]]:
        """File ``name`` read whole by one node over the storage network (§3, §6.4): its in-store
        processor (``isp``: ISP-Local and ISP-F) or its host through its device (``host``: Host-Local and
        H-F), every page checked. Returns the bytes (``None`` when written to ``out``) and the read's
        cost: pages local and remote, network messages, bytes and hops, PCIe bytes, the modeled time on
        the profile and the wall time here."""
        data, cost = self._inner.fs_get_via(name, via, node, None if out is None else os.fspath(out))
        return data, json.loads(cost)

    def fs_pages(self, name: str) -> "numpy.ndarray":  # noqa: F821
        """File ``name``'s physical pages in file order, the addresses its in-store processors read: a
        ``(pages, 6)`` ``uint64`` array of node, card, bus, chip, block, page (§4's file system)."""
        import numpy as np

        return np.frombuffer(self._inner.fs_pages(name), dtype="<u8").reshape(-1, 6).astype(np.uint64)

    def fs_gc(self) -> Dict[str, Any]:
        """Erases every block whose pages are all dead and cleans the closed blocks at least half dead (their
        live pages moved first), as a full appliance also does by itself, and gives back the host disk space
        of dead pages in blocks still in use: ``{"erased_blocks", "cleaned_blocks", "moved_pages",
        "discarded_pages", "disk_bytes_before", "disk_bytes_after", "stats"}``; the report is in
        :attr:`last_report`."""
        result, report = self._inner.fs_gc()
        self.last_report = Report.from_json(report)
        return json.loads(result)

    def fs_ls(self) -> List[Dict[str, Any]]:
        """The appliance's files: ``[{"name", "size", "pages", "nodes"}]`` (from the host's index alone
        while a node is offline)."""
        return json.loads(self._inner.fs_ls())["files"]

    def fs_rm(self, name: str) -> None:
        """Removes file ``name`` (its pages are dead, for cleaning)."""
        self._inner.fs_rm(name)

    def fs_search(
        self,
        name: str,
        needle: Union[str, bytes],
        placement: str = "isp",
        *,
        offsets: bool = False,
        node: int = 0,
        threads: int = 1,
    ) -> Tuple[Any, Dict[str, Any]]:
        """Searches file ``name`` for ``needle`` (1 to 1024 bytes) with the in-store processors'
        Morris-Pratt engines (``isp``) or host software reading through the device (``host``), through
        the pages' hosts (``remote-host``) or from DRAM (``host-dram``). Returns the number of occurrences (or, with ``offsets``, their byte
        offsets) and the whole result: ``count``, ``lines``, ``offsets``, ``cost`` and ``modeled`` (time and
        energy on the appliance's profile)."""
        n = _pattern(needle, "needle")
        r = json.loads(self._inner.fs_search(name, n, placement, offsets, node, threads))
        return (r["offsets"] if offsets else r["count"]), r

    def knn(
        self,
        items: str,
        queries: Any,
        k: int = 1,
        *,
        lsh: Optional[int] = None,
        lsh_bits: int = 16,
        placement: str = "isp",
        node: int = 0,
        threads: int = 1,
        flash_share: float = 0.0,
        disk_share: float = 0.0,
    ) -> Tuple[Any, Any, Dict[str, Any]]:
        """The ``k`` items of file ``items`` (a flash page each: 8 KiB on ``bluedbm``) nearest each query
        by Hamming distance, ties to the lowest index. ``queries``: bytes or a ``uint8`` numpy array of
        one or more page-sized items, or the path of a file of them. With ``lsh``, only items sharing a bit-sampling bucket with the
        query in one of ``lsh`` bands are compared. Placements as :meth:`fs_search`. With ``host-dram``, ``flash_share`` and ``disk_share``
        of the items are not in DRAM (§7.1's "DRAM + 10% flash", "DRAM + 5% disk"). Returns indices and distances (numpy arrays: 1-D for
        one query, ``(queries, k)`` for several; a list of 1-D arrays when LSH leaves some query fewer
        than ``k`` candidates) and the whole result."""
        import numpy as np

        if isinstance(queries, (str, os.PathLike)):
            # A query file, as `insitu bluedbm knn` takes (a path's own bytes were taken for a query).
            with open(queries, "rb") as f:
                q = f.read()
        else:
            q = queries.tobytes() if hasattr(queries, "tobytes") else bytes(queries)
        r = json.loads(
            self._inner.knn(items, q, k, lsh, lsh_bits, placement, node, threads, flash_share, disk_share)
        )
        idx = [[p[0] for p in n] for n in r["nearest"]]
        dist = [[p[1] for p in n] for n in r["nearest"]]
        if len(idx) == 1:
            return np.array(idx[0], dtype=np.int64), np.array(dist[0], dtype=np.int64), r
        if len({len(i) for i in idx}) > 1:
            # With LSH a query may have fewer than k candidates: one array a query.
            return [np.array(i, dtype=np.int64) for i in idx], [np.array(d, dtype=np.int64) for d in dist], r
        return np.array(idx, dtype=np.int64), np.array(dist, dtype=np.int64), r

    def put_graph(
        self,
        edges: Any,
        name: str,
        *,
        directed: bool = False,
        vertices: Optional[int] = None,
        node: Optional[int] = None,
        format: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Stores a graph a vertex a flash page (its neighbours inside, spill pages for the rest), from
        ``edges``: an ``(E, 2)`` integer numpy array, a list of pairs, or the path of an edge file as
        ``insitu bluedbm put-graph`` reads it (``format`` ``"text"``, two integers a line, or ``"u32le"``
        pairs; by default ``.bin``/``.u32`` files are u32le, others text). Undirected unless ``directed``."""
        import numpy as np

        if isinstance(edges, (str, os.PathLike)):
            result, report = self._inner.put_graph_file(os.fspath(edges), name, format, directed, vertices, node)
            self.last_report = Report.from_json(report)
            return json.loads(result)
        if format is not None:
            from .errors import InvalidArgumentError

            raise InvalidArgumentError("format= is for an edge file; these edges are in memory")

        given = np.asarray(edges)
        if given.size and given.dtype.kind not in "iu":
            from .errors import InvalidArgumentError

            # Floats would be cut to whole vertex ids without a word.
            raise InvalidArgumentError(f"edges are integer vertex ids, not {given.dtype}")
        e = np.ascontiguousarray(given.astype(np.int64))
        if e.ndim != 2 or e.shape[1] != 2:
            from .errors import InvalidArgumentError

            raise InvalidArgumentError(f"edges must be pairs (an (E, 2) array), got shape {e.shape}")
        if e.size and (e.min() < 0 or e.max() > 0xFFFFFFFF):
            from .errors import InvalidArgumentError

            raise InvalidArgumentError("vertex ids must be 0 to 4294967295")
        data = e.astype("<u4").tobytes()
        result, report = self._inner.put_graph(data, name, directed, vertices, node)
        self.last_report = Report.from_json(report)
        return json.loads(result)

    def bfs(
        self, graph: str, start: int, placement: str = "isp", *, node: int = 0, flash_share: float = 0.0
    ) -> Tuple[Dict[int, int], Dict[str, Any]]:
        """Breadth-first search of a stored graph from ``start`` by node ``node``'s in-store processor
        (``isp``), or its host reading through its device (``host``), through the pages' hosts
        (``remote-host``) or from their memory (``host-dram``, ``flash_share`` of the accesses to their
        flash instead). Returns ``{vertex: level}`` and the whole result."""
        r = json.loads(self._inner.bfs(graph, start, placement, node, flash_share))
        return {int(v): l for v, l in r["levels"].items()}, r

    def walk(
        self,
        graph: str,
        start: int,
        *,
        walks: int = 1,
        length: int = 16,
        seed: int = 1,
        placement: str = "isp",
        node: int = 0,
        flash_share: float = 0.0,
    ) -> Tuple[List[List[int]], Dict[str, Any]]:
        """``walks`` random walks of ``length`` steps from ``start`` (the same walks for a seed whoever
        walks; placements as :meth:`bfs`). Returns the walks' vertices and the whole result."""
        r = json.loads(self._inner.walk(graph, start, walks, length, seed, placement, node, flash_share))
        return r["walks"], r

    # --- the block interface of one device (an LBA is a flash page of its profile) ---

    def lba_write(
        self,
        data: Union[bytes, bytearray, memoryview, PathLike],
        lba: int,
        *,
        device: int = 0,
        progress: Progress = False,
    ) -> Report:
        """Writes ``data`` (bytes, or a file's path) at block ``lba`` of ``device``, through the FTL; the
        last block is padded with zeros."""
        update, close = _progress(progress, "lba write")
        try:
            r = self._inner.lba_write(device, lba, *_bytes_or_path(data), update)
        finally:
            close()
        return Report.from_json(r)

    def lba_read(
        self,
        lba: int,
        length: Size,
        *,
        out: Optional[PathLike] = None,
        device: int = 0,
        progress: Progress = False,
    ) -> Optional[bytes]:
        """``length`` bytes (a number or a size such as ``'64KiB'``) from block ``lba`` of ``device``
        (``None`` when written to the file ``out``); the report is in :attr:`last_report`. Blocks of an
        index's range configured for active reads come back in key order (see :meth:`selfsort_config`)."""
        update, close = _progress(progress, "lba read")
        try:
            data, report = self._inner.lba_read(
                device, lba, _length(length), None if out is None else os.fspath(out), update
            )
        finally:
            close()
        self.last_report = Report.from_json(report)
        return data

    def lba_trim(self, lba: int, length: Size, *, device: int = 0) -> Report:
        """Trims ``length`` bytes (whole blocks; a number or a size) from block ``lba`` of ``device``: they
        read as zeros from now on."""
        return Report.from_json(self._inner.lba_trim(device, lba, _length(length)))

    # --- the Self-Sorting SSD (Cavazos Quero, Lee, Kim, §III) ---

    def selfsort_config(
        self,
        record_size: int,
        key_size: int,
        *,
        key_offset: int = 0,
        sort_on_write: bool = False,
        base_lba: int = 0,
        records: int = 0,
        active_read: bool = True,
        fanout: int = 128,
        device: int = 0,
        index: int = 1,
        via: str = "block",
    ) -> Report:
        """Configures (or replaces) index ``index`` of ``device`` over records of ``record_size`` bytes
        packed from LBA ``base_lba``, keyed by ``key_size`` bytes at ``key_offset`` (memcmp order).
        ``sort_on_write`` inserts every record as it is written (otherwise :meth:`selfsort_generate`
        builds the tree on command); ``active_read`` makes reads of the range return the records in key
        order. ``via`` is ``block`` (the command block at the command LBA, §III-E) or ``vendor`` (the
        protocol's typed commands): both configure the same index."""
        return Report.from_json(
            self._inner.selfsort_config(
                device, index, record_size, key_size, key_offset, sort_on_write, base_lba, records,
                active_read, fanout, via,
            )
        )

    def selfsort_write(
        self,
        records: Union[bytes, bytearray, memoryview, PathLike],
        *,
        at_record: int = 0,
        device: int = 0,
        index: int = 1,
        via: str = "block",
        progress: Progress = False,
    ) -> Report:
        """Writes ``records`` (bytes, or the path of a file of records) into the index's range through
        the block interface, from record ``at_record``; the range grows to hold them."""
        update, close = _progress(progress, "selfsort write")
        try:
            r = self._inner.selfsort_write(device, index, *_bytes_or_path(records), at_record, via, update)
        finally:
            close()
        return Report.from_json(r)

    def selfsort_generate(
        self, *, chunk: int = 0, device: int = 0, index: int = 1, via: str = "block", progress: Progress = False
    ) -> Report:
        """Sort-on-command: repeats the generate command, ``chunk`` records each (0: the firmware's
        default), until every record of the range is in the index. ``progress`` counts records."""
        update, close = _progress(progress, "generate", "records")
        try:
            return Report.from_json(self._inner.selfsort_generate(device, index, chunk, via, update))
        finally:
            close()

    def selfsort_read(
        self, *, out: Optional[PathLike] = None, device: int = 0, index: int = 1, progress: Progress = False
    ) -> Optional[bytes]:
        """The index's whole range in key order, by active reads: the bytes, or ``None`` when written to
        the file ``out``. The report is in :attr:`last_report`."""
        update, close = _progress(progress, "selfsort read")
        try:
            data, report = self._inner.selfsort_read(
                device, index, None if out is None else os.fspath(out), update
            )
        finally:
            close()
        self.last_report = Report.from_json(report)
        return data

    def _selfsort_query(
        self, kind: str, lo: Any, hi: Any, count: bool, out: Optional[PathLike], device: int, index: int
    ) -> Tuple[Any, Report]:
        if count and out is not None:
            from .errors import InvalidArgumentError

            raise InvalidArgumentError("count=True returns the number of records and out= writes them: give one")
        data, report = self._inner.selfsort_query(
            device, index, kind, _key(lo), _key(hi), count, None if out is None else os.fspath(out)
        )
        r = Report.from_json(report)
        return (r.result["count"] if count else data), r

    def selfsort_min(
        self, *, out: Optional[PathLike] = None, device: int = 0, index: int = 1
    ) -> Tuple[Optional[bytes], Report]:
        """The records with the smallest key (``None`` when written to ``out``), and the report."""
        return self._selfsort_query("min", None, None, False, out, device, index)

    def selfsort_max(
        self, *, out: Optional[PathLike] = None, device: int = 0, index: int = 1
    ) -> Tuple[Optional[bytes], Report]:
        """The records with the largest key (``None`` when written to ``out``), and the report."""
        return self._selfsort_query("max", None, None, False, out, device, index)

    def selfsort_range(
        self,
        lo: Union[bytes, str],
        hi: Union[bytes, str],
        *,
        count: bool = False,
        out: Optional[PathLike] = None,
        device: int = 0,
        index: int = 1,
    ) -> Tuple[Any, Report]:
        """The records whose key lies between ``lo`` and ``hi``, both inclusive, in key order (a bound
        shorter than the key is a prefix; a ``str`` key is its UTF-8 bytes, where the CLI reads hex:
        ``bytes.fromhex`` for hex):
        their bytes, their number with ``count``, or ``None`` when written to ``out``; and the report."""
        return self._selfsort_query("range", lo, hi, count, out, device, index)

    def selfsort_select(
        self,
        key: Union[bytes, str],
        *,
        count: bool = False,
        out: Optional[PathLike] = None,
        device: int = 0,
        index: int = 1,
    ) -> Tuple[Any, Report]:
        """The records with key ``key`` (or starting with it; a ``str`` is its UTF-8 bytes, where the CLI
        reads hex), as :meth:`selfsort_range` returns them."""
        return self._selfsort_query("select", key, None, count, out, device, index)

    def selfsort_flush(self, *, device: int = 0, via: str = "block") -> Report:
        """Saves the device's indexes to its flash now (also done when the array closes)."""
        return Report.from_json(self._inner.selfsort_flush(device, via))

    def selfsort_drop(self, *, device: int = 0, index: int = 1, via: str = "block") -> Report:
        """Forgets an index (its records stay)."""
        return Report.from_json(self._inner.selfsort_drop(device, index, via))

    def selfsort_stats(self, *, device: int = 0) -> Dict[str, Any]:
        """The firmware's state: command LBA, device memory, every index (configuration, records
        indexed, B+tree height and memory). The report is in :attr:`last_report`."""
        self.last_report = Report.from_json(self._inner.selfsort_stats(device))
        return self.last_report.result

    def selfsort_sort(
        self,
        records: Union[bytes, bytearray, memoryview, PathLike],
        *,
        method: str = "self-sort-write",
        format: Optional[str] = None,
        record_size: int = 0,
        key_size: int = 0,
        key_offset: int = 0,
        out: Optional[PathLike] = None,
        device: int = 0,
        index: int = 16,
        base_lba: int = 0,
        runs: int = 8,
    ) -> Tuple[Optional[bytes], Report]:
        """Sorts ``records`` (bytes, or a file's path) end to end on ``device`` with one of the paper's
        four methods (``self-sort-write``, ``self-sort-command``, ``merge-sort``, ``active-sort``), as
        ``insitu selfsort sort`` does. ``format``: ``gensort`` (100-byte records, 10-byte keys),
        ``paper`` (16 KB, 10-byte keys) or ``fixed`` (``record_size``, ``key_size``, ``key_offset``);
        by default ``fixed`` when a ``record_size`` is given, else ``gensort``. The sort replaces index
        ``index`` of the device (by default 16, the last id) and writes its records (and runs) from block ``base_lba`` on. Returns the
        records in key order (``None`` when written to ``out``) and the report."""
        if format is None:
            format = "fixed" if record_size else "gensort"
        data, path = _bytes_or_path(records)
        sorted_, report = self._inner.selfsort_sort(
            data, path, None if out is None else os.fspath(out), method, format, record_size, key_size,
            key_offset, device, index, base_lba, runs,
        )
        return sorted_, Report.from_json(report)

    # --- the array ---

    def fsck(self) -> Dict[str, Any]:
        """Checks the array: ``{"ok": bool, "problems": [...], "notes": [...]}``."""
        return json.loads(self._inner.fsck())

    def stats(self) -> Dict[str, Any]:
        """Per-device figures: objects, space used, flash wear, counters."""
        return json.loads(self._inner.stats()[0])


def profiles() -> List[Dict[str, str]]:
    """The built-in hardware profiles: ``[{"name": ..., "description": ..., "host": ...}]`` (``host``: the
    host profile their host work is modeled on, the machine of the profile's paper)."""
    return json.loads(_insitu.profiles())


def model_intersect(
    size1: Size,
    size2: Size,
    entry_size: int = 256,
    ratio: float = 0.01,
    result_entry_size: int = 4,
    profile: str = "smartssd-2016",
) -> Dict[str, Any]:
    """The list-intersection cost model (DaMoN '16 §4): load, copy, intersect and send times, host
    versus device, for lists of ``size1`` and ``size2`` bytes. The CLI's rendering is under ``"text"``."""
    s1 = _insitu.parse_size(str(size1))
    s2 = _insitu.parse_size(str(size2))
    data, text = _insitu.model_intersect(
        float(s1), float(s2), float(entry_size), float(ratio), float(result_entry_size), profile
    )
    out = json.loads(data)
    out["text"] = text
    return out


def net_routes(
    topology: str = "ring", nodes: Optional[int] = None, lanes: int = 1, profile: str = "bluedbm"
) -> Dict[str, Any]:
    """BlueDBM's storage network (§3.2.3), as ``insitu net routes``: the topology (``"ring"``, ``"line"``,
    ``"mesh"``, ``"full"`` or a ``.toml`` file) checked, and the route every endpoint takes between every
    pair of nodes (``pairs``: ``src``, ``dst``, ``hops``, ``routes``, ``distinct``). A shape has 4 nodes
    unless ``nodes`` says; a file says how many it has. The CLI's rendering is under ``"text"``. A bad
    topology (an unknown node, a port used twice, a node no route reaches) raises ``InvalidArgument``."""
    data, text = _whole_numbers("net_routes", _insitu.net_routes, os.fspath(topology), nodes, lanes, profile)
    out = json.loads(data)
    out["text"] = text
    return out


def net_bench(
    nodes: int = 4,
    topology: str = "ring",
    lanes: int = 1,
    size: Size = "4GiB",
    reads: int = 100_000,
    profile: str = "bluedbm",
    work: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Dict[str, Any]:
    """Random 8 KB page reads over an appliance of simulated nodes by every path of BlueDBM §6.4-6.5 (ISP
    and host, local and remote), as ``insitu net bench``: per path (``rows``), the pages emulated per second
    of wall time here and the bandwidth modeled on the profile. ``size`` bytes are written first, spread
    over the nodes, into sparse NAND images in a scratch folder under ``work`` (default: the system's
    temporary folder), removed afterwards. The CLI's rendering is under ``"text"``."""
    import tempfile

    where = os.fspath(work) if work is not None else tempfile.gettempdir()
    data, text = _whole_numbers(
        "net_bench", _insitu.net_bench, nodes, os.fspath(topology), lanes, str(size), reads, profile, where
    )
    out = json.loads(data)
    out["text"] = text
    return out
