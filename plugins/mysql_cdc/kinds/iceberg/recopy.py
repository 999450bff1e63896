"""Which tables of a batch an Iceberg follower must copy again instead of merging
(``merge.recopy``), with Iceberg's types: a column keeps its Iceberg type, and Iceberg's schema
evolution widens only int to long, float to double, and a decimal's precision at the same scale."""

from __future__ import annotations

import re

from ...contracts import ColumnSpec
from ...merge.recopy import LakeTypes
from .types import iceberg_arrow_type, iceberg_type

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def iceberg_type_name(column: ColumnSpec, where: str) -> str:
    """The Iceberg type of a batch column as pyiceberg spells it (``long``, ``decimal(10, 2)``)."""
    return str(iceberg_type(iceberg_arrow_type(column, where)))


def iceberg_widens(have: str, want: str) -> bool:
    """Whether Iceberg's schema evolution changes ``have`` into ``want`` in place."""
    if (have, want) in {("int", "long"), ("float", "double")}:
        return True
    a, b = _DECIMAL.match(have), _DECIMAL.match(want)
    return bool(a and b and a[2] == b[2] and int(b[1]) > int(a[1]))


ICEBERG_TYPES = LakeTypes(iceberg_type_name, iceberg_widens, "Iceberg")
