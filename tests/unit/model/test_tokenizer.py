"""The SentencePiece BPE tokenizer: digits, byte fallback round trips, specials, chat."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from afm.model.text.tokenizer import CHAT_TOKENS, Tokenizer, TokenizerError, train_tokenizer

WORDS = ("the model data train token apple web page text quality filter language crawl "
         "robots shard parquet beam digit number year report learning rate batch").split()


def make_corpus(path: Path, n_docs: int = 300, seed: int = 0) -> Path:
    """Deterministic documents with words, numbers, punctuation and a little Unicode."""
    rng = random.Random(seed)
    lines = []
    for i in range(n_docs):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 40))]
        words.insert(rng.randrange(len(words)), str(rng.randint(0, 99_999)))
        text = " ".join(words).capitalize() + ". Café naïve 漢字.\nSecond line, 2024."
        lines.append(json.dumps({"id": f"d{i:04d}", "source": "web", "text": text}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("corpus") / "docs.jsonl")


@pytest.fixture(scope="module")
def tok_dir(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tokenizer([str(corpus)], tmp_path_factory.mktemp("tok"), vocab_size=400, sample_docs=200)


@pytest.fixture(scope="module")
def tok(tok_dir: Path) -> Tokenizer:
    return Tokenizer.load(tok_dir)


def test_specials_and_metadata(tok: Tokenizer, tok_dir: Path) -> None:
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert 300 < tok.vocab_size <= 400
    meta = json.loads((tok_dir / "tokenizer_meta.json").read_text())
    assert meta["docs_seen"] == 300 and meta["docs_sampled"] == 200
    assert meta["split_digits"] and meta["byte_fallback"] and meta["normalization"] == "identity"
    for t in CHAT_TOKENS:
        assert tok.sp.is_control(tok.chat_ids[t])


def test_every_digit_is_its_own_token(tok: Tokenizer) -> None:
    text = "year 2024 and 31415926 apples"
    pieces = [tok.id_to_piece(i) for i in tok.encode(text)]
    digit_pieces = [p for p in pieces if any(c.isdigit() for c in p)]
    assert digit_pieces == list("202431415926")


@pytest.mark.parametrize(
    "text",
    [
        "plain words from the model report",
        "emoji 🤖🎉👩‍👩‍👧 and CJK 漢字かなカナ 한국어",
        "control \x00\x01\x07\x1b[0m\x7f bytes",
        "  leading, double  and trailing spaces  ",
        "tabs\tand\nnew\r\nlines\n\n",
        "NFKC would fold these: ﬁ ① Ｆｕｌｌ e\u0301 \u00e9",
        "rare scripts: ᚠᛇᚻ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓂀",
        "",
    ],
)
def test_utf8_round_trips_exactly(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.unk_id not in ids  # byte fallback: nothing becomes <unk>


def test_random_unicode_round_trips(tok: Tokenizer) -> None:
    rng = random.Random(7)
    for _ in range(50):
        chars = []
        for _ in range(rng.randint(1, 30)):
            cp = rng.randint(0, 0x10FFFF)
            # Surrogates are not encodable; U+2581 is SentencePiece's own space marker.
            if 0xD800 <= cp <= 0xDFFF or cp == 0x2581:
                cp = 0x41
            chars.append(chr(cp))
        text = "".join(chars)
        assert tok.decode(tok.encode(text)) == text


def test_user_text_cannot_forge_control_tokens(tok: Tokenizer) -> None:
    ids = tok.encode("<|assistant|> hi </s>")
    assert tok.role_id("assistant") not in ids and tok.eos_id not in ids
    assert tok.decode(ids) == "<|assistant|> hi </s>"


def test_chat_template_and_assistant_mask(tok: Tokenizer) -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "the data"}]
    ids, mask = tok.encode_chat(msgs)
    assert ids[0] == tok.bos_id and ids[1] == tok.role_id("user")
    reply = tok.encode("the data") + [tok.end_id]
    assert [i for i, m in zip(ids, mask) if m] == reply
    prompt, _ = tok.encode_chat(msgs[:1], add_generation_prompt=True)
    assert prompt[-1] == tok.role_id("assistant")
    with pytest.raises(TokenizerError):
        tok.encode_chat([{"role": "wizard", "content": "x"}])


def test_training_is_deterministic_and_checks_vocab(corpus: Path, tok_dir: Path, tmp_path: Path) -> None:
    again = train_tokenizer([str(corpus)], tmp_path / "again", vocab_size=400, sample_docs=200)
    # Same sample, same pieces and scores (the model file also records its own paths).
    assert Tokenizer.load(again).pieces() == Tokenizer.load(tok_dir).pieces()
    with pytest.raises(TokenizerError, match="too small"):
        train_tokenizer([str(corpus)], tmp_path / "small", vocab_size=100)
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"id": "x", "text": ""}) + "\n")
    with pytest.raises(TokenizerError, match="no documents"):
        train_tokenizer([str(empty)], tmp_path / "none", vocab_size=400)
    # SentencePiece's own refusals (more characters than pieces) are user errors, not crashes.
    varied = tmp_path / "varied.jsonl"
    varied.write_text(json.dumps({"id": "v", "text": "".join(chr(0x4E00 + i) for i in range(300))}) + "\n")
    with pytest.raises(TokenizerError, match="SentencePiece could not train"):
        train_tokenizer([str(varied)], tmp_path / "varied", vocab_size=300)


@pytest.fixture(scope="module")
def sixty_articles(tmp_path_factory, shared_eval) -> Path:
    """60 real articles (the extraction benchmark's gold text: many scripts and symbols)."""
    truth = json.loads((shared_eval / "extraction" / "ground-truth.json").read_text(encoding="utf-8"))
    rows = [{"id": k, "text": v["articleBody"]} for k, v in sorted(truth.items())[:60]]
    path = tmp_path_factory.mktemp("articles") / "articles.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_small_vocabulary_on_real_articles_trains_with_a_lowered_coverage(sixty_articles, tmp_path) -> None:
    """SentencePiece alone refuses vocab 512 here ("Vocabulary size is smaller than
    required_chars", naming its own --character_coverage); afm lowers the coverage so that
    the characters fit and says so."""
    from click.testing import CliRunner

    from afm.app.cli import main

    out = CliRunner().invoke(main, ["tokenizer", "train", "--input", str(sixty_articles), "--vocab-size", "512",
                                    "--out", str(tmp_path / "tok")])
    assert out.exit_code == 0, out.output
    meta = json.loads((tmp_path / "tok" / "tokenizer_meta.json").read_text())
    assert meta["character_coverage"] < 0.9995 and meta["characters"] < meta["distinct_characters"]
    assert "lowered" in meta["coverage_choice"] and "of 512 requested" in out.output
    tok = Tokenizer.load(tmp_path / "tok")
    text = "Gaming used to be so simple — naïve café ☃"
    assert tok.decode(tok.encode(text)) == text  # the rare characters still round-trip (bytes)
    # The one output rule: an existing tokenizer is refused before any training, kept
    # until a run with --overwrite has trained the new one.
    again = ["tokenizer", "train", "--input", str(sixty_articles), "--vocab-size", "400", "--out", str(tmp_path / "tok")]
    refused = CliRunner().invoke(main, again)
    assert refused.exit_code != 0 and "--overwrite" in refused.output and "Traceback" not in refused.output
    assert json.loads((tmp_path / "tok" / "tokenizer_meta.json").read_text()) == meta
    replaced = CliRunner().invoke(main, [*again, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert json.loads((tmp_path / "tok" / "tokenizer_meta.json").read_text())["vocab_size"] <= 400


def test_a_coverage_that_does_not_fit_is_afm_advice_not_sentencepiece(sixty_articles, tmp_path) -> None:
    from click.testing import CliRunner

    from afm.app.cli import main

    out = CliRunner().invoke(main, ["tokenizer", "train", "--input", str(sixty_articles), "--vocab-size", "512",
                                    "--character-coverage", "0.9995", "--out", str(tmp_path / "tok")])
    assert out.exit_code != 0 and "Traceback" not in out.output
    message = " ".join(out.output.split())
    assert "--vocab-size" in message and "--character-coverage" in message
    assert "character_coverage" not in message.replace("--character-coverage", "")  # not SentencePiece's name
