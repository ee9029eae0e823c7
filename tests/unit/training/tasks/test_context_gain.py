"""The context-gain task (training/tasks/context_gain.py): its spans cut documents into runs
of the right length, a span of one token makes each token's output its own (whatever its
position or neighbours), and a run trains and logs every span's loss."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from afm.config import ConfigError
from afm.model.config import get_config
from afm.model.transformer import Transformer
from afm.outputs import write_directory
from afm.training.data.shards import write_token_shard
from afm.training.runs.train import train
from afm.training.tasks.context_gain import ContextGainOptions, windowed_segments


def test_spans_cut_each_document_into_runs_and_leave_padding() -> None:
    segments = jnp.array([[1, 1, 1, 1, 1, 2, 2, 2, 0, 0]])
    positions = jnp.array([[0, 1, 2, 3, 4, 0, 1, 2, 0, 0]])
    ones = np.asarray(windowed_segments(segments, positions, 1))[0]
    assert len(set(ones[:8])) == 8 and list(ones[8:]) == [0, 0]
    threes = np.asarray(windowed_segments(segments, positions, 3))[0]
    runs = [list(threes[:3]), list(threes[3:5]), list(threes[5:8])]
    assert all(len(set(r)) == 1 for r in runs) and len({r[0] for r in runs}) == 3
    assert list(threes[8:]) == [0, 0]


def test_a_span_of_one_token_sees_only_the_token() -> None:
    """What the filter's table rests on: at span 1 a token's features depend on the token alone."""
    from flax import nnx

    cfg = get_config("tiny", dtype="float32", vocab_size=64)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.array([[5, 9, 5, 7, 9, 5]])
    positions = jnp.arange(6)[None]
    alone = windowed_segments(jnp.ones_like(tokens), positions, 1)
    hidden, _ = model.features(tokens, positions=positions, segment_ids=alone)
    h = np.asarray(hidden)[0]
    assert np.allclose(h[0], h[2], atol=1e-5) and np.allclose(h[0], h[5], atol=1e-5)
    assert np.allclose(h[1], h[4], atol=1e-5) and not np.allclose(h[0], h[1], atol=1e-3)


def test_windows_must_be_positive_token_counts() -> None:
    for windows in ([0], [1, 1], [True], []):
        with pytest.raises(ConfigError, match="windows"):
            ContextGainOptions(windows=windows).check()


def test_a_run_trains_and_logs_every_span(tmp_path) -> None:
    rng = np.random.default_rng(0)
    rows = [{"id": str(i), "source": "web", "tokens": rng.integers(5, 64, 40).tolist()} for i in range(30)]
    write_directory(str(tmp_path / "shards"),
                    lambda staging: write_token_shard(rows, f"{staging}/tokens-00000.parquet"))
    result = train("tiny-context-gain", tmp_path / "run", data=[str(tmp_path / "shards")], quiet=True)
    assert result["steps"] == 4 and np.isfinite(result["final_loss"])
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    for name in ("loss_whole", "loss_window_1", "loss_window_3"):
        assert np.isfinite(last[name])
    # the reported loss is the token-weighted mean of the three spans' losses
    assert last["loss"] == pytest.approx((last["loss_whole"] + last["loss_window_1"] + last["loss_window_3"]) / 3,
                                         rel=1e-3)
