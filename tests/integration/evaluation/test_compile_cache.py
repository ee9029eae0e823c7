"""Compiled programs across processes: a second ``afm eval`` compiles nothing (it loads every
program the first one stored, counted in the results file rather than timed), and a
process that trains a model and then generates, with JAX's persistent cache on as every
command has it, stores programs the next process can run.

The second is the failure a user met training and evaluating in one process (a notebook, a
script, the README quickstart run in one interpreter): JAX decides once per process whether
it reads its cache, so after training the store took executables from that cache, which
XLA:CPU serialises without their kernels ("Function iota_convert_fusion not found")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from afm.evaluation.tiny import tokenizer_dir, write_tiny_checkpoint


def _clean_env() -> dict[str, str]:
    """Without the test session's own JAX cache settings: each run gets only --compile-cache."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION", "JAX_ENABLE_COMP",
                                                                       "JAX_PERSISTENT", "AFM_COMPILE"))}


def _eval(cache: Path, ckpt: Path, out: Path, *tasks: str) -> dict:
    """One ``afm eval`` in a fresh process; its results file."""
    run = subprocess.run(
        [sys.executable, "-m", "afm.app", "--compile-cache", str(cache), "eval", "--checkpoint", str(ckpt),
         "--tokenizer", str(tokenizer_dir()), "--tasks", ",".join(tasks), "--output", str(out)],
        env=_clean_env(), capture_output=True, text=True, timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(out.read_text())


def test_a_second_eval_loads_every_program_the_first_compiled(tmp_path: Path) -> None:
    ckpt = write_tiny_checkpoint(tmp_path / "ck", seed=0, max_seq_len=256)
    cache = tmp_path / "cache"
    first = _eval(cache, ckpt, tmp_path / "a.json", "afm_niah")
    second = _eval(cache, ckpt, tmp_path / "b.json", "afm_niah")
    assert first["programs"]["compiled"] > 0 and first["programs"]["stored"] == first["programs"]["compiled"]
    assert second["programs"]["compiled"] == 0 and second["programs"]["loaded"] == first["programs"]["stored"]
    assert first["tasks"] == second["tasks"]  # the stored programs compute the same


_TRAIN_THEN_GENERATE = """
import json, sys
from click.testing import CliRunner
from afm.app.cli import main
from afm.evaluation.tiny import tokenizer_dir

cache, work, shards = sys.argv[1], sys.argv[2], sys.argv[3:]
data = [a for s in shards for a in ("--data", s)]
for args in (["train", "--config", "tiny-core", "--workdir", f"{work}/run", "--steps", "2", *data,
              "--set", "model_overrides.vocab_size=512"],
             ["eval", "--checkpoint", f"{work}/run/model", "--tokenizer", str(tokenizer_dir()),
              "--tasks", "afm_niah", "--output", f"{work}/same-process.json"]):
    out = CliRunner().invoke(main, ["--compile-cache", cache, *args])
    assert out.exit_code == 0, (args[0], out.output[-2000:], repr(out.exception))
print(json.dumps(json.loads(open(f"{work}/same-process.json").read())["programs"]))
"""


def test_training_then_generating_in_one_process_stores_programs_the_next_process_runs(
        tmp_path: Path, token_shards: list[str]) -> None:
    cache = tmp_path / "cache"
    run = subprocess.run([sys.executable, "-c", _TRAIN_THEN_GENERATE, str(cache), str(tmp_path), *token_shards],
                         env={**_clean_env(), "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    programs = json.loads(run.stdout.strip().splitlines()[-1])
    assert programs["stored"] > 0 and programs["cache_hit_not_stored"] == 0
    assert list((cache / "executables").glob("*.bin"))
    again = _eval(cache, tmp_path / "run" / "model", tmp_path / "next-process.json", "afm_niah")
    assert again["programs"]["compiled"] == 0 and again["programs"]["loaded"] > 0
    same = json.loads((tmp_path / "same-process.json").read_text())
    assert again["tasks"] == same["tasks"] and again["long_context"] == same["long_context"]
