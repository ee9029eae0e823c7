"""Sampling (KV cache, batching, stop tokens, top-p), checkpoints, HF tensor layout, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner
from flax import nnx

from afm.model.checkpoints.checkpoint import load_model, save_params
from afm.model.checkpoints.hf_export import (
    config_from_hf,
    from_hf_tensors,
    hf_config,
    to_hf_tensors,
)
from afm.model.config import get_config
from afm.model.inference.sampling import generate, sample, top_p_filter
from afm.model.inference.scoring import score_tokens
from afm.model.initializer import init_model
from afm.model.transformer import Transformer

CFG = get_config("tiny", dtype="float32")


@pytest.fixture(scope="module")
def model() -> Transformer:
    m = init_model(CFG, 1)
    # Random norm scales, so that layouts which ignore a norm would be caught.
    rng = np.random.RandomState(9)
    state = jax.tree.map(
        lambda x: x * (1 + 0.3 * rng.randn(*x.shape).astype(np.float32)) if x.ndim == 1 else x,
        nnx.state(m, nnx.Param),
    )
    nnx.update(m, state)
    return m


def _greedy_reference(m: Transformer, prompt: list[int], n: int) -> list[int]:
    """Greedy decoding WITHOUT a cache: a full forward over a fixed-width buffer per token
    (causal, so what follows the current position does not matter; one compile)."""
    fwd = nnx.jit(lambda m, t: jnp.argmax(m(t), axis=-1)[0])
    width = len(prompt) + n
    seq = np.zeros((1, width), np.int32)
    seq[0, : len(prompt)] = prompt
    for i in range(len(prompt), width):
        seq[0, i] = int(fwd(m, jnp.asarray(seq))[i - 1])
    return seq[0, len(prompt):].tolist()


def test_greedy_batched_generation_matches_full_forward(model: Transformer) -> None:
    prompts = [[1, 2, 3], [5, 6, 7, 8, 9, 10, 11]]
    out = generate(model, prompts, max_new_tokens=4)
    # Left padding in the batch must not change any row.
    assert out == [_greedy_reference(model, p, 4) for p in prompts]


def test_stop_tokens_and_logprobs(model: Transformer) -> None:
    prompts = [[4, 9], [7]]
    free = generate(model, prompts, max_new_tokens=4)
    stop = free[0][1]
    res = sample(model, prompts, max_new_tokens=4, stop_tokens=[stop])
    assert res.tokens[0] == free[0][: free[0].index(stop) + 1] and res.stopped[0]
    assert all(lp <= 0 for row in res.logprobs for lp in row)
    # Sampling is reproducible for a seed and stays in the vocabulary.
    a = generate(model, prompts, max_new_tokens=4, temperature=1.0, top_p=0.9, seed=3)
    b = generate(model, prompts, max_new_tokens=4, temperature=1.0, top_p=0.9, seed=3)
    assert a == b and all(0 <= t < CFG.vocab_size for row in a for t in row)
    with pytest.raises(ValueError):
        generate(model, [[]], max_new_tokens=2)
    with pytest.raises(ValueError):
        generate(model, [[CFG.vocab_size]], max_new_tokens=2)


def test_top_k_keeps_the_k_most_likely_and_scoring_matches() -> None:
    """``top_k_filter`` keeps the k largest logits (a tie with the k-th too); the one
    log-prob function's ``top_k`` scores that renormalised distribution, and a target
    outside it gets a finite log-prob (over the support and itself), not -inf."""
    from afm.model.inference.sampling import top_k_filter
    from afm.model.inference.scoring import token_logprobs

    logits = jnp.asarray([[3.0, 1.0, 2.0, 2.0, -1.0]])
    assert np.isfinite(np.asarray(top_k_filter(logits, 2))).tolist() == [[True, False, True, True, False]]
    assert np.isfinite(np.asarray(top_k_filter(logits, 0))).all()
    with pytest.raises(ValueError, match="top_k"):
        sample(Transformer(CFG, rngs=nnx.Rngs(0)), [[1, 2]], max_new_tokens=1, temperature=1.0, top_k=-1)
    # hidden @ table = the logits above (identity table over five "tokens")
    hidden, table = jnp.asarray([[[3.0, 1.0, 2.0, 2.0, -1.0]]]), jnp.eye(5)
    for target in range(5):
        got = float(token_logprobs(hidden, table, jnp.asarray([[target]]), logit_scale=1.0, top_k=2).logprob[0, 0])
        z = np.asarray([3.0, 1.0, 2.0, 2.0, -1.0])
        support = [0, 2, 3] + ([target] if target in (1, 4) else [])
        assert got == pytest.approx(z[target] - np.log(np.exp(z[support]).sum()), abs=1e-6)


def test_top_p_keeps_the_nucleus() -> None:
    logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05]]))
    kept = np.isfinite(np.asarray(top_p_filter(logits, jnp.float32(0.7))))
    assert kept.tolist() == [[True, True, False, False]]
    kept = np.isfinite(np.asarray(top_p_filter(logits, jnp.float32(0.01))))
    assert kept.tolist() == [[True, False, False, False]]


def test_checkpoint_round_trip_and_scoring(model: Transformer, tmp_path: Path) -> None:
    path = save_params(model, tmp_path / "ckpt")
    assert json.loads((path / "config.json").read_text())["config"]["name"] == "tiny"
    with pytest.raises(FileExistsError):
        save_params(model, path)
    loaded, cfg = load_model(path)
    assert cfg == CFG
    ids = [1, 5, 9, 2]
    np.testing.assert_allclose(score_tokens(loaded, ids), score_tokens(model, ids), atol=1e-6)
    # Run-time fields may change on load; the parameter tree does not depend on them.
    scanned, _ = load_model(path, scan_layers=True)
    np.testing.assert_allclose(score_tokens(scanned, ids), score_tokens(model, ids), atol=1e-5)


def test_hf_layout_round_trips(model: Transformer) -> None:
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    tensors = to_hf_tensors(params, CFG)
    assert tensors["model.layers.0.self_attn.q_proj.weight"].shape == (
        CFG.n_heads * CFG.head_dim, CFG.dim)
    assert tensors["model.layers.1.mlp.down_proj.weight"].shape == (CFG.dim, CFG.ffn_dim)
    assert "lm_head.weight" not in tensors  # tied
    back = from_hf_tensors(tensors, CFG)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(back)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    hf = hf_config(CFG, dtype="float32")
    assert hf["model_type"] == "qwen3" and hf["tie_word_embeddings"] is True
    assert config_from_hf(hf) == CFG


def test_cli_model_info_init_score(tmp_path: Path) -> None:
    from afm.app.commands.model.model import model_group, score_command

    runner = CliRunner()
    res = runner.invoke(model_group, ["info", "afm-on-device", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert abs(info["non_embedding_params"] / 1e9 - 2.58) < 0.01
    ckpt = tmp_path / "init"
    res = runner.invoke(model_group, ["init", "--config", "tiny", "--out", str(ckpt), "--seed", "2"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(score_command, ["--checkpoint", str(ckpt), "--tokens", "1 2 3"])
    assert res.exit_code == 0, res.output
    lps = json.loads(res.stdout)["logprobs"]
    assert len(lps) == 2 and all(lp < 0 for lp in lps)
    res = runner.invoke(score_command, ["--checkpoint", str(ckpt), "--tokens", "1 x"])
    assert res.exit_code != 0 and "integers" in res.output


def _nucleus_logprobs(logits: np.ndarray, temperature: float, top_p: float, top_k: int = 0) -> np.ndarray:
    """log p of every token under softmax(logits / T) restricted to the top-k tokens (ties
    at the k-th kept) and then the top-p nucleus, written out directly in float64 (the
    smallest set of most likely tokens whose mass reaches top_p; -inf outside it)."""
    z = logits.astype(np.float64) / temperature
    if top_k:
        z = np.where(z >= np.sort(z)[::-1][top_k - 1], z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    before = np.cumsum(p[order]) - p[order]
    keep = np.zeros_like(p, bool)
    keep[order[before < top_p]] = True
    keep[order[0]] = True
    q = np.where(keep, p, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(q / q.sum())


@pytest.mark.parametrize("temperature,top_p,top_k", [(0.7, 0.8, 0), (1.6, 0.5, 0), (1.0, 1.0, 0), (1.0, 1.0, 5),
                                                     (1.3, 0.9, 40)])
def test_sampled_logprobs_are_the_sampling_distribution(model: Transformer, temperature: float,
                                                         top_p: float, top_k: int) -> None:
    """Each drawn token's log-prob is under the distribution that drew it (logits / T, then
    the top-k tokens and the top-p nucleus renormalised), checked against a direct float64
    computation from a cache-free forward; ``model_logprobs`` stay the model's own (T = 1,
    no top-k or top-p). With top-k every drawn token is among the k most likely."""
    prompts = [[3, 1, 4, 1, 5], [9, 2]]
    res = sample(model, prompts, max_new_tokens=6, temperature=temperature, top_p=top_p, seed=11, top_k=top_k)
    fwd = nnx.jit(lambda m, t: m(t))
    for prompt, toks, lps, model_lps in zip(prompts, res.tokens, res.logprobs, res.model_logprobs, strict=True):
        seq = np.asarray([prompt + toks], np.int32)
        logits = np.asarray(fwd(model, jnp.asarray(seq)))[0]
        for i, tok in enumerate(toks):
            at = len(prompt) + i - 1
            want = _nucleus_logprobs(logits[at], temperature, top_p, top_k)[tok]
            assert np.isfinite(want)  # a drawn token is always inside the nucleus (and the top k)
            assert lps[i] == pytest.approx(want, abs=2e-4)
            own = logits[at].astype(np.float64)
            assert model_lps[i] == pytest.approx(own[tok] - own.max() - np.log(np.exp(own - own.max()).sum()),
                                                 abs=2e-4)
    if (temperature, top_p, top_k) != (1.0, 1.0, 0):  # the two differ once the policy is not the model
        assert any(abs(a - b) > 1e-3 for row, mrow in zip(res.logprobs, res.model_logprobs)
                   for a, b in zip(row, mrow))
