"""A tiny model and tokenizer for the demo, the benchmark and the tests.

The tokenizer in ``data/tokenizer`` (SentencePiece BPE, 512 pieces, the afm recipe) was
trained with ``afm.model.text.tokenizer.train_tokenizer`` (one thread, so it is reproducible)
on the text of the bundled demo site and the project's demo-math set. With
``init_model(get_config("tiny"), seed)`` it gives a fully deterministic model that needs
no download and no training, which is what stored parity values need.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from afm.model.checkpoints.checkpoint import save_params
from afm.model.config import get_config
from afm.model.initializer import init_model

DATA = Path(__file__).resolve().parent / "data"


def tokenizer_dir() -> Path:
    return DATA / "tokenizer"


def tiny_model(seed: int = 0, max_seq_len: int = 512, dtype: str = "float32", config: str = "tiny") -> Any:
    """The ``tiny`` config (or another named size, e.g. ``100m`` for the evaluation
    benchmark), randomly initialised, with a longer window for few-shot prompts."""

    return init_model(get_config(config, max_seq_len=max_seq_len, dtype=dtype), seed)


def write_tiny_checkpoint(out: str | os.PathLike[str], seed: int = 0, max_seq_len: int = 512,
                          config: str = "tiny") -> Path:
    return save_params(tiny_model(seed, max_seq_len, config=config), out, overwrite=True)
