"""The one registry of named stages: every task's stages resolve through it (with
``base:`` inheritance), ``afm train --list-configs`` lists them, and the YAML rules
(merge, ``null`` removes, cycles, duplicates) hold for the shipped tables and users' files."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.config import ConfigError
from afm.training.core.config import get_train_config, list_configs, model_config
from afm.training.core.stages import CONFIG_DIR, merge, stage_table, stages
from afm.training.tasks import TASKS

EVERY_TASK = {"pretrain", "prune", "distill", "sft", "reward_model", "dpo", "ipo", "adapter"}


def test_every_named_stage_builds_a_config_of_a_registered_task() -> None:
    names = list(stages())
    assert len(names) == len(set(names)) >= 24
    seen = set()
    for name in names:
        cfg = get_train_config(name)
        assert cfg.name == name and cfg.task in TASKS, name
        assert cfg.description, f"{name}: no description for --list-configs"
        model_config(cfg)  # the model it names exists, with the stage's overrides
        seen.add(cfg.task)
    assert EVERY_TASK <= seen, f"no stage for {EVERY_TASK - seen}"


def test_stages_of_every_task_resolve_by_name_and_keep_the_recipe() -> None:
    sft = get_train_config("tiny-sft")
    assert (sft.task, sft.optimizer.name, sft.schedule.kind) == ("sft", "adamw", "constant")
    assert get_train_config("sft-on-device").optimizer.learning_rate == 2e-5  # base: sft, LR changed
    assert get_train_config("tiny-rm").eval.select_metric == "eval/heldout/accuracy"
    assert get_train_config("tiny-dpo").task == "dpo" and get_train_config("tiny-ipo").task == "ipo"
    odc = get_train_config("on-device-continued")
    assert (odc.data.seq_len, odc.data.global_batch_size, odc.model) == (8192, 512, "afm-on-device")
    assert get_train_config("tiny-recovery").data.weights == {}  # null removed the inherited mixture


def test_list_configs_command_lists_every_stage() -> None:
    from afm.app.cli import main

    out = CliRunner().invoke(main, ["train", "--list-configs"])
    assert out.exit_code == 0, out.output
    listed = [line.split()[0] for line in out.output.splitlines() if line and not line.startswith("#")]
    assert listed == [c["name"] for c in list_configs()] == list(stages())
    assert "tiny-sft" in listed and "tiny-rm" in listed
    missing = CliRunner().invoke(main, ["train", "--workdir", "x"])
    assert missing.exit_code != 0 and "--list-configs" in missing.output


def test_user_files_layer_on_any_stage(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("base: tiny-sft\ntotal_steps: 7\noptimizer: {learning_rate: 0.01}\neval: {every_steps: null}\n")
    cfg = get_train_config(path)
    assert (cfg.task, cfg.total_steps, cfg.optimizer.learning_rate) == ("sft", 7, 0.01)
    assert cfg.optimizer.name == "adamw" and cfg.eval.every_steps == 0  # inherited; null -> default
    plain = tmp_path / "plain.yaml"
    plain.write_text("total_steps: 3\n")
    assert get_train_config(plain, task="reward_model").task == "reward_model"  # a command's own task
    with pytest.raises(ConfigError, match="unknown stage 'no-such'"):
        get_train_config("no-such")
    with pytest.raises(ConfigError, match="not found"):
        get_train_config(tmp_path / "absent.yaml")


def test_table_rules(tmp_path: Path) -> None:
    assert merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}, "b": None}) == {"a": {"x": 1, "y": 3}}
    (tmp_path / "one.yaml").write_text("_common: {total_steps: 5, log_every: 2}\n"
                                       "a: {base: _common, description: d}\nb: {base: a, log_every: 3}\n")
    table = stage_table(str(tmp_path))
    assert table["b"].settings["total_steps"] == 5 and table["b"].settings["log_every"] == 3
    assert table["b"].settings["name"] == "b"
    (tmp_path / "two.yaml").write_text("a: {total_steps: 1}\n")
    with pytest.raises(ConfigError, match="defined in"):
        stage_table.__wrapped__(str(tmp_path))
    (tmp_path / "two.yaml").write_text("c: {base: d}\nd: {base: c}\n")
    with pytest.raises(ConfigError, match="cycle"):
        stage_table.__wrapped__(str(tmp_path))
    (tmp_path / "two.yaml").write_text("c: {base: nowhere}\n")
    with pytest.raises(ConfigError, match="base 'nowhere'"):
        stage_table.__wrapped__(str(tmp_path))


def test_shipped_tables_are_the_registry() -> None:
    files = sorted(p.name for p in CONFIG_DIR.glob("*.yaml"))
    assert {s.source for s in stage_table().values()} == set(files)
