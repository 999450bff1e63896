"""How counts read in logs, on the page and in results."""

from __future__ import annotations


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 table``, ``2 tables`` (``nouns``: the plural when it is not the noun and an s): how every
    count reads in logs and on the page."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"
