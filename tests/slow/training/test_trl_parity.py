"""Parity with TRL (CPU torch): our DPO / IPO losses equal ``trl.DPOTrainer``'s loss
computation (``_compute_loss``, TRL 1.16) on the same log-probs within 1e-5, and the
stored values the fast tier checks (tests/unit/training/tasks/test_dpo.py) are TRL's.

TRL 1.x computes the loss inside the trainer from a model forward, with no stand-alone
loss function; we call that method on a minimal trainer state and a model stub whose
forward returns the given per-token log-probs (TRL's fused-LM-head outputs), so the
code under comparison is exactly TRL's loss arithmetic."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from afm.training.tasks.dpo import dpo_loss, ipo_loss  # noqa: E402
from tests.unit.training.tasks.test_dpo import EXPECTED, N_C, N_R, PI_C, PI_R, REF_C, REF_R  # noqa: E402

pytestmark = pytest.mark.slow


def _trl_loss(loss_type: str, beta: float, pi_c, pi_r, ref_c, ref_r, n_c, n_r) -> float:
    width = max(n_c, n_r) + 2
    mask = torch.zeros(2, width, dtype=torch.long)
    mask[0, 1 : 1 + n_c] = 1
    mask[1, 1 : 1 + n_r] = 1
    per_token = torch.zeros(2, width - 1, dtype=torch.float64)
    per_token[0, 0], per_token[1, 0] = pi_c, pi_r  # the sum over the reply is what counts

    def model(**kwargs):
        zeros = torch.zeros(2, width - 1, dtype=torch.float64)
        return SimpleNamespace(log_probs=per_token, entropy=zeros, mean_logits=zeros,
                               is_top1=torch.zeros(2, width - 1, dtype=torch.bool))

    accel = SimpleNamespace(device="cpu", gather_for_metrics=lambda x: x, gather=lambda x: x)
    state = SimpleNamespace(
        model=SimpleNamespace(training=False), accelerator=accel, ld_alpha=None, precompute_ref_logps=True,
        f_divergence_type="reverse_kl", loss_types=[loss_type], loss_weights=[1.0], beta=beta,
        aux_loss_enabled=False, use_weighting=False, label_smoothing=0.0,
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, _total_train_tokens=0, _tp_size=1,
    )
    inputs = {"input_ids": torch.ones(2, width, dtype=torch.long), "attention_mask": torch.ones(2, width),
              "completion_mask": mask, "ref_chosen_logps": torch.tensor([ref_c], dtype=torch.float64),
              "ref_rejected_logps": torch.tensor([ref_r], dtype=torch.float64)}
    return float(trl.DPOTrainer._compute_loss(state, model, inputs, False))


@pytest.mark.parametrize("beta", sorted(EXPECTED))
def test_dpo_and_ipo_equal_trl_on_the_same_logprobs(beta):
    for i in range(len(PI_C)):
        args = (PI_C[i], PI_R[i], REF_C[i], REF_R[i], N_C[i], N_R[i])
        ours_dpo = float(dpo_loss(*(np.float32(a) for a in args[:4]), beta))
        ours_ipo = float(ipo_loss(*(np.float32(a) for a in args), beta))
        theirs_dpo, theirs_ipo = _trl_loss("sigmoid", beta, *args), _trl_loss("ipo", beta, *args)
        assert abs(ours_dpo - theirs_dpo) < 1e-5 and abs(ours_ipo - theirs_ipo) < 1e-5 * max(1.0, theirs_ipo)
        assert abs(EXPECTED[beta]["sigmoid"][i] - theirs_dpo) < 1e-5
        assert abs(EXPECTED[beta]["ipo"][i] - theirs_ipo) < 1e-5 * max(1.0, theirs_ipo)
