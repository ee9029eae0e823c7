"""The learned extraction selector: features, the exported trees, the model file, the
cascade on a real-looking page, and by-source cross-validation on a made-up table."""

from __future__ import annotations

import click
import numpy as np
import pytest

from afm.errors import UserError
from afm.filters.extraction import train
from afm.filters.extraction.candidates import CANDIDATES, Page, run_candidate
from afm.filters.extraction.features import agreement, switch_feature_names, switch_features
from afm.filters.extraction.gold import GoldPage, counts, extraction_scores, page_counts
from afm.filters.extraction.select import select_text
from afm.filters.extraction.selector import MODEL_PATH, Selector, TreeEnsemble, load_selector

STORY = "".join(f"<p>The river authority said on Tuesday that flood defences built after storm "
                f"number {i} had held, although fields near the old mill were under water for "
                "a week and the farmers who work them counted the cost of the lost winter crops "
                "and of the fences they will have to rebuild before the spring.</p>"
                for i in range(12))
PAGE = (f"<html><head><title>Floods</title></head><body><nav><a href='/'>Home</a> "
        f"<a href='/news'>News</a></nav><article><h1>Floods held back</h1>{STORY}</article>"
        "<footer>Imprint | Privacy | Contact us</footer></body></html>")


def test_every_candidate_runs_and_none_raises() -> None:
    page = Page(PAGE, "https://example.org/floods")
    for name in CANDIDATES:
        text = run_candidate(name, page)
        assert "storm number 11" in text, name
    assert run_candidate("traf_fast", Page("", None)) == ""  # empty page: empty, no error


def test_agreement_and_switch_features() -> None:
    assert agreement("a b c d e", "a b c d e") == 1.0
    assert agreement("", "") == 1.0
    assert agreement("one two three four five", "six seven eight nine ten") == 0.0
    texts = {"ref": "alpha beta gamma delta epsilon zeta", "x": "alpha beta gamma delta", "y": ""}
    x = switch_features(texts, "ref", ("x", "y"), page_words=50)
    assert x.shape == (2, len(switch_feature_names(("ref", "x", "y"))))
    assert x[1, -2] == 1.0 and x[0, -2] == 0.0  # "empty" of y, not of x


def test_tree_export_matches_sklearn() -> None:
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    y = np.sin(x[:, 0]) + x[:, 1] * (x[:, 2] > 0)
    model = GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(x, y)
    ours = TreeEnsemble.from_json(TreeEnsemble.from_sklearn(model).to_json())
    np.testing.assert_allclose(ours.predict(x), model.predict(x), rtol=1e-6, atol=1e-6)
    # float64 features split as sklearn splits them (read as float32), by the same tree walk
    # as the block extractor's
    wide = rng.normal(size=(300, 4))
    np.testing.assert_allclose(ours.predict(wide), model.predict(wide), rtol=1e-6, atol=1e-6)


def test_shipped_model_loads_and_is_small() -> None:
    selector = load_selector()
    assert MODEL_PATH.stat().st_size < 300_000
    assert selector.fast_candidates[0] in CANDIDATES and selector.reference in CANDIDATES
    assert set(selector.all_candidates) <= set(CANDIDATES)
    assert 0.0 < selector.gate <= 1.0


def test_model_file_round_trip_and_refusals(tmp_path) -> None:
    selector = load_selector()
    selector.save(tmp_path / "s.json")
    again = Selector.load(tmp_path / "s.json")
    assert (again.gate, again.tau, again.others) == (selector.gate, selector.tau, selector.others)
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(UserError):
        Selector.load(tmp_path / "bad.json")
    with pytest.raises(UserError):
        Selector.load(tmp_path / "missing.json")


def test_cascade_fast_path_and_slow_path() -> None:
    selector = load_selector()
    text, signals = select_text(selector, PAGE, "https://example.org/floods")
    assert "storm number 11" in text and "Privacy" not in text
    assert signals["fast_path"] == 1.0  # both fast candidates find the same article
    never = Selector(selector.fast_candidates, selector.reference, selector.others, 1.01,
                     selector.tau, selector.model, {})
    text, signals = select_text(never, PAGE, None)
    assert signals["fast_path"] == 0.0 and "storm number 11" in text


def test_snippet_and_text_gold() -> None:
    assert page_counts("a b c d e", "a b c d e") == (1.0, 0.0, 0.0)
    gold = GoldPage("trafilatura", "p", None, b"", with_=["Flood defences"], without=["Imprint"])
    assert counts(gold, "the flood defences held") == (1.0, 0.0, 0.0)
    assert counts(gold, "flood defences; imprint") == (0.5, 0.5, 0.0)
    assert extraction_scores([(1.0, 0.0, 0.0)])["f1"] == 1.0


def _made_up_table() -> train.Table:
    """Three sources; on every page the reference is right unless its text is empty, when
    resiliparse is right: a switch the model can learn and that transfers across sources."""
    rng = np.random.default_rng(1)
    table = train.Table(names=("traf_fast", "traf_fallback", "traf_recall", "readability",
                               "resiliparse", "justext"))
    for source in ("alpha", "beta", "gamma"):
        for i in range(200):
            broken = i % 4 == 0
            good, bad = (1.0, 0.0, 0.0), (0.2, 0.4, 0.4)
            c = {n: bad for n in table.names}
            c["traf_fallback"] = bad if broken else good
            c["resiliparse"] = good if broken else bad
            c["traf_fast"] = bad if broken else good
            x = rng.normal(size=(len(train.OTHERS), 8)).astype(np.float32)
            x[:, 0] = float(broken)
            x[:, 1] = np.arange(len(train.OTHERS))  # which candidate (real rows: is_<name>)
            table.sets.append(source)
            table.counts.append(c)
            table.agree.append(0.5 if broken else 0.99)
            table.x.append(x)
            table.cpu.append({})
    return table


def test_cross_validation_by_source_learns_a_switch_that_transfers(monkeypatch) -> None:
    monkeypatch.setattr(train, "GBT", {**train.GBT, "n_estimators": 20})
    monkeypatch.setattr(train, "GATES", (0.9,))
    table = _made_up_table()
    results = train.cross_validate_by_source(table)
    assert set(results) == {"alpha", "beta", "gamma"}
    for r in results.values():
        assert r["afm"]["f1"] == pytest.approx(1.0)
        assert r["afm"]["f1"] > max(s["f1"] for s in r["single"].values())
        assert r["fast_share"] == pytest.approx(0.75)
    header, rows = train.report_rows(results)
    assert header[:5] == ["set", "pages", "afm F1", "best single", "margin"] and len(rows) == 3
    with pytest.raises(UserError):
        train.cross_validate_by_source(table.subset(range(400)))  # two sources only


# ----------------------------------------------------------------------------- the vote

REF = "Floods held back\nThe river authority said on Tuesday that the defences held"
CAPTION = "Fields near the old mill were under water for a whole week"
MENU = "Subscribe to our newsletter for more news every single morning"


def test_vote_adds_a_line_a_majority_holds_and_drops_one_only_one_voter_has() -> None:
    from afm.filters.extraction.vote import majority, vote_text

    texts = {"ref": REF,
             "a": f"The river authority said on Tuesday that the defences held\n{CAPTION}",
             "b": f"{CAPTION}\nThe river authority said on Tuesday that the defences held",
             "c": f"{MENU}\nThe river authority said on Tuesday that the defences held"}
    assert majority(3) == 2
    out = vote_text(texts, "ref", ("a", "b", "c"), majority(3)).split("\n")
    assert CAPTION in out  # two of three voters hold it
    assert MENU not in out  # one voter only
    assert out[:2] == REF.split("\n")  # the reference's lines, never out-voted
    assert out.index(CAPTION) == 2  # after the line it follows in the voters' texts
    assert vote_text({"ref": "", "a": "", "b": ""}, "ref", ("a", "b"), 2) == ""


def test_vote_pool_keeps_page_order_and_skips_paragraphs_split_differently() -> None:
    from afm.filters.extraction.vote import pool

    texts = {"ref": "one two three four five six\nten eleven twelve thirteen fourteen",
             "x": "one two three four\nfive six\nseven eight nine ten\nten eleven twelve thirteen"}
    # "one two three four" is inside the reference's first line and "five six" is a
    # short line of its own: only "seven eight nine ten" is new, between the two.
    assert pool(texts, ("ref", "x")) == ["one two three four five six", "five six",
                                          "seven eight nine ten",
                                          "ten eleven twelve thirteen fourteen"]


def test_short_lines_count_only_when_a_candidate_has_that_very_line() -> None:
    from afm.filters.extraction.vote import containment

    texts = {"a": "we met at noon and left at dusk", "b": "at"}
    held = containment(["at"], texts, ("a", "b"))
    assert held[0, 0] == 0.0 and held[0, 1] == 1.0


def test_cross_validation_never_fits_on_the_held_out_source(monkeypatch) -> None:
    table = _made_up_table()
    for c in table.counts:  # a vote column, as build_table makes: the vote path runs
        c[train.VOTE] = c["resiliparse"] if c["traf_fallback"][0] < 1 else c["traf_fallback"]
    table.vote = train.VOTE_SPEC
    seen: list[set[str]] = []
    real = train.search

    def spy(t: train.Table, pages):  # type: ignore[no-untyped-def]
        seen.append({train.source_of(t.sets[i]) for i in pages})
        return real(t, pages)

    monkeypatch.setattr(train, "search", spy)
    results = train.cross_validate_by_source(table)
    assert seen == [{"beta", "gamma"}, {"alpha", "gamma"}, {"alpha", "beta"}]
    for r in results.values():  # the vote column is never a "single" candidate
        assert train.VOTE not in r["single"]
        assert r["afm"]["f1"] == pytest.approx(1.0)
        assert r["switch_share"] == pytest.approx(0.25)  # the slow pages: voted


def test_cascade_slow_path_votes() -> None:
    selector = load_selector()
    assert selector.votes and selector.min_votes >= 1
    slow = Selector(selector.fast_candidates, selector.reference, selector.others, 1.01,
                    selector.tau, selector.model, {}, selector.voters, selector.min_votes)
    text, signals = select_text(slow, PAGE, None)
    assert signals["fast_path"] == 0.0 and signals["candidate"] == -1.0
    assert "storm number 11" in text and "Privacy" not in text


# ------------------------------------------------------------ more sources, nested choice


def test_utomo_loader_pairs_pages_with_gold_and_names_sets(tmp_path) -> None:
    from afm.filters.extraction.gold import load_sets

    for folder, name in (("big5-05", "flood (1)"), ("chaos-all", "storm (2)")):
        (tmp_path / folder / "html").mkdir(parents=True)
        (tmp_path / folder / "gold").mkdir()
        (tmp_path / folder / "html" / f"{name}.htm").write_bytes(b"<p>The defences held</p>")
        (tmp_path / folder / "gold" / f"{name}.txt").write_bytes("Caf\xe9 defences".encode("cp1252"))
    (tmp_path / "chaos-all" / "html" / "orphan.htm").write_bytes(b"<p>no gold</p>")
    pages = load_sets(utomo=tmp_path)
    assert [(p.set, p.id) for p in pages] == [("utomo-big5", "big5-05/flood (1)"),
                                              ("utomo-chaos", "chaos-all/storm (2)")]
    assert pages[0].truth == "Café defences"  # not UTF-8: read as Windows-1252
    assert train.source_of(pages[1].set) == "utomo"


def test_googletrends_loader_reads_the_main_label_and_hides_the_labels(tmp_path) -> None:
    from afm.filters.extraction.gold import load_sets

    (tmp_path / "raw_html").mkdir()
    (tmp_path / "raw_html" / "001.html").write_bytes(
        b'<html><body><nav>Home</nav><h1 __label="title">Storm hits</h1>'
        b'<div __label="main "><p>The storm <b>came</b> at dawn.</p><p>Roads closed.</p>'
        b'<p __label="main">Nested once.</p><figcaption __label="caption">A photo</figcaption>'
        b'<div __label=\'commen\'><p>First!</p></div></div><footer>About us</footer></body></html>')
    (tmp_path / "raw_html" / "002.html").write_bytes(b'<p __label="comment">only a comment</p>')
    pages = load_sets(googletrends=tmp_path)
    assert [(p.set, p.id) for p in pages] == [("googletrends", "001")]  # no main: no gold
    page = pages[0]
    assert page.truth == "The storm came at dawn.\nRoads closed.\nNested once."
    assert b"__label" not in page.body and b"<b>came</b>" in page.body  # the answer is hidden
    assert train.source_of(page.set) == "googletrends"


def test_fundus_loader_pairs_versions_with_pages_and_keeps_only_visible_gold(tmp_path) -> None:
    import gzip
    import json

    from afm.filters.extraction.gold import load_sets

    data = tmp_path / "tests" / "resources" / "parser" / "test_data" / "uk"
    data.mkdir(parents=True)
    words = " ".join(f"word{k}" for k in range(60))

    def page(text: str, extra: str = "") -> bytes:
        return gzip.compress(f"<html><head>{extra}</head><body><nav>Home</nav><p>{text}</p>"
                             f"<script>var x = 1;</script></body></html>".encode())

    body = {"summary": ["Lead line here."], "sections": [{"headline": [], "paragraphs": [words]}]}
    umlauts = " ".join(f"\u00fcbung{k}" for k in range(60))  # UTF-8, no charset declared
    (data / "Paper.json").write_text(json.dumps({
        "V1": {"body": {"summary": [], "sections": [{"headline": ["Old"], "paragraphs": ["old " + umlauts]}]}},
        "V1_1": {"body": body}}))
    (data / "Paper_2024_01_02.html.gz").write_bytes(page("Old old " + umlauts))
    (data / "Paper_2025_03_04.html.gz").write_bytes(
        page("Lead line here. " + words + " caf\u00e9", '<meta charset="iso-8859-1">'))
    (data / "Hidden.json").write_text(json.dumps({"V1": {"body": body}}))  # gold only in a script
    (data / "Hidden_2024_05_06.html.gz").write_bytes(gzip.compress(
        f"<html><body><script>{{\"body\": \"Lead line here. {words}\"}}</script></body></html>".encode()))
    (data / "Short.json").write_text(json.dumps({"V1": {"body": {"summary": ["Two words."]}}}))
    (data / "Short_2024_05_06.html.gz").write_bytes(page("Two words."))
    (data / "meta.info").write_text(json.dumps({
        "Paper_2025_03_04.html.gz": {"url": "https://paper.example/a", "crawl_date": "2025-03-04"}}))
    pages = load_sets(fundus=tmp_path)
    assert [(p.set, p.id) for p in pages] == [("fundus", "uk/Paper_2024_01_02"), ("fundus", "uk/Paper_2025_03_04")]
    assert pages[0].truth == "Old\nold " + umlauts  # the oldest page is the first version's
    assert pages[1].truth == "Lead line here.\n" + words and pages[1].url == "https://paper.example/a"
    assert "caf\u00e9".encode("iso-8859-1") in pages[1].body  # in the charset its page declares
    assert train.source_of(pages[0].set) == "fundus"


def test_nested_cv_chooses_the_panel_without_the_held_out_source(monkeypatch) -> None:
    from afm.filters.extraction import nested

    table = _made_up_table()
    good = (1.0, 0.0, 0.0)
    small, big = ("traf_fast", "readability", "resiliparse"), ("traf_recall", "traf_fast",
                                                              "readability", "resiliparse")
    for i, c in enumerate(table.counts):  # the small panel fixes broken pages on alpha only
        broken = c["traf_fallback"] != good
        c[nested.vote_column(train.REFERENCE, small)] = (
            good if broken and table.sets[i] == "alpha" else c["traf_fallback"])
        c[nested.vote_column(train.REFERENCE, big)] = good if broken else c["traf_fallback"]
    configs = nested.grid(panels=(small, big), gates=(0.9,), fasts=(train.FAST[0],))
    seen: list[set[str]] = []
    real = nested.choose

    def spy(scorer, cf, by_source):  # type: ignore[no-untyped-def]
        seen.append(set(by_source))
        return real(scorer, cf, by_source)

    results = nested.nested_cv(table, configs, chooser=spy, n_boot=50)
    assert seen == [{"beta", "gamma"}, {"alpha", "gamma"}, {"alpha", "beta"}]
    for r in results.values():  # the big panel is chosen (the small one fails beta, gamma)
        assert r["config"] == str(nested.Config(big, 0.9))
        assert r["afm"] == pytest.approx(1.0) and r["margin"] > 0 and r["p_ahead"] == 1.0
    header, rows = nested.report_rows(results)
    assert header[5] == "margin" and len(rows) == 3
    with pytest.raises(UserError):
        nested.nested_cv(table.subset(range(400)), configs)


def test_trim_edges_drops_only_the_edge_lines_the_other_lacks() -> None:
    from afm.filters.extraction.vote import trim_edges

    body = ["The storm reached the coast on Monday night with heavy rain.",
            "Related: five other stories nobody else printed here at all",
            "Officials said the river would crest on Wednesday morning."]
    text = "\n".join(["| | |", "By Staff Writer of the daily news desk", *body,
                      "- Most viewed story one of the day today"])
    other = "\n".join([body[0], body[2]])
    assert trim_edges(text, other) == "\n".join(body)  # the middle line stays
    assert trim_edges(text, "") == text  # nothing held: untouched
    assert trim_edges("\n".join(body), "\n".join(body)) == "\n".join(body)


def test_every_gold_set_is_an_option_of_the_extraction_commands(tmp_path) -> None:
    """`afm extraction table` and `afm extraction blocks table` take each set ``gold.LOADERS``
    knows, by the same name, and no other; an unknown path is refused in one line."""
    from click.testing import CliRunner

    from afm.app.commands.filters.extraction import GOLD_SET_HELP, extraction
    from afm.filters.extraction.gold import LOADERS

    assert list(GOLD_SET_HELP) == list(LOADERS)
    for command in (["table"], ["blocks", "table"]):
        result = CliRunner().invoke(extraction, [*command, "--help"])
        assert all(f"--{name}" in result.output for name in LOADERS), result.output
    result = CliRunner().invoke(extraction, ["blocks", "table", "--utomo", str(tmp_path / "none"),
                                             "--cache", str(tmp_path / "c")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_the_nets_option_states_the_package_default_and_refuses_zero(tmp_path) -> None:
    """``--nets``'s help names ``SEQUENCE["nets"]`` (the command module does not import the
    package, so the two are kept in step here); a count out of range is a usage error."""
    from click.testing import CliRunner

    from afm.app.commands.filters.extraction import _NETS_HELP, extraction
    from afm.filters.extraction.block_sequence import SEQUENCE

    assert f"[default: {SEQUENCE['nets']}]" in _NETS_HELP
    result = CliRunner().invoke(extraction, ["blocks", "cv", "--cache", str(tmp_path), "--nets", "0"])
    assert result.exit_code == 2 and "--nets" in result.output


def test_the_fallback_cap_is_the_choices_default_and_a_share() -> None:
    """``--max-fallback-share`` says the choice's default and refuses what is not a share."""
    from click.testing import CliRunner

    from afm.app.commands.filters.extraction import _MAX_FALLBACK_HELP, _choice, extraction
    from afm.filters.extraction.block_train import MAX_FALLBACK_SHARE, Choice, page_rules

    assert f"[default: {MAX_FALLBACK_SHARE}]" in _MAX_FALLBACK_HELP
    assert _choice(("mix",), (), None) == Choice(variants=("mix",)) and Choice().max_fallback_share == MAX_FALLBACK_SHARE
    assert _choice(("one",), ("none",), 0.015) == Choice(("one",), rules=tuple(page_rules(())),
                                                        max_fallback_share=0.015)
    assert _choice(("mix",), (), None, lead_rule=False) == Choice(
        variants=("mix",), rules=tuple(page_rules(leads=(None,))))
    result = CliRunner().invoke(extraction, ["blocks", "train", "--cache", ".", "--max-fallback-share", "1.5"])
    assert result.exit_code == 2 and "--max-fallback-share" in result.output


def test_the_fallback_option_names_the_extractors_a_rule_may_hand_pages_to() -> None:
    """``--fallback`` offers the page rule's extractors and none (in step with the model's
    list), gives the grid of each, and refuses `none` beside an extractor in one line."""
    from click.testing import CliRunner

    from afm.app.commands.filters.extraction import FALLBACK_CHOICES, _page_rules, extraction
    from afm.filters.extraction.block_model import FALLBACK_EXTRACTORS
    from afm.filters.extraction.block_train import page_rules

    assert FALLBACK_CHOICES == (*FALLBACK_EXTRACTORS, "none")
    assert _page_rules(()) == page_rules() == page_rules(("resiliparse",))
    assert _page_rules(("trafilatura",)) == page_rules(("trafilatura",)) != page_rules()
    assert _page_rules(("none",)) == page_rules(())
    assert _page_rules(("resiliparse",)) == page_rules(("resiliparse",))
    # --no-lead-rule: the same grids less every rule that drops the blocks above the text
    assert _page_rules((), False) == [r for r in page_rules() if r.lead_words is None] == page_rules(leads=(None,))
    assert _page_rules(("none",), False) == [r for r in page_rules(()) if r.lead_words is None]
    # --headline drop: the same grids less every rule that keeps the headline
    assert _page_rules((), True, "drop") == [r for r in page_rules() if r.drop_headline] == page_rules(headlines=(True,))
    assert _page_rules((), False, "drop") == [r for r in page_rules() if r.drop_headline and r.lead_words is None]
    with pytest.raises(click.BadParameter, match="--headline|keep"):
        _page_rules((), True, "keep")
    result = CliRunner().invoke(extraction, ["blocks", "cv", "--cache", ".", "--fallback", "none",
                                             "--fallback", "resiliparse"])
    assert result.exit_code == 2 and "`none` cannot be named with an extractor" in result.output
    result = CliRunner().invoke(extraction, ["blocks", "cv", "--cache", ".", "--fallback", "boilerpipe"])
    assert result.exit_code == 2 and "--fallback" in result.output
    result = CliRunner().invoke(extraction, ["blocks", "train", "--cache", ".", "--headline", "keep"])
    assert result.exit_code == 2 and "--headline" in result.output


def test_block_commands_take_some_sources_of_a_cache_and_refuse_one_it_lacks(monkeypatch) -> None:
    """``--source`` keeps only the named sources' records (the four training sources of a
    cache that also holds Google-Trends); a source the cache lacks is a one-line error."""
    from types import SimpleNamespace

    import afm.filters.extraction.block_train as block_train
    from afm.app.commands.filters.extraction import _block_records
    from afm.errors import UserError

    sets = ["scrapinghub", "utomo-big5", "utomo-chaos", "wcxb-forum", "googletrends"]
    monkeypatch.setattr(block_train, "load_records", lambda cache: [SimpleNamespace(set=s) for s in sets])
    assert len(_block_records("c", ())) == 5
    kept = _block_records("c", ("utomo", "wcxb"))
    assert [r.set for r in kept] == ["utomo-big5", "utomo-chaos", "wcxb-forum"]
    with pytest.raises(UserError, match="no pages of trafilatura"):
        _block_records("c", ("utomo", "trafilatura"))
    from click.testing import CliRunner

    from afm.app.commands.filters.extraction import extraction

    result = CliRunner().invoke(extraction, ["blocks", "cv", "--cache", ".", "--source", "wcbx"])
    assert result.exit_code == 2 and "wcbx" in result.output  # a misspelt source: a usage error


def test_the_page_rule_options_reach_the_choice_of_cv_and_train(monkeypatch, tmp_path) -> None:
    """``--no-lead-rule`` and ``--headline drop`` narrow the grid the nested run and the
    training search (the defaults: the full grid, so earlier runs repeat)."""
    from click.testing import CliRunner

    import afm.app.commands.filters.extraction as commands
    import afm.filters.extraction.block_train as block_train
    from afm.filters.extraction.block_train import page_rules

    seen: list = []

    def stop(records, choice, *rest, **kw):
        seen.append(choice)
        raise SystemExit(0)

    monkeypatch.setattr(commands, "_block_records", lambda cache, sources: [])
    monkeypatch.setattr(block_train, "cross_validate", stop)
    monkeypatch.setattr(block_train, "fit_model", lambda records, idx, fits, meta, choice, log: stop(records, choice))
    monkeypatch.setattr(block_train, "Fits", lambda *a, **kw: None)
    for command in ("cv", "train"):
        for flags, rules in (([], page_rules()),
                             (["--no-lead-rule", "--headline", "drop"],
                              [r for r in page_rules() if r.lead_words is None and r.drop_headline])):
            result = CliRunner().invoke(commands.extraction, ["blocks", command, "--cache", str(tmp_path), *flags])
            assert result.exit_code == 0, result.output
            assert list(seen[-1].rules) == rules
    assert len(seen) == 4


def test_block_records_of_an_older_feature_list_are_refused_in_one_line(tmp_path) -> None:
    """A cache built before the feature list grew would train a model whose file names
    columns its rows lack: it is refused, with the command that rebuilds it."""
    import gzip
    import json
    import pickle
    from types import SimpleNamespace

    import numpy as np

    from afm.errors import UserError
    from afm.filters.extraction import block_train

    record = SimpleNamespace(set="wcxb-article", id="1", x=np.zeros((2, 3), dtype=np.float32), cpu={})
    with gzip.open(tmp_path / "blocks-wcxb.pkl.gz", "wb") as f:
        pickle.dump([record], f)
    with gzip.open(tmp_path / "baselines-wcxb.jsonl.gz", "wt") as f:
        f.write(json.dumps({"set": "wcxb-article", "id": "1", "texts": {}, "cpu": {}}) + "\n")
    with pytest.raises(UserError, match="afm extraction blocks table"):
        block_train.load_records(tmp_path)
