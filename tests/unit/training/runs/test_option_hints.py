"""Every option a training command's help, error or config comment names works as named:
each ``--set KEY=...`` in the training code, its stage tables and its commands is a key
the config loader accepts (a TrainConfig field, a model field under ``model_overrides``, a
task's option under ``task_options``, an iTeC round's field), and the online-RL command
offers exactly the algorithms the task knows."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

from afm.model.config import ModelConfig
from afm.training.core.config import TrainConfig
from afm.training.runs.itec import RoundConfig
from afm.training.tasks import TASKS, task_class
from tests.paths import ROOT

HINT = re.compile(r"--set ([A-Za-z_][A-Za-z0-9_.]*)=")
PLACES = ["training/**/*.py", "training/configs/*.yaml", "app/commands/training/*.py", "docs/post-training.md"]


def _hints() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for pattern in PLACES:
        for path in sorted(ROOT.glob(pattern)):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for key in HINT.findall(line):
                    if key not in ("KEY", "FIELD"):
                        found.setdefault(key, []).append(f"{path.relative_to(ROOT)}:{n}")
    return found


def _task_option_names() -> set[str]:
    names: set[str] = set()
    for name in TASKS:
        options = getattr(task_class(name), "Options", None)
        if options is not None:
            names |= {f.name for f in dataclasses.fields(options)}
    return names


def _valid(key: str, cls: type) -> bool:
    parts = key.split(".")
    hints = typing.get_type_hints(cls)
    head, rest = parts[0], parts[1:]
    if head not in hints:
        return False
    if head == "model_overrides":
        return len(rest) == 1 and rest[0] in {f.name for f in dataclasses.fields(ModelConfig)}
    if head == "task_options":
        return len(rest) >= 1 and rest[0] in _task_option_names()
    tp = hints[head]
    if not rest:
        return True
    if dataclasses.is_dataclass(tp):
        return _valid(".".join(rest), tp)
    return typing.get_origin(tp) is dict  # e.g. data.weights.<dataset>


def test_every_set_hint_names_a_key_the_loader_accepts() -> None:
    hints = _hints()
    assert "task_options.max_unscored" in hints  # the online-RL stop's hint, checked below
    bad = {k: where for k, where in hints.items() if not (_valid(k, TrainConfig) or _valid(k, RoundConfig))}
    assert bad == {}, f"--set hints naming no accepted key: {bad}"


def test_the_rl_command_offers_every_algorithm_the_task_knows() -> None:
    from afm.app.commands.training.rl import ALGORITHM_CHOICES
    from afm.training.rl.objectives import ALGORITHMS

    assert tuple(ALGORITHM_CHOICES) == tuple(ALGORITHMS)


def test_the_unscored_hint_works_as_written(tmp_path: Path) -> None:
    """The key the unscored-reward stop names is accepted by the front door as written."""
    import json

    from afm.training.runs.train import prepare
    from tests.paths import CHAT_TOKENIZER

    source = (ROOT / "training/tasks/mdloo.py").read_text()
    written = re.search(r'option="(--set task_options\.max_unscored=)SHARE', source)
    assert written, "the hint changed: update this test"
    policy = tmp_path / "policy"
    _save_tiny(policy)
    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    cfg = prepare("tiny-mdloo", tmp_path / "run", init_from=policy,
                  overrides=[written.group(1)[len("--set "):] + "0.9"],
                  task_options={"tokenizer": str(CHAT_TOKENIZER), "prompts": str(tmp_path / "p.jsonl")})
    assert cfg.task_options["max_unscored"] == 0.9


def _save_tiny(path: Path, **changes) -> None:
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer

    save_params(Transformer(get_config("tiny").replace(vocab_size=640, max_seq_len=128, **changes),
                            rngs=nnx.Rngs(0)), path)
