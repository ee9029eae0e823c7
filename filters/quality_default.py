"""How the shipped default quality model is made: real pages, a choice made on held-out
sites, and a test on pages from other sets that neither the new nor the old model saw.

The recipe (``afm quality train-default`` runs it; ``data/quality/README.md`` has its
figures and the licences):

1. **Data**: WCXB's development split (human-reviewed main content of 1,497 pages of
   seven types, CC-BY-4.0). Label ``hq``: the content of article and documentation pages.
   Label ``cc``: every page's boilerplate (:func:`~afm.filters.quality_eval.content_and_boilerplate`)
   and the content of product, service, collection and listing pages (thin, commercial
   or link-list text). Forum content is left out of both classes (its value varies too
   much to call either way).
2. **Choice**: a small grid of fastText settings, each trained on 80% of the sites and
   scored by AUC on the other 20% (whole sites held out: :func:`split_by_domain`); the
   best one's score cut of best balanced accuracy on those sites becomes the model's
   threshold (stored in its sidecar, used when a config names none).
3. **Final model**: the chosen settings trained on every site, quantized (``.ftz``).
4. **Test**: AUC (content vs boilerplate) on the sets given as held out (the ScrapingHub
   article benchmark, Utomo & Leu's pages), for the new model and the baseline side by
   side; the figures go into the model's sidecar metadata.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from afm.filters.classifier import FastTextClassifier, metadata_path, train_classifier
from afm.filters.quality_eval import LabelledText, ModelScore, auc, compare_models, split_by_domain
from afm.filters.quality_model import sidecar_threshold

POSITIVE_SETS = ("wcxb-article", "wcxb-documentation")
NEGATIVE_CONTENT_SETS = ("wcxb-product", "wcxb-service", "wcxb-collection", "wcxb-listing")
LABEL_POS, LABEL_NEG = "hq", "cc"
# The grid searched on held-out sites: fastText's main knobs at sizes that ship small.
GRID: tuple[dict[str, Any], ...] = tuple(
    {"epoch": epoch, "lr": lr, "wordNgrams": ngrams, "dim": 32}
    for epoch in (5, 15) for lr in (0.1, 0.5) for ngrams in (1, 2)
)


@dataclass
class DefaultReport:
    """What ``train-default`` measured; stored in the model's sidecar metadata."""

    chosen: dict[str, Any]
    validation: list[dict[str, Any]]  # one row per grid point: params, AUC on held-out sites
    counts: dict[str, int]
    test: list[ModelScore] = field(default_factory=list)

    def as_metadata(self) -> dict[str, Any]:
        return {"chosen": self.chosen, "validation": self.validation, "counts": self.counts,
                "test": [asdict(t) for t in self.test]}


def _texts(items: Sequence[LabelledText], label: int) -> list[str]:
    return [x.text for x in items if x.label == label]


def balanced_threshold(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The cut that maximises balanced accuracy (the mean of the recall of each class),
    so the two classes' sizes in the data do not move the threshold."""
    import numpy as np

    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(bool)
    best, best_value = 0.5, -1.0
    for cut in np.unique(s):
        value = (np.mean(s[y] >= cut) + np.mean(s[~y] < cut)) / 2
        if value > best_value:
            best, best_value = float(cut), float(value)
    return best


def choose_settings(items: Sequence[LabelledText], *, held_out: float = 0.2, seed: int = 0,
                    grid: Sequence[dict[str, Any]] = GRID,
                    log: Callable[[str], None] = lambda _m: None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The grid point with the best AUC on held-out sites (with, under ``threshold``, the
    score cut of best balanced accuracy there), and every point's AUC."""

    train, val = split_by_domain(items, held_out, seed)
    labels = [x.label for x in val]
    rows = []
    with tempfile.TemporaryDirectory(prefix="afm-quality-grid-") as tmp:
        for i, params in enumerate(grid):
            path = Path(tmp) / f"grid{i}.bin"
            train_classifier(_texts(train, 1), _texts(train, 0), path, label_pos=LABEL_POS,
                             label_neg=LABEL_NEG, held_out=0.0, seed=seed, quantize=False,
                             verbose=False, **params)
            scores = FastTextClassifier(path).score([x.text for x in val])
            value = auc(scores, labels)
            rows.append({**params, "val_auc": round(value, 4),
                         "val_threshold": round(balanced_threshold(scores, labels), 4)})
            log(f"grid {i + 1}/{len(grid)}: {params} -> held-out-site AUC {value:.4f}")
    best = max(rows, key=lambda r: r["val_auc"])
    chosen = {k: v for k, v in best.items() if not k.startswith("val_")}
    return {**chosen, "threshold": best["val_threshold"]}, rows


def train_default(items: Sequence[LabelledText], out: str | Path, *,
                  tests: dict[str, Sequence[LabelledText]], baselines: dict[str, str],
                  seed: int = 0, grid: Sequence[dict[str, Any]] = GRID,
                  sources: list[dict[str, str]] | None = None,
                  log: Callable[[str], None] = lambda _m: None) -> DefaultReport:
    """Steps 2-4 of the recipe on ``items`` (the labelled training texts): choose, train
    the final model at ``out``, test it and every model of ``baselines`` (name -> path)
    on ``tests`` (set name -> labelled texts), and write the report (plus ``sources``)
    into the model's sidecar metadata."""

    chosen, rows = choose_settings(items, seed=seed, grid=grid, log=log)
    log(f"chosen on held-out sites: {chosen}")
    out = Path(out)
    train_classifier(_texts(items, 1), _texts(items, 0), out, label_pos=LABEL_POS, label_neg=LABEL_NEG,
                     held_out=0.0, seed=seed, verbose=False, **chosen)
    counts = {"hq": sum(x.label == 1 for x in items), "cc": sum(x.label == 0 for x in items),
              "sites": len({x.domain for x in items})}
    report = DefaultReport(chosen, rows, counts)
    models = {"new": str(out), **baselines}

    scorers = {name: FastTextClassifier(path).score for name, path in models.items()}
    thresholds = {name: sidecar_threshold(path) for name, path in models.items()}  # each its own
    for set_name, test_items in tests.items():
        report.test.extend(compare_models(scorers, test_items, set_name=set_name, threshold=thresholds))
    meta_file = metadata_path(out)
    meta = {k: v for k, v in json.loads(meta_file.read_text()).items()
            if not (isinstance(v, float) and v != v)}  # no NaN: nothing was held out of this fit
    meta.update({"heldout_real_pages": report.as_metadata(), "sources": sources or [],
                 "heldout_auc": {t.set: {r.model: round(r.auc, 4) for r in report.test if r.set == t.set}
                                 for t in report.test}})
    meta_file.write_text(json.dumps(meta, indent=2, sort_keys=True, default=float) + "\n")
    return report


__all__ = ["GRID", "LABEL_NEG", "LABEL_POS", "NEGATIVE_CONTENT_SETS", "POSITIVE_SETS", "DefaultReport",
           "choose_settings", "train_default"]
