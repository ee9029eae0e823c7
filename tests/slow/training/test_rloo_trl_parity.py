"""The RLOO advantage with the KL penalty subtracted from the reward, against TRL's own code
(trl==1.16.0, CPU torch; ``make test-all`` installs them with the ``hf`` extra).

TRL computes the advantage inline in ``RLOOTrainer._generate_and_score_completions``; there
is no function to call. So this test takes that method's source, cuts out the block from
"Include the KL penalty in the reward" through the ``nan_to_num`` of the advantages, and
runs *that code* on fixed log-probs, masks and scores, then compares it with
``afm.training.tasks.mdloo.kl_penalised_reward`` + ``loo_advantage`` within 1e-5. If a TRL upgrade
moves the markers the test fails loudly rather than comparing against nothing.

``python tests/slow/training/test_rloo_trl_parity.py`` rewrites the stored values the fast
test (tests/unit/training/tasks/test_mdloo.py) checks without TRL.
"""

from __future__ import annotations

import inspect
import json
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from tests.paths import TESTS

STORED = TESTS / "unit" / "training" / "tasks" / "data" / "rloo_trl_expected.json"
START, END = "# Include the KL penalty in the reward", "advantages = torch.nan_to_num(advantages, nan=0.0)"


def make_case() -> dict:
    """3 prompts x K=4 responses, ragged response lengths (mask), beta = 0.05."""
    rng = np.random.default_rng(19)
    n, k, t = 3, 4, 7
    lengths = rng.integers(1, t + 1, size=n * k)
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32)
    policy = rng.normal(-2.0, 1.0, size=(n * k, t)).astype(np.float32)
    ref = (policy + rng.normal(0.0, 0.3, size=(n * k, t))).astype(np.float32)
    scores = rng.normal(0.5, 1.0, size=n * k).astype(np.float32)
    return {"k": k, "beta": 0.05, "scores": scores.tolist(), "policy_logprobs": (policy * mask).tolist(),
            "ref_logprobs": (ref * mask).tolist(), "mask": mask.tolist()}


def trl_advantages(case: dict) -> np.ndarray:
    torch = pytest.importorskip("torch")
    rloo = pytest.importorskip("trl.trainer.rloo_trainer")
    source = inspect.getsource(rloo.RLOOTrainer._generate_and_score_completions)
    if START not in source or END not in source:
        pytest.fail("TRL's RLOO advantage block moved: update the markers of this test")
    line_start = source.rfind("\n", 0, source.index(START)) + 1
    block = textwrap.dedent(source[line_start:source.index(END) + len(END)])
    namespace = dict(vars(rloo))
    namespace.update({
        "torch": torch, "gather": lambda x: x,
        "self": SimpleNamespace(beta=case["beta"], normalize_advantages=False),
        "rewards": torch.tensor(case["scores"], dtype=torch.float32),
        "old_per_token_logps": torch.tensor(case["policy_logprobs"], dtype=torch.float32),
        "ref_per_token_logps": torch.tensor(case["ref_logprobs"], dtype=torch.float32),
        "completion_mask": torch.tensor(case["mask"], dtype=torch.float32),
        "num_generations": case["k"],
    })
    exec(compile(block, "trl-rloo-advantage-block", "exec"), namespace)  # noqa: S102 - TRL's own code
    return namespace["advantages"].numpy()


@pytest.mark.slow
def test_rloo_advantage_equals_trl() -> None:
    from afm.training.tasks.mdloo import kl_penalised_reward, loo_advantage

    case = make_case()
    expected = trl_advantages(case)
    rewards = kl_penalised_reward(np.asarray(case["scores"]), np.asarray(case["policy_logprobs"]),
                                  np.asarray(case["ref_logprobs"]), np.asarray(case["mask"]), case["beta"])
    np.testing.assert_allclose(loo_advantage(rewards, case["k"]), expected, atol=1e-5)
    stored = json.loads(STORED.read_text())
    np.testing.assert_allclose(stored["trl_advantages"], expected, atol=1e-6)


if __name__ == "__main__":
    import trl

    case = make_case()
    case["trl_advantages"] = trl_advantages(case).tolist()
    case["trl_version"] = trl.__version__
    STORED.parent.mkdir(parents=True, exist_ok=True)
    STORED.write_text(json.dumps(case, indent=1) + "\n")
    print(f"wrote {STORED}")
