"""What every operation returns beside its result: what it cost here and on the hardware profile."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional


class Report:
    """The account of one operation.

    Attributes:
        op: the operation (``"sort"``, ``"shuffle"``...).
        headline: one line saying what it did.
        result: the operation's result, as the CLI's ``--json`` gives it.
        wall_s, host_cpu_s, device_cpu_s: measured here, in seconds.
        bytes: bytes on every path (flash read and program, flash to device memory, host link both ways,
            device to device), summed over the devices.
        ops: flash pages read and programmed, blocks erased, device commands.
        modeled: the modeled time and energy on the array's profile (``time_s``, ``energy_j``, per phase).
        measured_phases: per phase, the wall time measured here, as the CLI's ``--json`` gives it.
        warnings: what to know that the result does not say: an option the operation did not use (a
            memory budget past a device's memory, the host baselines' threads on the device), a costly
            choice (far more partitions than rows), or what the figures leave out (a device that stopped
            answering once the work was done); ``sort`` and ``shuffle`` also warn them (``warnings.warn``).
    """

    __slots__ = (
        "op",
        "headline",
        "result",
        "wall_s",
        "host_cpu_s",
        "device_cpu_s",
        "bytes",
        "ops",
        "modeled",
        "measured_phases",
        "warnings",
        "_summary",
    )

    def __init__(self, data: Dict[str, Any]):
        self.op: str = data["op"]
        self.headline: str = data["headline"]
        self.result: Any = data["result"]
        self.wall_s: float = data["wall_s"]
        self.host_cpu_s: float = data["host_cpu_s"]
        self.device_cpu_s: float = data["device_cpu_s"]
        self.bytes: Dict[str, int] = data["bytes"]
        self.ops: Dict[str, int] = data["ops"]
        self.modeled: Dict[str, Any] = data["modeled"]
        self.measured_phases: List[Any] = data.get("measured_phases", [])
        self.warnings: List[str] = data.get("warnings", [])
        self._summary: Optional[str] = data.get("summary")

    @classmethod
    def from_json(cls, text: str) -> "Report":
        return cls(json.loads(text))

    @property
    def modeled_time_s(self) -> float:
        """Modeled time on the profile, in seconds."""
        return float(self.modeled["time_s"])

    @property
    def modeled_energy_j(self) -> float:
        """Modeled energy on the profile, in joules."""
        return float(self.modeled["energy_j"])

    def to_dict(self) -> Dict[str, Any]:
        """The report as plain data (what the CLI's ``--json`` prints)."""
        return {
            "op": self.op,
            "headline": self.headline,
            "result": self.result,
            "wall_s": self.wall_s,
            "host_cpu_s": self.host_cpu_s,
            "device_cpu_s": self.device_cpu_s,
            "bytes": dict(self.bytes),
            "ops": dict(self.ops),
            "modeled": self.modeled,
            "measured_phases": self.measured_phases,
            **({"warnings": list(self.warnings)} if self.warnings else {}),
        }

    def __str__(self) -> str:
        return self._summary or self.headline

    def __repr__(self) -> str:
        first = self.headline.splitlines()[0] if self.headline else self.op
        return (
            f"<Report {first!r}: wall {self.wall_s:.3f} s, "
            f"{self.bytes.get('device_to_host', 0)} B device->host, "
            f"modeled {self.modeled_time_s:.4g} s / {self.modeled_energy_j:.4g} J on {self.modeled['profile']}>"
        )
