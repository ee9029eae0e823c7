"""Model benchmarks (light, CPU-friendly; the GPU MFU benchmark is ``afm bench train``).

* ``model_forward``: forward tokens/s of the jit-compiled model vs the same model run
  eagerly (op by op), on ``tiny`` (quick) or ``100m``.
* ``model_decode``: generated tokens/s with the KV cache (``afm.model.inference.sampling``) vs
  the no-cache baseline that re-runs the full (jitted) forward over the whole sequence
  for every new token.
* ``tokenizer_encode``: tokens/s of our SentencePiece encoding vs Hugging Face
  ``tokenizers`` loading our exported ``tokenizer.json`` (same vocabulary; when
  installed), and the fraction of documents both encode identically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison


def _time(fn: Callable[[], Any], repeats: int) -> float:
    """Best wall time of ``repeats`` calls after one warm-up call."""
    import jax

    jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best


def _bench_config(name: str) -> Any:
    """The named config; on CPU computed in float32 (XLA:CPU has no fast bf16 matmul)."""
    import jax

    from afm.model.config import get_config

    cfg = get_config(name)
    return cfg.replace(dtype="float32") if jax.default_backend() == "cpu" else cfg


def bench_forward(opts: BenchOptions) -> list[Comparison]:
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from afm.model.transformer import Transformer

    name, batch, seq = ("tiny", 4, 128) if opts.quick else ("100m", 2, 256)
    cfg = _bench_config(name)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.asarray(np.random.RandomState(0).randint(0, cfg.vocab_size, (batch, seq)), jnp.int32)
    jitted = nnx.jit(lambda m, t: m(t))
    t_jit = _time(lambda: jitted(model, tokens), repeats=5)
    t_eager = _time(lambda: model(tokens), repeats=2)
    n = batch * seq
    return [Comparison(f"forward tokens/s ({name}, {batch}x{seq})", n / t_jit, n / t_eager,
                       "eager (op by op)", "tok/s", "jit >= eager")]


def bench_decode(opts: BenchOptions) -> list[Comparison]:
    import jax.numpy as jnp
    from flax import nnx

    from afm.model.inference.sampling import generate
    from afm.model.transformer import Transformer

    name, new = ("tiny", 32) if opts.quick else ("100m", 16)
    cfg = _bench_config(name)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    prompts = [[1] + list(range(5, 5 + 15)) for _ in range(4)]

    def cached() -> Any:
        return generate(model, prompts, max_new_tokens=new)

    fwd = nnx.jit(lambda m, t: jnp.argmax(m(t)[:, -1], axis=-1))
    width = 16 + new  # fixed shape: one compile, the no-cache loop re-reads everything

    def no_cache() -> Any:
        toks = jnp.zeros((len(prompts), width), jnp.int32).at[:, :16].set(jnp.asarray(prompts))
        for i in range(16, width):
            nxt = fwd(model, toks[:, :width])  # full forward each step (causal: pad is ignored)
            toks = toks.at[:, i].set(nxt)
        return toks

    t_cache = _time(cached, repeats=2)
    t_plain = _time(no_cache, repeats=1)
    n = len(prompts) * new
    return [Comparison(f"decode tokens/s ({name}, batch {len(prompts)}, {new} new)", n / t_cache,
                       n / t_plain, "no KV cache (full forward per token)", "tok/s", "cache > full")]


def bench_tokenizer(opts: BenchOptions) -> list[Comparison]:
    import json
    import random
    import tempfile
    from pathlib import Path

    from afm.model.text.tokenizer import Tokenizer, train_tokenizer

    rng = random.Random(0)
    words = [w for w in (Path(__file__).read_text().split()) if w.isalpha()][:400] or ["word"]
    n_docs = 500 if opts.quick else 5000
    docs = [" ".join(rng.choice(words) for _ in range(200)) + f" {i}" for i in range(n_docs)]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "docs.jsonl"
        src.write_text("\n".join(json.dumps({"id": str(i), "text": d}) for i, d in enumerate(docs)))
        tok = Tokenizer.load(train_tokenizer([str(src)], Path(tmp) / "tok", vocab_size=1000))
        start = time.perf_counter()
        ours = tok.encode_batch(docs)
        t_ours = time.perf_counter() - start
        try:  # the same vocabulary in Hugging Face `tokenizers` (our HF export), if installed
            from tokenizers import Tokenizer as HFTokenizer

            from afm.model.checkpoints.hf_export import tokenizer_json
        except ImportError:
            hf = None
        else:
            hf = HFTokenizer.from_str(json.dumps(tokenizer_json(tok)))
    n = sum(len(x) for x in ours)
    if hf is None:
        return [Comparison(f"encode tokens/s ({n_docs} docs)", n / t_ours, None,
                           "HF tokenizers not installed", "tok/s")]
    start = time.perf_counter()
    theirs = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    t_hf = time.perf_counter() - start
    agree = sum(a == b for a, b in zip(ours, theirs)) / len(docs)
    return [
        Comparison(f"encode tokens/s ({n_docs} docs)", n / t_ours, n / t_hf,
                   "HF tokenizers, same vocab", "tok/s"),
        Comparison("documents encoded identically by the HF export", agree, 1.0,
                   "all", "fraction", "= 1"),
    ]


BENCHMARKS = {
    "model_forward": bench_forward,
    "model_decode": bench_decode,
    "tokenizer_encode": bench_tokenizer,
}
