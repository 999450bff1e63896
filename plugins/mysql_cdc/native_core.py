"""The compiled core (``native/``: Rust through PyO3, built by ``make setup``), behind this one
module: the only place that imports ``mysql_cdc_native`` (its types: ``native/mysql_cdc_native.pyi``).

One policy when it is missing: a caller that needs it calls ``require(what)``, which raises
``NativeCoreMissing`` naming the fix; nothing falls back to another path by itself. The pure-Python
paths (mysql-replication's decoding, pyarrow's Parquet reader) stay the references the tests
compare the compiled ones with, and a pipeline chooses them by its settings (``decoder: python``),
never by the core's absence.
"""

from __future__ import annotations

from typing import Any

from .errors import PermanentError

try:
    import mysql_cdc_native as _core
    _IMPORT_ERROR = ""
except ImportError as exc:  # built by `make setup` (pip install ./native)
    _core = None
    _IMPORT_ERROR = str(exc)


class NativeCoreMissing(RuntimeError, PermanentError):
    """The compiled core is not installed where this process runs."""


def available() -> bool:
    return _core is not None


def require(what: str, instead: str = "") -> Any:
    """The compiled core's module; ``NativeCoreMissing`` when it is not installed, naming ``what``
    needs it, the fix, and ``instead`` (the setting that chooses the pure-Python path, if any)."""
    if _core is None:
        alternative = f"; or {instead}" if instead else ""
        raise NativeCoreMissing(
            f"{what} needs mysql-cdc's compiled core (mysql_cdc_native), which is not installed ({_IMPORT_ERROR}): "
            f"run `make setup`, or `pip install ./native` with Rust's cargo on PATH{alternative}")
    return _core
