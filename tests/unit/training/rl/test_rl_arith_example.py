"""The arithmetic RL example (experiments/rl-arith and its README): its configs
load with the loaders the commands use, and its data sets keep measured problems out of
everything trained on."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.paths import ROOT

EXAMPLE = ROOT / "experiments" / "rl-arith"


def _make_data_module():
    spec = importlib.util.spec_from_file_location("rl_arith_make_data", EXAMPLE / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["mdloo.yaml", "ppo.yaml"])
def test_online_rl_configs_load(name):
    """The experiment's online-RL runs are stages like any other: task mdloo on tiny-mdloo,
    their options the task's own (checked by the task's one options parser)."""
    from afm.training.core.config import get_train_config
    from afm.training.core.task import parse_task_options
    from afm.training.tasks.mdloo import MdlooOptions

    cfg = get_train_config(EXAMPLE / name)
    assert cfg.task == "mdloo" and cfg.init_from == "work/rl/sft/best"
    opts = parse_task_options(MdlooOptions, cfg.task_options, "mdloo")
    assert opts.algorithm == name.split(".")[0] and opts.eval_reward == "task:arith"
    assert opts.iterations == 80 and cfg.eval.every_steps == 20 * opts.steps_per_iteration


def test_round_config_loads_and_names_the_refreshed_reward_model():
    from afm.training.runs.itec import load_round

    cfg = load_round(EXAMPLE / "round.yaml")
    assert {m.name for m in cfg.committee} == {"sft", "dpo", "mdloo", "ppo"}
    assert cfg.reward.startswith("work/rl/rm/")


def test_reward_model_config_is_the_larger_base_shape():
    from afm.training.core.config import get_train_config

    cfg = get_train_config(EXAMPLE / "rm.yaml", task="reward_model")
    assert cfg.task == "reward_model"
    assert (cfg.model_overrides["dim"], cfg.model_overrides["n_layers"]) == (128, 4)
    assert cfg.eval.select_metric == "eval/heldout/accuracy"


def test_data_sets_are_disjoint_where_it_matters(tmp_path):
    """The reward model's base is fine-tuned on 30k reference solutions: none of their
    questions may be one the round, the RM's held-out pairs or the test problems score."""
    from afm.synth.arith_task import make_problems

    module = _make_data_module()
    seed = module.SETS["rm_base"][1]
    module.SETS = {**module.SETS, "rm_base": (4000, seed)}
    module.main(str(tmp_path))
    base = {json.loads(line)["messages"][0]["content"].split("\n")[0]
            for line in (tmp_path / "rm_base.jsonl").read_text().splitlines()}
    measured = {p.question for p in make_problems(module.TEST_MAX, seed=module.TEST_SEED)}
    for name in module.MEASURED_ON:
        measured |= {p.question for p in make_problems(*module.SETS[name])}
    drawn = {p.question for p in make_problems(4000, seed=seed)}
    assert drawn & measured, "the check needs overlap to remove (the problem space is small)"
    assert not base & measured
    assert base == drawn - measured
    trained = set().union(*(module._questions(tmp_path / f"{name}.jsonl") for name in module.TRAINED_ON))
    assert not module._questions(tmp_path / "itec_prompts_1k.jsonl") & trained


def _example_module(name):
    spec = importlib.util.spec_from_file_location(f"rl_arith_{name}", EXAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paired_se_is_the_standard_error_of_per_problem_differences():
    """Per problem: the model's mean over its replies minus the start's; the SE is over
    problems; ``GROUP-sN`` seeds are averaged per problem before the SE."""
    import numpy as np

    paired_se = _example_module("paired_se")
    start = {"sampled": {"reward": [[0, 0], [1, 1], [0, 1]], "correct": [[0, 0], [1, 1], [0, 1]]}}
    a = {"sampled": {"reward": [[1, 0], [1, 1], [1, 1]], "correct": [[1, 0], [1, 1], [1, 1]]}}
    b = {"sampled": {"reward": [[1, 1], [0, 1], [0, 1]], "correct": [[1, 1], [0, 1], [0, 1]]}}
    out = paired_se.analyse({"sft": start, "m-s0": a, "m-s1": b}, "sft")
    d_a = np.array([0.5, 0.0, 0.5])
    got = out["models"]["m-s0"]["sampled/reward"]
    assert got["diff"] == pytest.approx(d_a.mean(), abs=1e-4)
    assert got["se"] == pytest.approx(d_a.std(ddof=1) / np.sqrt(3), abs=1e-4)
    pooled = out["pooled"]["m"]["sampled/correct"]
    d_pool = (d_a + np.array([1.0, -0.5, 0.0])) / 2
    assert pooled["diff"] == pytest.approx(d_pool.mean(), abs=1e-4)
    assert pooled["se"] == pytest.approx(d_pool.std(ddof=1) / np.sqrt(3), abs=1e-4)
    assert out["pooled"]["m"]["seeds"] == ["m-s0", "m-s1"]
    assert "| m pooled" in paired_se.table(out).replace("**", "")


def test_greedy_eval_groups_every_reply_per_problem():
    from afm.synth.arith_task import make_problems

    greedy_eval = _example_module("greedy_eval")
    problems = make_problems(2, seed=300)
    replies = ["nonsense", "x", f"Answer: {problems[1].answer}", "y"]
    rows = greedy_eval._per_problem([p for p in problems for _ in range(2)], replies, 2)
    assert [len(r) for r in rows["reward"]] == [2, 2]
    assert rows["correct"] == [[0, 0], [1, 0]]
    assert rows["reward"][1][0] > rows["reward"][0][0]


def test_paired_se_compares_pooled_groups_per_problem():
    import numpy as np

    paired_se = _example_module("paired_se")
    start = {"greedy": {"reward": [[0], [1], [0]], "correct": [[0], [1], [0]]}}
    a = {"greedy": {"reward": [[1], [1], [0]], "correct": [[1], [1], [0]]}}
    b = {"greedy": {"reward": [[0], [0], [1]], "correct": [[0], [0], [1]]}}
    out = paired_se.analyse({"sft": start, "x-s0": a, "y-s0": b}, "sft")
    got = out["between_groups"]["x - y"]["greedy/reward"]
    d = np.array([1.0, 1.0, -1.0])
    assert got["diff"] == pytest.approx(d.mean(), abs=1e-4)
    assert got["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(3), abs=1e-4)


@pytest.mark.parametrize("algorithm", ["mdloo", "ppo", "grpo", "dr_grpo", "dapo"])
def test_the_algorithm_comparison_config_loads_for_every_algorithm(algorithm):
    """The comparison's one stage (algorithms.yaml) runs every algorithm on the same budget."""
    from afm.training.core.config import get_train_config, with_task_options
    from afm.training.core.task import parse_task_options
    from afm.training.tasks.mdloo import MdlooOptions

    cfg = with_task_options(get_train_config(EXAMPLE / "algorithms.yaml"), algorithm=algorithm)
    opts = parse_task_options(MdlooOptions, cfg.task_options, "mdloo")
    assert cfg.task == "mdloo" and opts.algorithm == algorithm and opts.reward == "task:arith"
    assert (opts.iterations, opts.prompts_per_iteration, opts.k, opts.steps_per_iteration) == (12, 4, 8, 2)
    script = (EXAMPLE / "compare_algorithms.sh").read_text()
    assert algorithm in script.split("ALGOS=")[1].split("\n")[0]
