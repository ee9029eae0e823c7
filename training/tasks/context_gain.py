"""Context gain: one language model trained at several attention spans at once.

The quality stage's chain rule (``afm.filters.quality.context_gain``) reads a text's
*gain from context*: its loss when each word sees only itself minus its loss when it
sees the whole window before it. Real writing gains from context; a chain of word
bigrams (each word drawn given the one before: spun or machine-made text that every
published rule passes) gains almost nothing beyond its last word. For one model to give
both losses it must have learned both, so every batch is scored under several spans and
the loss is their mean (the pre-training loss over each span, weighted by tokens):

* the whole row (``data.attention: document``: each document its own segment);
* each span of ``task_options.windows`` (1 and 3 by default): a document cut into runs of
  that many tokens, each run its own segment, so a token sees at most that many tokens,
  itself included. Positions are left as they are: RoPE makes attention depend on the
  distance between tokens only, so a run of ``w`` tokens is read as it would be in place.

With one token of context attention returns the token's own value, so the model's answer
there depends on the token alone (no position): the filter keeps it as a table, and only
the whole-window pass costs anything when a text is scored. The task is pre-training in
every other respect (the streaming loader, checkpoints, resume): it trains the small word
model ``afm quality train-context-gain`` makes; any stage of it is a normal ``afm train``
stage (``configs/quality.yaml``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp

from afm.config import ConfigError
from afm.training.core.losses import next_token_loss
from afm.training.core.task import LossContext, LossOutput
from afm.training.tasks.pretrain import PretrainTask


@dataclass
class ContextGainOptions:
    """``task_options`` of the context-gain task."""

    windows: list[int] = dataclasses.field(default_factory=lambda: [1, 3])  # spans besides the whole row

    def check(self) -> None:
        bad = any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in self.windows)
        if not self.windows or bad or len(set(self.windows)) != len(self.windows):
            raise ConfigError(f"task_options.windows: distinct positive whole numbers of tokens, got {self.windows}")


def windowed_segments(segment_ids: Any, positions: Any, window: int) -> Any:
    """Segment ids that cut each document of a row into runs of ``window`` tokens (by its
    positions, which restart at 0 per document); padding (segment 0) stays 0."""
    runs_per_document = positions.shape[-1] // window + 2
    return jnp.where(segment_ids > 0, segment_ids * runs_per_document + positions // window + 1, 0)


class ContextGainTask(PretrainTask):
    """See the module docstring."""

    name = "context_gain"
    Options = ContextGainOptions

    def start_run(self, workdir: str) -> None:
        if self.config.data.attention != "document":
            raise ConfigError("the context_gain task needs data.attention: document (spans are cut per document)")

    def configure_model(self, model_config: Any) -> Any:
        """A span of one token makes a segment of every token: the packed-layout bound is
        the row's length."""
        return dataclasses.replace(model_config, max_segments=self.config.data.seq_len + 1)

    def loss(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext) -> LossOutput:
        chunk = self.config.loss_chunk
        whole = next_token_loss(params, batch, ctx, chunk=chunk, segments=True)
        total, metrics = whole.loss, {"loss_whole": whole.loss}
        for window in self.options.windows:
            spans = {**batch, "segment_ids": windowed_segments(batch["segment_ids"], batch["positions"], window)}
            out = next_token_loss(params, spans, ctx, chunk=chunk, segments=True)
            metrics[f"loss_window_{window}"] = out.loss
            total = (total[0] + out.loss[0], total[1] + out.loss[1])
        return LossOutput(loss=total, metrics=metrics)


__all__ = ["ContextGainOptions", "ContextGainTask", "windowed_segments"]
