"""One layer order, checked by module name (``afm/areas.py``): no module imports from an area
above its own, counting imports at the top of a file, imports inside functions,
``TYPE_CHECKING`` imports, ``package.module:attr`` strings in code and in the configs that
ship with the package, and f-strings that build a module name; and no cycle between the
rooms (subfolders and top-level modules) of one area. There is no exception list: a lower
layer that needs something from a higher one gets the piece moved down or passed in."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from afm.areas import AREAS, area_of, rank
from tests.paths import ROOT

NAME = re.compile(r"afm(?:\.[A-Za-z_]\w*)+")
TARGET = re.compile(rf"^({NAME.pattern})(?::[A-Za-z_][\w.]*)?$")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml")


def module_name(path: Path) -> str:
    area = next(a for a in AREAS if path.is_relative_to(ROOT / a.folder) and
                not any(path.is_relative_to(ROOT / b.folder) and len(b.folder) > len(a.folder) for b in AREAS))
    parts = [area.package, *path.relative_to(ROOT / area.folder).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    """Every module of every area, by its import name."""
    found = {}
    for area in AREAS:
        for path in sorted((ROOT / area.folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(path)] = path
    return found


MODULES = sources()


def known(name: str) -> str:
    """The longest prefix of ``name`` that is a module of the project (``pkg.mod.attr`` ->
    ``pkg.mod``)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def references(module: str, path: Path) -> list[tuple[str, int, str]]:
    """``(referenced name, line, how)`` for every way ``module`` names project code."""
    out: list[tuple[str, int, str]] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, "import") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            out.append((base, node.lineno, "import"))
            out += [(f"{base}.{a.name}", node.lineno, "import") for a in node.names if f"{base}.{a.name}" in MODULES]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = TARGET.match(node.value.strip())
            if match:
                out.append((match.group(1), node.lineno, "string"))
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            head = str(node.values[0].value)
            if head.startswith("afm.") and NAME.match(head):
                out.append((NAME.match(head).group(0), node.lineno, "f-string"))
    return out


def config_references() -> list[tuple[str, str, int]]:
    """``(file, referenced name, line)`` for module names in the data files that ship with an area."""
    out = []
    for area in AREAS:
        for path in sorted((ROOT / area.folder).rglob("*")):
            if path.suffix in CONFIG_SUFFIXES and path.is_file():
                for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    for match in re.finditer(rf"[\"'\s\[,]({NAME.pattern}):\w+", line):
                        out.append((str(path.relative_to(ROOT)), match.group(1), lineno))
    return out


def upward() -> list[str]:
    found = []
    for module, path in MODULES.items():
        for name, lineno, how in references(module, path):
            if rank(name) > rank(module):
                where = f"{path.relative_to(ROOT)}:{lineno}"
                found.append(f"{where} ({area_of(module).folder}) -> {name} ({area_of(name).folder}) by {how}")
    for file, name, lineno in config_references():
        owner = module_name(ROOT / file) if file.endswith(".py") else module_name((ROOT / file).with_suffix(".py"))
        if rank(name) > rank(owner):
            found.append(f"{file}:{lineno} ({area_of(owner).folder}) -> {name} ({area_of(name).folder}) by config")
    return found


def test_the_areas_are_the_checkouts_folders_in_one_order() -> None:
    assert [a.folder for a in AREAS][0] == "afm" and AREAS[-1].package == "afm.app"
    for area in AREAS:
        assert (ROOT / area.folder / "__init__.py").is_file(), area
        assert area.package == "afm" or area.package == f"afm.{area.folder}", area
    assert len({a.folder for a in AREAS}) == len(AREAS)


def test_the_checker_sees_every_kind_of_reference(tmp_path: Path) -> None:
    """The parser finds imports inside functions, relative imports, TYPE_CHECKING imports,
    ``module:attr`` strings and f-string module names (a checker that misses one is vacuous)."""
    probe = ROOT / "filters" / "_layer_probe.py"  # never written: parsed from a string below
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from afm.training.core import task\n"
        "def f():\n    from ..app import cli\n    return 'afm.evaluation.hook:x', f'afm.synth.{f}'\n"
        "import afm.pipelines.tokenize\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    names = {(n, how) for n, _, how in references(module_name(probe), path)}
    assert {("afm.training.core", "import"), ("afm.app", "import"), ("afm.evaluation.hook", "string"),
            ("afm.synth.", "f-string") if False else ("afm.synth", "f-string"),
            ("afm.pipelines.tokenize", "import")} <= names, names
    assert rank("afm.app.cli") > rank("afm.evaluation.hook") > rank("afm.training.core") > rank("afm.filters.minhash") > rank("afm.io") == 0


def test_nothing_imports_upward() -> None:
    found = upward()
    assert not found, "imports that run upward (afm/areas.py gives the order):\n" + "\n".join(found)


def rooms_of(area_package: str) -> dict[str, set[str]]:
    """The room graph of one area: a room is a subfolder of the area, or one of its
    top-level modules (its ``__init__`` is left out: a package's own namespace)."""

    def room(name: str) -> str:
        rest = name[len(area_package) + 1:].split(".") if name != area_package else []
        return ".".join([area_package, *rest[:1]])

    graph: dict[str, set[str]] = defaultdict(set)
    inner = [a.package for a in AREAS if a.package != area_package and a.package.startswith(area_package + ".")]
    for module, path in MODULES.items():
        if area_of(module).package != area_package:
            continue
        for name, _, _ in references(module, path):
            name = known(name)
            if area_of(name) is None or area_of(name).package != area_package or any(name.startswith(i) for i in inner):
                continue
            a, b = room(module), room(name)
            if a != b and area_package not in (a, b):
                graph[a].add(b)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("area", [a.package for a in AREAS])
def test_no_cycle_between_the_rooms_of_an_area(area: str) -> None:
    """Inside an area the rooms (subfolders and top-level modules) form no cycle either, imports inside functions and ``module:attr`` strings counted: in
    ``training``, for one, the engine (``core``) never names a task, and the front door
    that does (``runs``) is the one room above ``tasks``."""
    assert cycles(rooms_of(area)) == []


def test_the_architecture_page_draws_the_declared_order() -> None:
    """The picture cannot drift from ``afm/areas.py``: its chain of areas is the same order."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    chain = re.search(r"^\s*(\w+(?: --> \w+)+)\s*$", text, re.M).group(1).split(" --> ")
    assert chain == ["core" if a.folder == "afm" else a.folder for a in AREAS]
    listed = [line.split()[0] for line in text.split("```")[3].strip().splitlines()]  # the text picture
    assert listed == list(reversed(["afm" if a.folder == "afm" else a.folder for a in AREAS]))
