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
* ``precomputed`` -- ``ref_chosen_logps`` / ``ref_rejected_logps`` columns of the
  preference records (written by :func:`add_reference_logps`), so no second model is held
  in memory during training.

Batches are the preference pairs of ``afm.training.data.preferences``; the loss is a sum
over pairs with weight = pairs. Metrics: the implicit reward accuracy
(``beta * log-ratio`` of chosen above rejected), margins, and both log-ratios.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.config import ConfigError
from afm.model.checkpoint import load_model
from afm.model.scoring import token_logprobs
from afm.model.tokenizer import Tokenizer
from afm.training.core.task import (
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
    GRADES,
    LEVELS,
    PairTaskInputs,
    encode_response,
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
        """The exported policy (no reference in it) as ``model``."""
        return {**result, "model": result["model_checkpoint"] or str(Path(workdir) / "model")}

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
        read = read_preferences(paths)
        pairs = read.pairs
        if self.options.reference == "precomputed":
            missing = [p.id for p in pairs if p.ref_logps is None]
            if missing:
                raise ConfigError(f"{len(missing)} pairs lack ref_chosen_logps/ref_rejected_logps "
                                  "(run add_reference_logps first, or use reference=frozen)")
        return tokenize_pairs(pairs, self.tokenizer, self.config.data.seq_len, read.rejects, packed=self.packed)

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

def _with_reference_logps(cfg: Any, workdir: Path, tokenizer: Any) -> Any:
    """``reference: precomputed`` without a frozen copy in the step (the on-device model's
    DPO fits one 80 GB device only so: ``afm bench train --task dpo``): files whose pairs
    lack reference log-probs get them from the starting model in one no-gradient pass,
    written once under ``workdir/reference_logps/`` and reused by a resumed run."""
    import dataclasses


    def ensure(paths: list[str], role: str) -> list[str]:
        if not paths or all(p.ref_logps is not None for p in read_preferences(paths).pairs):
            return paths
        out = workdir / "reference_logps" / f"{role}.jsonl"
        if not out.exists():
            tmp = out.with_suffix(".tmp")
            n = add_reference_logps(paths, tmp, cfg.init_from, tokenizer)
            tmp.replace(out)
            print(f"reference log-probs of {n} {role} pairs from {cfg.init_from} -> {out}")
        return [str(out)]

    ev = dataclasses.replace(cfg.eval, heldout=ensure(list(cfg.eval.heldout), "heldout"))
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, paths=ensure(list(cfg.data.paths), "training")),
                               eval=ev)


def add_reference_logps(paths: Sequence[str], out: str | Path, model_dir: str | Path, tokenizer: Any,
                        *, batch_size: int = 8) -> int:
    """Preference JSONL with ``ref_chosen_logps`` / ``ref_rejected_logps`` from the model at
    ``model_dir`` (the reference), for ``reference: precomputed``."""
    import json


    tok = Tokenizer.load(tokenizer) if isinstance(tokenizer, (str, Path)) else tokenizer
    model, mcfg = load_model(model_dir, dtype="float32")
    pairs = read_preferences(list(paths)).pairs

    @jax.jit
    def logps(tokens, segments, response):
        return sequence_logps(model, tokens, segments, response, logit_scale=mcfg.logit_scale, chunk=1024)[0]

    def score(seqs: list[tuple[list[int], np.ndarray]]) -> np.ndarray:
        out_ = np.zeros(len(seqs), np.float32)
        for at in range(0, len(seqs), batch_size):
            chunk = seqs[at : at + batch_size]
            width = -(-max(len(s) for s, _ in chunk) // 16) * 16
            t = np.full((batch_size, width), tok.pad_id, np.int32)
            g = np.zeros((batch_size, width), np.int32)
            r = np.zeros((batch_size, width), np.float32)
            for i, (ids, reply) in enumerate(chunk):
                t[i, : len(ids)], g[i, : len(ids)], r[i, : len(ids)] = ids, 1, reply
            out_[at : at + len(chunk)] = np.asarray(logps(t, g, r))[: len(chunk)]
        return out_

    chosen = score([encode_response(tok, p.prompt, p.chosen) for p in pairs])
    rejected = score([encode_response(tok, p.prompt, p.rejected) for p in pairs])

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for p, c, r in zip(pairs, chosen, rejected, strict=True):
            row = {"id": p.id, "prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected,
                   "level": LEVELS[p.level],
                   "chosen_grades": {g: v for g, v in zip(GRADES, p.chosen_grades, strict=True) if v >= 0},
                   "rejected_grades": {g: v for g, v in zip(GRADES, p.rejected_grades, strict=True) if v >= 0},
                   "ref_chosen_logps": float(c), "ref_rejected_logps": float(r)}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(pairs)


__all__ = ["DpoOptions", "DpoTask", "IpoTask", "add_reference_logps", "dpo_loss", "ipo_loss", "sequence_logps"]
