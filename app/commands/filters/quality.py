"""``afm quality``: the quality stage on files, labels from a judge or a scorer, and the
quality models compared on labelled real pages.

(``afm classifier train`` trains any fastText classifier, from labels this group writes
too; this group holds what is specific to quality.)
"""

from __future__ import annotations

from typing import Any

import click

from afm.app.commands.filters.quality_audit import audit_cmd, junk_cmd
from afm.app.commands.options import (
    FRACTION,
    POSITIVE,
    POSITIVE_INT,
    PROBABILITY_OPEN,
    SEED,
    Number,
)
from afm.app.commands.pipelines.output_options import output_policy_options

FILTER_EPILOG = """\b
Examples:
  afm quality filter docs.parquet --output out/
  afm quality filter crawl/*.jsonl --output out/ --top-fraction 0.3
  afm quality filter docs.parquet --output out/ --no-model --set fineweb=false
  afm quality filter docs.parquet --output out/ --model my_quality.ftz --threshold 0.7
  afm quality filter docs.parquet --output out/ --model dclm_fasttext.bin --label-pos hq
  afm quality filter docs.parquet --output out/ --model fineweb-edu-classifier/ \
      --threshold 3 --batch-size 64

\b
Runs on the curate engine: writes OUTPUT/documents-NNNNN.parquet, OUTPUT/rejects-NNNNN.parquet
(every dropped document with the stage and rule that dropped it, its quality_score
and the signals, and every unreadable record), OUTPUT/manifest.json, OUTPUT/report.html
and OUTPUT/_SUCCESS.

\b
--model: a fastText file (any labels: --label-pos names the positive one) or a
Hugging Face sequence-classification / regression directory (needs the hf extra; scored
in batches, on the GPU when there is one). A regression head has its own scale: give
--threshold (FineWeb-Edu's classifier keeps >= 3). --top-fraction keeps that share of
the documents that passed the heuristics, by a corpus-wide percentile of the model score
(two passes). --set KEY=VALUE overrides a QualityConfig field (e.g. min_doc_words=100).
"""

LABEL_EPILOG = """\b
Examples:
  afm quality label web.parquet --reference wiki.jsonl --out quality_lm.ftz
  afm quality label web.parquet --scorer mypkg.scorers:make_llm_scorer --out q.ftz \\
      --sample 20000 --pos-fraction 0.2 --neg-fraction 0.5 --labels-out labels.jsonl

\b
LLM-guided selection: score a random sample of INPUTS with a scoring model (a word trigram
Kneser-Ney LM fitted on --reference text, or your own model via --scorer module:attr, any object
with score(texts) -> list[float]), label the top / bottom of the sample positive /
negative, and train the fast fastText classifier on those labels. The held-out metrics
printed are the fast classifier's agreement with the scorer's labels.
"""


@click.group("quality")
def quality() -> None:
    """Quality filtering: heuristics + a classifier (fastText or Hugging Face), judge labels."""


@quality.command("filter", epilog=FILTER_EPILOG)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--model", "model_path", default=None,
              help="fastText file or Hugging Face model directory (default: the shipped one).")
@click.option("--no-model", is_flag=True, help="Heuristics only.")
@click.option("--no-heuristics", is_flag=True, help="Model only.")
@click.option("--threshold", type=Number(), default=None,
              help="Drop when the model score is below this (default 0.5 for a probability).")
@click.option("--top-fraction", type=PROBABILITY_OPEN, default=None,
              help="Keep this share by a global percentile.")
@click.option("--label-pos", default=None, help="The model's positive label (e.g. hq for DCLM's fastText).")
@click.option("--batch-size", type=POSITIVE_INT, default=None, help="Documents per model call (default 64).")
@click.option("--device", default=None, help="Hugging Face models: auto (GPU when present), cpu, cuda, cuda:N.")
@click.option("--set", "overrides", multiple=True, help="QualityConfig override KEY=VALUE.")
@output_policy_options
def filter_cmd(
    inputs: tuple[str, ...],
    output: str,
    model_path: str | None,
    no_model: bool,
    no_heuristics: bool,
    threshold: float | None,
    top_fraction: float | None,
    label_pos: str | None,
    batch_size: int | None,
    device: str | None,
    overrides: tuple[str, ...],
    overwrite: bool,
    allow_empty: bool,
) -> None:
    """Run the quality heuristics and the quality model over documents.

    The two stages run on the curate engine, so the input boundary (damaged files and
    rows become recorded rejects), the output policy and the accounting are the same as
    for ``afm curate``, ``afm dedup`` and ``afm decontam run``.
    """
    from afm.app.commands.pipelines.usage import user_errors
    from afm.config import ConfigError, parse_overrides
    from afm.preflight import check_inputs

    if no_model and no_heuristics:
        raise click.UsageError("--no-model and --no-heuristics together leave nothing to run")
    model_options = (model_path, threshold, top_fraction, label_pos, batch_size, device)
    if no_model and any(v is not None for v in model_options):
        raise click.UsageError("--model / --threshold / --top-fraction / --label-pos / --batch-size / "
                               "--device need the model (drop --no-model)")
    try:
        heuristics = parse_overrides(overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    model: dict[str, object] = {"top_fraction": top_fraction}
    if model_path:
        model["model_path"] = model_path
    for key, value in (("threshold", threshold), ("label_pos", label_pos), ("batch_size", batch_size),
                       ("device", device)):
        if value is not None:
            model[key] = value
    stages = ([] if no_heuristics else ["quality"]) + ([] if no_model else ["quality_model"])
    config = {"stages": stages, "quality": {"params": heuristics},
              "quality_model": {"params": model}}
    with user_errors():  # before Beam is imported: a bad input is one line in seconds
        check_inputs(inputs)
    from afm.pipelines.curate.pipeline import run_curate

    with user_errors():
        run_curate(list(inputs), output, command="quality filter", overwrite=overwrite,
                   config=config, allow_empty=allow_empty,
                   pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"])


@quality.command("label", epilog=LABEL_EPILOG)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="fastText model to write (.ftz/.bin).")
@click.option("--reference", multiple=True, help="Reference text file(s) for the built-in n-gram LM scorer.")
@click.option("--scorer", "scorer_spec", default=None, help="Your scorer as module:attribute.")
@click.option("--text-field", default="text", show_default=True)
@click.option("--sample", "sample_size", default=10_000, show_default=True, type=int)
@click.option("--pos-fraction", default=0.3, show_default=True, type=FRACTION)
@click.option("--neg-fraction", default=0.3, show_default=True, type=FRACTION)
@click.option("--labels-out", default=None, type=click.Path(dir_okay=False), help="Write the labelled sample (JSONL).")
@click.option("--epoch", default=10, show_default=True, type=int)
@click.option("--lr", default=0.2, show_default=True, type=POSITIVE)
@click.option("--seed", default=0, show_default=True, type=SEED)
def label_cmd(
    inputs: tuple[str, ...],
    out: str,
    reference: tuple[str, ...],
    scorer_spec: str | None,
    text_field: str,
    sample_size: int,
    pos_fraction: float,
    neg_fraction: float,
    labels_out: str | None,
    epoch: int,
    lr: float,
    seed: int,
) -> None:
    """Label a sample with a scoring model and train the fast classifier on the labels."""

    from afm.console import console, print_summary
    from afm.filters.classifier import ClassifierError, read_texts
    from afm.filters.quality.model import (
        NGramLMScorer,
        llm_guided_selection,
        load_scorer,
    )
    from afm.io import expand_inputs
    from afm.preflight import check_file

    if bool(reference) == bool(scorer_spec):
        raise click.UsageError("give exactly one of --reference (built-in LM scorer) or --scorer")
    try:
        files = expand_inputs(inputs)
        for path in [*files, *expand_inputs(reference)]:  # empty, binary, undecodable: one line now
            check_file(path, "input")
        if scorer_spec:
            scorer = load_scorer(scorer_spec)
        else:
            console.print(f"fitting the word trigram LM scorer (Kneser-Ney) on {len(reference)} reference file(s)")
            scorer = NGramLMScorer().fit(read_texts(expand_inputs(reference), text_field))
        report = llm_guided_selection(
            read_texts(files, text_field), scorer, out, sample_size=sample_size, seed=seed,
            pos_fraction=pos_fraction, neg_fraction=neg_fraction, labels_out=labels_out,
            epoch=epoch, lr=lr, progress=True,
        )
    except (ClassifierError, ValueError, TypeError, ImportError, AttributeError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("afm quality label", {
        "sampled": report["sampled"],
        "labelled positive": report["labelled_positive"],
        "labelled negative": report["labelled_negative"],
        "unlabelled (uncertain)": report["unlabelled"],
        "positive threshold": report["pos_threshold"],
        "negative threshold": report["neg_threshold"],
        "held-out accuracy vs scorer labels": report["accuracy"],
        "model": report["model"],
    })


ANNOTATE_EPILOG = """\b
Examples:
  afm quality annotate web.parquet --judge openai:http://localhost:8000/v1 \\
      --model Llama-3.1-70B-Instruct --sample 20000 --out edu_labels.jsonl
  afm quality annotate corpus/ --judge checkpoint:runs/sft/best --rubric my_rubric.yaml \\
      --sample 500 --out labels.jsonl
  afm classifier train --labels edu_labels.jsonl --out edu.ftz   # then learn the labels

\b
FineWeb-Edu's recipe: a strong model scores a random sample against a written rubric
(the shipped one is educational_value, 0-5, positive from 3: synth/data/rubrics/), a small
fast classifier learns the scores, the classifier filters the whole corpus. OUT gets one
JSON line per sampled document: id, text, score, label (pos / neg by the rubric's
positive_from), the judge's raw answer, why it ended, and a refusal if there was one.
Answers are cached (OUT.cache.sqlite): an interrupted run resumes where it stopped.
"""

COMPARE_EPILOG = """\b
Examples:
  afm quality compare builtin handwritten --scrapinghub ../shared/eval --utomo ir-data/Extraction
  afm quality compare builtin dclm.bin --label-pos hq --scrapinghub ../shared/eval
  afm quality compare fineweb-edu-classifier/ builtin --scrapinghub ../shared/eval --json auc.json

\b
Each model scores the content (the human-made gold text) and the boilerplate (the page's
other visible lines) of every page of the gold sets given; the table is the AUC of
content over boilerplate (no threshold: it compares models whose scores live on
different scales) and the accuracy at --threshold. MODEL: a fastText file, a Hugging Face
directory, builtin (the shipped default) or handwritten (the model it replaced). Only a
set a model was neither trained nor tuned on is a test of it (filters/data/quality/README.md).
"""

TRAIN_LM_EPILOG = """\b
Example (the model and threshold docs/quality.md reports):
  afm quality train-lm --wcxb WCXB --out word_lm.arpa.gz
  afm curate ... --set quality.params.word_lm=word_lm.arpa.gz --set quality.params.max_word_perplexity=1727

\b
Estimates the word trigram model the quality rule afm_word_perplexity reads (modified
Kneser-Ney, trigrams seen once pruned, ARPA) on the main texts of 70% of the sites of
WCXB's development split (article, forum, documentation and service pages). The
threshold is the perplexity that keeps 99% of the development good text the other
document stages keep (the other 30% of the sites and, with --technical, this machine's
package docs, READMEs and manual pages); development junk of every kind made from the
held-out sites' pages is then reported at it. Figures and the threshold: OUT.json.
"""

TRAIN_CHROME_EPILOG = """\b
Example (how filters/data/quality/chrome_lines.ftz was made):
  afm quality train-chrome --wcxb WCXB --out filters/data/quality/chrome_lines.ftz
  afm curate ... --set quality.params.chrome_model=chrome_lines.ftz --set quality.params.max_chrome_model_share=0.36

\b
Fits the line classifier the quality rule afm_chrome_model_share reads: the short visible
lines of WCXB's pages (its dev and test splits, a page in both read once) that hold none of
their main text are chrome, the short lines of the main texts and of this machine's
package docs, READMEs and manual pages are content, from 70% of the sites and documents (a
seeded hash). The threshold is the chrome share that keeps 98% of the development good
text the other document stages keep (the other 30%), fixed before development junk of
every kind, made from the held-out sites' pages, is reported at it. Figures and the
threshold: OUT.json.
"""

TRAIN_CONTEXT_GAIN_EPILOG = """\b
Example (how filters/data/quality/context_gain.npz was made):
  afm quality train-context-gain --wcxb WCXB --workdir runs/context-gain \\
      --out filters/data/quality/context_gain.npz
  afm curate ... --set quality.params.context_gain_model=builtin     # the shipped model, at its threshold 0.307

\b
Trains the word model the quality rule afm_context_gain reads: a 4,096-word vocabulary and
token shards of the main texts of 70% of WCXB's sites (its dev and test splits) and of this
machine's package docs, READMEs and manual pages are written to WORKDIR, the one trainer
runs the context-gain stage on them (task context_gain: the whole 64-word window and spans
of 3 and 1 words; `afm train --list-configs`), and the last checkpoint's weights are
written to OUT as numpy arrays. A run stopped half-way resumes from WORKDIR. The threshold
is the gain that keeps 98% of the development good text the other document stages keep
(the other 30%), fixed before development junk of every kind, made from the held-out
sites' pages, is reported at it. Figures and the threshold: OUT.json.
"""

TRAIN_DEFAULT_EPILOG = """\b
Example (how filters/data/quality/quality_default.ftz was made):
  afm quality train-default --wcxb WCXB --scrapinghub ../shared/eval \\
      --utomo IR-RESEARCH-DATA/Extraction --out filters/data/quality/quality_default.ftz

\b
Good text: the main text of WCXB's article, forum, documentation and service pages and
this machine's package documentation and manual pages; junk: texts of each kind in turn
made from each of them (afm quality junk), so both classes have the same topics
(--after-rules: both as the model stage sees them, after the quality rules).
Settings and threshold are chosen on 20% of the units (sites, packages) held out; the
held-out sets (--scrapinghub, --utomo, other manual pages, the standard library's
reference pages) only test the result: keep rates per source, topic and language, junk
rejected per kind, and whether the model earns its place beside the rules, in OUT.json.
"""

def _read_documents(inputs: tuple[str, ...], text_field: str) -> list[dict]:
    from afm.io import expand_inputs, read_records
    from afm.readers import file_format

    records: list[dict] = []
    for path in expand_inputs(inputs):
        if file_format(path) not in ("parquet", "jsonl"):
            raise click.ClickException(f"{path}: expected .parquet, .jsonl or .jsonl.gz documents")
        records.extend(r for r in read_records(path) if isinstance(r.get(text_field), str))
    return records


@quality.command("annotate", epilog=ANNOTATE_EPILOG)
@click.argument("inputs", nargs=-1, required=True)
@click.option("--judge", required=True,
              help="openai:URL (with --model), checkpoint:PATH, or module:factory.")
@click.option("--model", default=None, help="The model name an OpenAI-compatible server knows.")
@click.option("--tokenizer", default=None, help="checkpoint judges: tokenizer folder (default PATH/tokenizer).")
@click.option("--rubric", default="educational_value", show_default=True,
              help="A shipped rubric by name, or a rubric YAML file.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Labels file to write (JSONL).")
@click.option("--sample", "sample_size", default=1000, show_default=True, type=POSITIVE_INT,
              help="Documents to judge (a uniform random sample).")
@click.option("--positive-from", type=Number(integer=True), default=None,
              help="Score from which a label is pos (default: the rubric's).")
@click.option("--text-field", default="text", show_default=True)
@click.option("--seed", default=0, show_default=True, type=SEED)
@click.option("--max-concurrency", default=8, show_default=True, type=POSITIVE_INT,
              help="openai judges: requests in flight.")
@click.option("--requests-per-minute", default=None, type=POSITIVE, help="openai judges: rate limit.")
@click.option("--long-prompts", type=click.Choice(["refuse", "cut"]), default="refuse", show_default=True,
              help="checkpoint judges: a prompt longer than the model's window stops the run (refuse), or "
                   "keeps its end and is counted (cut).")
def annotate_cmd(inputs: tuple[str, ...], judge: str, model: str | None, tokenizer: str | None,
                 rubric: str, out: str, sample_size: int, positive_from: int | None, text_field: str,
                 seed: int, max_concurrency: int, requests_per_minute: float | None, long_prompts: str) -> None:
    """Score a sample of documents with a judge model against a rubric; write the labels."""
    from afm.console import make_progress, print_summary
    from afm.synth.annotate import annotate, load_rubric, sample_documents, write_labels
    from afm.synth.generators import GenerationError, make_generator

    rub = load_rubric(rubric)
    if positive_from is not None and not rub.min_score < positive_from <= rub.max_score:
        raise click.BadParameter(f"must be above {rub.min_score} and at most {rub.max_score} (the rubric's scale)",
                                 param_hint="--positive-from")
    try:
        docs = sample_documents(_read_documents(inputs, text_field), sample_size, seed=seed,
                                text_field=text_field)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if not docs:
        raise click.ClickException(f"no documents with a non-empty {text_field!r} in {', '.join(inputs)}")
    try:
        gen = make_generator(judge, model=model, tokenizer=tokenizer, cache=f"{out}.cache.sqlite",
                             max_concurrency=max_concurrency, requests_per_minute=requests_per_minute,
                             long_prompts=long_prompts)
    except (ValueError, TypeError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        with make_progress() as bar:
            task = bar.add_task(f"judging ({rub.name})", total=len(docs), rate="")
            annotations = annotate(docs, gen, rub, positive_from=positive_from, seed=seed,
                                   progress=lambda n: bar.advance(task, n))
    except GenerationError as exc:
        raise click.ClickException(str(exc)) from exc
    cut = int(getattr(getattr(gen, "inner", gen), "cut_prompts", 0))
    if cut:
        click.echo(f"{cut} prompts were longer than the judge's window and kept their end (--long-prompts cut)")
    summary = write_labels(out, annotations, judge=gen.name, rubric=rub, positive_from=positive_from)
    print_summary("afm quality annotate", {
        "judge": gen.name, "rubric": rub.source, "documents judged": summary["documents"],
        **{f"score {k}": v for k, v in summary["scores"].items()},
        f"pos (score >= {summary['positive_from']})": summary["labels"].get("pos", 0),
        "neg": summary["labels"].get("neg", 0),
        "answers without a score": summary["unparsed"], "refused": summary["refused"],
        "labels": summary["labels_file"],
        "next": f"afm classifier train --labels {out} --out MODEL.ftz",
    })


@quality.command("compare", epilog=COMPARE_EPILOG)
@click.argument("models", nargs=-1, required=True)
@click.option("--scrapinghub", default=None, type=click.Path(file_okay=False),
              help="The eval folder holding extraction/ (ScrapingHub's 181 article pages).")
@click.option("--utomo", default=None, type=click.Path(file_okay=False),
              help="Utomo & Leu's Extraction folder (big5 and chaos sets).")
@click.option("--wcxb", default=None, type=click.Path(file_okay=False),
              help="WCXB (its dev split; the shipped default was trained on it).")
@click.option("--label-pos", default=None, help="Positive label of models trained elsewhere (e.g. hq).")
@click.option("--threshold", type=Number(), default=None,
              help="For the accuracy column (default: each fastText model's own, else 0.5).")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False), help="Also write the rows.")
def compare_cmd(models: tuple[str, ...], scrapinghub: str | None, utomo: str | None, wcxb: str | None,
                label_pos: str | None, threshold: float | None, json_out: str | None) -> None:
    """AUC of quality models on labelled real pages (content vs boilerplate), side by side."""
    import json
    from dataclasses import asdict

    from afm.console import track
    from afm.filters.quality.eval import compare_models, real_page_sets
    from afm.filters.quality.model import sidecar_threshold
    from afm.filters.quality.scorers import ScorerError, open_scorer

    if not (scrapinghub or utomo or wcxb):
        raise click.UsageError("give at least one set: --scrapinghub, --utomo or --wcxb")
    scorers, thresholds = {}, {}
    for name in models:
        try:
            scorers[name] = open_scorer(_model_path(name), label_pos=label_pos)
        except (ScorerError, FileNotFoundError) as exc:
            raise click.ClickException(f"{name}: {exc}") from exc
        own = sidecar_threshold(_model_path(name)) if scorers[name].kind == "fasttext" else 0.5
        thresholds[name] = own if threshold is None else threshold
    sets = real_page_sets(scrapinghub=scrapinghub, utomo=utomo, wcxb=wcxb,
                          progress=lambda pages: track(list(pages), "reading pages", unit="pages"))
    rows = [row for set_name, items in sets.items()
            for row in compare_models({n: s.score for n, s in scorers.items()}, items, set_name=set_name,
                                      threshold=thresholds)]
    _print_auc_table(rows, "quality models on labelled real pages (content vs boilerplate)")
    if json_out:
        with open(json_out, "w", encoding="utf-8") as fh:
            json.dump([asdict(r) for r in rows], fh, indent=2)


@quality.command("train-default", epilog=TRAIN_DEFAULT_EPILOG)
@click.option("--wcxb", required=True, type=click.Path(file_okay=False), help="WCXB checkout (dev/ is read).")
@click.option("--scrapinghub", default=None, type=click.Path(file_okay=False), help="Held-out set: eval folder.")
@click.option("--utomo", default=None, type=click.Path(file_okay=False), help="Held-out set: Extraction folder.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The model to write (.ftz).")
@click.option("--technical/--no-technical", default=True, show_default=True,
              help="Add this machine's manual pages and package docs (training and test).")
@click.option("--after-rules", is_flag=True,
              help="Train on both classes as the model stage sees them, after the quality rules.")
@click.option("--seed", default=0, show_default=True, type=SEED)
def train_default_cmd(wcxb: str, scrapinghub: str | None, utomo: str | None, out: str, technical: bool,
                      after_rules: bool, seed: int) -> None:
    """Train the default quality model (good text vs junk made from it) and test it."""
    from pathlib import Path

    from afm.console import console, print_summary, print_table
    from afm.filters.extraction.gold import load_scrapinghub, load_utomo, load_wcxb
    from afm.filters.language import LanguageFilter
    from afm.filters.quality.defaults import recipe_texts, train_default, training_set
    from afm.filters.quality.rules import QualityHeuristicsFilter

    if not (Path(wcxb) / "dev").is_dir():
        raise click.BadParameter(f"{wcxb} has no dev/ folder (a WCXB checkout)", param_hint="--wcxb")
    if not (scrapinghub or utomo):
        raise click.UsageError("give a held-out set to test on: --scrapinghub and/or --utomo")
    console.print("reading the gold sets")
    test_pages = {}
    if scrapinghub:
        test_pages["scrapinghub"] = load_scrapinghub(Path(scrapinghub))
    if utomo:
        test_pages["utomo"] = load_utomo(Path(utomo))
    lid = LanguageFilter()
    data = recipe_texts(train_pages=load_wcxb(Path(wcxb)), test_pages=test_pages, technical=technical,
                        seed=seed, languages=lambda texts: [lang for lang, _ in lid.predict(texts)],
                        log=console.print)
    if after_rules:
        langs = dict(zip([t.id for t in data.train], [lang for lang, _ in lid.predict([t.text for t in data.train])]))
        ts = training_set(data.train, data.boilerplate, seed=seed, rules=QualityHeuristicsFilter(), languages=langs)
    else:
        ts = training_set(data.train, data.boilerplate, seed=seed)
    report = train_default(ts, out, tests=data.tests, seed=seed, sources=data.sources, log=console.print)
    print_table("held-out good text: share kept", ["set", "texts", "rules", "model", "both", "both, English",
                                                   "lowest topic"],
                [[name, g["n"], f"{g['rules_keep']:.3f}", f"{g['model_keep']:.3f}", f"{g['both_keep']:.3f}",
                  f"{g['both_keep_en']:.3f}", _lowest_topic(g["by_topic"])]
                 for name, g in report.test["good"].items()])
    print_table("held-out junk: share rejected", ["kind", "texts", "rules", "model", "both",
                                                  "model catches of what the rules pass"],
                [[kind, j["n"], f"{j['rules_reject']:.3f}", f"{j['model_reject']:.3f}", f"{j['both_reject']:.3f}",
                  "-" if j["model_catches_of_rules_pass"] is None else
                  f"{j['model_catches_of_rules_pass']:.3f} of {j['rules_pass']}"]
                 for kind, j in report.test["junk"].items()])
    verdict = report.verdict
    print_summary("afm quality train-default", {
        "training texts (good / junk)": f"{report.counts['hq']} / {report.counts['cc']}",
        "units": report.counts["units"], "chosen settings": report.chosen,
        "earns its place (on by default)": "yes" if verdict["on_by_default"] else "no: " + "; ".join(verdict["why_not"]),
        "model": out, "metadata": f"{out}.json"})


@quality.command("train-lm", epilog=TRAIN_LM_EPILOG)
@click.option("--wcxb", required=True, type=click.Path(file_okay=False), help="WCXB checkout (dev/ is read).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The model to write (.arpa or .arpa.gz).")
@click.option("--technical/--no-technical", default=True, show_default=True,
              help="Also choose the threshold on this machine's package docs, READMEs and manual pages.")
@click.option("--per-kind", default=300, show_default=True, type=POSITIVE_INT, help="Development junk of each kind.")
def train_lm_cmd(wcxb: str, out: str, technical: bool, per_kind: int) -> None:
    """Train the word n-gram model of the perplexity rule and choose its threshold."""
    from pathlib import Path

    from afm.console import console, print_summary
    from afm.filters.extraction.gold import load_wcxb
    from afm.filters.quality.audit import run_chain, write_sidecar
    from afm.filters.quality.defaults import POSITIVE_KINDS, gold_with_boilerplate, technical_texts
    from afm.filters.quality.lm import development_report, split_sites, train_word_lm
    from afm.pipelines.curate.stages import document_filters

    if not (Path(wcxb) / "dev").is_dir():
        raise click.BadParameter(f"{wcxb} has no dev/ folder (a WCXB checkout)", param_hint="--wcxb")
    console.print("reading WCXB's development split")
    texts, boilerplate = gold_with_boilerplate(load_wcxb(Path(wcxb)), POSITIVE_KINDS)
    train, held = split_sites(texts)
    console.print(f"estimating the model on {len(train):,} texts ({len(held):,} of held-out sites choose the threshold)")
    info = train_word_lm(train, out)
    good = list(held)
    if technical:
        console.print("reading this machine's documentation (package docs, READMEs, manual pages)")
        good += [t for t in technical_texts()[0] if not t.language]
    others = document_filters({"quality": {"word_lm": None}})
    console.print(f"scoring {len(good):,} development good texts and {per_kind} junk texts of each kind")
    report = development_report(out, good, held, boilerplate,
                                lambda items: [o.kept for o in run_chain(others, items)], per_kind=per_kind)
    info.update(report, sources=[{"set": "WCXB dev split (article, forum, documentation, service pages)",
                                  "where": "Murrough-Foley/web-content-extraction-benchmark, dev/",
                                  "licence": "CC-BY-4.0", "use": "the model (70% of sites); the threshold (30%)"}])
    side = write_sidecar(out, info)
    _print_development(report)
    print_summary("afm quality train-lm", {"model": out, "n-grams": info["ngrams"], "bytes": info["bytes"],
                                           "threshold (max_word_perplexity)": report["threshold"],
                                           "metadata": str(side)})


@quality.command("train-chrome", epilog=TRAIN_CHROME_EPILOG)
@click.option("--wcxb", required=True, type=click.Path(file_okay=False),
              help="WCXB checkout (dev/ and, when there, test/ are read).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The model to write (.ftz).")
@click.option("--technical/--no-technical", default=True, show_default=True,
              help="Also read this machine's package docs, READMEs and manual pages as content.")
@click.option("--per-kind", default=300, show_default=True, type=POSITIVE_INT, help="Development junk of each kind.")
def train_chrome_cmd(wcxb: str, out: str, technical: bool, per_kind: int) -> None:
    """Train the chrome line classifier of the quality rule and choose its threshold."""
    from pathlib import Path

    from afm.console import console, print_summary
    from afm.filters.classifier import ClassifierError
    from afm.filters.extraction.gold import load_wcxb_all
    from afm.filters.quality.audit import run_chain, write_sidecar
    from afm.filters.quality.chrome_train import development_report, train_chrome_model
    from afm.filters.quality.defaults import development_split
    from afm.pipelines.curate.stages import document_filters

    if not (Path(wcxb) / "dev").is_dir():
        raise click.BadParameter(f"{wcxb} has no dev/ folder (a WCXB checkout)", param_hint="--wcxb")
    if not out.endswith(".ftz"):
        raise click.BadParameter(f"{out}: the model is written quantised, as .ftz", param_hint="--out")
    console.print("reading WCXB's pages (dev and test splits)")
    if technical:
        console.print("and this machine's documentation (package docs, READMEs, manual pages)")
    split = development_split(load_wcxb_all(Path(wcxb)), technical=technical)
    train, held, tech_train, tech_held, boilerplate = (split.train, split.held, split.tech_train, split.tech_held,
                                                       split.boilerplate)
    console.print(f"fitting the line model on {len(train):,} pages and {len(tech_train):,} documents "
                  f"({len(held):,} pages of held-out sites and {len(tech_held):,} documents choose the threshold)")
    try:
        info = train_chrome_model(train, boilerplate, tech_train, out)
    except ClassifierError as exc:
        raise click.ClickException(str(exc)) from exc
    others = document_filters({"quality": {"chrome_model": None}})
    console.print(f"scoring the development good texts and {per_kind} junk texts of each kind")
    report = development_report(out, list(held) + list(tech_held), held, boilerplate,
                                lambda items: [o.kept for o in run_chain(others, items)], per_kind=per_kind)
    info.update(report, sources=[{"set": "WCXB dev and test splits (article, forum, documentation, service pages)",
                                  "where": "Murrough-Foley/web-content-extraction-benchmark, dev/ and test/",
                                  "licence": "CC-BY-4.0", "use": "the model (70% of sites); the threshold (30%)"},
                                 {"set": "this machine's package docs, READMEs and manual pages" if technical else "none",
                                  "use": "content lines (70% of documents); the threshold (30%)"}])
    side = write_sidecar(out, info)
    _print_development(report)
    print_summary("afm quality train-chrome", {"model": out, "bytes": info["bytes"],
                                               "lines (chrome / content)": f"{info['chrome_lines']:,} / {info['content_lines']:,}",
                                               "threshold (max_chrome_model_share)": report["threshold"],
                                               "metadata": str(side)})


@quality.command("train-context-gain", epilog=TRAIN_CONTEXT_GAIN_EPILOG)
@click.option("--wcxb", required=True, type=click.Path(file_okay=False),
              help="WCXB checkout (dev/ and, when there, test/ are read).")
@click.option("--workdir", required=True, type=click.Path(file_okay=False),
              help="Where the vocabulary, the token shards and the training run go (a run there resumes).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The model to write (.npz).")
@click.option("--steps", type=POSITIVE_INT, default=None, help="Training steps (default: the stage's total_steps).")
@click.option("--technical/--no-technical", default=True, show_default=True,
              help="Also read this machine's package docs, READMEs and manual pages.")
@click.option("--per-kind", default=300, show_default=True, type=POSITIVE_INT, help="Development junk of each kind.")
def train_context_gain_cmd(wcxb: str, workdir: str, out: str, steps: int | None, technical: bool,
                           per_kind: int) -> None:
    """Train the word model of the chain rule (afm_context_gain) and choose its threshold."""
    from pathlib import Path

    from afm.app.commands.filters.quality_context_gain import train_context_gain

    if not (Path(wcxb) / "dev").is_dir():
        raise click.BadParameter(f"{wcxb} has no dev/ folder (a WCXB checkout)", param_hint="--wcxb")
    if not out.endswith(".npz"):
        raise click.BadParameter(f"{out}: the model is written as numpy arrays, .npz", param_hint="--out")
    report = train_context_gain(Path(wcxb), Path(workdir), Path(out), steps=steps, technical=technical,
                                per_kind=per_kind)
    _print_development(report)


def _print_development(report: dict[str, Any]) -> None:
    """A learned rule's development figures (``audit.rule_development_report``) as tables."""
    from afm.console import print_table

    print_table("development junk rejected", ["kind", "texts", "by the other stages", "with the rule"],
                [[k, v["n"], f"{v['rejected_by_others']:.3f}", f"{v['rejected']:.3f}"]
                 for k, v in report["junk_rejected_by_kind"].items()])
    print_table("development good text failing the rule", ["kind", "texts", "failing"],
                [[k, v["n"], f"{v['failing']:.3f}"] for k, v in report["good_failing_by_kind"].items()])


def _lowest_topic(topics: dict[str, Any]) -> str:
    rated = [(t["both_keep"], name, t["n"]) for name, t in topics.items() if t["n"] >= 10 and name != "other"]
    if not rated:
        return "-"
    rate, name, n = min(rated)
    return f"{name} {rate:.3f} ({n})"


def _model_path(name: str) -> str:
    """``builtin`` / ``handwritten`` -> the shipped files; anything else is a path."""
    from afm.filters.quality.model import DATA_DIR, resolve_model_path

    if name == "handwritten":
        return str(DATA_DIR / "handwritten" / "quality_handwritten.ftz")
    return resolve_model_path(name)


def _print_auc_table(rows: list, title: str) -> None:
    """One row per set and model: AUC, accuracy, and the first model's AUC minus this one's
    with its paired bootstrap standard error."""
    from afm.console import print_table

    table = []
    for r in rows:
        delta = "" if r.delta_vs_first is None else f"{r.delta_vs_first:+.3f} ± {r.delta_se:.3f}"
        table.append([r.set, f"{r.n_pos}/{r.n_neg}", r.model, f"{r.auc:.3f}",
                      f"{r.accuracy:.3f} @{r.threshold:.2f}", delta])
    first = rows[0].model if rows else "first"
    print_table(title, ["set", "content/boilerplate", "model", "AUC", "accuracy @threshold",
                        f"AUC {first} - this (SE)"], table)


quality.add_command(audit_cmd)
quality.add_command(junk_cmd)

COMMANDS = [quality]
