"""The AFM tokenizer (report §3.1.6): SentencePiece BPE, one token per digit, byte fallback,
no Unicode normalisation.

Choices beyond the report (the project's own):

* **Identity normalisation and no dummy prefix**: ``decode(encode(s)) == s`` for any
  string that does not contain U+2581 ("▁", SentencePiece's own space marker, which
  decodes to a space). Spaces are kept exactly; nothing is NFKC-folded.
* **Byte fallback** covers everything outside the learned pieces (rare scripts, control
  bytes, invalid-looking sequences): such characters become their UTF-8 bytes
  ``<0x..>``, so there is no ``<unk>`` in practice.
* **Special ids**: ``<pad>`` 0, ``<s>`` (BOS) 1, ``</s>`` (EOS) 2, ``<unk>`` 3, then the
  chat-template control tokens :data:`CHAT_TOKENS`. Control tokens are never produced by
  :meth:`Tokenizer.encode` from user text (a user cannot type a role switch); they are
  inserted by :meth:`Tokenizer.encode_chat`.
* **Training input**: a deterministic (seeded) reservoir sample of ``sample_docs``
  documents from the input shards, split into lines (SentencePiece's unit), lines longer
  than ``max_sentence_length`` bytes cut into pieces rather than dropped.
* **Small corpora**: with ``hard_vocab_limit=False`` SentencePiece stops early when the
  corpus cannot support the requested size; :attr:`Tokenizer.vocab_size` is the real
  size. A vocabulary too small to hold the 256 byte pieces and the specials is refused
  with a clear error.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afm import fs
from afm.errors import UserError
from afm.io import expand_inputs, read_records
from afm.model.text.chat import ChatFormatError, encode_chat
from afm.sampling import reservoir_sample

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
CHAT_ROLES = ("system", "user", "assistant", "tool")
CHAT_TOKENS = tuple(f"<|{r}|>" for r in CHAT_ROLES) + ("<|end|>",)
MODEL_FILE = "tokenizer.model"
META_FILE = "tokenizer_meta.json"
_N_BYTE_PIECES = 256


class TokenizerError(UserError):
    """Bad tokenizer input or configuration."""


class TokenizerNotFound(TokenizerError, FileNotFoundError):
    """No tokenizer model where one was named (still a FileNotFoundError for callers)."""


def iter_texts(inputs: Sequence[str | os.PathLike[str]], text_field: str = "text") -> Iterator[str]:
    """Document texts from Parquet / JSONL(.gz) shards, in the given file order."""

    for path in inputs:
        for rec in read_records(path):
            text = rec.get(text_field)
            if isinstance(text, str) and text:
                yield text


def document_files(inputs: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Parquet/JSONL files named by paths, directories or globs (sorted, de-duplicated)."""

    # Not plain .json: pipeline folders hold manifests and stats as .json.
    suffixes = (".parquet", ".jsonl", ".jsonl.gz")
    return [f for f in expand_inputs([str(i) for i in inputs]) if f.endswith(suffixes)]


def _lines(texts: Iterable[str], max_bytes: int) -> Iterator[str]:
    for text in texts:
        for line in text.split("\n"):
            if not line.strip():
                continue
            data = line.encode("utf-8", "surrogatepass")
            if len(data) <= max_bytes:
                yield line
                continue
            # Cut on character boundaries into <= max_bytes pieces.
            start = 0
            while start < len(line):
                end = min(len(line), start + max_bytes // 4)
                yield line[start:end]
                start = end


DEFAULT_CHARACTER_COVERAGE = 0.9995
MIN_MERGE_SHARE = 0.1  # of the pieces beyond specials and bytes, kept for merges when coverage is chosen


@dataclass(frozen=True)
class CoverageChoice:
    """The character coverage a training uses, how many characters that keeps, and why."""

    coverage: float
    characters: int
    distinct: int
    reason: str


def choose_character_coverage(lines: Sequence[str], vocab_size: int, requested: float | None = None,
                              ) -> CoverageChoice:
    """The character coverage SentencePiece can train with at ``vocab_size``.

    SentencePiece gives every character it covers its own piece, on top of the specials and
    the 256 byte pieces, and refuses a vocabulary smaller than that; the uncovered rare
    characters are still encoded (byte fallback). So on a small or script-rich corpus the
    coverage must come down. ``requested`` None: the highest coverage up to
    :data:`DEFAULT_CHARACTER_COVERAGE` whose characters leave :data:`MIN_MERGE_SHARE` of the
    room for merges. A ``requested`` coverage that does not fit raises
    :class:`TokenizerError` with afm's options to change."""
    counts = Counter(ch for line in lines for ch in line)
    total = sum(counts.values())
    freqs = sorted(counts.values(), reverse=True)
    room = vocab_size - _N_BYTE_PIECES - 4 - len(CHAT_TOKENS)  # pieces for characters and merges
    budget = max(1, int(room * (1 - MIN_MERGE_SHARE)))

    def kept(coverage: float) -> int:  # SentencePiece adds characters until it reaches coverage
        acc, n = 0, 0
        for f in freqs:
            if acc >= coverage * total:
                break
            acc, n = acc + f, n + 1
        return n

    target = DEFAULT_CHARACTER_COVERAGE if requested is None else requested
    need = kept(target)
    if need <= budget:
        return CoverageChoice(target, need, len(freqs), "requested" if requested is not None else "default")
    if requested is not None:
        fits = sum(freqs[:budget]) / max(total, 1)
        raise TokenizerError(
            f"--character-coverage {requested:g} keeps {need} characters, more than --vocab-size {vocab_size} has "
            f"room for ({budget} beside the 256 byte pieces, the specials and merges): raise --vocab-size to at "
            f"least {vocab_size + need - budget}, lower --character-coverage to at most {fits:.4f}, or leave it "
            "out and afm picks the highest coverage that fits")
    # the highest coverage that keeps `budget` characters: halfway to the next character's share
    below = sum(freqs[:budget - 1]) / total if budget > 1 else 0.0
    at = sum(freqs[:budget]) / total
    return CoverageChoice((below + at) / 2, budget, len(freqs),
                          f"lowered from {DEFAULT_CHARACTER_COVERAGE:g} to fit --vocab-size {vocab_size}")


def train_tokenizer(
    inputs: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    vocab_size: int,
    sample_docs: int = 200_000,
    seed: int = 0,
    text_field: str = "text",
    character_coverage: float | None = None,
    max_sentence_length: int = 16_384,
    num_threads: int | None = None,
) -> Path:
    """Train the tokenizer on a sample of the documents in ``inputs`` (Parquet/JSONL files,
    directories or globs); returns ``out_dir``.

    ``character_coverage`` None: afm chooses it (:func:`choose_character_coverage`), so a
    small vocabulary trains on a corpus with many distinct characters. Writes
    ``tokenizer.model`` (+ ``.vocab``) and ``tokenizer_meta.json`` (specials, training
    settings including the coverage used and why, corpus statistics).
    """
    import sentencepiece as spm

    min_vocab = _N_BYTE_PIECES + 4 + len(CHAT_TOKENS) + 1
    if vocab_size < min_vocab:
        raise TokenizerError(
            f"vocab_size {vocab_size} is too small: byte fallback needs 256 byte pieces plus "
            f"{4 + len(CHAT_TOKENS)} special tokens (use at least {min_vocab})"
        )
    files = document_files(inputs)
    if not files:
        raise TokenizerError(f"train_tokenizer: no .parquet/.jsonl document files in {list(inputs)}")
    texts, n_docs = reservoir_sample(iter_texts(files, text_field), sample_docs, seed, in_input_order=True)
    if not texts:
        raise TokenizerError(f"no documents with a non-empty {text_field!r} field in {list(inputs)}")
    lines = list(_lines(texts, max_sentence_length))
    if character_coverage is not None and not 0 < character_coverage <= 1:
        raise TokenizerError(f"--character-coverage must be in (0, 1], got {character_coverage}")
    coverage = choose_character_coverage(lines, vocab_size, character_coverage)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # SentencePiece reads its input from a file most reliably (one sentence a line).
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
        try:
            spm.SentencePieceTrainer.train(
                input=str(corpus),
                model_prefix=str(out / "tokenizer"),
                model_type="bpe",
                vocab_size=vocab_size,
                hard_vocab_limit=False,
                split_digits=True,
                byte_fallback=True,
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                add_dummy_prefix=False,
                allow_whitespace_only_pieces=True,
                split_by_whitespace=True,
                character_coverage=coverage.coverage,
                max_sentence_length=max_sentence_length,
                input_sentence_size=0,
                pad_id=0,
                bos_id=1,
                eos_id=2,
                unk_id=3,
                pad_piece=PAD,
                bos_piece=BOS,
                eos_piece=EOS,
                unk_piece=UNK,
                control_symbols=",".join(CHAT_TOKENS),
                num_threads=num_threads or max(1, min(16, os.cpu_count() or 1)),
                minloglevel=2,
            )
        except RuntimeError as exc:  # SentencePiece's own verdict on the corpus, e.g. too small
            reason = str(exc).strip().splitlines()[-1]
            raise TokenizerError(f"SentencePiece could not train on {n_docs} document(s) at --vocab-size "
                                 f"{vocab_size}: {reason}; give more documents (--sample-docs, --input) or a "
                                 "smaller --vocab-size") from None
    tok = Tokenizer.load(out)
    meta = {
        "format": "afm-tokenizer-v1",
        "model_type": "bpe",
        "requested_vocab_size": vocab_size,
        "vocab_size": tok.vocab_size,
        "split_digits": True,
        "byte_fallback": True,
        "normalization": "identity",
        "add_dummy_prefix": False,
        "special_tokens": {"pad": PAD, "bos": BOS, "eos": EOS, "unk": UNK},
        "chat_tokens": list(CHAT_TOKENS),
        "character_coverage": coverage.coverage,
        "characters": coverage.characters,
        "distinct_characters": coverage.distinct,
        "coverage_choice": coverage.reason,
        "sample_docs": sample_docs,
        "seed": seed,
        "docs_seen": n_docs,
        "docs_sampled": len(texts),
        "lines_trained": len(lines),
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return out


class Tokenizer:
    """A trained tokenizer: ``encode``/``decode`` plus the special ids.

    The one place SentencePiece is loaded: every user of a tokenizer (training, eval, the
    tokenize pipeline's workers, sft prepare) builds this class. The model file is read
    through :mod:`afm.fs`, so it may be local or a URL (``gs://``, ...). Importing this
    module needs neither JAX nor SentencePiece (a curate host tokenizes without JAX)."""

    def __init__(self, model_path: str | os.PathLike[str]):
        import sentencepiece as spm

        text = os.fspath(model_path)
        self.path: Path | str = text if fs.is_remote(text) else Path(fs.local(text))
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=fs.read_bytes(text))
        except (RuntimeError, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TokenizerError(f"{self.path}: not a SentencePiece tokenizer model ({first}); give the "
                                 "directory `afm tokenizer train --out` wrote") from None
        self.chat_ids = {t: self.sp.piece_to_id(t) for t in CHAT_TOKENS}
        for t, i in self.chat_ids.items():
            if self.sp.id_to_piece(i) != t:
                raise TokenizerError(f"{self.path}: chat token {t} missing (not an afm tokenizer?)")

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Tokenizer:
        """The tokenizer in ``directory`` (its ``tokenizer.model``), or the model file
        itself; local or a URL."""
        d = os.fspath(directory)
        path = fs.join(d, MODEL_FILE) if fs.isdir(d) else d
        if not fs.isfile(path):
            raise TokenizerNotFound(f"no tokenizer model at {path}")
        return cls(path)

    # -- ids ---------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def pad_id(self) -> int:
        return self.sp.pad_id()

    @property
    def bos_id(self) -> int:
        return self.sp.bos_id()

    @property
    def eos_id(self) -> int:
        return self.sp.eos_id()

    @property
    def unk_id(self) -> int:
        return self.sp.unk_id()

    @property
    def end_id(self) -> int:
        """``<|end|>``: closes a chat message."""
        return self.chat_ids["<|end|>"]

    def role_id(self, role: str) -> int:
        try:
            return self.chat_ids[f"<|{role}|>"]
        except KeyError:
            raise TokenizerError(f"unknown chat role {role!r}; known: {CHAT_ROLES}") from None

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(i)

    def pieces(self) -> list[tuple[str, float]]:
        """Every (piece, score) in id order."""
        return [(self.sp.id_to_piece(i), self.sp.get_score(i)) for i in range(self.vocab_size)]

    # -- text ----------------------------------------------------------------------------
    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        ids = self.sp.encode(text, out_type=int)
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.sp.encode(list(texts), out_type=int)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; special and control tokens decode to nothing."""
        return self.sp.decode([int(i) for i in ids])

    def encode_chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        add_generation_prompt: bool = False,
    ) -> tuple[list[int], list[bool]]:
        """The chat template (``afm.model.text.chat``): ``<s>`` then, per message,
        ``<|role|> content <|end|>``; with ``add_generation_prompt`` a trailing
        ``<|assistant|>``.

        Returns the ids and, per id, whether it belongs to an assistant reply (content,
        tool calls and its ``<|end|>``): the tokens an SFT loss trains on.
        """

        try:
            return encode_chat(self, messages, tools=tools, add_generation_prompt=add_generation_prompt)
        except ChatFormatError as exc:
            raise TokenizerError(str(exc)) from None
