"""``afm quality audit`` and ``afm quality junk``: what the default stages do to good text of
every kind and to junk of every kind, and the junk sets themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from afm.app.commands.options import POSITIVE_INT, SEED

AUDIT_EPILOG = """\b
Examples:
  afm quality audit --scrapinghub ../shared/eval --utomo IR-RESEARCH-DATA/Extraction
  afm quality audit --scrapinghub ../shared/eval --min-words 200 --json audit.json
  afm quality audit --scrapinghub ../shared/eval --without quality_model
  afm quality audit --scrapinghub ../shared/eval --set quality.c4_curly_bracket=true
  afm quality audit --scrapinghub ../shared/eval --set quality_model.enabled=true

\b
Runs the document stages of afm curate (language, safety, PII, the quality rules, the
quality model), built as curate builds them, over: the human-made main texts of the gold
sets given (news, blogs, forums, essays: none of them training data of the default model
when they are ScrapingHub's or Utomo & Leu's), this machine's technical writing (--technical:
the manual pages and standard-library reference pages the default model never read, or
the package docs, READMEs and manual pages it was trained on), and junk of every kind made
from those texts (--junk, afm quality junk). Prints the share kept per set,
per kind of text, per topic and per language, the stage and rule that dropped the rest,
and per junk kind the share rejected and how much of what the other stages pass the
quality model (--measure) catches. --rules adds, per kind of text, the share failing each
quality rule with afm's settings and with the published ones. --set STAGE.FIELD=VALUE
changes a stage's setting, --without STAGE leaves a stage out.
"""

JUNK_EPILOG = """\b
Examples:
  afm quality junk --scrapinghub ../shared/eval --out junk/ --per-kind 100
  afm quality junk --utomo IR-RESEARCH-DATA/Extraction --out junk/ --kinds word_salad,keyword_spam

\b
Writes OUT/<kind>.jsonl for each kind (text, kind, source, topic, made_from): junk made from
the main text and the page boilerplate of the gold pages given, so each set has the topics
of the pages it was made from (filters/quality/junk.py lists the kinds).
"""


def _gold_pages(scrapinghub: str | None, utomo: str | None, wcxb: str | None) -> dict[str, Any]:
    from afm.filters.extraction.gold import load_scrapinghub, load_utomo, load_wcxb

    pages: dict[str, Any] = {}
    for name, path, loader in (("scrapinghub", scrapinghub, load_scrapinghub), ("utomo", utomo, load_utomo),
                               ("wcxb", wcxb, load_wcxb)):
        if path is not None:
            if not Path(path).is_dir():
                raise click.BadParameter(f"{path}: no such folder", param_hint=f"--{name}")
            pages[name] = loader(Path(path))
    return pages


def _stage_config(sets: tuple[str, ...], without: tuple[str, ...]) -> dict[str, Any]:
    """``--set STAGE.FIELD=VALUE`` and ``--without STAGE`` as the mapping
    :func:`~afm.pipelines.curate.stages.document_filters` takes (values parsed as YAML)."""
    import yaml

    config: dict[str, Any] = {name: False for name in without}
    for item in sets:
        key, sep, value = item.partition("=")
        stage, dot, name = key.partition(".")
        if not (sep and dot and name):
            raise click.BadParameter(f"{item!r}: expected STAGE.FIELD=VALUE", param_hint="--set")
        if name == "enabled":  # a stage switched on (off by default) or off
            on = yaml.safe_load(value)
            if on is False:
                config[stage] = False
            elif config.get(stage) in (None, False):
                config[stage] = True
            continue
        section = config.get(stage)
        if section is False:
            raise click.BadParameter(f"{stage} is left out (--without)", param_hint="--set")
        section = config[stage] = section if isinstance(section, dict) else {}
        section[name.removeprefix("params.")] = yaml.safe_load(value)
    return config


@click.command("audit", epilog=AUDIT_EPILOG)
@click.option("--scrapinghub", default=None, type=click.Path(file_okay=False), help="The eval folder (ScrapingHub).")
@click.option("--utomo", default=None, type=click.Path(file_okay=False), help="Utomo & Leu's Extraction folder.")
@click.option("--wcxb", default=None, type=click.Path(file_okay=False),
              help="WCXB checkout (the default model's training data: not a test of it).")
@click.option("--technical", type=click.Choice(["held-out", "dev", "none"]), default="held-out", show_default=True,
              help="This machine's technical writing: the sets the default model never read (manual pages, "
                   "stdlib reference pages), or its training sets (package docs, READMEs, other manual pages).")
@click.option("--junk/--no-junk", default=True, show_default=True, help="Junk of every kind made from the texts.")
@click.option("--per-kind", default=100, show_default=True, type=POSITIVE_INT, help="Junk texts of each kind.")
@click.option("--min-words", default=50, show_default=True, type=POSITIVE_INT, help="Shorter texts are left out.")
@click.option("--set", "sets", multiple=True, help="STAGE.FIELD=VALUE: a stage setting.")
@click.option("--without", multiple=True, help="Leave this stage out (e.g. quality_model).")
@click.option("--measure", default="quality_model", show_default=True,
              help="The stage whose own catches of junk are counted (what the stages before it pass).")
@click.option("--seed", default=1, show_default=True, type=SEED, help="The junk made.")
@click.option("--rules", "rules_table", is_flag=True,
              help="Also: the share of each kind of text each quality rule fails, afm's rules beside the published ones.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False), help="Also write every table.")
def audit_cmd(scrapinghub: str | None, utomo: str | None, wcxb: str | None, technical: str, junk: bool,
              per_kind: int, min_words: int, sets: tuple[str, ...], without: tuple[str, ...], measure: str,
              seed: int, rules_table: bool, json_out: str | None) -> None:
    """What the default stages keep of good text of every kind, and reject of junk."""
    from afm.console import console, print_table
    from afm.filters.quality.audit import group, run_chain, topic_gaps
    from afm.filters.quality.defaults import gold_with_boilerplate, technical_texts
    from afm.filters.quality.junk import make_junk, materials_for
    from afm.pipelines.curate.stages import FilterSetupError, document_filters

    if not (scrapinghub or utomo or wcxb or technical != "none"):
        raise click.UsageError("nothing to audit: give a gold set (--scrapinghub, --utomo, --wcxb) or --technical")
    try:
        filters = document_filters(_stage_config(sets, without))
    except FilterSetupError as exc:
        raise click.ClickException(str(exc)) from exc
    texts, boilerplate = [], {}
    for pages in _gold_pages(scrapinghub, utomo, wcxb).values():
        t, bp = gold_with_boilerplate(pages)
        texts += t
        boilerplate.update(bp)
    if technical != "none":
        console.print(f"reading this machine's technical writing ({technical})")
        train, test = technical_texts()
        texts += train if technical == "dev" else [t for items in test.values() for t in items]
    texts = [t for t in texts if len(t.text.split()) >= min_words]
    console.print(f"{len(texts):,} good texts through {[f.name for f in filters]}")
    outcomes = run_chain(filters, [t.text for t in texts])
    report: dict[str, Any] = {"stages": [f.name for f in filters], "min_words": min_words}
    sets_of = [t.source + ("-translated" if t.language else "") for t in texts]
    by_set = group(sets_of, outcomes)
    by_kind = group([f"{s}/{t.kind}" for s, t in zip(sets_of, texts)], outcomes)
    articles = [(t, o) for t, o in zip(texts, outcomes) if t.kind == "article"]
    by_topic = group([t.topic for t, _ in articles], [o for _, o in articles])
    overall = sum(o.kept for _, o in articles) / max(len(articles), 1)
    report["good"] = {"by_set": {k: g.as_dict() for k, g in by_set.items()},
                      "by_kind": {k: g.as_dict() for k, g in by_kind.items()},
                      "articles_by_topic": {k: g.as_dict() for k, g in by_topic.items()},
                      "articles_kept": round(overall, 4), "topic_gaps": topic_gaps(by_topic, overall)}
    _table("good text: share kept", by_set)
    _table("good text by kind", by_kind)
    _table(f"articles by topic (all sets together: {overall:.3f} kept)", by_topic)
    if rules_table:
        section = _stage_config(sets, without).get("quality")
        report["rules"] = _rules_table(texts, section if isinstance(section, dict) else {})
    if junk and texts:
        made = make_junk(materials_for(texts, boilerplate), per_kind=per_kind, seed=seed)
        console.print(f"{len(made):,} junk texts of {len({j.kind for j in made})} kinds")
        full = run_chain(filters, [j.text for j in made])
        rest = [f for f in filters if f.name != measure]
        others = run_chain(rest, [j.text for j in made]) if len(rest) < len(filters) else full
        kinds: dict[str, dict[str, Any]] = {}
        for j, o, r in zip(made, full, others):
            k = kinds.setdefault(j.kind, {"n": 0, "rejected": 0, "others_pass": 0, "model_catches": 0})
            k["n"] += 1
            k["rejected"] += not o.kept
            k["others_pass"] += r.kept
            k["model_catches"] += r.kept and not o.kept
        total = {key: sum(k[key] for k in kinds.values()) for key in ("n", "rejected", "others_pass", "model_catches")}
        report["junk"] = {**kinds, "all": total}
        measured = len(rest) < len(filters)
        print_table("junk: share rejected", ["kind", "texts", "rejected", "the other stages pass",
                                             f"of those, {measure} rejects" if measured else f"({measure} not run)"],
                    [[name, k["n"], f"{k['rejected'] / k['n']:.3f}", k["others_pass"],
                      f"{k['model_catches'] / k['others_pass']:.3f}" if k["others_pass"] and measured else "-"]
                     for name, k in [*kinds.items(), ("all", total)]])
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        console.print(f"tables: {json_out}")


def _rules_table(texts: list[Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """For each kind of text: the share failing each quality rule (alone or with others),
    with the stage's settings and with the published ones, side by side; and the share each
    set keeps. The language of each text is the language stage's."""
    from afm.config import from_dict
    from afm.console import print_table
    from afm.filters.language import LanguageFilter
    from afm.filters.quality.rules import QualityConfig, QualityHeuristicsFilter

    ours = QualityHeuristicsFilter(from_dict(QualityConfig, dict(overrides), path="quality"))
    theirs = QualityHeuristicsFilter(QualityConfig.published())
    languages = [lang for lang, _ in LanguageFilter().predict([t.text for t in texts])]
    key = [f"{t.source}{'-translated' if t.language else ''}/{t.kind}" for t in texts]
    kinds = list(dict.fromkeys(key))
    fails: dict[str, dict[str, list[int]]] = {}  # rule -> kind -> [ours, published]
    kept: dict[str, list[int]] = {k: [0, 0, 0] for k in kinds}  # n, ours, published
    for t, lang, kind in zip(texts, languages, key):
        kept[kind][0] += 1
        for col, flt in ((0, ours), (1, theirs)):
            checks, _ = flt.signals(t.text, "web", lang)
            failed = [name for name, value, bound in checks if not bound(value)]
            kept[kind][1 + col] += not failed
            for name in failed:
                fails.setdefault(name, {}).setdefault(kind, [0, 0])[col] += 1
    head = ["rule"] + kinds
    rows = [["kept (afm / published)"] + [f"{kept[k][1] / kept[k][0]:.2f} / {kept[k][2] / kept[k][0]:.2f}"
                                          for k in kinds]]
    for name, per in sorted(fails.items(), key=lambda kv: -sum(b for _, b in kv[1].values())):
        rows.append([name] + [f"{per.get(k, [0, 0])[0] / kept[k][0]:.2f} / {per.get(k, [0, 0])[1] / kept[k][0]:.2f}"
                              for k in kinds])
    print_table("quality rules: share of each kind failing each rule (afm / published)", head, rows)
    return {"kinds": {k: {"n": v[0], "kept_afm": v[1], "kept_published": v[2]} for k, v in kept.items()},
            "fails": {name: {k: {"afm": v[0], "published": v[1]} for k, v in per.items()}
                      for name, per in fails.items()}}


def _table(title: str, groups: dict[str, Any]) -> None:
    from afm.console import print_table

    print_table(title, ["group", "texts", "kept", "dropped by (most)"],
                [[name, g.n, f"{g.keep_rate:.3f}", ", ".join(f"{k} {v}" for k, v in g.dropped_by.most_common(3))]
                 for name, g in groups.items()])


@click.command("junk", epilog=JUNK_EPILOG)
@click.option("--scrapinghub", default=None, type=click.Path(file_okay=False), help="The eval folder (ScrapingHub).")
@click.option("--utomo", default=None, type=click.Path(file_okay=False), help="Utomo & Leu's Extraction folder.")
@click.option("--wcxb", default=None, type=click.Path(file_okay=False), help="WCXB checkout (dev/ is read).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder for <kind>.jsonl.")
@click.option("--per-kind", default=100, show_default=True, type=POSITIVE_INT)
@click.option("--kinds", default=None, help="Comma-separated kinds (default: every kind).")
@click.option("--seed", default=0, show_default=True, type=SEED)
def junk_cmd(scrapinghub: str | None, utomo: str | None, wcxb: str | None, out: str, per_kind: int,
             kinds: str | None, seed: int) -> None:
    """Write junk of every kind made from real pages' text and boilerplate."""
    from afm.console import print_summary
    from afm.filters.quality.defaults import gold_with_boilerplate
    from afm.filters.quality.junk import KINDS, make_junk, materials_for

    chosen = tuple(k.strip() for k in kinds.split(",")) if kinds else KINDS
    unknown = set(chosen) - set(KINDS)
    if unknown:
        raise click.BadParameter(f"unknown kinds {sorted(unknown)}; known: {', '.join(KINDS)}", param_hint="--kinds")
    pages = _gold_pages(scrapinghub, utomo, wcxb)
    if not pages:
        raise click.UsageError("give the pages to make junk from: --scrapinghub, --utomo or --wcxb")
    texts, boilerplate = [], {}
    for ps in pages.values():
        t, bp = gold_with_boilerplate(ps)
        texts += t
        boilerplate.update(bp)
    made = make_junk(materials_for(texts, boilerplate), chosen, per_kind=per_kind, seed=seed)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    handles = {k: (folder / f"{k}.jsonl").open("w", encoding="utf-8") for k in chosen}
    try:
        for j in made:
            handles[j.kind].write(json.dumps({"text": j.text, "kind": j.kind, "source": j.source, "topic": j.topic,
                                              "made_from": j.made_from}, ensure_ascii=False) + "\n")
            counts[j.kind] = counts.get(j.kind, 0) + 1
    finally:
        for h in handles.values():
            h.close()
    print_summary("afm quality junk", {**{f"{k}.jsonl": counts.get(k, 0) for k in chosen},
                                       "made from": f"{len(texts)} main texts", "folder": out})


__all__ = ["audit_cmd", "junk_cmd"]
