"""Soft-Top-K against reference implementations (slow tier, needs the `reference` extra):

* CoDA's solver (:func:`soft_top_k_coordinate`) against colt5-attention's ``coor_descent``
  (lucidrains' implementation of the same dual coordinate descent with eps-scaling, which
  cites CoDA), on random inputs, batches, budgets and schedules;
* the exact solver (:func:`soft_top_k`) against SciPy: the budget equation solved with
  ``brentq`` for the threshold, and the primal objective checked optimal against
  ``scipy.optimize.minimize`` (SLSQP) on small problems.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from afm.training.compress.soft_topk import soft_top_k, soft_top_k_coordinate

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", range(6))
def test_coordinate_descent_matches_colt5(seed):
    torch = pytest.importorskip("torch")
    coor_descent = pytest.importorskip("colt5_attention.coor_descent").coor_descent
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 600))
    k = int(rng.integers(1, n))
    eps = float(rng.choice([1.0, 0.5, 0.1]))
    iters = int(rng.choice([5, 20, 50]))
    eps_init, decay = (4.0, 0.7) if seed % 2 else (eps, 1.0)
    scores = (rng.normal(size=(3, n)) * rng.choice([0.3, 1.0, 3.0])).astype(np.float32)
    ref = coor_descent(torch.tensor(scores), n_iters=iters, k=k, eps=eps, eps_init=eps_init, eps_decay=decay).numpy()
    ours = np.asarray(soft_top_k_coordinate(jnp.asarray(scores), k, eps, iterations=iters, eps_init=eps_init,
                                            eps_decay=decay))
    np.testing.assert_allclose(ours, ref, atol=2e-5, rtol=1e-4)


def test_the_fast_tiers_stored_values_are_colt5s_today():
    """``tests/unit/training/compress/test_soft_topk.py`` keeps colt5-attention's output as numbers;
    recomputed here with the library itself, so a stored value can never drift from it."""
    torch = pytest.importorskip("torch")
    coor_descent = pytest.importorskip("colt5_attention.coor_descent").coor_descent
    from tests.unit.training.compress.test_soft_topk import COLT5_K3_EPS05, S

    live = coor_descent(torch.tensor(S), n_iters=20, k=3, eps=0.5, eps_init=4.0, eps_decay=0.7).numpy()
    np.testing.assert_allclose(live, COLT5_K3_EPS05, atol=1e-6, rtol=0)


@pytest.mark.parametrize("seed", range(8))
def test_exact_solver_matches_scipy(seed):
    optimize = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(5, 2000))
    k = int(rng.integers(1, n + 1))
    eps = float(rng.choice([2.0, 0.3, 0.02]))
    s = rng.normal(size=n) * float(rng.choice([0.1, 1.0, 4.0]))

    def budget(t: float) -> float:
        return float(np.minimum(1.0, np.exp(np.minimum((s - t) / eps, 0.0))).sum() - k)

    lo, hi = s.min() - eps * (np.log(n) + 60), s.max() + 60 * eps
    if budget(lo) <= 0:  # k == n: everything at 1
        expected = np.ones(n)
    else:
        t = optimize.brentq(budget, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
        expected = np.minimum(1.0, np.exp(np.minimum((s - t) / eps, 0.0)))
    ours = np.asarray(soft_top_k(jnp.asarray(s, jnp.float32), k, eps), np.float64)
    np.testing.assert_allclose(ours, expected, atol=2e-5)


def test_exact_solver_is_optimal_for_the_primal():
    optimize = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(7)
    s, k, eps = rng.normal(size=12), 4, 0.5

    def neg_objective(lam: np.ndarray) -> float:
        lam = np.clip(lam, 1e-12, 1.0)
        return float(-(s @ lam) + eps * np.sum(lam * np.log(lam)))

    res = optimize.minimize(
        neg_objective, np.full(12, k / 12), method="SLSQP", bounds=[(1e-9, 1.0)] * 12,
        constraints=[{"type": "eq", "fun": lambda lam: lam.sum() - k}], options={"ftol": 1e-14, "maxiter": 500},
    )
    ours = np.asarray(soft_top_k(jnp.asarray(s, jnp.float32), k, eps), np.float64)
    assert neg_objective(ours) <= res.fun + 1e-6
    np.testing.assert_allclose(ours, res.x, atol=1e-3)
