"""The project's areas and the dependencies allowed between them: the one place that lists them.

Each area is a top-level folder of the checkout installed under one import name
(``filters/`` is ``afm.filters``, ``sandbox/`` is ``afm.sandbox``). ``uses`` names the
areas an area may import, directly; nothing else is allowed, whether the import is at the
top of a file, inside a function, or a ``package.module:attr`` string handed to
:func:`afm.imports.resolve`. The allowed dependencies form a graph, not a line: the data
side (consent -> crawler, filters -> pipelines) and the model side (model -> training ->
evaluation) are two columns joined by ``synth`` (and by ``pipelines/tokenize.py``, which
loads the one tokenizer, ``model/text/tokenizer.py``), with the app on top of everything.
``AREAS`` lists the areas in one topological order (every area after those it uses).

``tests/unit/project/test_layers.py`` checks every file against this graph (and that every
declared dependency is used, so the map never claims more than the code does), and that no
two files import each other in a cycle; ``setup.py`` builds the package list from it; the
``afm`` command finds its commands and benchmarks in the app's folders in this order;
docs/architecture.md draws it.

Stdlib only: ``setup.py`` reads this file before anything is installed.
"""

from __future__ import annotations

from typing import NamedTuple


class Area(NamedTuple):
    folder: str  # top-level folder of the checkout
    summary: str  # what lives there, one line
    uses: tuple[str, ...] = ()  # folders of the areas this one may import (besides itself)

    @property
    def package(self) -> str:
        """The import name: ``afm`` for the core, ``afm.<folder>`` for every other area."""
        return "afm" if self.folder == "afm" else f"afm.{self.folder}"


AREAS: tuple[Area, ...] = (
    Area("afm", "core: configs, schemas, readers, the shard writer, filesystem, errors"),
    Area("sandbox", "running a program a model wrote behind a kernel boundary", ("afm",)),
    Area("consent", "publishers' rules: robots.txt, TDMRep, AI preferences, snapshots", ("afm",)),
    Area("model", "the AFM transformer (Flax NNX), tokenizer, sampling, checkpoints, export", ("afm",)),
    Area("crawler", "Scrapy daemon and batch fetcher: politeness, safety, frontier, WARC writer",
         ("afm", "consent")),
    Area("filters", "per-document logic: extraction, language, safety, PII, quality, MinHash",
         ("afm", "consent")),
    Area("pipelines", "Beam pipelines: fetch, curate (its stage registry), dedup, decontaminate, tokenize",
         ("afm", "consent", "model", "crawler", "filters")),
    Area("synth", "chat and synthetic data: sft prepare, math, code, tool use",
         ("afm", "sandbox", "model", "filters")),
    Area("training", "one trainer loop and its tasks: pre-training to MDLOO, compression",
         ("afm", "model", "synth")),
    Area("evaluation", "afm eval: the lm-eval backend, local benchmarks, judges, reports",
         ("afm", "sandbox", "model", "filters", "synth", "training")),
    Area("app", "the afm command, every command and benchmark, the demo, studies",
         ("afm", "sandbox", "consent", "model", "crawler", "filters", "pipelines", "synth",
          "training", "evaluation")),
)

BY_FOLDER: dict[str, Area] = {a.folder: a for a in AREAS}


def area_of(module: str) -> Area | None:
    """The area a dotted module name belongs to (longest package prefix), None outside afm."""
    best: Area | None = None
    for area in AREAS:
        if module == area.package or module.startswith(area.package + "."):
            if best is None or len(area.package) > len(best.package):
                best = area
    return best


def may_import(importer: str, imported: str) -> bool:
    """Whether module ``importer`` may name module ``imported`` (same area, or a declared use)."""
    a, b = area_of(importer), area_of(imported)
    if a is None or b is None:
        return True
    return a == b or b.folder in a.uses


def rank(module: str) -> int:
    """The index of ``module``'s area in the topological order (0 is the core); -1 outside."""
    area = area_of(module)
    return -1 if area is None else AREAS.index(area)


__all__ = ["AREAS", "Area", "BY_FOLDER", "area_of", "may_import", "rank"]
