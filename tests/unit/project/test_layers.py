"""The dependency map holds, file by file (``afm/areas.py``): every reference from one module to
another is allowed by the graph of areas, counting imports at the top of a file, imports
inside functions, ``TYPE_CHECKING`` imports, ``package.module:attr`` strings in code and in
the configs that ship with the package, and f-strings that build a module name; every
dependency the graph declares is used (the map claims no more than the code does); no two
files import each other in a cycle, however late the import; afm's own modules are imported
inside functions rarely (outside the app, which keeps ``afm --help`` fast that way); and
the rooms of an area form no cycle. There is no exception list: a module that needs
something from an area it may not use gets the piece moved down or passed in."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import pytest

from afm.areas import AREAS, BY_FOLDER, area_of, may_import
from tests.paths import ROOT

NAME = re.compile(r"afm(?:\.[A-Za-z_]\w*)+")
TARGET = re.compile(rf"^({NAME.pattern})(?::[A-Za-z_][\w.]*)?$")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
LATE_SHARE_MAX = 0.10  # of the statements outside app/ that import afm's own modules


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


class Reference(NamedTuple):
    name: str  # the module (or module.attr) named
    line: int
    how: str  # import | string | f-string
    late: bool  # inside a function


def _functions(tree: ast.AST) -> dict[ast.AST, bool]:
    """Every node of ``tree`` -> whether it sits inside a function."""
    inside: dict[ast.AST, bool] = {}

    def visit(node: ast.AST, in_function: bool) -> None:
        inside[node] = in_function
        nested = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, nested)

    visit(tree, False)
    return inside


def references(module: str, path: Path, source: str | None = None) -> list[Reference]:
    """Every way ``module`` names project code."""
    out: list[Reference] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(source if source is not None else path.read_text(), str(path))
    late = _functions(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [Reference(a.name, node.lineno, "import", late[node]) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            out += [Reference(n, node.lineno, "import", late[node]) for n in names or [base]]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = TARGET.match(node.value.strip())
            if match:
                out.append(Reference(match.group(1), node.lineno, "string", late[node]))
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            head = str(node.values[0].value)
            if head.startswith("afm.") and NAME.match(head):
                out.append(Reference(NAME.match(head).group(0), node.lineno, "f-string", late[node]))
    return out


REFERENCES = {module: references(module, path) for module, path in MODULES.items()}


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


def disallowed() -> list[str]:
    found = []
    for module, refs in REFERENCES.items():
        for ref in refs:
            if area_of(ref.name) is not None and not may_import(module, ref.name):
                where = f"{MODULES[module].relative_to(ROOT)}:{ref.line}"
                found.append(f"{where} ({area_of(module).folder}) -> {ref.name} ({area_of(ref.name).folder}) by {ref.how}")
    for file, name, lineno in config_references():
        owner = module_name((ROOT / file).with_suffix(".py"))
        if not may_import(owner, name):
            found.append(f"{file}:{lineno} ({area_of(owner).folder}) -> {name} ({area_of(name).folder}) by config")
    return found


def test_the_areas_are_the_checkouts_folders_in_a_topological_order() -> None:
    assert AREAS[0].folder == "afm" and AREAS[0].uses == () and AREAS[-1].package == "afm.app"
    seen: set[str] = set()
    for area in AREAS:
        assert (ROOT / area.folder / "__init__.py").is_file(), area
        assert (ROOT / area.folder / "README.md").is_file(), area
        assert area.package == "afm" or area.package == f"afm.{area.folder}", area
        assert set(area.uses) <= seen, f"{area.folder} uses an area listed after it: {set(area.uses) - seen}"
        seen.add(area.folder)
    assert len(seen) == len(AREAS)
    assert set(AREAS[-1].uses) == seen - {"app"}, "the app sits on every area"


def test_the_checker_sees_every_kind_of_reference(tmp_path: Path) -> None:
    """The parser finds imports inside functions (marked late), relative imports,
    TYPE_CHECKING imports, ``module:attr`` strings and f-string module names (a checker
    that misses one is vacuous)."""
    probe = ROOT / "filters" / "_layer_probe.py"  # never written: parsed from a string below
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from afm.training.core import task\n"
        "def f():\n    from ..app import cli\n    return 'afm.evaluation.hook:x', f'afm.synth.{f}'\n"
        "import afm.pipelines.tokenize\n"
    )
    refs = references(module_name(probe), probe, source)
    found = {(r.name, r.how, r.late) for r in refs}
    assert {("afm.training.core.task", "import", False), ("afm.app.cli", "import", True),
            ("afm.evaluation.hook", "string", True), ("afm.synth", "f-string", True),
            ("afm.pipelines.tokenize", "import", False)} <= found, found
    assert not may_import("afm.filters.x", "afm.training.core") and not may_import("afm.filters.x", "afm.crawler.run")
    assert may_import("afm.filters.x", "afm.consent.robots") and may_import("afm.app.cli", "afm.filters.x")


def test_every_reference_is_allowed_by_the_map() -> None:
    found = disallowed()
    assert not found, "references the map (afm/areas.py) does not allow:\n" + "\n".join(found)


def test_every_declared_dependency_is_used() -> None:
    """The map tells the truth: an area that may use another does."""
    used: dict[str, set[str]] = defaultdict(set)
    for module, refs in REFERENCES.items():
        for ref in refs:
            target = area_of(ref.name)
            if target is not None and target != area_of(module):
                used[area_of(module).folder].add(target.folder)
    stale = {a.folder: sorted(set(a.uses) - used[a.folder]) for a in AREAS if set(a.uses) - used[a.folder]}
    assert not stale, f"declared in afm/areas.py but never used: {stale}"


def file_graph() -> dict[str, set[str]]:
    """Module -> the project modules it names (any kind of reference, late ones too)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, refs in REFERENCES.items():
        for ref in refs:
            target = known(ref.name)
            if target in MODULES and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_cycle_between_files() -> None:
    """No two files name each other, directly or around a loop, however late the import:
    an import inside a function does not make a cycle go away, it only hides it."""
    found = cycles(file_graph())
    assert not found, "files that import each other:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_imports_of_afm_sit_at_the_top() -> None:
    """An import inside a function hides a dependency from the reader; outside the app (whose
    command bodies import late to keep ``afm --help`` instant) one is left only where the
    module it names needs an extra the caller's host may not have."""
    statements = late = 0
    where = []
    for module, path in MODULES.items():
        if module.startswith("afm.app"):
            continue
        tree = ast.parse(path.read_text())
        inside = _functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    r.how == "import" and r.name.split(".")[0] == "afm"
                    for r in references(module, path, ast.unparse(node))):
                statements += 1
                if inside[node]:
                    late += 1
                    where.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert statements > 300
    assert late <= LATE_SHARE_MAX * statements, (
        f"{late} of {statements} imports of afm's modules sit inside functions:\n" + "\n".join(where))


def rooms_of(area_package: str) -> dict[str, set[str]]:
    """The room graph of one area: a room is a subfolder of the area, or one of its
    top-level modules (its ``__init__`` is left out: a package's own namespace)."""

    def room(name: str) -> str:
        rest = name[len(area_package) + 1:].split(".") if name != area_package else []
        return ".".join([area_package, *rest[:1]])

    graph: dict[str, set[str]] = defaultdict(set)
    for module, refs in REFERENCES.items():
        if area_of(module).package != area_package:
            continue
        for ref in refs:
            name = known(ref.name)
            if area_of(name) is None or area_of(name).package != area_package:
                continue
            a, b = room(module), room(name)
            if a != b and area_package not in (a, b):
                graph[a].add(b)
    return graph


@pytest.mark.parametrize("area", [a.package for a in AREAS])
def test_no_cycle_between_the_rooms_of_an_area(area: str) -> None:
    """Inside an area the rooms (subfolders and top-level modules) form no cycle either: in
    ``training``, for one, the engine (``core``) never names a task, and the front door
    that does (``runs``) is the one room above ``tasks``."""
    assert cycles(rooms_of(area)) == []


def _label(folder: str) -> str:
    return "core" if folder == "afm" else folder


def test_the_architecture_page_draws_the_declared_graph() -> None:
    """The picture cannot drift from ``afm/areas.py``: the diagram's arrows (``used -->
    user``) are exactly the declared dependencies, and the text picture lists every area."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    diagram = re.search(r"```mermaid\n(.*?)```", text, re.S).group(1)
    drawn = set(re.findall(r"^\s*(\w+) --> (\w+)\s*$", diagram, re.M))
    declared = {(_label(used), _label(a.folder)) for a in AREAS for used in a.uses}
    assert drawn == declared, (f"missing {sorted(declared - drawn)}, extra {sorted(drawn - declared)}")
    listed = {line.split()[0] for line in text.split("```")[3].strip().splitlines()}
    assert listed == {a.folder for a in AREAS}
    assert all(BY_FOLDER[f] for f in listed)
