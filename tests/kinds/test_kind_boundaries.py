"""A follower kind is one package: nothing outside ``mysql_cdc/kinds/<kind>/`` imports its modules
or its own libraries, and no module outside the registry names a kind in a branch. Read from the
source (the import statements and comparisons themselves), so a new leak fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from mysql_cdc.kinds import KINDS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "plugins" / "mysql_cdc"
# product code: the plugin package, the DAG file, the Spark jobs
SOURCES = sorted([*PACKAGE.rglob("*.py"), *(REPO / "dags").glob("*.py"), *(REPO / "spark_jobs").glob("*.py")])
REGISTRY = PACKAGE / "kinds" / "__init__.py"
# libraries that belong to one kind: only its package imports them
KIND_LIBRARIES = {"deltalake": "delta", "pyiceberg": "iceberg"}


def _module_name(path: Path) -> str:
    if PACKAGE in path.parents:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return path.stem


def _owner(path: Path) -> str | None:
    """The kind whose package holds ``path``, if any."""
    kinds_dir = PACKAGE / "kinds"
    if kinds_dir in path.parents:
        first = path.relative_to(kinds_dir).parts[0]
        return first if first in KINDS else None
    return None


def _imported(path: Path, tree: ast.AST) -> list[str]:
    """Every module ``path`` imports, relative imports resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.append(target)
            names += [f"{target}.{a.name}" for a in node.names]  # `from ..kinds import delta`
    return names


def _kind_of_import(name: str) -> str | None:
    parts = name.split(".")
    if parts[:2] == ["mysql_cdc", "kinds"] and len(parts) > 2 and parts[2] in KINDS:
        return parts[2]
    return KIND_LIBRARIES.get(parts[0])


def test_nothing_outside_a_kinds_package_imports_it():
    leaks = []
    for path in SOURCES:
        owner = _owner(path)
        for name in _imported(path, ast.parse(path.read_text(), str(path))):
            kind = _kind_of_import(name)
            if kind is not None and kind != owner:
                leaks.append(f"{path.relative_to(REPO)} imports {name}")
    assert leaks == []


def _names_a_kind(tree: ast.AST) -> bool:
    """A comparison of something called ``kind`` with a kind's name, or a kind's name as a dict
    value under ``"kind"`` or a call's ``kind=``: a branch on the kind."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Constant) and s.value in KINDS for s in sides)
            about_kind = any("kind" in ast.unparse(s).lower() for s in sides if not isinstance(s, ast.Constant))
            if named and about_kind:
                return True
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "kind" and isinstance(value, ast.Constant) \
                        and value.value in KINDS:
                    return True
        if isinstance(node, ast.keyword) and node.arg == "kind" and isinstance(node.value, ast.Constant) \
                and node.value.value in KINDS:
            return True
    return False


def test_only_the_registry_branches_on_a_kind():
    naming = [str(p.relative_to(REPO)) for p in SOURCES
              if _owner(p) is None and p != REGISTRY and _names_a_kind(ast.parse(p.read_text(), str(p)))]
    assert naming == []


def test_the_check_sees_a_leak(tmp_path):
    """The two checks above find what they look for (so they cannot pass by seeing nothing)."""
    leak = PACKAGE / "monitor" / "example.py"  # a path outside the kinds, never written
    tree = ast.parse("from ..kinds.delta.state import cut\nimport deltalake\n"
                     "if follower['kind'] == 'delta':\n    pass\n")
    assert [_kind_of_import(n) for n in _imported(leak, tree) if _kind_of_import(n)] == ["delta", "delta", "delta"]
    assert _names_a_kind(tree)
    assert _owner(PACKAGE / "kinds" / "delta" / "sink" / "merges.py") == "delta"


def test_every_kind_is_found_by_its_name():
    from mysql_cdc.kinds import kind

    for name in KINDS:
        assert kind(name).name == name
