"""The exceptions of insitu: one class per kind of failure, all under :class:`InsituError`.

The messages are the CLI's. Classes also derive from the built-in exception a Python user would
catch for that kind (``ValueError`` for bad input, ``LookupError`` for a missing object, ``OSError``
for a file or a locked array), so ``except ValueError`` works as expected.
"""

from __future__ import annotations

__all__ = [
    "InsituError",
    "InvalidArgumentError",
    "NotFoundError",
    "AlreadyExistsError",
    "NoArrayError",
    "ArrayExistsError",
    "LockedError",
    "CorruptError",
    "DamagedError",
    "DeviceFullError",
    "DeviceMemoryError",
    "OfflineError",
    "FileError",
    "MissingFileError",
    "FormatError",
    "DeviceError",
]


class InsituError(Exception):
    """Any error of insitu."""


class InvalidArgumentError(InsituError, ValueError):
    """A bad name, option, value or profile."""


class NotFoundError(InsituError, LookupError):
    """No object of that name."""


class AlreadyExistsError(InsituError):
    """An object of that name exists already."""


class NoArrayError(InsituError, FileNotFoundError):
    """No array in the directory (create one with ``Array.create``)."""


class ArrayExistsError(InsituError, FileExistsError):
    """An array is in the directory already."""


class LockedError(InsituError, OSError):
    """Another process holds the array."""


class CorruptError(InsituError):
    """Metadata on disk is not what was written (a damaged image or catalog)."""


class DamagedError(InsituError):
    """An object's data is damaged."""


class DeviceFullError(InsituError, OSError):
    """A device has no room for the write."""


class DeviceMemoryError(InsituError, MemoryError):
    """A device's memory cannot hold what a program needs."""


class OfflineError(InsituError):
    """A device did not open, or its server (or actor) went away."""


class FileError(InsituError, OSError):
    """A file could not be read or written (``errno`` and ``filename`` say which and why)."""

    def __str__(self) -> str:
        # The CLI's message, which names the file and the reason (OSError would print "[Errno N] ...").
        return str(self.args[0]) if self.args else super().__str__()

    def __reduce__(self):  # type: ignore[override]
        # errno and filename are not in args: carried apart, so they survive pickling (Ray).
        return (type(self), self.args, {"errno": self.errno, "filename": self.filename})

    def __setstate__(self, state: dict) -> None:
        self.errno = state.get("errno")
        self.filename = state.get("filename")


class MissingFileError(FileError, FileNotFoundError):
    """A file to read is not there."""


class FormatError(InsituError, ValueError):
    """Input data that Arrow or Parquet refused."""


class DeviceError(InsituError):
    """Anything else a device reported."""
