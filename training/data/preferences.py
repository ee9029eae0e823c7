"""Preference data: one reader and the pair batches of the reward-model and DPO tasks.

A preference record (report App. E.1), one JSON object per JSONL line or Parquet row::

    {"id": "...",                                  # optional
     "prompt": [{"role": "user", "content": "..."}, ...],   # the whole conversation
     "chosen": "...", "rejected": "...",           # the two assistant replies
     "level": "significantly_better",             # negligibly_better | slightly_better |
                                                   # better | significantly_better
     "chosen_grades": {"instruction_following": 2, "verbosity": 2,
                       "truthfulness": 2, "harmlessness": 2},   # optional, 0/1/2 each
     "rejected_grades": {...}}                     # optional

``prompt`` may also be a plain string (one user turn). ``chosen`` / ``rejected`` may be
lists of messages (TRL's conversational form): the reply is then every message of the
list, in order (assistant turns, and tool results between them), and it must end with an
assistant turn; DPO/IPO score every assistant message of it. Without a ``prompt``, two
message lists are TRL's implicit-prompt form: the messages they share from the start are
the prompt. A reply recorded as cut at the token limit (``finish_reason`` ``length`` on a
reply message, or ``chosen_finish_reason`` / ``rejected_finish_reason`` on the record) is
never a finished turn (``afm.finish``) and rejects the pair. Grading classes: 0 = major issue,
1 = minor issue, 2 = no issue (verbosity: 0 too verbose, 1 too short, 2 just right); a
missing grading is ``-1`` and adds no regularisation term.

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

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from afm import fs
from afm.console import console
from afm.errors import UserError
from afm.finish import DROP_REASON, finish_of, is_cut
from afm.model.chat import ChatFormatError, validate
from afm.readers import Failure, Record, Skipped, read_file
from afm.training.data.loader import LoaderState

LEVELS = ("negligibly_better", "slightly_better", "better", "significantly_better")
GRADES = ("instruction_following", "verbosity", "truthfulness", "harmlessness")
SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".parquet")


class PreferenceDataError(UserError):
    """No usable preference file, or no usable pair in them."""


Reply = str | list[dict[str, Any]]  # one assistant text, or the reply's messages in order


@dataclass(frozen=True)
class PreferencePair:
    id: str
    prompt: list[dict[str, Any]]
    chosen: Reply
    rejected: Reply
    level: int
    chosen_grades: tuple[int, int, int, int]
    rejected_grades: tuple[int, int, int, int]
    ref_logps: tuple[float, float] | None = None  # a reference model's (chosen, rejected) log-probs


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


def _grades(value: Any, name: str) -> tuple[int, int, int, int]:
    if value is None:
        return (-1, -1, -1, -1)
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(f"{name}: expected an object of gradings")
    unknown = set(value) - set(GRADES)
    if unknown:
        raise ValueError(f"{name}: unknown grading {sorted(unknown)[0]!r}")
    out = []
    for g in GRADES:
        v = value.get(g)
        if v is None:
            out.append(-1)
        elif isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2:
            raise ValueError(f"{name}.{g}: expected 0, 1 or 2, got {v!r}")
        else:
            out.append(int(v))
    return tuple(out)  # type: ignore[return-value]


def _messages(value: Any) -> Any:
    """A message list stored as JSON text (a Parquet column) decoded; anything else as is."""
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(decoded, list) and all(isinstance(m, dict) and "role" in m for m in decoded):
            return decoded
    return value


def implicit_prompt(chosen: list[Any], rejected: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """TRL's implicit-prompt form (no ``prompt``; both replies are whole conversations):
    the messages both share from the start, up to the last one the assistant answers, are
    the prompt; the rest is each side's reply."""
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1
    # assistant turns (and tool results) both replies open with stay in both replies: a
    # prompt ends with what the assistant answers
    while n and isinstance(chosen[n - 1], dict) and chosen[n - 1].get("role") in ("assistant", "tool"):
        n -= 1
    return chosen[:n], chosen[n:], rejected[n:]


def parse_reply(value: Any, key: str, rec: dict[str, Any]) -> Reply:
    """One side's reply: a non-empty string, or a list of messages read whole (every
    message, in order) that holds assistant and tool messages only, ends with an assistant
    turn and was not cut at the token limit. ``ValueError`` with the reject reason."""


    side = {k[len(key) + 1:]: v for k, v in rec.items() if k.startswith(key + "_")}
    if is_cut(finish_of(side)):
        raise ValueError(f"{DROP_REASON}: {key!r} stopped for length ({finish_of(side)}): never a finished turn")
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"missing_response: {key!r} is missing or empty")
        return value
    if not isinstance(value, list) or not value:
        raise ValueError(f"missing_response: {key!r} is missing or empty")
    try:
        validate(value)
    except ChatFormatError as exc:
        raise ValueError(f"bad_response: {key!r}: {exc}") from None
    last = value[-1].get("role")
    if last != "assistant":
        raise ValueError(f"reply_not_from_assistant: {key!r} ends with a {last} message, not the assistant's reply")
    for i, m in enumerate(value):
        if m["role"] not in ("assistant", "tool"):
            raise ValueError(f"bad_response: {key!r} message {i} is a {m['role']} turn; a reply holds assistant "
                             "messages and the tool results between them")
        if is_cut(finish_of(m)):
            raise ValueError(f"{DROP_REASON}: {key!r} message {i} stopped for length ({finish_of(m)}): "
                             "never a finished turn")
    if not any((m.get("content") or "").strip() or m.get("tool_calls") for m in value if m["role"] == "assistant"):
        raise ValueError(f"missing_response: {key!r} has no assistant text or tool call")
    return [dict(m) for m in value]


def parse_record(rec: Any, default_id: str) -> PreferencePair:
    """A record -> a pair, or ``ValueError`` whose message is the reject reason."""

    if not isinstance(rec, dict):
        raise ValueError(f"not_an_object: got {type(rec).__name__}")
    chosen, rejected = _messages(rec.get("chosen")), _messages(rec.get("rejected"))
    prompt = rec.get("prompt")
    if prompt is None and isinstance(chosen, list) and isinstance(rejected, list):
        prompt, chosen, rejected = implicit_prompt(chosen, rejected)  # TRL's implicit-prompt form
    if isinstance(prompt, str) and prompt.strip().startswith("["):
        try:
            prompt = json.loads(prompt)
        except json.JSONDecodeError:
            pass
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not isinstance(prompt, list) or not prompt:
        raise ValueError("bad_prompt: expected a non-empty conversation or string")
    try:
        validate(prompt)
    except ChatFormatError as exc:
        raise ValueError(f"bad_prompt: {exc}") from None
    if prompt[-1].get("role") == "assistant":
        raise ValueError("bad_prompt: the conversation ends with an assistant turn")
    responses = [parse_reply(chosen, "chosen", rec), parse_reply(rejected, "rejected", rec)]
    if responses[0] == responses[1]:
        raise ValueError("identical_responses: chosen equals rejected")
    if "level" not in rec:
        raise ValueError(f"missing_level: a preference needs a level ({', '.join(LEVELS)})")
    level = rec["level"]
    if level not in LEVELS:
        raise ValueError(f"bad_level: {level!r} is not one of {', '.join(LEVELS)}")
    try:
        cg = _grades(rec.get("chosen_grades"), "chosen_grades")
        rg = _grades(rec.get("rejected_grades"), "rejected_grades")
    except (ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"bad_grades: {exc}") from None
    ref = None
    if rec.get("ref_chosen_logps") is not None or rec.get("ref_rejected_logps") is not None:
        try:
            ref = (float(rec["ref_chosen_logps"]), float(rec["ref_rejected_logps"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError("bad_ref_logps: ref_chosen_logps and ref_rejected_logps must both be numbers") from None
        if not all(np.isfinite(ref)) or max(ref) > 0:
            raise ValueError(f"bad_ref_logps: log-probs must be finite and <= 0, got {ref}")
    rid = rec.get("id")
    return PreferencePair(str(rid) if rid not in (None, "") else default_id, prompt,
                          responses[0], responses[1], LEVELS.index(level), cg, rg, ref)


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


def report_rejects(data: TokenizedPairs, paths: Sequence[str], role: str, seq_len: int) -> None:
    """Say on the console how many records a task's pair input lost and why: a pair too
    long for ``data.seq_len`` is dropped (a truncated reply would score a different text),
    and a run must not lose a fifth of its data silently."""
    if not data.rejects:
        return

    reasons = reject_reasons(data.rejects)
    total = len(data.level) + len(data.rejects)
    hint = f"; raise data.seq_len (now {seq_len})" if reasons.get("too_long") else ""
    console.print(f"[yellow]{role} pairs ({', '.join(map(str, paths))}): {len(data.rejects):,} of {total:,} "
                  f"records rejected ({', '.join(f'{k} {v:,}' for k, v in reasons.most_common())}){hint}",
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
           "pair_batch", "parse_record", "parse_reply", "preference_files", "read_preferences", "reject_reasons", "report_rejects", "tokenize_pairs",
           "usable_heldout_pairs"]


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
