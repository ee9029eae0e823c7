"""The chain rule's numpy forward pass (filters/quality/context_gain.py) against the AFM
transformer it was trained as (afm.model: the features, the one chunked log-probability
function): the same log-probabilities for a random model, at the whole window and at a
span of one token (the trainer's segments), and its span-one table equal to both."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from afm.filters.quality.context_gain import ContextGainModel, Shape, model_arrays
from afm.model.config import get_config
from afm.model.inference.scoring import token_logprobs
from afm.model.params import flatten_state
from afm.model.transformer import Transformer
from afm.training.tasks.context_gain import windowed_segments

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_numpy_forward_matches_the_model(tmp_path, kv_heads: int) -> None:
    cfg = get_config("tiny", dtype="float32", vocab_size=300, dim=48, n_heads=4, n_kv_heads=kv_heads, head_dim=12,
                     ffn_dim=96, max_seq_len=64)
    model = Transformer(cfg, rngs=nnx.Rngs(3))
    # trained weights are not at their init: move every norm scale off 1 so each one counts
    flat, _ = flatten_state(nnx.state(model, nnx.Param))
    rng = np.random.default_rng(0)
    flat = {k: np.asarray(v) * (1 + 0.3 * rng.standard_normal(np.shape(v))) for k, v in flat.items()}
    nnx.update(model, _nested(model, flat))
    vocabulary = [f"w{i}" for i in range(cfg.vocab_size)]
    shape = Shape(dim=cfg.dim, n_layers=cfg.n_layers, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads,
                  head_dim=cfg.head_dim, norm_eps=cfg.norm_eps, rope_base=cfg.rope_base)
    np.savez(tmp_path / "m.npz", **model_arrays(flat, shape, vocabulary))
    ours = ContextGainModel(tmp_path / "m.npz")

    ids = rng.integers(0, cfg.vocab_size, (3, 33)).astype(np.int32)
    inputs, targets = jnp.asarray(ids[:, :-1]), jnp.asarray(ids[:, 1:])
    positions = jnp.broadcast_to(jnp.arange(32), (3, 32))
    for window, segments in ((64, None), (1, windowed_segments(jnp.ones_like(inputs), positions, 1))):
        hidden, _ = model.features(inputs, positions=positions, segment_ids=segments)
        reference = np.asarray(token_logprobs(hidden, model.embed[...], targets, logit_scale=cfg.logit_scale).logprob)
        np.testing.assert_allclose(ours.token_logprobs(ids, window), reference, atol=2e-4, rtol=1e-4)
    hidden_alone, normaliser = ours.alone()
    one = np.einsum("btd,btd->bt", hidden_alone[ids[:, :-1]], ours.params["embed"][ids[:, 1:]]) * shape.logit_scale
    np.testing.assert_allclose(one - normaliser[ids[:, :-1]], ours.token_logprobs(ids, 1), atol=2e-4)


def _nested(model: Transformer, flat: dict[str, np.ndarray]):
    state = nnx.state(model, nnx.Param)
    _, layout = flatten_state(state)
    return layout.unflatten({k: jnp.asarray(v, jnp.float32) for k, v in flat.items()})
