"""How the shipped default quality model is made: good text of many kinds against junk made
from that same text, a choice made on held-out units, and a test on sources it never saw.

The recipe (``afm quality train-default`` runs it; ``data/quality/README.md`` has its
figures and the licences):

1. **Good text** (:mod:`afm.filters.quality.texts`): the human-made main text of WCXB's
   article, forum, documentation and service pages (product, collection and listing pages
   are left out of both classes: thin or link-list content, neither good text nor junk of a
   kind the generators make), READMEs, package descriptions and manual pages found on the
   machine, English and translated.
2. **Junk made from it** (:mod:`afm.filters.quality.junk`): each good text gives junk
   texts, the kinds in turn (boilerplate, navigation, link lists, listings, keyword spam,
   templated pages, word salad, bigram chains, repetition, cookie and legal notices,
   truncated teasers), built from that text's words and its page's boilerplate. The two
   classes therefore have the same topics, so the model cannot learn a subject as junk.
   (``--after-rules`` trains instead on both classes as the model stage sees them, after
   the quality rules: tried, and worse on the held-out sets; ``docs/quality.md``.)
3. **Choice**: a small grid of fastText settings, each trained on 80% of the units (sites,
   packages, manual-page families) and scored on the other 20%; the threshold is the score
   that keeps :data:`KEEP_TARGET` of the held-out good texts, and the setting that then
   rejects the most held-out junk is chosen.
4. **Final model**: the chosen setting trained on everything, quantized (``.ftz``).
5. **Test** (:func:`held_out_report`): on good texts and junk of sources the recipe never
   read (the ScrapingHub and Utomo & Leu gold sets, manual pages outside the training
   sample, the standard library's reference pages), the keep rate of the heuristic rules,
   of the model and of both, per source, per topic and per language, and per junk kind
   the share rejected and the share of what the rules pass that the model catches. Whether
   the model earns its place (:func:`earns_its_place`) is decided from those figures, and
   everything goes into the model's sidecar.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from afm.filters.classifier import FastTextClassifier, metadata_path, train_classifier
from afm.filters.extraction.gold import GoldPage
from afm.filters.quality.eval import auc, content_and_boilerplate
from afm.filters.quality.junk import JunkText, make_junk, materials_for
from afm.filters.quality.rules import QualityHeuristicsFilter
from afm.filters.quality.texts import (
    KindText,
    gold_texts,
    man_page_texts,
    python_package_texts,
    stdlib_reference_texts,
    usr_share_doc_texts,
)

POSITIVE_KINDS = ("article", "forum", "documentation", "service")  # WCXB page types taken as good
LABEL_POS, LABEL_NEG = "hq", "cc"
KEEP_TARGET = 0.98  # share of held-out good text the threshold keeps
# The grid searched on held-out units: fastText's main knobs at sizes that ship small.
GRID: tuple[dict[str, Any], ...] = tuple(
    {"epoch": epoch, "lr": 0.5, "wordNgrams": ngrams, "dim": dim}
    for epoch in (15, 25) for ngrams in (2, 3) for dim in (32, 64)
)
# What the model must do on held-out data to be on by default (the bar).
MIN_SET_KEEP = 0.90  # every good-text set, rules and model together
MAX_TOPIC_GAP = 0.10  # no topic kept this far below the set's average
MIN_CATCH = 0.5  # share of the junk the rules pass that the model rejects
# Translated manual pages (the languages most installed man-db translations have).
MAN_LANGUAGES = ("de", "fr", "es", "it", "pl", "pt_BR", "ru", "ja", "zh_CN", "nl", "sv", "uk")
TEST_JUNK_PER_KIND = 100


@dataclass
class RecipeTexts:
    """Everything the recipe reads: the training texts with their pages' boilerplate, and
    the test sets (sources the training never reads)."""

    train: list[KindText]
    boilerplate: dict[str, str]
    tests: HeldOutSets
    sources: list[dict[str, str]]


def gold_with_boilerplate(pages: Sequence[GoldPage], kinds: Sequence[str] | None = None
                          ) -> tuple[list[KindText], dict[str, str]]:
    """The main texts of ``pages`` (:func:`~afm.filters.quality.texts.gold_texts`) and each
    page's boilerplate lines by text id (what the junk generators build real chrome from)."""
    texts = gold_texts(pages, kinds=kinds)
    wanted = {t.id for t in texts}
    boilerplate = {f"{p.set}/{p.id}": content_and_boilerplate(p)[1] for p in pages
                   if f"{p.set}/{p.id}" in wanted}
    return texts, boilerplate


def technical_texts(seed: int = 0) -> tuple[list[KindText], dict[str, list[KindText]]]:
    """This machine's technical writing, split as the recipe splits it: (the training
    texts: installed Python packages' descriptions and docs, ``/usr/share/doc`` READMEs, a
    sample of manual pages in English and translated; the held-out sets by name: manual
    pages of other families, English and translated, and the standard library's reference
    pages)."""
    man_train = man_page_texts(limit=300, seed=seed) + man_page_texts(languages=MAN_LANGUAGES, limit=30, seed=seed)
    train = python_package_texts(limit=400, seed=seed) + usr_share_doc_texts(limit=300, seed=seed) + man_train
    families = {t.unit for t in man_train}
    test = {"manpages": man_page_texts(limit=300, seed=seed + 1, exclude_units=families),
            "manpages-translated": man_page_texts(languages=MAN_LANGUAGES, limit=20, seed=seed + 1,
                                                  exclude_units=families),
            "python-stdlib": stdlib_reference_texts(limit=200, seed=seed)}
    return train, test


def recipe_texts(*, train_pages: Sequence[GoldPage], test_pages: dict[str, Sequence[GoldPage]],
                 technical: bool = True, seed: int = 0, languages: Callable[[list[str]], list[str]] | None = None,
                 log: Callable[[str], None] = lambda _m: None) -> RecipeTexts:
    """The recipe's data. Training: the main texts of ``train_pages`` of the
    :data:`POSITIVE_KINDS` and (``technical``) this machine's package documentation, READMEs
    and a sample of its manual pages, English and translated. Tests: the main texts of
    each set of ``test_pages`` (name -> pages), and (``technical``) another sample of
    manual pages (no family of the training sample) and the standard library's reference
    pages, with junk of every kind made from them; ``languages`` labels each test text as
    the language stage would."""
    train, boilerplate = gold_with_boilerplate(train_pages, POSITIVE_KINDS)
    sources = [{"set": "WCXB dev split (article, forum, documentation, service pages)",
                "where": "Murrough-Foley/web-content-extraction-benchmark, dev/", "licence": "CC-BY-4.0",
                "use": "training, and the choice of settings (20% of sites held out)"}]
    good: dict[str, list[KindText]] = {}
    test_boilerplate: dict[str, str] = {}
    for name, pages in test_pages.items():
        texts, bp = gold_with_boilerplate(pages)
        for t in texts:
            good.setdefault(t.source, []).append(t)
        test_boilerplate.update(bp)
        sources.append({"set": name, "use": "held-out test only",
                        "licence": "MIT" if name == "scrapinghub" else "research use (no redistribution)"})
    if technical:
        log("reading this machine's documentation (manual pages, READMEs, package descriptions)")
        tech_train, tech_test = technical_texts(seed)
        train += tech_train
        good.update(tech_test)
        sources += [
            {"set": "installed Python packages' descriptions and docs; /usr/share/doc READMEs; manual pages "
                    "(a sample, one per family)", "where": "this machine", "use": "training",
             "licence": "each package's own; nothing is shipped"},
            {"set": "manual pages of other families; the Python standard library's reference pages",
             "where": "this machine", "use": "held-out test only", "licence": "each package's own; nothing is shipped"}]
    every_test = [t for items in good.values() for t in items]
    junk = make_junk(materials_for(every_test, test_boilerplate), per_kind=TEST_JUNK_PER_KIND, seed=seed + 1)
    langs = dict(zip([t.id for t in every_test], languages([t.text for t in every_test]))) if languages else {}
    return RecipeTexts(train, boilerplate, HeldOutSets(good, junk, langs), sources)


@dataclass
class TrainingSet:
    """Good texts and the junk made from them (one junk text per good text)."""

    positives: list[KindText]
    negatives: list[JunkText]

    def counts(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for j in self.negatives:
            kinds[j.kind] = kinds.get(j.kind, 0) + 1
        sources: dict[str, int] = {}
        for t in self.positives:
            sources[t.source] = sources.get(t.source, 0) + 1
        return {"hq": len(self.positives), "cc": len(self.negatives), "hq_by_source": sources,
                "cc_by_kind": kinds, "units": len({t.unit for t in self.positives})}


def passes_rules(rules: QualityHeuristicsFilter, text: str, language: str | None = None) -> bool:
    """Whether the quality rules keep ``text`` (what the model stage, after them, sees)."""
    checks, _ = rules.signals(text, "web", language)
    return all(bound(value) for _, value, bound in checks)


def training_set(texts: Sequence[KindText], boilerplate: dict[str, str] | None = None, *,
                 seed: int = 0, rules: QualityHeuristicsFilter | None = None,
                 languages: dict[str, str] | None = None, rounds: int = 3) -> TrainingSet:
    """The good ``texts`` and junk made from them (kinds in turn, ``rounds`` texts of junk
    per good text). With ``rules``: both classes as the model stage sees them, after the
    quality rules: the good texts the rules keep (``languages``: each text's language by
    id) and the junk they pass, as much junk as good text. The model then learns what the
    rules miss (word salad, spam, teasers, notices), not what they already catch (menus,
    listings and link lists, whose numbers and names would teach it that a sports report
    or a court story is junk)."""
    materials = materials_for(texts, boilerplate)
    if rules is None:
        return TrainingSet(list(texts), make_junk(materials, seed=seed))
    langs = languages or {}
    good = [t for t in texts if passes_rules(rules, t.text, langs.get(t.id))]
    junk = [j for r in range(rounds) for j in make_junk(materials, seed=seed + r) if passes_rules(rules, j.text)]
    random.Random(seed).shuffle(junk)
    return TrainingSet(good, junk[:len(good)])


def split_units(texts: Sequence[KindText], held_out: float, seed: int = 0
                ) -> tuple[list[KindText], list[KindText]]:
    """(the texts of units on the training side, the texts of held-out units), whole units
    on one side (:func:`held_out_unit`)."""
    held = [held_out_unit(t.unit, held_out, seed) for t in texts]
    return [t for t, h in zip(texts, held) if not h], [t for t, h in zip(texts, held) if h]


DEVELOPMENT_HELD_OUT = 0.3  # share of WCXB's sites and of the technical documents that choose a learned rule's threshold


@dataclass
class DevelopmentSplit:
    """The development texts of afm's learned quality rules (the chrome line model, the
    chain rule): WCXB's main texts and this machine's technical documents, split by site
    or document (:func:`split_units`, :data:`DEVELOPMENT_HELD_OUT`)."""

    train: list[KindText]  # WCXB's training sites' texts
    held: list[KindText]  # WCXB's held-out sites' texts (their pages make the development junk)
    tech_train: list[KindText]
    tech_held: list[KindText]
    boilerplate: dict[str, str]  # each page's boilerplate, by text id

    @property
    def good(self) -> list[KindText]:
        """The held-out good texts a threshold is chosen on."""
        return [*self.held, *self.tech_held]


def development_split(pages: Sequence[GoldPage], *, technical: bool = True, seed: int = 0) -> DevelopmentSplit:
    """WCXB's ``pages`` (article, forum, documentation and service pages) and, with
    ``technical``, this machine's untranslated docs, READMEs and manual pages, split."""
    texts, boilerplate = gold_with_boilerplate(pages, POSITIVE_KINDS)
    train, held = split_units(texts, DEVELOPMENT_HELD_OUT, seed)
    tech_train: list[KindText] = []
    tech_held: list[KindText] = []
    if technical:
        tech = [t for t in technical_texts()[0] if not t.language]
        tech_train, tech_held = split_units(tech, DEVELOPMENT_HELD_OUT, seed)
    return DevelopmentSplit(train, held, tech_train, tech_held, boilerplate)


def held_out_unit(unit: str, fraction: float, seed: int = 0) -> bool:
    """Whether ``unit`` (a site, package, manual-page family) is on the held-out side: a
    seeded hash, so a unit's good texts and the junk made from them stay together."""
    digest = hashlib.sha256(f"{seed}:{unit}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def _train(pos: Sequence[str], neg: Sequence[str], path: Path, params: dict[str, Any], seed: int,
           quantize: bool) -> FastTextClassifier:
    train_classifier(list(pos), list(neg), path, label_pos=LABEL_POS, label_neg=LABEL_NEG, held_out=0.0,
                     seed=seed, quantize=quantize, verbose=False, **params)
    return FastTextClassifier(path)


def choose_settings(ts: TrainingSet, *, held_out: float = 0.2, seed: int = 0, keep_target: float = KEEP_TARGET,
                    grid: Sequence[dict[str, Any]] = GRID, log: Callable[[str], None] = lambda _m: None
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every grid point trained on the units not held out and scored on the others: its
    threshold (the score keeping ``keep_target`` of the held-out good texts), the junk it
    then rejects (overall and per kind) and the AUC. The chosen point rejects the most."""
    pos_train = [t.text for t in ts.positives if not held_out_unit(t.unit, held_out, seed)]
    pos_val = [t.text for t in ts.positives if held_out_unit(t.unit, held_out, seed)]
    neg_train = [j.text for j in ts.negatives if not held_out_unit(j.unit, held_out, seed)]
    neg_val = [j for j in ts.negatives if held_out_unit(j.unit, held_out, seed)]
    if not (pos_val and neg_val and pos_train and neg_train):
        raise ValueError("too few units to hold some out: give more good texts")
    rows = []
    with tempfile.TemporaryDirectory(prefix="afm-quality-grid-") as tmp:
        for i, params in enumerate(grid):
            clf = _train(pos_train, neg_train, Path(tmp) / f"grid{i}.bin", params, seed, quantize=False)
            sp = clf.score(pos_val)
            sn = clf.score([j.text for j in neg_val])
            cut = float(np.quantile(sp, 1 - keep_target))
            by_kind: dict[str, list[bool]] = {}
            for j, s in zip(neg_val, sn):
                by_kind.setdefault(j.kind, []).append(bool(s < cut))
            rows.append({**params, "val_threshold": round(cut, 4), "val_keep": round(float(np.mean(sp >= cut)), 4),
                         "val_junk_rejected": round(float(np.mean(sn < cut)), 4),
                         "val_auc": round(auc(np.r_[sp, sn], np.r_[np.ones(len(sp)), np.zeros(len(sn))]), 4),
                         "val_junk_rejected_by_kind": {k: round(float(np.mean(v)), 3) for k, v in by_kind.items()}})
            log(f"grid {i + 1}/{len(grid)}: {params} -> held-out junk rejected {rows[-1]['val_junk_rejected']:.3f} "
                f"keeping {rows[-1]['val_keep']:.3f} of held-out good text")
    best = max(rows, key=lambda r: (r["val_junk_rejected"], r["val_auc"]))
    chosen = {k: v for k, v in best.items() if not k.startswith("val_")}
    return {**chosen, "threshold": best["val_threshold"]}, rows


def _rate(flags: Sequence[bool]) -> float:
    return round(float(np.mean(flags)), 4) if len(flags) else float("nan")


@dataclass
class HeldOutSets:
    """What the default is tested on: good texts by set name, junk texts (any kinds), and
    the language of each text by id (from the language stage; None: unknown)."""

    good: dict[str, list[KindText]]
    junk: list[JunkText]
    languages: dict[str, str] = field(default_factory=dict)


def held_out_report(score: Callable[[list[str]], np.ndarray], threshold: float, tests: HeldOutSets,
                heuristics: QualityHeuristicsFilter | None = None) -> dict[str, Any]:
    """Keep rates of the rules, the model and both on each good set (overall, per topic,
    per language), and per junk kind: rejected by the rules, by the model, by both, and
    the share of the junk the rules pass that the model rejects."""
    rules = heuristics or QualityHeuristicsFilter()

    def passes(text: str, language: str | None) -> bool:
        return passes_rules(rules, text, language)

    good: dict[str, Any] = {}
    for name, items in tests.good.items():
        if not items:
            continue
        model_keep = np.asarray(score([t.text for t in items])) >= threshold
        rule_keep = np.array([passes(t.text, tests.languages.get(t.id)) for t in items])
        both = model_keep & rule_keep
        topics: dict[str, list[bool]] = {}
        langs: dict[str, list[bool]] = {}
        for t, k in zip(items, both):
            english = tests.languages.get(t.id, "en") == "en"
            if english:  # the topic lists are English; other languages are no topic
                topics.setdefault(t.topic, []).append(bool(k))
            langs.setdefault("en" if english else "other", []).append(bool(k))
        good[name] = {"n": len(items), "rules_keep": _rate(rule_keep), "model_keep": _rate(model_keep),
                      "both_keep": _rate(both), "both_keep_en": _rate(langs.get("en", [])),
                      "by_topic": {k: {"n": len(v), "both_keep": _rate(v)} for k, v in sorted(topics.items())},
                      "by_language": {k: {"n": len(v), "both_keep": _rate(v)} for k, v in sorted(langs.items())}}
    junk: dict[str, Any] = {}
    if tests.junk:
        model_rej = np.asarray(score([j.text for j in tests.junk])) < threshold
        rule_rej = np.array([not passes(j.text, "en") for j in tests.junk])
        kinds: dict[str, list[int]] = {}
        for j, m, r in zip(tests.junk, model_rej, rule_rej):
            kinds.setdefault(j.kind, []).append(int(m) + 2 * int(r))
        for kind, codes in [*sorted(kinds.items()), ("all", [c for v in kinds.values() for c in v])]:
            arr = np.array(codes)
            model, rule = (arr & 1) > 0, (arr & 2) > 0
            passed = ~rule
            junk[kind] = {"n": len(arr), "rules_reject": _rate(rule), "model_reject": _rate(model),
                          "both_reject": _rate(model | rule), "rules_pass": int(passed.sum()),
                          "model_catches_of_rules_pass": _rate(model[passed]) if passed.any() else None}
    return {"good": good, "junk": junk}


def earns_its_place(report: dict[str, Any]) -> dict[str, Any]:
    """Whether the model belongs on by default, from held-out figures: it rejects at least
    :data:`MIN_CATCH` of the junk the rules pass, while the rules and the model together keep
    at least :data:`MIN_SET_KEEP` of every good-text set and no topic of a set (with 10
    texts or more) is kept more than :data:`MAX_TOPIC_GAP` below that set's rate. A set's
    rate is over its English texts: the default language stage keeps no other language,
    so the model never sees them by default (their rate is reported beside)."""
    reasons = []
    catch = (report["junk"].get("all") or {}).get("model_catches_of_rules_pass")
    if catch is None or catch < MIN_CATCH:
        reasons.append(f"catches {catch} of the junk the rules pass (needs {MIN_CATCH})")
    for name, g in report["good"].items():
        keep = g.get("both_keep_en", g["both_keep"])
        if keep != keep:  # no English text in the set: the default language stage keeps none of it
            continue
        if keep < MIN_SET_KEEP:
            reasons.append(f"{name}: keeps {keep:.3f} of its English texts with the rules (needs {MIN_SET_KEEP})")
        for topic, t in g["by_topic"].items():
            if t["n"] >= 10 and topic != "other" and t["both_keep"] < keep - MAX_TOPIC_GAP:
                reasons.append(f"{name}: topic {topic} kept {t['both_keep']:.3f}, more than "
                               f"{MAX_TOPIC_GAP:.2f} below the set's {keep:.3f}")
    return {"on_by_default": not reasons, "why_not": reasons, "catches_of_rules_pass": catch}


@dataclass
class DefaultReport:
    """What ``train-default`` measured; stored in the model's sidecar metadata."""

    chosen: dict[str, Any]
    validation: list[dict[str, Any]]
    counts: dict[str, Any]
    test: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] = field(default_factory=dict)

    def as_metadata(self) -> dict[str, Any]:
        return {"chosen": self.chosen, "validation": self.validation, "counts": self.counts,
                "test": self.test, "verdict": self.verdict}


def train_default(ts: TrainingSet, out: str | Path, *, tests: HeldOutSets, seed: int = 0,
                  grid: Sequence[dict[str, Any]] = GRID, keep_target: float = KEEP_TARGET,
                  sources: list[dict[str, str]] | None = None,
                  log: Callable[[str], None] = lambda _m: None) -> DefaultReport:
    """Steps 3-5 of the recipe: choose on held-out units, train the final model at ``out``,
    test it on ``tests`` (sources the recipe never read), and write the report, the
    threshold and ``sources`` into its sidecar."""
    chosen, rows = choose_settings(ts, seed=seed, grid=grid, keep_target=keep_target, log=log)
    log(f"chosen on held-out units: {chosen}")
    out = Path(out)
    params = {k: v for k, v in chosen.items() if k != "threshold"}
    clf = _train([t.text for t in ts.positives], [j.text for j in ts.negatives], out, params, seed,
                 quantize=out.suffix == ".ftz")
    threshold = float(chosen["threshold"])
    report = DefaultReport(chosen, rows, ts.counts())
    report.test = held_out_report(clf.score, threshold, tests)
    report.verdict = earns_its_place(report.test)
    meta_file = metadata_path(out)
    meta = {k: v for k, v in json.loads(meta_file.read_text()).items()
            if not (isinstance(v, float) and v != v)}  # no NaN: nothing was held out of this fit
    meta.update({"threshold": threshold, "keep_target": keep_target, "recipe": "good text vs junk made from it",
                 "heldout": report.as_metadata(), "sources": sources or []})
    meta_file.write_text(json.dumps(meta, indent=2, sort_keys=True, default=float) + "\n")
    return report


__all__ = ["GRID", "KEEP_TARGET", "LABEL_NEG", "LABEL_POS", "POSITIVE_KINDS", "DefaultReport", "RecipeTexts",
           "DEVELOPMENT_HELD_OUT", "DevelopmentSplit", "HeldOutSets", "TrainingSet", "choose_settings",
           "development_split", "earns_its_place", "gold_with_boilerplate",
           "held_out_unit", "recipe_texts", "technical_texts", "held_out_report", "train_default", "training_set"]
