"""The training-time eval hook: in-memory parameters in, flat metrics out."""

from __future__ import annotations

from flax import nnx

from afm.evaluation.hook import make_eval_hook
from afm.evaluation.suite import prepare_demo_data
from afm.evaluation.tiny import tiny_model, tokenizer_dir


def test_hook_returns_metrics_every_k_steps(tmp_path) -> None:
    from afm.training.data.synthetic import markov_token_shards

    shards = markov_token_shards(tmp_path / "heldout", docs=8, length=(10, 100))
    hook = make_eval_hook(tokenizer_dir(), tasks=["arc_easy", "piqa"], limit=4, every=10,
                          data_dir=prepare_demo_data(tmp_path / "data"), perplexity_data=[str(shards[0])],
                          model_config=tiny_model().cfg)
    model = tiny_model(seed=2, max_seq_len=512)
    assert hook(5, model) == {}
    metrics = hook(10, model)
    assert {"eval/arc_easy/acc", "eval/piqa/acc", "eval/heldout/perplexity"} <= set(metrics)
    assert all(isinstance(v, float) for v in metrics.values())
    # bare parameters (what a functional trainer holds) give the same numbers
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    assert hook(20, params) == metrics


def test_trainer_runs_a_task_group_as_its_eval_hook(tmp_path) -> None:
    """``eval.hooks: [afm.evaluation.hook:benchmarks]`` logs benchmark metrics during training."""
    import json

    from afm.training.core.metrics import read_metrics
    from afm.training.data.synthetic import markov_token_shards
    from afm.training.runs.train import train

    shards = [str(p) for p in markov_token_shards(tmp_path / "tokens", docs=40, length=(10, 100))]
    options = {"tokenizer": str(tokenizer_dir()), "tasks": ["arc_easy"], "limit": 4,
               "data_dir": str(prepare_demo_data(tmp_path / "data"))}
    train("tiny-core", tmp_path / "run", steps=2, data=shards, quiet=True,
          overrides=["eval.every_steps=2", "eval.hooks=[afm.evaluation.hook:benchmarks]",
                     f"eval.options={json.dumps(options)}", "checkpoint.async_save=false"])
    rows = {r["step"]: r for r in read_metrics(tmp_path / "run")}
    assert 0.0 <= rows[2]["eval/bench/arc_easy/acc"] <= 1.0
