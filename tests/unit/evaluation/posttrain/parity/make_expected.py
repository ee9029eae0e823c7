"""Computes ``expected.json``: the published code's numbers on ``fixtures.json``.

Nothing of the published code is copied into afm; this script imports it from checkouts
given on the command line and records what it computes::

    python make_expected.py --arena-hard PATH/arena-hard-auto --alpaca-eval PATH/alpaca_eval/src

(``pandas``, ``scikit-learn``, ``patsy``, ``python-dotenv``, ``fire`` and ``termcolor``
importable; ``torch`` is not needed: ``show_result``'s default table never calls it, and a
stand-in module lets it import). Arena-Hard's bootstrap draws from NumPy's global
generator, so the script seeds it (``np.random.seed(SEED)``) before each category; afm's
``bootstrap(seed=SEED)`` makes the same draws. AlpacaEval's GLM reads ``df_gamed.csv``
from the Hugging Face hub; the script hands it the fixture's table instead.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).parent
SEED = 7


def commit(path: Path) -> str:
    try:
        return subprocess.check_output(["git", "-C", str(path), "rev-parse", "HEAD"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def arena(root: Path, rows: list[dict]) -> dict:
    import numpy as np
    import yaml

    class Stand(types.ModuleType):  # show_result imports torch; its default table never calls it
        def __getattr__(self, name: str):
            return type(name, (), {})

    for name in ("torch", "torch.nn", "torch.nn.functional", "torch.optim"):
        sys.modules.setdefault(name, Stand(name))
    sys.modules["torch"].nn = sys.modules["torch.nn"]
    sys.modules["torch.nn"].functional = sys.modules["torch.nn.functional"]
    sys.modules["torch"].optim = sys.modules["torch.optim"]
    sys.path.insert(0, str(root))
    tree = ast.parse((root / "gen_judgment.py").read_text())
    source = next(ast.get_source_segment((root / "gen_judgment.py").read_text(), n) for n in tree.body
                  if isinstance(n, ast.FunctionDef) and n.name == "get_score")
    scope: dict = {}
    exec(source, scope)  # gen_judgment.get_score itself (its module imports the API clients)
    patterns = yaml.safe_load((root / "config" / "arena-hard-v2.0.yaml").read_text())["regex_patterns"]
    import show_result

    captured: dict = {}
    original = show_result.format_confidence_interval

    def capture(mean_scores, lower_scores, upper_scores, baseline=None):
        captured.update(score=float(mean_scores.set_index("model").loc["model", "scores"]),
                        lower=float(lower_scores.set_index("model").loc["model", "lower"]),
                        upper=float(upper_scores.set_index("model").loc["model", "upper"]))
        return original(mean_scores, lower_scores, upper_scores, baseline)

    show_result.format_confidence_interval = capture
    labels = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "data" / "arena-hard-v2.0" / "model_judgment" / "judge"
        out.mkdir(parents=True)
        with open(out / "model.jsonl", "w") as fh:
            for row in rows:
                scores = [None if t is None else scope["get_score"](t, patterns) for t in row["games"]]
                labels.append(scores)
                games = [None if t is None else {"score": s} for t, s in zip(row["games"], scores)]
                fh.write(json.dumps({"uid": row["uid"], "category": row["category"], "model": "model",
                                     "games": games}) + "\n")
        here = os.getcwd()
        os.chdir(tmp)
        try:
            battles = show_result.load_judgments(["judge"], "arena-hard-v2.0")
            per_category = {}
            for category in sorted(battles.category.unique()):
                part = battles[battles.category == category].reset_index(drop=True)
                np.random.seed(SEED)
                show_result.print_leaderboard(part, category)
                per_category[category] = {**captured, "battles": [float(x) for x in part.scores]}
        finally:
            os.chdir(here)
    return {"source": "lmarena/arena-hard-auto", "commit": commit(root), "seed": SEED, "labels": labels,
            "per_category": per_category}


def alpaca(src: Path, data: dict) -> dict:
    import pandas as pd

    sys.path.insert(0, str(src))
    from alpaca_eval import utils
    from alpaca_eval.completion_parsers import logprob_parser
    from alpaca_eval.metrics import glm_winrate
    from alpaca_eval.metrics.winrate import get_winrate
    from alpaca_eval.processors import RandomSwitchTwoColumnsProcessor

    items = data["items"]
    df = pd.DataFrame({"instruction": [i["instruction"] for i in items], "output_1": [i["reference"] for i in items],
                       "output_2": [i["answer"] for i in items], "index": [i["index"] for i in items],
                       "generator_1": "reference", "generator_2": "model",
                       "annotator": "weighted_alpaca_eval_gpt4_turbo"})

    def replace_if_switch(part):  # the annotator's fn_replace_if_switch: preference -> 3 - preference
        if part.empty or "preference" not in part.columns:
            return part
        part = part.copy()
        part["preference"] = part["preference"].apply(lambda x: 3 - x)
        return part

    processor = RandomSwitchTwoColumnsProcessor(two_columns_to_switch=["output_1", "output_2"],
                                                fn_replace_if_switch=replace_if_switch,
                                                random_seed_columns=["instruction"],
                                                _switch_column="is_switched_outputs", seed=0)
    switched = processor.preprocess(df)
    template = (src / "alpaca_eval" / "evaluators_configs" / "alpaca_eval_clf_gpt4_turbo" / "alpaca_eval_clf.txt").read_text()
    prompts, _ = utils.make_prompts(switched, template)
    messages = [utils.prompt_to_chatml(p) for p in prompts]
    raw = []
    for item in items:
        if item["reference"] == item["answer"]:
            raw.append(1.5)  # the pairwise annotator's _preprocess: identical outputs, never sent
        else:
            completion = {"logprobs": {"content": [{"top_logprobs": item["top_logprobs"]}]}}
            raw.append(logprob_parser(completion, numerator_token="m", denominator_tokens=["m", "M"],
                                      is_binarize=False)[0])
    same = switched["output_1"] == switched["output_2"]
    switched["preference"] = [1.5 if s else r for s, r in zip(same, raw)]
    # identical outputs are set after the switch and never switched back by the judge: mark them unswitched
    annotated = processor.postprocess(switched.assign(preference=[
        (3 - p if sw else p) if s else p for p, s, sw in zip(switched["preference"], same, switched["is_switched_outputs"])]))
    annotations = annotated.assign(output_1=df["output_1"], output_2=df["output_2"])
    with tempfile.TemporaryDirectory() as tmp:
        gamed = Path(tmp) / "df_gamed.csv"
        pd.DataFrame(data["gamed"]).to_csv(gamed, index=False)
        glm_winrate.hf_hub_download = lambda **kwargs: str(gamed)  # the hub's file, from the fixture
        lc = {}
        for glm in ("length_controlled_v1", "length_controlled_noreg", "length_controlled_minimal"):
            m = glm_winrate.get_length_controlled_winrate(annotations.copy(), glm_name=glm, save_weights_dir=None,
                                                           is_warn_extreme_changes=False)
            lc[glm] = {"length_controlled_winrate": float(m["length_controlled_winrate"]),
                       "lc_standard_error": float(m["lc_standard_error"])}
    wr = get_winrate(annotations)
    return {"source": "tatsu-lab/alpaca_eval", "commit": commit(src.parent), "switched": [bool(x) for x in switched["is_switched_outputs"]],
            "messages_sha256": [hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest() for m in messages],
            "preferences": [None if pd.isna(p) else float(p) for p in annotations["preference"]],
            "win_rate": {k: float(wr[k]) for k in ("win_rate", "standard_error", "n_wins", "n_wins_base", "n_draws",
                                                   "n_total", "discrete_win_rate")},
            "length_controlled": lc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arena-hard", type=Path, required=True)
    ap.add_argument("--alpaca-eval", type=Path, required=True, help="the src/ folder of an alpaca_eval checkout")
    ap.add_argument("--commits", nargs=2, metavar=("ARENA_HARD", "ALPACA_EVAL"), default=None,
                    help="the checkouts' commits, when they are exports without git")
    a = ap.parse_args()
    fixtures = json.loads((HERE / "fixtures.json").read_text())
    alpaca_expected = alpaca(a.alpaca_eval.resolve(), fixtures["alpaca_eval"])  # before torch's stand-in
    expected = {"arena_hard": arena(a.arena_hard.resolve(), fixtures["arena_hard"]), "alpaca_eval": alpaca_expected}
    if a.commits:
        expected["arena_hard"]["commit"], expected["alpaca_eval"]["commit"] = a.commits
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
