"""afm_rmsprop against a plain NumPy transcription of SPEC 3.1, step by step; skip-step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from afm.training.core.optimizer import (
    OptimizerConfig,
    SkipConfig,
    adamw_baseline,
    afm_rmsprop,
    applied_updates,
    build_optimizer,
    skip_on_spikes,
    skipped_updates,
)
from afm.training.core.schedules import warmup_cosine


def spec_reference(params, grads_seq, *, lr, wd, sched, mult, b1=0.95, b2=0.95, eps2=1e-30):
    """SPEC 3.1 literally, in float64 NumPy."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    v = {k: np.zeros_like(x) for k, x in p.items()}
    m = {k: np.zeros_like(x) for k, x in p.items()}
    for t, grads in enumerate(grads_seq, start=1):
        g = {k: x.astype(np.float64) for k, x in grads.items()}
        norm = np.sqrt(sum(np.sum(x**2) for x in g.values()))
        if norm > 1.0:  # 1. global norm clip to 1.0
            g = {k: x / norm for k, x in g.items()}
        for k in p:
            v[k] = b2 * v[k] + (1 - b2) * (g[k] ** 2 + eps2)  # 2. EMA of g^2 + eps
            v_hat = v[k] / (1 - b2**t)  # bias correction
            u = g[k] / np.sqrt(v_hat)  # 3.
            rms = np.sqrt(np.mean(u**2))  # 4. per-block RMS clip to 1.0
            if rms > 1.0:
                u = u / rms
            m[k] = b1 * m[k] + (1 - b1) * u  # 5. no bias correction
            p[k] = p[k] - sched(t - 1) * (lr * mult[k] * m[k] + wd * p[k])  # 6.
    return p


def _data(seed=0, steps=6):
    rng = np.random.default_rng(seed)
    params = {"w": rng.normal(size=(8, 4)).astype(np.float32), "b": rng.normal(size=(4,)).astype(np.float32)}
    grads = []
    for i in range(steps):
        scale = 5.0 if i % 2 == 0 else 0.01  # alternate clipped / unclipped global norms
        g = {k: (rng.normal(size=x.shape) * scale).astype(np.float32) for k, x in params.items()}
        g["w"][0, 0] = 40.0 * scale  # an outlier makes the per-block RMS clip bite
        grads.append(g)
    return params, grads


def test_matches_numpy_transcription_of_spec():
    params, grads_seq = _data()
    sched = warmup_cosine(3, 10, 0.1)
    mult = {"w": 0.25, "b": 1.0}
    opt = afm_rmsprop(0.05, sched, weight_decay=0.01, lr_multipliers=mult)
    p = jax.tree.map(jnp.asarray, params)
    state = opt.init(p)
    step = jax.jit(opt.update)
    for g in grads_seq:
        updates, state = step(jax.tree.map(jnp.asarray, g), state, p)
        p = optax.apply_updates(p, updates)
    ref = spec_reference(params, grads_seq, lr=0.05, wd=0.01, sched=lambda s: float(sched(s)), mult=mult)
    for k in params:
        np.testing.assert_allclose(np.asarray(p[k]), ref[k], rtol=2e-5, atol=1e-6)
    assert int(applied_updates(state)) == len(grads_seq)


def test_first_update_is_momentum_without_bias_correction():
    # t=1: v_hat = g^2 (+eps), u = sign(g) (RMS 1, unclipped), m = 0.05 * u.
    p = {"w": jnp.zeros((3, 3))}
    g = {"w": jnp.full((3, 3), 0.1)}
    opt = afm_rmsprop(1.0, lambda s: jnp.float32(1.0), weight_decay=0.0)
    upd, _ = opt.update(g, opt.init(p), p)
    np.testing.assert_allclose(np.asarray(upd["w"]), -0.05, rtol=1e-6)


def test_weight_decay_is_scheduled_not_lr_scaled():
    p = {"w": jnp.full((2,), 2.0)}
    g = {"w": jnp.zeros((2,))}
    opt = afm_rmsprop(123.0, lambda s: jnp.float32(0.5), weight_decay=0.1)
    upd, _ = opt.update(g, opt.init(p), p)
    np.testing.assert_allclose(np.asarray(upd["w"]), -0.5 * 0.1 * 2.0, rtol=1e-6)


def test_adamw_switch_and_finite():
    cfg = OptimizerConfig(name="adamw", learning_rate=1e-3, weight_decay=1e-4, b1=0.9, b2=0.95)
    opt = build_optimizer(cfg, lambda s: jnp.float32(1.0))
    params, grads_seq = _data(1, 3)
    p = jax.tree.map(jnp.asarray, params)
    state = opt.init(p)
    for g in grads_seq:
        u, state = opt.update(jax.tree.map(jnp.asarray, g), state, p)
        p = optax.apply_updates(p, u)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(p))
    # AdamW's first step is ~lr * sign(g): bias correction makes m_hat/sqrt(v_hat) = +-1.
    opt2 = adamw_baseline(1e-3, lambda s: jnp.float32(1.0), weight_decay=0.0)
    q = {"w": jnp.zeros((4,))}
    u, _ = opt2.update({"w": jnp.array([0.1, -0.2, 0.3, -0.4])}, opt2.init(q), q)
    np.testing.assert_allclose(np.asarray(u["w"]), [-1e-3, 1e-3, -1e-3, 1e-3], rtol=1e-4)


def test_schedule_shape():
    s = warmup_cosine(10, 100, 0.005)
    assert abs(float(s(9)) - 1.0) < 1e-6
    assert abs(float(s(0)) - 0.1) < 1e-6
    assert abs(float(s(110)) - 0.005) < 1e-6
    assert abs(float(s(60)) - (0.005 + 0.995 * 0.5)) < 1e-5


def test_skip_on_spikes_leaves_params_and_state_untouched():
    """AXLearn's skip semantics: a non-finite or spiking gradient changes nothing."""
    cfg = SkipConfig(drop_stddev=3.0, min_count=4, ema_decay=0.9)
    opt = skip_on_spikes(afm_rmsprop(0.1, lambda s: jnp.float32(1.0), weight_decay=0.0), cfg)
    p = {"w": jnp.ones((4,))}
    state = opt.init(p)
    rng = np.random.default_rng(0)
    for _ in range(6):  # steady gradients with norm ~1
        u, state = opt.update({"w": jnp.asarray(rng.normal(0.5, 0.05, 4), jnp.float32)}, state, p)
        p = optax.apply_updates(p, u)
    assert int(skipped_updates(state)) == 0 and int(applied_updates(state)) == 6
    for bad in ({"w": jnp.array([jnp.nan, 0, 0, 0])}, {"w": jnp.full((4,), 1e4)}):
        u, new_state = opt.update(bad, state, p)
        assert float(jnp.abs(u["w"]).max()) == 0.0
        assert int(applied_updates(new_state)) == 6
        for a, b in zip(jax.tree.leaves(new_state.inner), jax.tree.leaves(state.inner)):
            np.testing.assert_array_equal(a, b)
        assert int(skipped_updates(new_state)) == int(skipped_updates(state)) + 1
    # a fixed drop norm works from the first step
    fixed = skip_on_spikes(afm_rmsprop(0.1, lambda s: jnp.float32(1.0), weight_decay=0.0),
                           SkipConfig(drop_norm=10.0, drop_stddev=0.0))
    u, st = fixed.update({"w": jnp.full((4,), 6.0)}, fixed.init(p), p)
    assert float(jnp.abs(u["w"]).max()) == 0.0 and int(skipped_updates(st)) == 1
