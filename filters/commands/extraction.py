"""``afm extraction``: build the candidate tables, cross-validate and retrain the
extraction selector that ``afm curate`` ships with (``filters/extraction/``)."""

from __future__ import annotations

from pathlib import Path

import click

from afm.options import FRACTION, POSITIVE_INT

EPILOG = """\b
Examples:
  afm extraction table --wcxb ../wcxb --trafilatura ../trafilatura/tests --cache work/xsel
  afm extraction cv --cache work/xsel
  afm extraction train --cache work/xsel                 # rewrites the shipped model
  afm extraction train --cache work/xsel --out my-selector.json --slow-share 0.1

\b
Gold sets (each optional; at least two sources for `cv`):
  --scrapinghub DIR   ../shared/eval (its extraction/ folder: 181 ScrapingHub pages), the default
  --wcxb DIR          a WCXB checkout (dev/html, dev/ground-truth; the test split is never read)
  --trafilatura DIR   trafilatura's tests/ folder (evaldata.json, eval/, cache/)
`table` runs every candidate extractor once per page (minutes) and caches the outputs in
--cache; `cv` and `train` read that cache. Use a curated extractor model with
`afm curate --set extract.selector_path=FILE`.
"""


def _sets(scrapinghub: str | None, wcxb: str | None, trafilatura: str | None) -> dict:
    if scrapinghub is None:
        from afm.benchutil import find_shared_dir

        shared = find_shared_dir()
        scrapinghub = str(shared / "eval") if shared else None
    return {"scrapinghub": scrapinghub, "wcxb": wcxb, "trafilatura": trafilatura}


def _load_cache(cache: str) -> list[dict]:
    from afm.errors import UserError
    from afm.filters.extraction.table import load_rows

    files = sorted(Path(cache).glob("rows-*.jsonl.gz"))
    if not files:
        raise UserError(f"{cache}: no candidate tables (rows-*.jsonl.gz); run `afm extraction table`")
    return [row for f in files for row in load_rows(f)]


@click.group("extraction", epilog=EPILOG)
def extraction() -> None:
    """Train and cross-validate the learned main-text extraction (candidate choice)."""


@extraction.command("table", epilog=EPILOG)
@click.option("--scrapinghub", type=click.Path(file_okay=False, exists=True), help="../shared/eval (default when present).")
@click.option("--wcxb", type=click.Path(file_okay=False, exists=True), help="WCXB checkout (dev split).")
@click.option("--trafilatura", type=click.Path(file_okay=False, exists=True), help="trafilatura's tests/ folder.")
@click.option("--cache", required=True, type=click.Path(file_okay=False), help="Folder for the candidate tables.")
@click.option("--workers", default=1, show_default=True, type=POSITIVE_INT, help="Processes.")
@click.option("--limit", type=POSITIVE_INT, help="Pages per source (smoke runs).")
def table_cmd(scrapinghub: str | None, wcxb: str | None, trafilatura: str | None, cache: str,
              workers: int, limit: int | None) -> None:
    """Run every candidate extractor on the gold pages once; cache their outputs."""
    from afm.console import print_summary
    from afm.filters.extraction.gold import load_sets
    from afm.filters.extraction.table import build_rows, save_rows

    summary = {}
    for name, path in _sets(scrapinghub, wcxb, trafilatura).items():
        if path is None:
            continue
        pages = load_sets(**{name: Path(path)}, limit=limit)
        n = save_rows(build_rows(pages, workers), Path(cache) / f"rows-{name}.jsonl.gz")
        summary[f"{name} pages"] = n
    print_summary("candidate tables", {**summary, "cache": cache})


@extraction.command("cv", epilog=EPILOG)
@click.option("--cache", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--slow-share", default=0.2, show_default=True, type=FRACTION, help="Share of training pages that take the slow path.")
def cv_cmd(cache: str, slow_share: float) -> None:
    """Leave-one-source-out F1 of the selector next to every single candidate."""
    from afm.console import print_table
    from afm.filters.extraction.train import build_table, cross_validate_by_source, report_rows

    table = build_table(_load_cache(cache))
    results = cross_validate_by_source(table, slow_share)
    header, rows = report_rows(results)
    print_table(f"held-out F1 by set (leave one source out, slow share {slow_share})", header, rows)


@extraction.command("train", epilog=EPILOG)
@click.option("--cache", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--out", type=click.Path(dir_okay=False), help="Model file (default: the shipped one).")
@click.option("--slow-share", default=0.2, show_default=True, type=FRACTION, help="Share of training pages that take the slow path.")
def train_cmd(cache: str, out: str | None, slow_share: float) -> None:
    """Fit the selector on every cached page and write the model file."""
    from afm.console import print_summary
    from afm.filters.extraction.selector import MODEL_PATH
    from afm.filters.extraction.train import build_table, fit_selector

    rows = _load_cache(cache)
    table = build_table(rows)
    sets = sorted(set(table.sets))
    selector = fit_selector(table, range(len(rows)), slow_share,
                            meta={"trained_on": {s: table.sets.count(s) for s in sets}})
    path = Path(out) if out else MODEL_PATH
    selector.save(path)
    print_summary("extraction selector", {"pages": len(rows), "sets": len(sets),
                                          "gate (fast confidence)": selector.gate,
                                          "model": str(path)})


COMMANDS = [extraction]
