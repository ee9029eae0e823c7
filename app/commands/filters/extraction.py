"""``afm extraction``: build the candidate tables, cross-validate and retrain the
extraction selector that ``afm curate`` ships with (``filters/extraction/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from afm.app.commands.options import POSITIVE_INT

EPILOG = """\b
Examples:
  afm extraction table --wcxb ../wcxb --trafilatura ../trafilatura/tests --cache work/xsel
  afm extraction cv --cache work/xsel --tsv cv.tsv
  afm extraction train --cache work/xsel                 # rewrites the shipped model

\b
Gold sets (each optional; `cv` needs all three sources, `train` two):
  --scrapinghub DIR   ../shared/eval (its extraction/ folder: 181 ScrapingHub pages), the default
  --wcxb DIR          a WCXB checkout (dev/html, dev/ground-truth; the test split is never read)
  --trafilatura DIR   trafilatura's tests/ folder (evaldata.json, eval/, cache/)
  --utomo DIR         Utomo & Leu's sets: the Extraction/ folder of MSVCode/ir-research-data
  --googletrends DIR  Google-Trends-2017 (BoilerNet's annotated pages): its datasets/googletrends/ folder
  --fundus DIR        a Fundus checkout (its parser test pages: news of ~180 publishers)
`table` runs every candidate extractor once per page (minutes) and caches the outputs in
--cache; `cv` and `train` read that cache (and cache their feature table there).
Use another selector model with
`afm curate --set extract.params.selector_path=FILE`.
"""


BLOCKS_EPILOG = """\b
Examples:
  afm extraction blocks table --wcxb ../wcxb --trafilatura ../trafilatura/tests --utomo ../utomo --googletrends ../boilernet/datasets/googletrends --cache work/xblocks --workers 2
  afm extraction blocks cv --cache work/xblocks --tsv blocks-cv.tsv --one-stage
  afm extraction blocks cv --cache work/xblocks --one-stage --sequence   # + trees and sequence net averaged
  afm extraction blocks train --cache work/xblocks      # rewrites filters/data/extraction/blocks.json
  afm extraction blocks cv --cache work/xblocks --net-only --headline drop --tsv cv.tsv   # the shipped procedure (trees + 3 nets)
  afm extraction blocks train --cache work/xblocks --net-only --nets 1    # one net: faster extraction
  afm extraction blocks train --cache work/xblocks --net-only --headline drop --source scrapinghub --source trafilatura --source utomo --source wcxb   # the shipped file: four sources, Google-Trends held out
  afm extraction blocks cv --cache work/xblocks --net-only --fallback resiliparse   # pages with too few kept words to Resiliparse

`table` cuts every gold page into blocks, labels them from the gold, and runs trafilatura
(defaults, no comments), Resiliparse and the cascade on the page for comparison and as
the page rules' fallbacks (minutes; an older cache gets only the texts it lacks); `cv` and
`train` read that cache. Gold sets as for `afm extraction table`.
"""


# The gold sets' options, by ``gold.LOADERS`` name (a test keeps the two in step; the
# package is not imported here, so ``--help`` stays fast).
GOLD_SET_HELP = {
    "scrapinghub": "../shared/eval (default when present).",
    "wcxb": "WCXB checkout (dev split).",
    "trafilatura": "trafilatura's tests/ folder.",
    "utomo": "Utomo & Leu's Extraction/ folder.",
    "googletrends": "Google-Trends-2017's folder (raw_html/).",
    "fundus": "Fundus checkout (or its tests/resources/parser/test_data folder).",
}
# ``--fallback``: ``block_model.FALLBACK_EXTRACTORS`` and none (a test keeps them in step).
FALLBACK_CHOICES = ("trafilatura", "resiliparse", "none")


def _gold_options(fn: Any) -> Any:
    for name, help_ in reversed(GOLD_SET_HELP.items()):
        fn = click.option(f"--{name}", type=click.Path(file_okay=False, exists=True), help=help_)(fn)
    return fn


def _gold_pages(gold: dict[str, str | None], limit: int | None) -> Any:
    """(name, pages) of every gold set given by name (ScrapingHub's from ../shared when
    its option is not given and ../shared is present)."""
    from afm.filters.extraction.gold import load_sets

    if gold.get("scrapinghub") is None:
        from afm.shared_data import find_shared_dir

        shared = find_shared_dir()
        gold = {**gold, "scrapinghub": str(shared / "eval") if shared else None}
    for name in GOLD_SET_HELP:  # in ``LOADERS``' order, whatever the command line's
        if gold.get(name) is not None:
            yield name, load_sets(**{name: Path(gold[name])}, limit=limit)


def _load_cache(cache: str) -> list[dict]:
    from afm.errors import UserError
    from afm.filters.extraction.table import load_rows

    files = sorted(Path(cache).glob("rows-*.jsonl.gz"))
    if not files:
        raise UserError(f"{cache}: no candidate tables (rows-*.jsonl.gz); run `afm extraction table`")
    return [row for f in files for row in load_rows(f)]


def _table(cache: str) -> Any:
    """The feature table of the cached rows, itself cached (``table.pkl``, rebuilt when a
    rows file is newer): building it costs minutes, a fit seconds."""
    import pickle

    from afm.filters.extraction.train import VOTE_SPEC, add_votes, build_table

    files = sorted(Path(cache).glob("rows-*.jsonl.gz"))
    path = Path(cache) / "table.pkl"
    if path.exists() and all(f.stat().st_mtime <= path.stat().st_mtime for f in files):
        table = pickle.loads(path.read_bytes())
        if table.vote == VOTE_SPEC:
            return table
        table = add_votes(table, _load_cache(cache))  # a table from before the vote
    else:
        table = build_table(_load_cache(cache))
    path.write_bytes(pickle.dumps(table))
    return table


@click.group("extraction", epilog=EPILOG)
def extraction() -> None:
    """Train and cross-validate the learned main-text extraction (candidate choice)."""


@extraction.command("table", epilog=EPILOG)
@_gold_options
@click.option("--cache", required=True, type=click.Path(file_okay=False), help="Folder for the candidate tables.")
@click.option("--workers", default=1, show_default=True, type=POSITIVE_INT, help="Processes.")
@click.option("--limit", type=POSITIVE_INT, help="Pages per source (smoke runs).")
def table_cmd(cache: str, workers: int, limit: int | None, **gold: str | None) -> None:
    """Run every candidate extractor on the gold pages once; cache their outputs."""
    from afm.console import print_summary
    from afm.filters.extraction.table import build_rows, save_rows

    summary = {}
    for name, pages in _gold_pages(gold, limit):
        n = save_rows(build_rows(pages, workers), Path(cache) / f"rows-{name}.jsonl.gz")
        summary[f"{name} pages"] = n
    print_summary("candidate tables", {**summary, "cache": cache})


@extraction.command("cv", epilog=EPILOG)
@click.option("--cache", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--tsv", type=click.Path(dir_okay=False), help="Also write the table as TSV (the README's source).")
@click.option("--nested", is_flag=True, help="Choose the vote's panel too (with the gate) on the "
              "other sources only, per held-out source; adds a paired bootstrap over pages.")
@click.option("--workers", default=1, show_default=True, type=POSITIVE_INT,
              help="Processes for the panels' vote columns (--nested).")
def cv_cmd(cache: str, tsv: str | None, nested: bool, workers: int) -> None:
    """Leave-one-source-out F1 of the selector (fast path + vote) next to every single candidate."""
    from afm.console import print_table
    from afm.filters.extraction.train import cross_validate_by_source, report_rows

    if nested:
        from afm.filters.extraction import nested as nest

        configs = nest.grid()
        table = nest.add_vote_columns(_table(cache), _load_cache(cache), configs, workers)
        header, rows = nest.report_rows(nest.nested_cv(table, configs))
        print_table("held-out F1 by source, every choice nested", header, rows)
    else:
        header, rows = report_rows(cross_validate_by_source(_table(cache)))
        print_table("held-out F1 by set (leave one source out)", header, rows)
    if tsv:
        Path(tsv).write_text("\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n",
                             encoding="utf-8")


@extraction.command("train", epilog=EPILOG)
@click.option("--cache", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--out", type=click.Path(dir_okay=False), help="Model file (default: the shipped one).")
def train_cmd(cache: str, out: str | None) -> None:
    """Choose the fast path's gate by set (the slow path is the vote), write the model."""
    from afm.console import print_summary
    from afm.filters.extraction.selector import MODEL_PATH
    from afm.filters.extraction.train import fit_selector

    table = _table(cache)
    sets = sorted(set(table.sets))
    selector = fit_selector(table, range(len(table.sets)),
                            meta={"trained_on": {s: table.sets.count(s) for s in sets}})
    path = Path(out) if out else MODEL_PATH
    selector.save(path)
    print_summary("extraction selector", {"pages": len(table.sets), "sets": len(sets),
                                          "gate (fast agreement)": selector.gate,
                                          "slow path": (f"vote: {selector.reference} + lines "
                                                        f"{selector.min_votes} of "
                                                        f"{len(selector.voters)} voters hold")
                                          if selector.votes else f"switch, tau {selector.tau}",
                                          "model": str(path)})


@extraction.group("blocks", epilog=BLOCKS_EPILOG)
def blocks() -> None:
    """The block extractor (lexbor DOM + learned block model): records, nested CV, training."""


@blocks.command("table", epilog=BLOCKS_EPILOG)
@_gold_options
@click.option("--cache", required=True, type=click.Path(file_okay=False), help="Folder for the records.")
@click.option("--workers", default=1, show_default=True, type=POSITIVE_INT, help="Processes.")
@click.option("--limit", type=POSITIVE_INT, help="Pages per source (smoke runs).")
def blocks_table_cmd(cache: str, workers: int, limit: int | None, **gold: str | None) -> None:
    """Cut every gold page into labelled blocks, run trafilatura and the cascade on it; cache."""
    from afm.console import print_summary
    from afm.filters.extraction.block_train import build_cache

    summary = {}
    for name, pages in _gold_pages(gold, limit):
        summary[f"{name} pages"] = build_cache(pages, Path(cache), name, cascade_text, workers)
    print_summary("block records", {**summary, "cache": cache})


_CASCADE: Any = None


def cascade_text(html: str, url: str | None) -> str:
    """The extract stage's text of a decoded page with the default cascade (the block
    records' comparison; top-level so worker processes can receive it)."""
    global _CASCADE
    if _CASCADE is None:
        from afm.filters.extract import ExtractConfig, Extractor

        _CASCADE = Extractor(ExtractConfig(method="selector", early_language=[]))
    return _CASCADE.extract_text(html, url)[0]


def _variants(one_stage: bool, sequence: bool, net_only: bool = False) -> tuple[str, ...]:
    """The block model variants ``block_train.choose`` tries."""
    if net_only:
        return ("mix",)
    return ("one",) + (() if one_stage else ("two",)) + (("mix",) if sequence else ())


_SOURCE_HELP = ("Only this source's pages of the cache (repeat it; default: every source there), e.g. "
                "the four training sources of a cache that also holds Google-Trends. The cache's fits "
                "stay valid: they are kept by the sources they were fitted on.")


HEADLINE_CHOICES = ("choose", "drop")


def _choice(variants: tuple[str, ...], fallbacks: tuple[str, ...], max_fallback_share: float | None,
            lead_rule: bool = True, headline: str = "choose") -> Any:
    """The ``block_train.Choice`` of a command's options: the variants, the page rules of
    ``--fallback``, ``--lead-rule/--no-lead-rule`` and ``--headline``, and
    ``--max-fallback-share`` (absent: the choice's default)."""
    from afm.filters.extraction.block_train import Choice

    cap = {} if max_fallback_share is None else {"max_fallback_share": max_fallback_share}
    return Choice(variants=variants, rules=tuple(_page_rules(fallbacks, lead_rule, headline)), **cap)


def _page_rules(fallbacks: tuple[str, ...], lead_rule: bool = True, headline: str = "choose") -> list[Any]:
    """The page rules of ``--fallback`` (absent: ``block_train.DEFAULT_FALLBACKS``; ``none``
    with an extractor is refused as contradictory), without the lead rule on request, the
    headline rule chosen or always on (``--headline``)."""
    from afm.filters.extraction.block_train import DEFAULT_FALLBACKS, HEADLINES, LEADS, page_rules

    if "none" in fallbacks and len(set(fallbacks)) > 1:
        raise click.BadParameter("`none` cannot be named with an extractor", param_hint="--fallback")
    if headline not in HEADLINE_CHOICES:
        raise click.BadParameter(f"{headline!r}: use {' or '.join(HEADLINE_CHOICES)}", param_hint="--headline")
    named = tuple(n for n in fallbacks if n != "none") if fallbacks else DEFAULT_FALLBACKS
    return page_rules(named, LEADS if lead_rule else (None,), HEADLINES if headline == "choose" else (True,))


def _block_records(cache: str, sources: tuple[str, ...]) -> list[Any]:
    """The cache's block records, only those of ``sources`` when some are named."""
    from afm.errors import UserError
    from afm.filters.extraction.block_train import load_records
    from afm.filters.extraction.train import source_of

    records = load_records(Path(cache))
    if not sources:
        return records
    held = {source_of(r.set) for r in records}
    missing = sorted(set(sources) - held)
    if missing:
        raise UserError(f"{cache}: no pages of {', '.join(missing)} (it holds {', '.join(sorted(held))})")
    return [r for r in records if source_of(r.set) in sources]


_NET_ONLY_HELP = ("Choose among the trees averaged with the sequence net only (not the trees alone "
                  "nor the context stage): near-equal settings of both made the choice flip between "
                  "folds; implies --sequence.")
_FALLBACK_HELP = ("The extractor the page rules may hand a page with too few kept words to (repeat "
                  "it to let the choice take either; `none`: only rules that never hand a page on) "
                  "[default: resiliparse; trafilatura before 2026-12-07]. Resiliparse's main-content "
                  "text costs under half a block page; a page trafilatura takes costs ~5x one, so 3% "
                  "of the pages cost the extractor a fifth of its speed. Written into the model file, "
                  "so the extract stage runs the text the choice scored.")
_MAX_FALLBACK_HELP = ("The largest share of the held-out pages a chosen setting may hand to the fallback "
                      "[default: 0.03]. A trafilatura page costs ~5x a block page: at 5.5x trafilatura's "
                      "speed, 2% of the pages bring the extractor to 5x.")
_LEAD_RULE_HELP = ("Let the choice try the lead rule (kept blocks above the first kept block of 10+ "
                   "words dropped: a headline, byline or date line) [default: on]. Off: only rules "
                   "that keep them (tried 2026-12-08 and not adopted: a fold's loss on ScrapingHub "
                   "came from the headline choice, not this rule).")
_HEADLINE_HELP = ("`choose`: the choice tries the page rules with and without the headline dropped "
                  "(kept h1 blocks above the text; the record carries the title apart); `drop`: "
                  "every rule drops it, trafilatura's convention and the news gold sets' "
                  "[default: choose].")
_NETS_HELP = ("How many sequence nets (seeds 0, 1, ...) are averaged [default: 3]. Each is a fit "
              "per set of training sources and adds ~0.6 ms a page to extraction; one net's seed "
              "moved a held-out set's F1 by 0.016.")


def _page_rule_options(fn: Any) -> Any:
    """``--lead-rule/--no-lead-rule`` and ``--headline``: the page-rule grid of ``cv`` and ``train``."""
    fn = click.option("--headline", type=click.Choice(HEADLINE_CHOICES), default="choose", help=_HEADLINE_HELP)(fn)
    return click.option("--lead-rule/--no-lead-rule", default=True, help=_LEAD_RULE_HELP)(fn)


@blocks.command("cv", epilog=BLOCKS_EPILOG)
@click.option("--cache", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--tsv", type=click.Path(dir_okay=False), help="Also write the table as TSV.")
@click.option("--one-stage", is_flag=True, help="Choose only the threshold and the page rule (no "
              "context stage); fewer fits.")
@click.option("--sequence", is_flag=True, help="Also try the trees averaged with a sequence net "
              "over the page's blocks (a JAX fit per set of training sources: ten with four "
              "sources, fifteen with five; minutes each).")
@click.option("--net-only", is_flag=True, help=_NET_ONLY_HELP)
@click.option("--nets", type=click.IntRange(1, 8), help=_NETS_HELP)
@click.option("--fallback", "fallbacks", multiple=True,
              type=click.Choice(FALLBACK_CHOICES), help=_FALLBACK_HELP)
@click.option("--max-fallback-share", type=click.FloatRange(0, 1), help=_MAX_FALLBACK_HELP)
@_page_rule_options
@click.option("--source", "sources", multiple=True, type=click.Choice(list(GOLD_SET_HELP)),
              help=_SOURCE_HELP)
@click.option("--verbose", is_flag=True, help="Print every inner fold's figure.")
def blocks_cv_cmd(cache: str, tsv: str | None, one_stage: bool, sequence: bool, net_only: bool,
                  nets: int | None, fallbacks: tuple[str, ...], max_fallback_share: float | None,
                  lead_rule: bool, headline: str, sources: tuple[str, ...], verbose: bool) -> None:
    """Nested leave-one-source-out F1 of the block extractor next to trafilatura and the cascade."""
    from afm.console import console, print_table
    from afm.filters.extraction.block_train import Fits, cross_validate, report_rows

    choice = _choice(_variants(one_stage, sequence, net_only), fallbacks, max_fallback_share,
                     lead_rule, headline)
    records = _block_records(cache, sources)
    log = console.print if verbose else None
    results = cross_validate(records, choice, log, Fits(records, log, Path(cache), nets))
    header, rows = report_rows(results)
    print_table("held-out F1 by source (nested leave one source out)", header, rows)
    if tsv:
        Path(tsv).write_text("\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n",
                             encoding="utf-8")


@blocks.command("train", epilog=BLOCKS_EPILOG)
@click.option("--cache", required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--out", type=click.Path(dir_okay=False), help="Model file (default: the shipped one).")
@click.option("--one-stage", is_flag=True, help="Choose only the threshold (no context stage: what "
              "the nested cross-validation chose in every fold); fewer fits.")
@click.option("--sequence", is_flag=True, help="Also try the trees averaged with a sequence net "
              "over the page's blocks.")
@click.option("--net-only", is_flag=True, help=_NET_ONLY_HELP)
@click.option("--nets", type=click.IntRange(1, 8), help=_NETS_HELP)
@click.option("--fallback", "fallbacks", multiple=True,
              type=click.Choice(FALLBACK_CHOICES), help=_FALLBACK_HELP)
@click.option("--max-fallback-share", type=click.FloatRange(0, 1), help=_MAX_FALLBACK_HELP)
@_page_rule_options
@click.option("--source", "sources", multiple=True, type=click.Choice(list(GOLD_SET_HELP)),
              help=_SOURCE_HELP)
@click.option("--verbose", is_flag=True, help="Print every fit and inner figure.")
def blocks_train_cmd(cache: str, out: str | None, one_stage: bool, sequence: bool, net_only: bool,
                     nets: int | None, fallbacks: tuple[str, ...], max_fallback_share: float | None,
                     lead_rule: bool, headline: str, sources: tuple[str, ...], verbose: bool) -> None:
    """Choose the settings by source, fit the block model on every page, write it."""
    from afm.console import print_summary
    from afm.filters.extraction.block_model import MODEL_PATH
    from afm.filters.extraction.block_train import Fits, describe_rule, fit_model

    choice = _choice(_variants(one_stage, sequence, net_only), fallbacks, max_fallback_share,
                     lead_rule, headline)
    records = _block_records(cache, sources)
    sets = sorted({r.set for r in records})
    from afm.console import console

    log = console.print if verbose else None
    model = fit_model(records, range(len(records)), Fits(records, log, Path(cache), nets),
                      meta={"trained_on": {s: sum(r.set == s for r in records) for s in sets}},
                      choice=choice, log=log)
    path = Path(out) if out else MODEL_PATH
    model.save(path)
    print_summary("block extraction model", {"pages": len(records), "sets": len(sets),
                                             "threshold": model.threshold,
                                             "trees": len(model.forest.feature),
                                             "variant": model.meta.get("variant", "one"),
                                             "sequence nets": len(model.sequence or ()),
                                             "page rule": describe_rule(model.rule),
                                             "model": str(path)})


COMMANDS = [extraction]
