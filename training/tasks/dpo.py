"""DPO and IPO (report §4.3: members of the iTeC committee) as tasks of the one trainer.

Per pair, with summed reply log-probs ``pi_c, pi_r`` (the policy) and ``ref_c, ref_r``
(the reference)::

    DPO:  -log s(beta * ((pi_c - ref_c) - (pi_r - ref_r)))                  (Rafailov et al.)
    IPO:  ((pi_c - ref_c) / n_c - (pi_r - ref_r) / n_r - 1 / (2 beta))^2   (Azar et al., eq. 17)

IPO's log-ratios are averaged over the reply's tokens (``n``), as TRL's ``DPOTrainer``
does (its authors confirmed the paper's results use this form); the parity tests check
both against TRL on the same log-probs.

The reference (``task_options.reference``):

* ``frozen`` (default) -- a frozen copy of the starting model (``ref/<path>`` extra
  parameters initialised from the model, no gradient, no optimizer state);
* ``precomputed`` -- the starting model's log-probs of every pair, computed once before
  the run (:func:`write_reference_logps`, kept by pair content under
  ``WORKDIR/reference_logps/``) or given as ``ref_chosen_logps`` / ``ref_rejected_logps``
  columns of the records, so no second model is held in memory during training. The run
  still reads the user's files with the one reader, so its rejects are counted and
  reported as with a frozen reference.

Either way the reference's log-probs equal the policy's at step 0 exactly (log-ratios 0,
the DPO loss log 2), in every precision and layout: the task compiles with
:data:`~afm.training.core.task.EXACT_ROUNDING` and a precomputed pass scores rows as the
step does.

Batches are the preference pairs of ``afm.training.data.preferences``; the loss is a sum
over pairs with weight = pairs. Metrics: the implicit reward accuracy
(``beta * log-ratio`` of chosen above rejected), margins, and both log-ratios.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from afm.config import ConfigError
from afm.model.checkpoints.checkpoint import load_model
from afm.model.inference.scoring import token_logprobs
from afm.model.text.tokenizer import Tokenizer
from afm.training.core.config import model_config
from afm.training.core.task import (
    EXACT_ROUNDING,
    Field,
    LossContext,
    LossOutput,
    ParamSpec,
    TaskBase,
    frozen_model,
    frozen_model_copy,
    parse_task_options,
    task_tokenizer,
)
from afm.training.data.packed_pairs import PackedPairEvalInput, PackedPairLoader
from afm.training.data.preferences import (
    PairTaskInputs,
    PreferencePair,
    pair_batch,
    read_preferences,
    tokenize_pairs,
)
from afm.training.tasks.reward_model import RewardModelTask, heldout_prepared

REF = "ref/"


def dpo_loss(pi_c, pi_r, ref_c, ref_r, beta: float):
    """Per-pair DPO loss from summed log-probs."""
    delta = (pi_c - ref_c) - (pi_r - ref_r)
    return -jax.nn.log_sigmoid(beta * delta)


def ipo_loss(pi_c, pi_r, ref_c, ref_r, n_c, n_r, beta: float):
    """Per-pair IPO loss; ``n_c`` / ``n_r`` are the replies' token counts."""
    delta = (pi_c - ref_c) / jnp.maximum(n_c, 1.0) - (pi_r - ref_r) / jnp.maximum(n_r, 1.0)
    return (delta - 1.0 / (2.0 * beta)) ** 2


def sequence_logps(model: Any, tokens, segments, response, *, logit_scale: float, chunk: int):
    """Summed log-probs of the reply tokens of each row ([B]) and their count ([B])."""
    positions = jnp.maximum(jnp.cumsum(segments != 0, axis=-1) - 1, 0).astype(jnp.int32)
    hidden, _ = model.features(tokens[:, :-1], positions=positions[:, :-1], segment_ids=segments[:, :-1])
    scores = token_logprobs(hidden, model.embed[...], tokens[:, 1:], logit_scale=logit_scale, chunk=chunk)
    mask = response[:, 1:].astype(jnp.float32)
    return jnp.sum(scores.logprob * mask, axis=-1), jnp.sum(mask, axis=-1)


@dataclass
class DpoOptions:
    tokenizer: str = ""
    beta: float = 0.1
    reference: str = "frozen"  # frozen | precomputed
    packing: str = "none"  # none | pairs: several pairs per row (afm.training.data.packed_pairs)
    max_pairs_per_row: int = 8
    # reference: precomputed -- the file of log-probs by pair content the run computed first
    # (set by prepare_config: WORKDIR/reference_logps/logps.jsonl); pairs that carry
    # ref_chosen_logps / ref_rejected_logps columns use their own
    reference_logps: str = ""

    def check(self) -> None:
        if self.reference not in ("frozen", "precomputed"):
            raise ConfigError(f"task_options.reference must be frozen or precomputed, not {self.reference!r}")
        if not self.beta > 0:  # also refuses nan (the config loader refuses it too)
            raise ConfigError(f"task_options.beta must be > 0, got {self.beta}")
        if self.packing not in ("none", "pairs"):
            raise ConfigError(f"task_options.packing must be none or pairs, not {self.packing!r}")
        if self.max_pairs_per_row < 1:
            raise ConfigError("task_options.max_pairs_per_row must be >= 1")


def packed_sequence_logps(model: Any, batch: dict[str, Any], slots: int, *, logit_scale: float, chunk: int):
    """Per pair slot of packed rows: summed reply log-probs of the chosen and rejected
    sequences and their token counts (each [rows, slots])."""
    tokens, segments = batch["tokens"], batch["segments"]
    hidden, _ = model.features(tokens[:, :-1], positions=batch["positions"][:, :-1], segment_ids=segments[:, :-1])
    scores = token_logprobs(hidden, model.embed[...], tokens[:, 1:], logit_scale=logit_scale, chunk=chunk)
    # A reply token is never a sequence's first, so its target shares the segment of its input.
    mask = batch["response"][:, 1:].astype(jnp.float32)
    onehot = jax.nn.one_hot(segments[:, 1:], 2 * slots + 1, dtype=jnp.float32)  # [rows, T, 2 * slots + 1]
    sums = jnp.einsum("bt,bts->bs", scores.logprob * mask, onehot)
    counts = jnp.einsum("bt,bts->bs", mask, onehot)
    return sums[:, 1::2], sums[:, 2::2], counts[:, 1::2], counts[:, 2::2]


class DpoTask(PairTaskInputs, TaskBase):
    """See the module docstring."""

    name = "dpo"
    kind = "dpo"
    Options = DpoOptions
    exact_rounding = True  # log-ratios exactly 0 at step 0 (core/task.py EXACT_ROUNDING)

    def __init__(self, config: Any):
        super().__init__(config)
        self.packed = self.options.packing == "pairs"

    @classmethod
    def prepare_config(cls, config: Any, workdir: str) -> Any:
        """The policy starts from a fine-tuned model (``init_from``, also the reference); the
        best checkpoint is the one with the highest held-out reward accuracy; with
        ``reference: precomputed`` the starting model's log-probs are added to the data
        first (once, under ``workdir/reference_logps``)."""

        if not config.init_from:
            raise ConfigError(f"{cls.name} starts from a fine-tuned model: set init_from (--init-from: an SFT "
                              "run or model)")
        config = heldout_prepared(config, select=("eval/heldout/reward_accuracy", "max"))
        options = parse_task_options(DpoOptions, config.task_options, cls.name)
        if options.reference == "precomputed":
            config = _with_reference_logps(config, Path(workdir), options.tokenizer)
        return config

    def finish_run(self, workdir: str, result: dict[str, Any]) -> dict[str, Any]:
        """The exported policy (no reference in it) as ``model``; the records each input
        lost and why (``rejects``, as with every reference mode)."""
        return {**result, "model": result["model_checkpoint"] or str(Path(workdir) / "model"),
                "rejects": self.rejects_summary()}

    tokenizer = property(task_tokenizer)

    def batch_fields(self) -> dict[str, Field]:
        if self.packed:
            slots = ("batch", self.options.max_pairs_per_row)
            fields = {"tokens": Field("int32"), "segments": Field("int32"), "positions": Field("int32"),
                      "response": Field("float32"), "pair_weight": Field("float32", slots)}
            if self.options.reference == "precomputed":
                fields |= {"ref_chosen_logps": Field("float32", slots), "ref_rejected_logps": Field("float32", slots)}
            return fields
        fields = RewardModelTask.batch_fields(self)  # type: ignore[arg-type]
        if self.options.reference == "precomputed":
            fields |= {"ref_chosen_logps": Field("float32", ("batch",)),
                       "ref_rejected_logps": Field("float32", ("batch",))}
        return fields

    def _pairs(self, paths: list[str]) -> Any:
        """The files read with the one reader (its rejects kept, whatever the reference),
        tokenized; with a precomputed reference each pair gets its log-probs."""
        read = read_preferences(paths)
        pairs = read.pairs
        if self.options.reference == "precomputed":
            known = read_reference_logps(self.options.reference_logps) if self.options.reference_logps else {}
            pairs = [p if p.ref_logps is not None or pair_key(p) not in known
                     else dataclasses.replace(p, ref_logps=known[pair_key(p)]) for p in pairs]
        data = tokenize_pairs(pairs, self.tokenizer, self.config.data.seq_len, read.rejects, packed=self.packed)
        if self.options.reference == "precomputed" and data.ref_logps is None and len(data.level):
            raise ConfigError("usable pairs lack reference log-probs (ref_chosen_logps/ref_rejected_logps "
                              "columns, or the run's reference_logps file): start the run through afm dpo "
                              "--reference precomputed, or use --reference frozen")
        return data

    def make_input(self, *, vocab_size: int, process_index: int, process_count: int, state: Any = None):
        if not self.packed:
            return super().make_input(vocab_size=vocab_size, process_index=process_index,
                                      process_count=process_count, state=state)

        d = self.config.data
        return PackedPairLoader(self._tokenized(d.paths, "training", process_index), seq_len=d.seq_len,
                                global_batch=d.global_batch_size, max_pairs=self.options.max_pairs_per_row,
                                pad_id=self.tokenizer.pad_id, seed=d.seed, process_index=process_index,
                                process_count=process_count, state=state)

    def make_eval_input(self, paths: list[str], *, vocab_size: int, process_index: int, process_count: int):
        if not self.packed:
            return super().make_eval_input(paths, vocab_size=vocab_size, process_index=process_index,
                                           process_count=process_count)

        d = self.config.data
        return PackedPairEvalInput(self._tokenized(paths, "held-out", process_index), seq_len=d.seq_len,
                                   global_batch=d.global_batch_size, max_pairs=self.options.max_pairs_per_row,
                                   pad_id=self.tokenizer.pad_id, process_index=process_index,
                                   process_count=process_count)

    def _policy_and_reference(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext):
        """(pi_c, pi_r, ref_c, ref_r, n_c, n_r, weight), per pair or per packed pair slot."""
        kw = {"logit_scale": ctx.model_config.logit_scale, "chunk": self.config.loss_chunk}
        policy = {k: v for k, v in params.items() if not k.startswith(REF)}
        frozen = self.options.reference == "frozen"
        if self.packed:
            slots = self.options.max_pairs_per_row
            pi_c, pi_r, n_c, n_r = packed_sequence_logps(ctx.model(policy), batch, slots, **kw)
            if frozen:
                ref_c, ref_r, _, _ = packed_sequence_logps(frozen_model(ctx.model, params, REF), batch, slots, **kw)
            else:
                ref_c, ref_r = batch["ref_chosen_logps"], batch["ref_rejected_logps"]
            return pi_c, pi_r, ref_c, ref_r, n_c, n_r, batch["pair_weight"]
        b = batch["chosen"].shape[0]
        tokens = jnp.concatenate([batch["chosen"], batch["rejected"]])
        segments = jnp.concatenate([batch["chosen_segments"], batch["rejected_segments"]])
        response = jnp.concatenate([batch["chosen_response"], batch["rejected_response"]])
        logps, counts = sequence_logps(ctx.model(policy), tokens, segments, response, **kw)
        if frozen:
            ref, _ = sequence_logps(frozen_model(ctx.model, params, REF), tokens, segments, response, **kw)
            ref_c, ref_r = ref[:b], ref[b:]
        else:
            ref_c, ref_r = batch["ref_chosen_logps"], batch["ref_rejected_logps"]
        return logps[:b], logps[b:], ref_c, ref_r, counts[:b], counts[b:], batch["weight"]

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]:
        if self.options.reference != "frozen":
            return {}
        return frozen_model_copy(model_config, REF)

    def loss(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext) -> LossOutput:
        pi_c, pi_r, ref_c, ref_r, n_c, n_r, w = self._policy_and_reference(params, batch, ctx)
        beta = self.options.beta
        if self.kind == "ipo":
            per_pair = ipo_loss(pi_c, pi_r, ref_c, ref_r, n_c, n_r, beta)
        else:
            per_pair = dpo_loss(pi_c, pi_r, ref_c, ref_r, beta)
        pairs = jnp.sum(w)
        chosen_ratio, rejected_ratio = pi_c - ref_c, pi_r - ref_r
        metrics = {
            "reward_accuracy": (jnp.sum((chosen_ratio > rejected_ratio) * w), pairs),
            "reward_margin": (jnp.sum(beta * (chosen_ratio - rejected_ratio) * w), pairs),
            "chosen_logratio": (jnp.sum(chosen_ratio * w), pairs),
            "rejected_logratio": (jnp.sum(rejected_ratio * w), pairs),
        }
        return LossOutput(loss=(jnp.sum(per_pair * w), pairs), metrics=metrics)


class IpoTask(DpoTask):
    name = "ipo"
    kind = "ipo"


# -- precomputed reference log-probs ---------------------------------------------------------

REFERENCE_LOGPS = "reference_logps/logps.jsonl"  # under the run's workdir


def pair_key(pair: PreferencePair) -> str:
    """A pair's content (prompt and both replies) hashed: what its reference log-probs
    depend on, so a file of them attaches to the same pairs whatever file or order they
    are read from."""
    blob = json.dumps([pair.prompt, pair.chosen, pair.rejected], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def read_reference_logps(path: str | Path) -> dict[str, tuple[float, float]]:
    """``{pair_key: (ref_chosen_logps, ref_rejected_logps)}`` from a file written by
    :func:`write_reference_logps` (empty when it does not exist yet)."""
    out: dict[str, tuple[float, float]] = {}
    if Path(path).exists():
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[row["key"]] = (float(row["ref_chosen_logps"]), float(row["ref_rejected_logps"]))
    return out


def _with_reference_logps(cfg: Any, workdir: Path, tokenizer: Any) -> Any:
    """``reference: precomputed`` without a frozen copy in the step (the on-device model's
    DPO fits one 80 GB device only so: ``afm bench train --task dpo``): the starting
    model's log-probs of every usable pair of the training and held-out files that carry
    none, in one no-gradient pass, appended to ``workdir/reference_logps/logps.jsonl`` (by
    pair content, :func:`pair_key`) and reused by a resumed run. The data paths stay the
    user's files, so the run reads them with the one reader and reports its rejects as a
    frozen reference's run does; the task attaches the log-probs to the pairs it reads."""
    out = workdir / REFERENCE_LOGPS
    have = read_reference_logps(out)
    pairs = [p for paths in (cfg.data.paths, cfg.eval.heldout) if paths
             for p in read_preferences(list(paths)).pairs if p.ref_logps is None]
    todo = list({k: p for p in pairs if (k := pair_key(p)) not in have}.values())
    if todo:
        n = write_reference_logps(todo, out, cfg, tokenizer)
        if n:
            print(f"reference log-probs of {n} pairs from {cfg.init_from} -> {out}")
    options = {**cfg.task_options, "reference_logps": str(out)}
    return dataclasses.replace(cfg, task_options=options)


def write_reference_logps(pairs: Sequence[PreferencePair], out: str | Path, cfg: Any, tokenizer: Any) -> int:
    """Append the reference log-probs of ``pairs`` under the run's starting model
    (``cfg.init_from``) to ``out``, one ``{"key", "ref_chosen_logps", "ref_rejected_logps"}``
    line per pair.

    They are computed as the training step computes the policy's at step 0, so the
    log-ratios start at exactly 0: the run's model settings (compute dtype, scan, ...), rows
    of ``data.seq_len`` tokens, ``global_batch_size`` pairs (chosen and rejected rows
    together) per call, the one chunked scoring function, compiled with
    :data:`~afm.training.core.task.EXACT_ROUNDING`. A pair too long for ``data.seq_len``
    is left out (the reader rejects it as ``too_long``)."""
    tok = Tokenizer.load(tokenizer) if isinstance(tokenizer, (str, Path)) else tokenizer
    seq_len, per_call = cfg.data.seq_len, cfg.data.global_batch_size
    keys = [pair_key(p) for p in pairs]
    kept = tokenize_pairs([dataclasses.replace(p, id=str(i)) for i, p in enumerate(pairs)], tok, seq_len)
    if not len(kept.level):
        return 0
    run_model = model_config(cfg)
    runtime = {k: getattr(run_model, k) for k in ("dtype", "scan_layers", "attention_impl", "max_seq_len",
                                                  "rope_base", "fp8")}
    model, mcfg = load_model(cfg.init_from, **runtime, dropout=0.0)
    chunk = cfg.loss_chunk

    def logps(graphdef: Any, state: Any, tokens: Any, segments: Any, response: Any) -> Any:
        return sequence_logps(nnx.merge(graphdef, state), tokens, segments, response,
                              logit_scale=mcfg.logit_scale, chunk=chunk)[0]

    graphdef, state = nnx.split(model)
    scored = jax.jit(logps, static_argnums=0, compiler_options=EXACT_ROUNDING)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    n = len(kept.level)
    with open(out, "a", encoding="utf-8") as fh:
        for at in range(0, n, per_call):
            index = np.arange(at, at + per_call) % max(n, 1)  # the last call padded with repeats
            b = pair_batch(kept, index, seq_len, tok.pad_id)
            tokens = np.concatenate([b["chosen"], b["rejected"]])
            segments = np.concatenate([b["chosen_segments"], b["rejected_segments"]])
            response = np.concatenate([b["chosen_response"], b["rejected_response"]])
            both = np.asarray(scored(graphdef, state, tokens, segments, response))
            for row, i in enumerate(index[: min(per_call, n - at)]):
                fh.write(json.dumps({"key": keys[int(kept.ids[i])], "ref_chosen_logps": float(both[row]),
                                     "ref_rejected_logps": float(both[per_call + row])}) + "\n")
    return n


__all__ = ["REFERENCE_LOGPS", "DpoOptions", "DpoTask", "IpoTask", "dpo_loss", "ipo_loss", "pair_key",
           "read_reference_logps", "sequence_logps", "write_reference_logps"]
