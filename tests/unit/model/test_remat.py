"""Remat: the named save points exist, each policy keeps what it says (measured from JAX's
own list of saved residuals), and the memory estimate orders policies the same way."""

from __future__ import annotations

import contextlib
import io
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from afm.model import remat
from afm.model.config import CONFIGS, estimate_train_memory_gb, get_config
from afm.model.transformer import Transformer

CFG = get_config("tiny", dim=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=256, n_layers=2, max_seq_len=128)
TOKENS = jnp.zeros((2, 128), jnp.int32)
BYTES = {"f32": 4, "bf16": 2, "i32": 4, "f16": 2, "bool": 1}


def _residuals(policy: str) -> tuple[int, set[str]]:
    """Bytes of activations saved for the backward pass (parameters excluded) and the
    names among them."""
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Transformer(CFG.replace(remat=policy), rngs=nnx.Rngs(0))))

    def loss(state):
        return nnx.merge(graphdef, state).features(TOKENS)[0].astype(jnp.float32).mean()

    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # the public API prints the list
        jax.ad_checkpoint.print_saved_residuals(loss, state)
    size, names = 0, set()
    for line in out.getvalue().splitlines():
        match = re.match(r"(\w+)\[([\d,]*)\] (.*)", line)
        if not match or "argument" in match.group(3):
            continue
        dims = [int(d) for d in match.group(2).split(",") if d]
        if len(dims) < 3:  # scalars and per-token statistics
            continue
        size += int(np.prod(dims)) * BYTES[match.group(1)]
        names |= {n for n in remat.NAMES if f"named '{n}'" in match.group(3)}
    return size, names


def test_policies_keep_what_they_say():
    sizes = {p: _residuals(p) for p in ("none", "dots_except_mlp", "qkv_attention", "attention", "full")}
    order = [sizes[p][0] for p in ("full", "attention", "qkv_attention", "dots_except_mlp", "none")]
    assert order == sorted(order) and order[0] < order[-1] / 3, sizes
    assert sizes["qkv_attention"][1] == {"query", "key", "value", "attn_context"}
    assert sizes["attention"][1] == {"attn_context"}
    assert sizes["full"][1] == set()
    assert _residuals("save:mlp_up")[1] == {"mlp_up"}


def test_policy_validation_and_estimates():
    for bad in ("sometimes", "save:nope"):
        with pytest.raises(ValueError, match="remat"):
            get_config("tiny", remat=bad)
    est = {p: estimate_train_memory_gb(CONFIGS["1b"], tokens_per_device=16384, policy=p)
           for p in ("none", "dots_except_mlp", "qkv_attention", "full")}
    assert est["full"] < est["qkv_attention"] < est["dots_except_mlp"] < est["none"]
    # every named size's default fits 80 GB at its reference shape (see afm.model.config)
    for name, devices in (("1b", 1), ("afm-on-device", 1), ("afm-teacher-6.4b", 8), ("afm-server", 256)):
        assert estimate_train_memory_gb(CONFIGS[name], tokens_per_device=16384, devices=devices) < 80, name
