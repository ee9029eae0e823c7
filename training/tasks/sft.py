"""Supervised fine-tuning (report §4.2, SPEC 4) as a task of the one trainer.

The task: packed conversations from the one streaming loader (``afm.training.data.loader``, ``packing: conversation``) (loss on assistant tokens
only), next-token cross-entropy averaged over those tokens, every parameter trains,
dropout (``task_options.dropout``, 0.1 by default, as the report) on the embedding and
every sublayer output, drawn from the step's ``ctx.rng``.

The SFT stages (``sft``, ``sft-on-device``, ``tiny-sft`` in ``configs/sft.yaml``) are the
report's hyper-parameters on top of it: a constant learning rate (5e-6 for AFM-server,
2e-5 for AFM-on-device) after a short warm-up, and the mixture of named datasets as
``data.weights``. Selecting the best
checkpoint by evaluation is the trainer's (``eval.select_metric``,
``afm.training.core.selection``); :meth:`SftTask.prepare_config` sets it up with the
held-out assistant-token loss unless another metric is chosen, for every command that runs
an SFT stage.

Optimizer: the report gives only the LR and dropout for SFT. We fine-tune with AdamW
(Appendix A's baseline settings, decoupled weight decay 0) and without muParam's
per-tensor multipliers, so the LR is the absolute step size the report quotes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afm.console import console
from afm.training.core.config import TrainConfig, get_train_config
from afm.training.core.engine import Engine
from afm.training.core.hooks import HeldOutLoss, ModelView
from afm.training.core.losses import next_token_loss
from afm.training.core.task import Field, LossContext, LossOutput, TaskBase
from afm.training.data.loader import HeldOutConversations, conversation_config, make_loader


@dataclass
class SftOptions:
    """``task_options`` of the SFT task."""

    dropout: float = 0.1  # report §4.2


class SftTask(TaskBase):
    """See the module docstring."""

    name = "sft"
    Options = SftOptions

    @classmethod
    def prepare_config(cls, config: Any, workdir: str) -> Any:
        """Held-out evaluation over every held-out conversation (its batch count computed
        here) selecting the best checkpoint by ``eval/heldout/loss``; without held-out data
        (and no other hook) selection is off: there is nothing to select by."""
        ev = config.eval
        if ev.heldout:
            needed = HeldOutConversations(conversation_config(config.data), list(ev.heldout),
                                          vocab_size=None).batches_needed()
            ev = dataclasses.replace(ev, heldout_batches=max(1, needed))
        if ev.select_metric.startswith("eval/heldout/") and not ev.heldout:
            ev = dataclasses.replace(ev, select_metric="")
        if not config.init_from:
            console.print("[yellow]note: no init_from (--init-from): fine-tuning a freshly initialised model")
        return dataclasses.replace(config, eval=ev)

    def configure_model(self, model_config: Any) -> Any:
        changes: dict[str, Any] = {"dropout": self.options.dropout}
        if self.config.data.max_segments_per_row > 0:
            changes["max_segments"] = self.config.data.max_segments_per_row + 1
        return dataclasses.replace(model_config, **changes)

    def batch_fields(self) -> dict[str, Field]:
        return {
            "inputs": Field("int32"), "targets": Field("int32"), "loss_mask": Field("float32"),
            "segment_ids": Field("int32"), "positions": Field("int32"),
        }

    def make_input(self, *, vocab_size: int, process_index: int, process_count: int, state: Any = None):
        """The one streaming loader, packing whole conversations (``conversation_config``)."""
        return make_loader(conversation_config(self.config.data), vocab_size=vocab_size,
                           process_index=process_index, process_count=process_count, state=state)

    def make_eval_input(self, paths: list[str], *, vocab_size: int, process_index: int, process_count: int):
        return HeldOutConversations(conversation_config(self.config.data), paths, vocab_size=vocab_size,
                                    process_index=process_index, process_count=process_count)

    def loss(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext) -> LossOutput:
        return next_token_loss(params, batch, ctx, chunk=self.config.loss_chunk, segments=True, dropout=True)


def heldout_metrics(
    config: str | Path | Any,
    checkpoint: str | Path,
    heldout: list[str],
    *,
    overrides: list[str] | tuple[str, ...] = (),
) -> dict[str, float]:
    """The held-out assistant-token loss and accuracy of any checkpoint (e.g. the base
    model before SFT, for a before/after comparison), computed exactly as the trainer's
    ``eval/heldout/*`` (same task, packing and batches; no dropout)."""

    cfg = config if isinstance(config, TrainConfig) else get_train_config(config, overrides, task="sft")
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, paths=list(heldout)))
    engine, params = Engine.from_checkpoint(cfg, str(checkpoint), SftTask(cfg))
    batches = HeldOutConversations(conversation_config(cfg.data), list(heldout), vocab_size=None).batches_needed()
    hook = HeldOutLoss(engine, list(heldout), max(1, batches))
    return hook(0, ModelView(params, engine.model_config, engine.mesh))


__all__ = ["SftOptions", "SftTask", "heldout_metrics"]
