"""Fast parity check: the native backend against stored ``lm-eval --model hf`` outputs.

``data/parity_expected.json`` holds what lm-eval's ``hf`` backend produced on the exported
random-init tiny model (``afm.evaluation.tiny``, seed 0) for the packaged demo items:
per-request log-likelihoods of ARC-Easy, PIQA and HellaSwag-format items and greedy
GSM8K-format generations. The slow tier recomputes it (``tests/slow/evaluation``,
``AFM_WRITE_PARITY_EXPECTED=1`` rewrites it); here only the native side runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from afm.evaluation.harness import AfmLM
from afm.evaluation.parity import compare_requests, request_outputs, run_tasks
from afm.evaluation.suite import BuildContext, build_task_configs, prepare_demo_data
from afm.evaluation.tiny import tiny_model, tokenizer_dir
from afm.model.text.tokenizer import Tokenizer

EXPECTED = json.loads((Path(__file__).parent / "data" / "parity_expected.json").read_text())


def test_native_backend_matches_stored_hf_outputs(tmp_path: Path) -> None:
    tok = Tokenizer.load(tokenizer_dir())
    lm = AfmLM(model=tiny_model(seed=0, max_seq_len=512), tokenizer=tok, show_progress=False)
    data = prepare_demo_data(tmp_path / "data")

    def configs(names: list[str], shots: int | None = None) -> list[dict]:
        return build_task_configs(names, BuildContext(data_dir=data, num_fewshot=shots, tokenizer=tok,
                                                      max_length=lm.max_length))

    ll = request_outputs(run_tasks(lm, configs(["arc_easy", "piqa", "hellaswag"])))
    gen = request_outputs(run_tasks(lm, configs(["gsm8k"], 0), limit=6, gen_kwargs={"max_gen_toks": 24}))
    report = {**compare_requests(ll, EXPECTED["loglikelihood"]),
              **compare_requests(gen, EXPECTED["generate_until"])}
    assert set(report) == {"arc_easy", "piqa", "hellaswag", "gsm8k"}
    for task, r in report.items():
        assert "error" not in r, (task, r)
        assert r["max_abs_diff"] < 1e-3, (task, r)
        assert r["metrics_identical"] and r["greedy_flags_identical"] and r["texts_identical"], (task, r)
    assert sum(r["loglikelihoods"] for r in report.values()) >= 60
