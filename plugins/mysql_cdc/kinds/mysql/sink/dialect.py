"""Leader DDL in the follower's dialect: a MySQL leader with a MariaDB follower, and the reverse.

The follower runs the leader's own definitions (``SHOW CREATE DATABASE`` / ``TABLE`` for a copy,
the statement text from the binlog for DDL replay). Between MySQL 8.0+/9.x and MariaDB 10.10+
they differ in a few names, never in data:

| leader says | MariaDB follower runs | MySQL follower runs |
|---|---|---|
| ``utf8mb4_0900_ai_ci`` (``_as_ci``, ``_as_cs``) | ``utf8mb4_uca1400_nopad_ai_ci`` (same suffix; NO PAD like 0900) | |
| ``utf8mb4_<language>_0900_<suffix>`` | ``utf8mb4_uca1400_nopad_<suffix>`` (the language's tailoring dropped) | |
| ``utf8mb4_0900_bin`` | ``utf8mb4_bin`` | |
| ``utf8mb4_uca1400_<...>_<suffix>`` | | ``utf8mb4_0900_<suffix>`` |
| ``utf8mb3_uca1400_<...>`` | | ``utf8mb3_unicode_520_ci`` |
| ``<charset>_<name>_nopad_<ci/bin>`` | | ``<charset>_<name>_<ci/bin>`` (PAD SPACE) |
| ``/*!80023 INVISIBLE */`` | ``INVISIBLE`` | |
| ``/*!80016 DEFAULT ENCRYPTION='N' */`` and other MySQL-8+ versioned comments | dropped (MariaDB would run them: its version numbers are higher) | |

A collation changes how the follower sorts and compares text, never the bytes stored: rows stay
exact, and so do the checksums of the verification (computed over the values). MariaDB's ``JSON``
is ``LONGTEXT`` with a ``json_valid`` check: a MySQL follower keeps it as that text (converting it
to MySQL's JSON would rewrite the values), and the merge matches a batch's ``json`` column with
either. Each mapping is logged once per job. What has no equivalent on the follower (MariaDB's
``INET4``/``INET6``/``UUID`` types, system-versioned tables, sequences, on a MySQL follower) is
refused with the reason, before the statement runs.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from ....errors import PermanentError

log = logging.getLogger(__name__)

MARIADB, MYSQL = "mariadb", "mysql"


class DialectError(ValueError, PermanentError):
    """A leader definition the follower's server has no equivalent for; no retry can fix it."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern
    replacement: str
    why: str


def _rule(pattern: str, replacement: str, why: str) -> _Rule:
    return _Rule(re.compile(pattern, re.IGNORECASE), replacement, why)


_TO_MARIADB = (
    _rule(r"\b(utf8mb4)_0900_bin\b", r"\1_bin", "MariaDB has no 0900 collations"),
    # MySQL's 0900 collations are NO PAD ('a' and 'a ' differ): so are the nopad ones; a PAD SPACE
    # collation would make a unique key of the follower refuse rows the leader holds
    _rule(r"\b(utf8mb4)_(?:[a-z]{2,3}(?:_[a-z]{2,4})?_)?0900_(ai|as)_(ci|cs)\b", r"\1_uca1400_nopad_\2_\3",
          "MariaDB's NO PAD UCA 14.0 collation is the nearest to MySQL's UCA 9.0"),
    _rule(r"/\*!8\d{4}\s+(INVISIBLE)\s*\*/", r"\1", "MariaDB marks invisible columns without a versioned comment"),
    # MariaDB runs /*!NNNNN ... */ when NNNNN is at most its own version (10.x: 10xxxx), so MySQL
    # 8.0+'s versioned comments would run there, and name options it does not have
    _rule(r"/\*!(?:8|9)\d{4}\s+[^*]*\*/", "", "a MySQL 8.0+ option MariaDB does not have"),
)
_TO_MYSQL = (
    _rule(r"\b(utf8mb4)_uca1400_(?:[a-z0-9]+_)*?(ai|as)_(ci|cs)\b", r"\1_0900_\2_\3",
          "MySQL's UCA 9.0 collation is the nearest to MariaDB's UCA 14.0"),
    _rule(r"\b(utf8mb3|utf8)_uca1400_(?:[a-z0-9]+_)*?(?:ai|as)_(?:ci|cs)\b", r"\1_unicode_520_ci",
          "MySQL has no UCA 14.0 collations for utf8mb3"),
    _rule(r"\b(utf8mb4|utf8mb3|utf8|latin1|ascii|binary)_((?:[a-z0-9]+_)*?)nopad_(ci|bin)\b", r"\1_\2\3",
          "MySQL has no NO PAD variant of this collation"),
)
_UNSUPPORTED_ON_MYSQL = (
    # a column's type: after its name (`name` or name), not a function call such as DEFAULT uuid()
    (re.compile(r"(?<=[`\w])\s+(INET4|INET6|UUID)\b(?!\s*\()", re.IGNORECASE), "MariaDB's {0} type"),
    (re.compile(r"\bWITH\s+SYSTEM\s+VERSIONING\b", re.IGNORECASE), "a system-versioned table"),
    (re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?SEQUENCE\b", re.IGNORECASE), "a sequence"),
)


def flavor_of(version: str) -> str:
    """``mariadb`` or ``mysql`` from ``SELECT VERSION()``."""
    return MARIADB if "mariadb" in version.lower() else MYSQL


@dataclass
class DdlTranslator:
    """Leader DDL for a follower of ``follower`` flavor; ``leader`` flavor is the batch's."""

    leader: str
    follower: str
    _logged: set = field(default_factory=set)

    @property
    def crossed(self) -> bool:
        return self.leader != self.follower

    def __call__(self, statement: str) -> str:
        if not self.crossed:
            return statement
        if self.follower == MYSQL:
            self._refuse_unsupported(statement)
        rules = _TO_MARIADB if self.follower == MARIADB else _TO_MYSQL
        for rule in rules:
            statement = rule.pattern.sub(lambda m, r=rule: self._apply(r, m), statement)
        return statement

    def _apply(self, rule: _Rule, match: re.Match) -> str:
        replaced = match.expand(rule.replacement)
        key = (match.group(0).lower(), replaced.lower())
        if key not in self._logged:
            self._logged.add(key)
            log.info("%s leader, %s follower: %r runs as %r (%s)", self.leader, self.follower, match.group(0),
                     replaced, rule.why)
        return replaced

    def _refuse_unsupported(self, statement: str) -> None:
        for pattern, what in _UNSUPPORTED_ON_MYSQL:
            found = pattern.search(statement)
            if found:
                raise DialectError(
                    f"the follower is MySQL, which has no equivalent of {what.format(found.group(found.lastindex or 0).strip().upper())} "
                    f"in this leader definition: {statement[:200]!r}; exclude the table from the pipeline "
                    "(exclude: [db.table]) or use a MariaDB follower")
