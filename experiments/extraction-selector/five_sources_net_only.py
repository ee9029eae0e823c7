"""Issue 57: the shipped procedure's nested cross-validation on five sources, pooled over four.

    python experiments/extraction-selector/five_sources_net_only.py CACHE OUT

``afm extraction blocks cv --cache CACHE --net-only`` (trees + net, the 120-rule grid; every
source of CACHE, here the four training sources and Google-Trends-2017), printed the same way,
plus each outer fold's chosen setting and the F1 pooled over the four old sources' pages alone
(the figure the decision to train on Google-Trends is taken on: the command pools all five).
Writes OUT/cv5.tsv and OUT/cv5.pkl (every held-out page's counts, each fold's model meta)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import BlockModel
from afm.filters.extraction.gold import extraction_scores

NEW_SOURCE = "googletrends"


def main(cache: Path, out: Path) -> None:
    records = bt.load_records(cache)
    nested_table(records, bt.Fits(records, print, cache), out)


def nested_table(records: list[bt.PageRecord], fits: bt.Fits, out: Path) -> None:
    """The nested run on ``records`` with ``fits``, its table and the old four's pool
    printed, OUT/cv5.tsv and OUT/cv5.pkl written."""
    models: list[BlockModel] = []
    fit_model = bt.fit_model

    def kept(*args: Any, **kwargs: Any) -> BlockModel:
        """``fit_model``, each outer fold's model kept (``cross_validate`` calls it once a fold)."""
        model = fit_model(*args, **kwargs)
        models.append(model)
        return model

    bt.fit_model = kept
    try:
        results = bt.cross_validate(records, bt.Choice(("mix",), rules=tuple(bt.page_rules(("trafilatura",)))),
                                    log=print, fits=fits)  # the rules of its day
    finally:
        bt.fit_model = fit_model
    header, rows = bt.report_rows(results)
    table = "\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n"
    print(table)
    (out / "cv5.tsv").write_text(table)
    held_rows: dict[int, tuple[str, str, str, tuple[float, float, float]]] = {}
    for (held, test), model in zip(bt.sources_of(records).items(), models):
        probs = {i: model.probability(records[i].table) for i in test}
        for i, row in bt.page_rows(records, probs, model.threshold, model.rule).items():
            held_rows[i] = (records[i].set, records[i].id, held, row)
        print("fold", held, model.meta["variant"], model.threshold, bt.describe_rule(model.rule),
              "comment words", model.rule.comment_words)
    old = [i for i, v in held_rows.items() if v[2] != NEW_SOURCE]
    pooled = {"blocks": [held_rows[i][3] for i in old],
              **{b: list(bt.baseline_rows(records, b, old).values()) for b in bt.BASELINES}}
    for name, page_counts in pooled.items():
        print("pooled over the old sources", name, extraction_scores(page_counts), len(page_counts))
    with open(out / "cv5.pkl", "wb") as f:
        pickle.dump({"rows": held_rows, "models": [m.meta for m in models]}, f)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
