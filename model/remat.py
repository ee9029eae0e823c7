"""Activation checkpointing (remat): named save points in a block and the policies over them.

Every block tags its intermediate activations with ``jax.ad_checkpoint.checkpoint_name``:

==============  ===========================================  ===================
name            what                                         size per token
==============  ===========================================  ===================
``query``       q after q-norm and RoPE                      ``n_heads x head_dim``
``key``         k after k-norm and RoPE                      ``n_kv x head_dim``
``value``       v projection                                 ``n_kv x head_dim``
``attn_context``attention output before the out-projection   ``n_heads x head_dim``
                (splash also saves its softmax statistics
                under this name)
``attn_out``    out-projection (the attention residual)      ``dim``
``mlp_gate``    gate projection                              ``ffn``
``mlp_up``      up projection                                ``ffn``
``mlp_out``     down projection (the MLP residual)           ``dim``
==============  ===========================================  ===================

A policy says which names survive the forward pass; everything else in the block is
recomputed in the backward pass. The block input is always kept (it is the scan carry /
the previous block's output).

* ``none``: no remat, keep everything (fastest, most memory).
* ``dots_except_mlp``: keep q/k/v/context/attn_out; recompute the MLP (the FFN
  activations are the biggest, ``3 x ffn`` per token).
* ``qkv_attention``: keep q, k, v and the attention context: the backward never re-runs
  the attention kernel, the projections of the MLP are recomputed.
* ``attention``: keep only the attention context (+ kernel residuals).
* ``dots``: keep every matmul output without batch dims (JAX's standard policy).
* ``full`` (alias ``block``): keep only the block input; recompute the whole block.
* ``save:NAME,NAME``: keep exactly these names.

Defaults per model size (``afm.model.config``) are the cheapest policy whose estimated
per-device training memory (:func:`afm.model.config.estimate_train_memory_gb`) fits an 80 GB accelerator at
the size's reference shape, with FSDP over the devices the stage uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.ad_checkpoint import checkpoint_name

NAMES = ("query", "key", "value", "attn_context", "attn_out", "mlp_gate", "mlp_up", "mlp_out")

_NAMED: dict[str, tuple[str, ...]] = {
    "dots_except_mlp": ("query", "key", "value", "attn_context", "attn_out"),
    "qkv_attention": ("query", "key", "value", "attn_context"),
    "attention": ("attn_context",),
}
POLICIES = ("none", "full", "block", "dots", *_NAMED)


def validate(policy: str) -> None:
    """Raise ValueError for an unknown policy or an unknown name in ``save:...``."""
    if policy in POLICIES:
        return
    if policy.startswith("save:"):
        bad = [n for n in policy[5:].split(",") if n not in NAMES]
        if not bad:
            return
        raise ValueError(f"remat 'save:' names {bad} unknown; known: {NAMES}")
    raise ValueError(f"unknown remat policy {policy!r}; choose from {POLICIES} or 'save:NAME,...'")


def saved_names(policy: str) -> tuple[str, ...] | None:
    """The names a policy keeps (None: no remat or a non-name policy)."""
    if policy in _NAMED:
        return _NAMED[policy]
    if policy.startswith("save:"):
        return tuple(policy[5:].split(","))
    if policy in ("full", "block"):
        return ()
    return None


def jax_policy(policy: str) -> Callable[..., Any] | None:
    """The ``jax.checkpoint`` policy for a name, or None for ``none`` (no remat)."""
    validate(policy)
    if policy == "none":
        return None
    if policy == "dots":
        return jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    names = saved_names(policy)
    if not names:
        return jax.checkpoint_policies.nothing_saveable
    return jax.checkpoint_policies.save_only_these_names(*names)


def tag(x: jax.Array, name: str) -> jax.Array:
    """Mark an activation as the save point ``name`` (an identity otherwise)."""
    return checkpoint_name(x, name)
