"""Preference data: reading files of pairs and the pair batches of the reward-model and
DPO tasks.

The record layout and its reader are ``afm.synth.preference_format`` (one reader of the
layout, shared with ``afm sft prepare``): the prompt conversation, ``chosen`` /
``rejected`` replies (text, or message lists: DPO/IPO score every assistant message of
the reply), ``level`` and optional gradings; a reply cut at the token limit rejects the
pair. Grading classes: 0 = major issue, 1 = minor issue, 2 = no issue (verbosity: 0 too
verbose, 1 too short, 2 just right); a missing grading is ``-1`` and adds no
regularisation term.

Reading goes through the project's input boundary (``afm.readers``): every line/row is
either a :class:`PreferencePair` or a reject with a reason (undecodable, not an object,
bad conversation, missing/empty response, a reply not ending with the assistant, a reply
cut at the token limit, missing or unknown level, grade out of range, identical responses,
too long once tokenized). Nothing raises on bad input.

Batches (:class:`PairLoader`): ``chosen`` / ``rejected`` token rows (the prompt and the
reply in the chat format, right-padded with ``pad_id``), their ``*_segments`` (1 on real
tokens, 0 on padding) and ``*_response`` (1 on the reply's assistant tokens: DPO sums
log-probs over them), ``level`` (0..3), ``grades`` [8] (chosen then rejected) and ``weight`` (0 on
the padding pairs of a held-out pass). Pairs are shuffled per epoch from a seed; the
position (epoch, next pair) is the checkpointed :class:`LoaderState`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from afm import fs
from afm.console import console
from afm.errors import UserError
from afm.readers import Failure, Record, Skipped, read_file
from afm.synth.preference_format import (
    GRADES,
    LEVELS,
    PreferencePair,
    Reply,
    implicit_prompt,
    parse_record,
    parse_reply,
)
from afm.training.data.loader import LoaderState

SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".parquet")


class PreferenceDataError(UserError):
    """No usable preference file, or no usable pair in them."""


@dataclass
class ReadResult:
    pairs: list[PreferencePair] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)  # where, reason

    @property
    def reasons(self) -> Counter:
        return reject_reasons(self.rejects)


def reject_reasons(rejects: Sequence[dict[str, Any]]) -> Counter:
    """How many rejects of each kind (the reason up to its first colon)."""
    return Counter(r["reason"].split(":", 1)[0] for r in rejects)


def preference_files(paths: Sequence[str]) -> list[str]:
    if not paths:
        raise PreferenceDataError("no preference data given (set data.paths or pass --data)")
    chosen_files: set[str] = set()
    for pattern in paths:
        found = set()
        for suffix in SUFFIXES:
            found |= set(fs.expand([pattern], suffix)[0])
        if not found:
            raise PreferenceDataError(f"no .jsonl/.parquet preference file at {pattern}")
        chosen_files |= found
    files = sorted(chosen_files)
    if not files:
        raise PreferenceDataError(f"no .jsonl/.parquet preference file in {', '.join(paths)}")
    return files


def read_preferences(paths: Sequence[str]) -> ReadResult:
    """Every record of the files: a pair or a reject (where, reason)."""

    out = ReadResult()
    for path in preference_files(paths):
        for item in read_file(path):
            if isinstance(item, Skipped):
                continue
            if isinstance(item, Failure):
                out.rejects.append({"where": item.where.describe(), "reason": f"undecodable: {item.reason}"})
                continue
            assert isinstance(item, Record)
            try:
                out.pairs.append(parse_record(item.value, f"{path}:{len(out.pairs) + len(out.rejects)}"))
            except ValueError as exc:
                out.rejects.append({"where": item.where.describe(), "reason": str(exc)})
    return out


def usable_heldout_pairs(paths: Sequence[str]) -> int:
    """How many pairs of the held-out files are usable; none is an error before any
    training (an evaluation over nothing would fail only after the run)."""
    read = read_preferences(paths)
    if not read.pairs:
        reasons = ", ".join(f"{r} {n}" for r, n in read.reasons.most_common(4)) or "the files hold no records"
        raise PreferenceDataError(f"no usable preference pair in the held-out data {', '.join(map(str, paths))}: "
                                  f"{len(read.rejects)} record(s) rejected ({reasons})")
    return len(read.pairs)


@dataclass
class TokenizedPairs:
    """Token ids of both sequences and the reply's start per pair."""

    chosen: list[np.ndarray]
    rejected: list[np.ndarray]
    chosen_reply: list[np.ndarray]  # bool per token: the reply's assistant tokens
    rejected_reply: list[np.ndarray]
    level: np.ndarray
    grades: np.ndarray  # [N, 8]
    ids: list[str]
    ref_logps: np.ndarray | None = None  # [N, 2] when every pair carries them
    rejects: list[dict[str, Any]] = field(default_factory=list)  # read or tokenize rejects: where, reason


def encode_response(tokenizer: Any, prompt: list[dict[str, Any]], response: Reply) -> tuple[list[int], np.ndarray]:
    """Prompt + reply in the chat format, and which tokens are the reply's (bool, one per
    id): the assistant tokens (content, tool calls, end-of-turn) of every assistant message
    of the reply. A multi-turn prompt's earlier assistant turns are context, not part of
    the reply whose log-probability DPO/IPO compare; a tool result inside a message-list
    reply is context too."""
    messages = [{"role": "assistant", "content": response}] if isinstance(response, str) else list(response)
    ids, mask = tokenizer.encode_chat([*prompt, *messages])
    start = len(tokenizer.encode_chat(list(prompt))[0])  # rendering is per message: the prompt is a prefix
    reply = np.asarray(mask, bool)
    reply[:start] = False
    return ids, reply


def tokenize_pairs(pairs: Sequence[PreferencePair], tokenizer: Any, max_len: int,
                   rejects: list[dict[str, Any]] | None = None, *, packed: bool = False) -> TokenizedPairs:
    """Tokenize; a pair with a sequence longer than ``max_len`` (``packed``: whose two
    sequences together are, as they share a row) becomes a ``too_long`` reject (a
    truncated reply would score a different text)."""
    out = TokenizedPairs([], [], [], [], np.zeros(0, np.int32), np.zeros((0, 8), np.int32), [])
    lv, gr, refs = [], [], []
    for p in pairs:
        c, c_reply = encode_response(tokenizer, p.prompt, p.chosen)
        r, r_reply = encode_response(tokenizer, p.prompt, p.rejected)
        length = len(c) + len(r) if packed else max(len(c), len(r))
        if length > max_len:
            if rejects is not None:
                rejects.append({"where": p.id, "reason": f"too_long: {length} tokens > {max_len}"})
            continue
        out.chosen.append(np.asarray(c, np.int32))
        out.rejected.append(np.asarray(r, np.int32))
        out.chosen_reply.append(c_reply)
        out.rejected_reply.append(r_reply)
        lv.append(p.level)
        gr.append([*p.chosen_grades, *p.rejected_grades])
        refs.append(p.ref_logps)
        out.ids.append(p.id)
    out.level = np.asarray(lv, np.int32)
    out.grades = np.asarray(gr, np.int32).reshape(-1, 8)
    if refs and all(r is not None for r in refs):
        out.ref_logps = np.asarray(refs, np.float32)
    out.rejects = list(rejects) if rejects is not None else []
    return out


def describe_rejects(data: TokenizedPairs) -> str:
    """``"5 of 12 records rejected (cut_reply 4, bad_level 1)"``: what a pair input lost
    and why, in the words every summary uses."""
    reasons = reject_reasons(data.rejects)
    total = len(data.level) + len(data.rejects)
    if not data.rejects:
        return f"0 of {total:,} records rejected"
    return (f"{len(data.rejects):,} of {total:,} records rejected "
            f"({', '.join(f'{k} {v:,}' for k, v in reasons.most_common())})")


def report_rejects(data: TokenizedPairs, paths: Sequence[str], role: str, seq_len: int) -> None:
    """Say on the console how many records a task's pair input lost and why: a pair too
    long for ``data.seq_len`` is dropped (a truncated reply would score a different text),
    and a run must not lose a fifth of its data silently."""
    if not data.rejects:
        return

    hint = f"; raise data.seq_len (now {seq_len})" if reject_reasons(data.rejects).get("too_long") else ""
    console.print(f"[yellow]{role} pairs ({', '.join(map(str, paths))}): {describe_rejects(data)}{hint}",
                  markup=True, highlight=False)


def pair_batch(data: TokenizedPairs, index: np.ndarray, seq_len: int, pad_id: int,
               weight: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The batch of pairs ``index`` (right-padded rows of ``seq_len``)."""
    n = len(index)
    out: dict[str, np.ndarray] = {}
    for side, seqs, replies in (("chosen", data.chosen, data.chosen_reply),
                                ("rejected", data.rejected, data.rejected_reply)):
        tokens = np.full((n, seq_len), pad_id, np.int32)
        segments = np.zeros((n, seq_len), np.int32)
        response = np.zeros((n, seq_len), np.float32)
        for row, i in enumerate(index):
            ids = seqs[i]
            tokens[row, : ids.size] = ids
            segments[row, : ids.size] = 1
            response[row, : ids.size] = replies[i]
        out[side], out[f"{side}_segments"], out[f"{side}_response"] = tokens, segments, response
    out["level"] = data.level[index].astype(np.int32)
    out["grades"] = data.grades[index].astype(np.int32)
    out["weight"] = np.ones(n, np.float32) if weight is None else weight.astype(np.float32)
    if data.ref_logps is not None:
        out["ref_chosen_logps"] = data.ref_logps[index, 0]
        out["ref_rejected_logps"] = data.ref_logps[index, 1]
    return out


PAIR_FIELDS = ("chosen", "chosen_segments", "chosen_response", "rejected", "rejected_segments",
               "rejected_response", "level", "grades", "weight")


class PairLoader:
    """Endless shuffled epochs over the pairs; this host's slice of each global batch."""

    def __init__(self, data: TokenizedPairs, *, seq_len: int, global_batch: int, pad_id: int,
                 seed: int, process_index: int = 0, process_count: int = 1, state: Any = None):
        if len(data.level) == 0:
            raise PreferenceDataError("no usable preference pair (every record was rejected)")
        if global_batch % process_count:
            raise PreferenceDataError(f"global batch {global_batch} does not split over {process_count} hosts")
        self.data, self.seq_len, self.pad_id, self.seed = data, seq_len, pad_id, seed
        self.global_batch, self.pi, self.pc = global_batch, process_index, process_count
        self.epoch, self.pos = 0, 0
        if state is not None:
            lanes = np.asarray(state.lanes)
            self.epoch, self.pos = int(lanes[0, 1]), int(lanes[0, 2])
        self.lanes = 1

    def _order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.data.level))

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        picks: list[int] = []
        while len(picks) < self.global_batch:
            order = self._order(self.epoch)
            take = order[self.pos : self.pos + self.global_batch - len(picks)]
            picks += take.tolist()
            self.pos += take.size
            if self.pos >= order.size:
                self.epoch, self.pos = self.epoch + 1, 0
        per = self.global_batch // self.pc
        mine = np.asarray(picks[self.pi * per : (self.pi + 1) * per])
        return pair_batch(self.data, mine, self.seq_len, self.pad_id)

    kind = "pairs"  # the checkpointed state's kind (a packed loader resumes only its own)

    def state(self) -> LoaderState:
        return LoaderState({"kind": self.kind, "pairs": len(self.data.level), "seed": self.seed},
                           np.asarray([[0, self.epoch, self.pos, 0]], np.int64))

    def describe(self) -> dict[str, Any]:
        return {"lanes": 1, "pairs": len(self.data.level)}

    def close(self) -> None:
        pass


class PairEvalInput:
    """Every held-out pair once, in file order, then weight-0 padding batches."""

    def __init__(self, data: TokenizedPairs, *, seq_len: int, global_batch: int, pad_id: int,
                 process_index: int = 0, process_count: int = 1):
        if len(data.level) == 0:
            raise PreferenceDataError("no usable held-out preference pair (every record was rejected; "
                                      f"{len(data.rejects)} rejects, e.g. {data.rejects[:1]})")
        self.data, self.seq_len, self.pad_id = data, seq_len, pad_id
        self.per = global_batch // process_count
        self.global_batch, self.pi = global_batch, process_index
        self.at = 0

    def batches_needed(self) -> int:
        return -(-len(self.data.level) // self.global_batch)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        n = len(self.data.level)
        start = self.at + self.pi * self.per
        index = np.arange(start, start + self.per)
        weight = (index < n).astype(np.float32)
        self.at += self.global_batch
        return pair_batch(self.data, np.minimum(index, max(n - 1, 0)), self.seq_len, self.pad_id, weight)

    def state(self) -> LoaderState:
        return LoaderState({"kind": "pairs-eval"}, np.asarray([[0, self.at, 0, 0]], np.int64))

    def describe(self) -> dict[str, Any]:
        return {"pairs": len(self.data.level)}

    def close(self) -> None:
        pass


__all__ = ["GRADES", "LEVELS", "PAIR_FIELDS", "PairEvalInput", "PairLoader", "PreferenceDataError",
           "PreferencePair", "ReadResult", "Reply", "TokenizedPairs", "encode_response", "implicit_prompt",
           "pair_batch", "parse_record", "parse_reply", "preference_files", "read_preferences", "reject_reasons",
           "describe_rejects", "report_rejects", "tokenize_pairs", "usable_heldout_pairs"]


class PairTaskInputs:
    """The training and held-out inputs of a task over preference pairs (reward model,
    DPO, IPO): one definition, so both read, tokenize and batch pairs the same way. The
    task provides ``config``, ``tokenizer`` and ``_pairs(paths) -> TokenizedPairs``."""

    config: Any
    tokenizer: Any

    def _pairs(self, paths: Sequence[str]) -> TokenizedPairs:
        raise NotImplementedError

    def _tokenized(self, paths: Sequence[str], role: str, process_index: int) -> TokenizedPairs:
        """``_pairs(paths)`` read and tokenized once per run (every evaluation asks again for
        the held-out set), its rejects said once on the console."""
        cache: dict[tuple[str, ...], TokenizedPairs] = self.__dict__.setdefault("_tokenized_pairs", {})
        said: set[tuple[str, tuple[str, ...]]] = self.__dict__.setdefault("_rejects_said", set())
        key = tuple(map(str, paths))
        if key not in cache:
            cache[key] = self._pairs(list(paths))
        if process_index == 0 and (role, key) not in said:
            report_rejects(cache[key], paths, role, self.config.data.seq_len)
            said.add((role, key))
        return cache[key]

    def rejects_summary(self) -> dict[str, Any]:
        """Per input the run read (``training``, ``held-out``): records, pairs kept and the
        rejects by reason (read and tokenize), for the run's result and summary, whatever
        the task's reference mode."""
        cache: dict[tuple[str, ...], TokenizedPairs] = self.__dict__.get("_tokenized_pairs", {})
        roles = {tuple(map(str, self.config.data.paths)): "training",
                 tuple(map(str, self.config.eval.heldout)): "held-out"}
        return {roles.get(key, ",".join(key)): {"records": len(d.level) + len(d.rejects), "pairs": len(d.level),
                                                "rejected": len(d.rejects), "reasons": dict(reject_reasons(d.rejects)),
                                                "summary": describe_rejects(d)}
                for key, d in cache.items()}

    def make_input(self, *, vocab_size: int, process_index: int, process_count: int,
                   state: Any = None) -> PairLoader:
        d = self.config.data
        data = self._tokenized(d.paths, "training", process_index)
        return PairLoader(data, seq_len=d.seq_len, global_batch=d.global_batch_size,
                          pad_id=self.tokenizer.pad_id, seed=d.seed, process_index=process_index,
                          process_count=process_count, state=state)

    def make_eval_input(self, paths: list[str], *, vocab_size: int, process_index: int,
                        process_count: int) -> PairEvalInput:
        d = self.config.data
        data = self._tokenized(paths, "held-out", process_index)
        return PairEvalInput(data, seq_len=d.seq_len, global_batch=d.global_batch_size,
                             pad_id=self.tokenizer.pad_id, process_index=process_index,
                             process_count=process_count)
