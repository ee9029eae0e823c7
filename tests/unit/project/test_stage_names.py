"""A curate stage is one object (``afm.pipelines.curate.stages``): no code outside a stage's own
modules (its implementation, its config and its hooks) branches on the stage's name, so a
new stage needs no edit anywhere else (``tests/integration/pipelines/curate/test_a_new_stage.py``
adds one)."""

from __future__ import annotations

import ast
from pathlib import Path

from afm.imports import split_target
from afm.pipelines.curate.stages import REGISTRY
from tests.paths import ROOT

# Where stages are run, shown and configured: the curate pipeline and its commands, the
# filters, and the per-page view. (Elsewhere the same words name other things: a source
# called "code", an evaluation family called "safety", the "math" module of Python.)
SCOPE = ("pipelines", "filters", "app/commands/pipelines", "app/commands/filters")
SOURCE_NAMES = ("source",)  # `source == "code"` compares a source (what is read), not a stage


def own_files(stage) -> set[Path]:
    modules = {split_target(t)[0] for t in (stage.implementation, stage.config, *stage.hooks().values())}
    files = set()
    for module in modules:
        parts = module.split(".")[1:]  # afm.<area>.<...>
        base = ROOT.joinpath(*parts)
        files |= {base.with_suffix(".py"), base / "__init__.py"}
    return files


def named_in_conditions(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) for every stage name compared in a condition of ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_identifier(op) in SOURCE_NAMES for op in operands):
                continue
            values = []
            for op in operands:
                if isinstance(op, ast.Constant):
                    values.append(op.value)
                elif isinstance(op, (ast.Tuple, ast.List, ast.Set)):
                    values += [e.value for e in op.elts if isinstance(e, ast.Constant)]
            found += [(node.lineno, v) for v in values if isinstance(v, str) and v in names]
        elif isinstance(node, ast.MatchValue) and isinstance(node.value, ast.Constant):
            if node.value.value in names:
                found.append((node.lineno, node.value.value))
    return found


def _identifier(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def test_no_stage_name_in_a_condition_outside_its_own_modules() -> None:
    names = {s.name for s in REGISTRY}
    own = {s.name: own_files(s) for s in REGISTRY}
    found = []
    for scope in SCOPE:
        target = ROOT / scope
        for path in [target] if target.is_file() else sorted(target.rglob("*.py")):
            for line, name in named_in_conditions(path, names):
                if path not in own[name]:
                    found.append(f"{path.relative_to(ROOT)}:{line}: {name!r}")
    assert not found, "code that branches on a stage's name outside the stage's modules:\n" + "\n".join(found)


def test_the_checker_sees_a_branch_on_a_name(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f(s):\n    if s.name == 'dedup' or s in ('pii', 'x'):\n        return 1\n"
                     "    match s:\n        case 'optout':\n            return 2\n")
    assert named_in_conditions(probe, {"dedup", "pii", "optout"}) == [(2, "dedup"), (2, "pii"), (5, "optout")]
