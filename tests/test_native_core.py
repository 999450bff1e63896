"""The compiled core behind one module, with one policy when it is missing: an error that names
what needs it and the fix (the suite's own install has it: ``make setup`` builds it)."""

from __future__ import annotations

import pytest

from mysql_cdc import native_core
from mysql_cdc.retry_policy import is_permanent


def test_the_install_has_the_core():
    assert native_core.available()
    assert hasattr(native_core.require("a test"), "RowsDecoder")


def test_a_missing_core_is_an_error_naming_the_fix_and_the_pure_python_setting(monkeypatch):
    monkeypatch.setattr(native_core, "_core", None)
    monkeypatch.setattr(native_core, "_IMPORT_ERROR", "No module named 'mysql_cdc_native'")
    with pytest.raises(native_core.NativeCoreMissing) as caught:
        native_core.require("the compiled row decoder", "set `extract: {decoder: python}`")
    message = str(caught.value)
    assert message.startswith("the compiled row decoder needs mysql-cdc's compiled core")
    assert "run `make setup`" in message and "or set `extract: {decoder: python}`" in message
    assert is_permanent(caught.value)  # no retry installs it
