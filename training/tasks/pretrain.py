"""The pre-training task: packed token rows, next-token cross-entropy, every parameter trains."""

from __future__ import annotations

import dataclasses
from typing import Any

from afm.training.core.losses import next_token_loss
from afm.training.core.task import Field, LossContext, LossOutput, TaskBase
from afm.training.data.loader import LoaderState, make_loader


class PretrainTask(TaskBase):
    """SPEC 3's objective on the streaming loader's batches.

    ``data.attention: document`` gives the model segment ids and per-document positions
    (attention stays inside a document); ``causal`` gives it neither, so no mask exists
    anywhere and the fused kernels run their plain causal path.
    """

    name = "pretrain"

    @property
    def _document(self) -> bool:
        return self.config.data.attention == "document"

    def configure_model(self, model_config: Any) -> Any:
        """cuDNN's packed layout needs a bound on the segment runs of a row: the loader's
        cap on documents, plus one run for the padding after them."""
        if self._document and self.config.data.max_segments_per_row > 0:
            return dataclasses.replace(model_config, max_segments=self.config.data.max_segments_per_row + 1)
        return model_config

    def batch_fields(self) -> dict[str, Field]:
        fields = {"inputs": Field("int32"), "targets": Field("int32"), "loss_mask": Field("float32")}
        if self._document:
            fields |= {"segment_ids": Field("int32"), "positions": Field("int32")}
        return fields

    def make_input(
        self, *, vocab_size: int, process_index: int, process_count: int, state: LoaderState | None = None
    ):
        return make_loader(
            self.config.data, vocab_size=vocab_size, process_index=process_index,
            process_count=process_count, state=state,
        )

    def make_eval_input(self, paths: list[str], *, vocab_size: int, process_index: int, process_count: int):
        cfg = dataclasses.replace(self.config.data, paths=list(paths), prefetch=0, index_cache="")
        return make_loader(cfg, vocab_size=vocab_size, process_index=process_index, process_count=process_count)

    def loss(self, params, batch, ctx: LossContext) -> LossOutput:
        return next_token_loss(params, batch, ctx, chunk=self.config.loss_chunk, segments=self._document)
