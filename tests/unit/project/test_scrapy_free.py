"""``pipelines`` may use ``crawler`` (``afm fetch`` runs the crawler's batch fetcher on Beam
workers), but a Beam worker installs the ``curate`` extra, not Scrapy: every crawler module
a pipeline imports, and every afm module those import in turn, names no Scrapy, Twisted or
scrapy-redis anywhere (at the top of the file or inside a function), and the crawler's
``__init__.py`` imports nothing (docs/architecture.md, "Crawling inside a pipeline")."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

FORBIDDEN = ("scrapy", "scrapy_redis", "twisted", "protego")


def _module_path(name: str) -> Path | None:
    """The file of an afm module (``afm.crawler.x`` is ``crawler/x.py``, ``afm.fs`` is
    ``afm/fs.py``); None for anything outside afm or a name that is an attribute."""
    parts = name.split(".")
    if parts[0] != "afm":
        return None
    for base in (ROOT.joinpath(*parts[1:]), ROOT.joinpath("afm", *parts[1:])):
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if base != ROOT and candidate.is_file():
                return candidate
    return None


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(ROOT).with_suffix("").parts
    package = ".".join(["afm", *rel[:-1]])  # the package relative imports start from
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            out.append(base)
            out += [f"{base}.{a.name}" for a in node.names]
    return out


def _crawler_modules_used_by_pipelines() -> set[str]:
    used = set()
    for path in (ROOT / "pipelines").rglob("*.py"):
        used |= {n for n in _imports(path) if n.startswith("afm.crawler")}
    return used


def test_what_pipelines_import_from_the_crawler_needs_no_scrapy() -> None:
    todo = sorted(_crawler_modules_used_by_pipelines())
    assert todo, "pipelines no longer use the crawler: drop the dependency from afm/areas.py"
    seen: set[Path] = set()
    offenders = []
    while todo:
        path = _module_path(todo.pop())
        if path is None or path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            if name.split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
            elif name.startswith("afm."):
                todo.append(name)
    assert not offenders, offenders
    assert ROOT / "crawler" / "batch" / "fetcher.py" in seen


def test_the_crawler_package_itself_imports_nothing() -> None:
    assert _imports(ROOT / "crawler" / "__init__.py") == []
