"""The learned chrome-line rule (filters/quality/chrome_model.py, chrome_train.py): the
shipped model reads a page's own chrome as chrome and prose as prose, the rule says what
decided, and training and the threshold choice work on small data."""

from __future__ import annotations

import pytest

from afm.filters.classifier import train_classifier
from afm.filters.quality.chrome_model import (
    CHROME,
    DEFAULT_MODEL,
    MAX_LINE_WORDS,
    NUMBER,
    WORD,
    ChromeLineModel,
    delexicalise,
    delexicalise_lines,
    load_chrome_model,
)
from afm.filters.quality.chrome_train import (
    TECHNICAL_LINES,
    choose_threshold,
    site_vocabulary,
    train_chrome_model,
    training_lines,
)
from afm.filters.quality.defaults import split_units
from afm.filters.quality.rules import QualityConfig, QualityHeuristicsFilter
from afm.filters.quality.texts import KindText

# A page's own chrome, as a failed extraction leaves it (written for this test).
MENU = "\n".join([
    "Skip to main content", "Home", "News", "Sport", "Weather", "Sign in", "Register",
    "Subscribe to our newsletter", "Search", "Menu", "Contact us", "About us",
    "Follow us on Facebook", "Share on Twitter", "Related articles", "Most popular",
    "Privacy policy", "Terms of use", "Cookie settings", "Back to top", "Log in",
    "Create an account", "Forgot your password?", "Shop all", "New arrivals", "Sale",
    "Read more", "Previous post", "Next post", "Leave a comment", "Categories", "Tags",
    "Archives", "Recent posts", "Popular posts", "Site map", "Careers", "Advertise with us",
])
PROSE = (
    "The council met on Tuesday evening to discuss the budget for the city's public schools, "
    "which has grown by four percent since last year.\n"
    "Members said the plan would add forty teachers next autumn, paid for by a local tax that "
    "voters approved in the spring after a long campaign.\n"
    "Parents who spoke at the meeting asked for smaller classes in the first years of primary "
    "school, where they said the need is greatest.\n"
    "The final vote is expected next month, once the finance committee has reviewed the figures "
    "and heard from the teachers' union.\n"
    "Several members said they would wait for the committee's figures before deciding how to vote.\n"
)


@pytest.fixture(scope="module")
def shipped() -> ChromeLineModel:
    if not DEFAULT_MODEL.is_file():
        pytest.fail(f"the shipped chrome line model is missing: {DEFAULT_MODEL}")
    return load_chrome_model("builtin")


def test_shipped_model_reads_menus_as_chrome_and_prose_as_content(shipped):
    threshold = QualityConfig().max_chrome_model_share
    assert shipped.classifier.label_pos == CHROME
    assert shipped.share(MENU.splitlines()) > 0.8 > threshold
    assert shipped.share(PROSE.splitlines()) < 0.1
    assert shipped.share([]) == 0.0


def test_only_short_lines_count_weighed_by_the_root_of_their_words(shipped):
    lines = PROSE.splitlines()
    assert all(len(line.split()) > MAX_LINE_WORDS for line in lines)
    assert shipped.line_scores(["Home"])[0] > 0.5
    # long lines are never chrome; one one-word chrome line weighs sqrt(1) among them
    expected = 1 / (1 + sum(len(line.split()) ** 0.5 for line in lines))
    assert shipped.share([*lines, "Home"]) == pytest.approx(expected)
    assert shipped.share(lines) == 0.0


def test_rule_rejects_chrome_with_its_value_and_threshold():
    rule = QualityHeuristicsFilter()
    page = PROSE + MENU  # a little text under a page of chrome
    decision = rule({"text": page, "language": "en", "source": "web"})
    assert not decision.keep
    assert "afm_chrome_model_share" in decision.details["failed_rules"]
    assert decision.signals["afm_chrome_model_share"] > QualityConfig().max_chrome_model_share
    kept = rule({"text": PROSE, "language": "en", "source": "web"})
    assert kept.keep, kept.details
    assert kept.signals["afm_chrome_model_share"] < 0.1


def test_rule_reads_only_its_languages_and_is_off_in_published_rules():
    rule = QualityHeuristicsFilter()
    checks, _ = rule.signals(PROSE + MENU, "web", "de")
    name, value, bound = next(c for c in checks if c[0] == "afm_chrome_model_share")
    assert bound(1.0)  # not applied to German text
    published = QualityHeuristicsFilter(QualityConfig.published())
    assert all(c[0] != "afm_chrome_model_share" for c in published.signals(PROSE, "web", "en")[0])
    off = QualityHeuristicsFilter(QualityConfig(chrome_model=None))
    assert all(c[0] != "afm_chrome_model_share" for c in off.signals(PROSE, "web", "en")[0])


def test_the_threshold_is_a_share():
    from afm.config import ConfigError, from_dict

    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ConfigError, match="max_chrome_model_share"):
            from_dict(QualityConfig, {"max_chrome_model_share": bad}, path="quality")
    assert from_dict(QualityConfig, {"max_chrome_model_share": None}).max_chrome_model_share is None


def test_a_missing_model_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="quality.chrome_model"):
        QualityHeuristicsFilter(QualityConfig(chrome_model=str(tmp_path / "none.ftz")))


def _page(i: int, site: str) -> KindText:
    return KindText(text=PROSE, source="wcxb", kind="article", unit=site, id=f"p{i}")


def test_training_lines_leave_out_chrome_that_holds_main_text():
    page = _page(0, "a.example")
    boilerplate = {"p0": "Home\nSign in\n" + PROSE.splitlines()[0] + "\nShare on Twitter"}
    long_doc = KindText(text="\n".join(f"option line {i} sets a value" for i in range(500)),
                        source="manpages", kind="manual", unit="ls", id="m0")
    chrome, content = training_lines([page], boilerplate, [long_doc])
    assert chrome == [("a.example", "Home"), ("a.example", "Sign in"), ("a.example", "Share on Twitter")]
    # the prose lines are long (never read as chrome, so not learned); technical lines capped
    assert len(content) == TECHNICAL_LINES


def test_lines_are_read_without_the_words_few_sites_use():
    vocabulary = frozenset({"sign", "in", "share", "on"})
    assert delexicalise("Sign in", vocabulary) == "sign in"
    assert delexicalise("200 g butter, softened", vocabulary) == f"{NUMBER} {WORD} {WORD} , {WORD}"
    assert delexicalise("Share on Twitter!", vocabulary) == f"share on {WORD} !"
    lines = [(f"site{i}", "Sign in") for i in range(3)] + [("site0", "Butter cake"), ("site1", "Butter")]
    assert site_vocabulary(lines, min_units=2) == ["butter", "in", "sign"]
    assert site_vocabulary(lines, min_units=3) == ["in", "sign"]


def test_a_plain_classifier_is_not_a_chrome_model(tmp_path):
    out = tmp_path / "plain.ftz"
    train_classifier(["home", "sign in"] * 20, ["the council met", "members said"] * 20, out,
                     label_pos=CHROME, label_neg="content", held_out=0.0, verbose=False)
    with pytest.raises(ValueError, match="not a chrome line model"):
        ChromeLineModel(out)


def test_units_are_split_whole():
    texts = [_page(i, f"site{i % 20}.example") for i in range(60)]
    train, held = split_units(texts, 0.3)
    assert train and held and len(train) + len(held) == 60
    assert not {t.unit for t in train} & {t.unit for t in held}


def test_threshold_keeps_the_target_share():
    assert choose_threshold([i / 100 for i in range(100)], keep=0.98) == 0.98
    assert choose_threshold([0.201] * 10, keep=0.98) == 0.21


def test_a_model_trained_on_small_data_scores_lines(tmp_path):
    short_prose = "\n".join(["The council met on Tuesday.", "Members approved the plan.",
                             "Parents asked for smaller classes.", "The vote is next month."])
    pages = [KindText(text=short_prose, source="wcxb", kind="article", unit=f"site{i}.example", id=f"p{i}")
             for i in range(30)]
    boilerplate = {f"p{i}": MENU for i in range(30)}
    out = tmp_path / "chrome.ftz"
    info = train_chrome_model(pages, boilerplate, [], out)
    assert out.is_file() and info["chrome_lines"] == 30 * len(MENU.splitlines())
    model = ChromeLineModel(out)
    assert model.share(MENU.splitlines()) > 0.8
    assert model.share(short_prose.splitlines()) < 0.2


def test_lines_delexicalised_together_read_as_each_alone() -> None:
    """The scoring path (one pass over a text's lines, token forms remembered) gives the
    strings training used, line by line, on the cases where a joined pass could differ."""
    vocabulary = frozenset({"sign", "in", "home", "label"})
    lines = ["Sign in | Home", "ΟΔΟΣ", "ΟΔΟΣ.", "ΑΣ ΒΣ", "x__label__y", "__LABEL__ Sign in", "İstanbul",
             "12,000 items — 3.5%", "a\u00a0b\u2003c", "tab\tsep", "", "   ", "Skip to content »"]
    forms: dict[str, str] = {}
    for _ in range(2):  # the second time from the remembered forms
        assert delexicalise_lines(lines, vocabulary, forms) == [delexicalise(x, vocabulary) for x in lines]
    assert delexicalise_lines([], vocabulary, forms) == []
    assert delexicalise_lines(["a\nb", "Home"], vocabulary, {}) == [delexicalise("a\nb", vocabulary), "home"]

