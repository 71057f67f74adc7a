"""insitu: computational storage from Python.

Operators run inside emulated storage devices (SmartSSD, Smart SSD prototypes, OpenSSD, BlueDBM nodes),
so data is processed where it lives and only results cross the host link. Every call reports the exact
result, the measured cost here and the modeled time and energy on a named hardware profile.

>>> import insitu, pyarrow as pa                                      # doctest: +SKIP
>>> arr = insitu.Array.create("/tmp/arr", devices=4, profile="smartssd")
>>> arr.put_table(pa.table({"k": [3, 1, 2], "v": ["c", "a", "b"]}), "t", key="k")
>>> name, report = arr.sort("t", "k")
>>> arr.get_table(name, merged=True).to_pydict()
{'k': [1, 2, 3], 'v': ['a', 'b', 'c']}
"""

from ._insitu import __version__
from .array import Array, model_intersect, net_bench, net_routes, profiles
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors
from .report import Report

__all__ = ["Array", "Report", "profiles", "model_intersect", "net_routes", "net_bench", "__version__", *_errors]
