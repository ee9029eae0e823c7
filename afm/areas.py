"""The project's areas and their layer order: the one place that lists them.

Each area is a top-level folder of the checkout installed under one import name
(``filters/`` is ``afm.filters``). The order is the layer order, bottom to top: a module
may import from its own area and from areas below it, never from one above, whether the
import is at the top of a file, inside a function, or a ``package.module:attr`` string
handed to :func:`afm.imports.resolve`. ``tests/unit/project/test_layers.py`` checks every
module against it; ``setup.py`` builds the package list from it; the ``afm`` command finds
its commands and benchmarks in the app's folders in this order; docs/architecture.md draws it.

Stdlib only: ``setup.py`` reads this file before anything is installed.
"""

from __future__ import annotations

from typing import NamedTuple


class Area(NamedTuple):
    folder: str  # top-level folder of the checkout
    summary: str  # what lives there, one line

    @property
    def package(self) -> str:
        """The import name: ``afm`` for the core, ``afm.<folder>`` for every other area."""
        return "afm" if self.folder == "afm" else f"afm.{self.folder}"


AREAS: tuple[Area, ...] = (
    Area("afm", "core: configs, schemas, readers, the shard writer, filesystem, errors, the code sandbox"),
    Area("model", "the AFM transformer (Flax NNX), tokenizer, sampling, checkpoints, export"),
    Area("crawler", "Scrapy daemon, robots.txt and opt-out policy, frontier, WARC writer"),
    Area("filters", "per-document logic: extraction, language, safety, PII, quality, MinHash"),
    Area("pipelines", "Beam pipelines: curate, dedup, decontaminate, tokenize"),
    Area("synth", "chat and synthetic data: sft prepare, math, code, tool use"),
    Area("training", "one trainer loop and its tasks: pre-training to MDLOO, compression"),
    Area("evaluation", "afm eval: the lm-eval backend, local benchmarks, judges, reports"),
    Area("app", "the afm command, every command and benchmark, the demo, studies"),
)


def area_of(module: str) -> Area | None:
    """The area a dotted module name belongs to (longest package prefix), None outside afm."""
    best: Area | None = None
    for area in AREAS:
        if module == area.package or module.startswith(area.package + "."):
            if best is None or len(area.package) > len(best.package):
                best = area
    return best


def rank(module: str) -> int:
    """The layer index of ``module`` (0 is the core); -1 outside the project."""
    area = area_of(module)
    return -1 if area is None else AREAS.index(area)


__all__ = ["AREAS", "Area", "area_of", "rank"]
