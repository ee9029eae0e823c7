"""Soft-Top-K (CoDA's program): exact optimum, budget, hard limit, gradient, stored values
from the reference implementation (colt5-attention's ``coor_descent``; live parity is in
the slow tier)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.training.compress.soft_topk import (
    binary_entropy,
    hard_top_k,
    kept_indices,
    soft_top_k,
    soft_top_k_coordinate,
    soft_top_k_exact,
    temperature_at,
)

# colt5_attention.coor_descent(torch.tensor(S), n_iters=20, k=3, eps=0.5, eps_init=4.0,
# eps_decay=0.7) with colt5-attention 0.11.2 / torch 2.13.0 (CPU): the paper's solver.
S = np.array([0.9, -0.3, 1.7, 0.2, -1.1, 0.55, 1.2, -0.05], np.float32)
COLT5_K3_EPS05 = np.array(
    [0.5230257, 0.04744782, 1.0, 0.12897657, 0.00957955, 0.25972688, 0.9530151, 0.07822824], np.float32
)


@pytest.mark.parametrize("n,k", [(10, 1), (10, 10), (576, 192), (23296, 8064)])
@pytest.mark.parametrize("scale", [0.0, 0.1, 1.0, 5.0])
@pytest.mark.parametrize("eps", [1.0, 0.1, 1e-3])
def test_exact_solver_is_the_optimum_and_spends_exactly_k(n, k, scale, eps):
    scores = np.random.default_rng(n + k).normal(size=n).astype(np.float32) * scale
    mask = np.asarray(soft_top_k(jnp.asarray(scores), k, eps))
    np.testing.assert_allclose(mask, soft_top_k_exact(scores, k, eps), atol=1e-4)
    assert mask.sum() == pytest.approx(k, rel=1e-5)
    assert mask.max() <= 1.0 and mask.min() >= 0.0


def test_stored_reference_values():
    """Both solvers give colt5-attention's values where its 20 iterations have converged."""
    ours = soft_top_k_coordinate(jnp.asarray(S), 3, 0.5, iterations=20, eps_init=4.0, eps_decay=0.7)
    np.testing.assert_allclose(np.asarray(ours), COLT5_K3_EPS05, atol=1e-6)
    np.testing.assert_allclose(np.asarray(soft_top_k(jnp.asarray(S), 3, 0.5)), COLT5_K3_EPS05, atol=1e-6)


def test_coordinate_descent_fails_where_pruning_ends():
    """Why training uses the exact solver: CoDA's iterations miss the budget once the mask is
    nearly hard (the module docstring's measurement)."""
    scores = np.random.default_rng(0).normal(size=576).astype(np.float32)
    approx = np.asarray(soft_top_k_coordinate(jnp.asarray(scores), 192, 0.01, iterations=50))
    assert approx.sum() < 0.9 * 192
    assert np.asarray(soft_top_k(jnp.asarray(scores), 192, 0.01)).sum() == pytest.approx(192, rel=1e-5)


def test_gradient_is_the_programs_and_nonzero_before_the_end():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=40)
    w = rng.normal(size=40)

    def objective(s):
        return jnp.sum(soft_top_k(s, 13, 0.3) * jnp.asarray(w, jnp.float32))

    grad = np.asarray(jax.jit(jax.grad(objective))(jnp.asarray(scores, jnp.float32)))
    h = 1e-5
    numeric = np.array([
        (np.sum(soft_top_k_exact(scores + h * e, 13, 0.3) * w) - np.sum(soft_top_k_exact(scores - h * e, 13, 0.3) * w))
        / (2 * h) for e in np.eye(40)
    ])
    np.testing.assert_allclose(grad, numeric, atol=2e-4)
    assert np.abs(grad).max() > 0.1
    # at uniform scores (the pruning init) every unit gets a gradient
    uniform = np.asarray(jax.grad(objective)(jnp.zeros(40)))
    assert np.all(uniform != 0)


def test_cooling_reaches_the_hard_top_k():
    scores = jnp.asarray(np.random.default_rng(2).normal(size=(3, 100)), jnp.float32)
    hard = np.asarray(hard_top_k(scores, 30))
    assert (hard.sum(-1) == 30).all() and set(np.unique(hard)) == {0.0, 1.0}
    for row in range(3):
        np.testing.assert_array_equal(np.flatnonzero(hard[row]), kept_indices(np.asarray(scores[row]), 30))
    cold = np.asarray(soft_top_k(scores, 30, 1e-4))
    np.testing.assert_allclose(cold, hard, atol=1e-6)
    assert float(jnp.mean(binary_entropy(jnp.asarray(cold)))) < 1e-4
    warm = soft_top_k(scores, 30, 10.0)
    assert float(jnp.mean(binary_entropy(warm))) > 0.5


def test_ties_go_to_the_lower_index_everywhere():
    scores = np.zeros(12, np.float32)
    np.testing.assert_array_equal(kept_indices(scores, 4), [0, 1, 2, 3])
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(hard_top_k(jnp.asarray(scores), 4))), [0, 1, 2, 3])
    np.testing.assert_allclose(np.asarray(soft_top_k(jnp.asarray(scores), 4, 0.1)), np.full(12, 1 / 3), atol=1e-6)


def test_temperature_schedule_and_bad_arguments():
    assert float(temperature_at(0, 11, 1.0, 0.01)) == pytest.approx(1.0)
    assert float(temperature_at(5, 11, 1.0, 0.01)) == pytest.approx(0.1, rel=1e-5)
    assert float(temperature_at(10, 11, 1.0, 0.01)) == pytest.approx(0.01, rel=1e-5)
    assert float(temperature_at(99, 11, 1.0, 0.01)) == pytest.approx(0.01, rel=1e-5)
    with pytest.raises(ValueError):
        temperature_at(0, 10, 0.0, 0.01)
    for bad_k in (0, 9):
        with pytest.raises(ValueError):
            soft_top_k(jnp.zeros(8), bad_k, 0.1)
        with pytest.raises(ValueError):
            kept_indices(np.zeros(8), bad_k)
