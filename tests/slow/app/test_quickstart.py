"""The README's "Your own data" quickstart, exactly as printed, on 181 real articles (the
extraction benchmark's gold text) and chat data made from them: documents -> curate ->
tokenizer -> tokenize -> train -> eval, and chat JSONL -> sft prepare -> sft -> eval."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from tests.paths import ROOT


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Your own data"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = block.replace("\\\n", " ").splitlines()
    return [line.split("  #", 1)[0].strip() for line in lines if line.strip().startswith("afm ")]


def write_my_data(shared_eval: Path, folder: Path) -> None:
    truth = json.loads((shared_eval / "extraction" / "ground-truth.json").read_text(encoding="utf-8"))
    articles = [(k, v["articleBody"], v.get("url", "")) for k, v in sorted(truth.items())]
    folder.mkdir()
    (folder / "benchmarks").symlink_to(shared_eval / "benchmarks", target_is_directory=True)  # your copies
    with (folder / "docs.jsonl").open("w") as fh:
        for key, body, url in articles:
            fh.write(json.dumps({"id": key, "text": body, "url": url}) + "\n")
    with (folder / "chat.jsonl").open("w") as fh:  # "what is this about?" -> the article's first sentence
        for _, body, _ in articles:
            first = body.split(". ")[0].strip()[:300]
            opening = " ".join(body.split()[:60])
            fh.write(json.dumps({"messages": [
                {"role": "user", "content": f"In one sentence, what does this start of an article say?\n\n{opening}"},
                {"role": "assistant", "content": first.rstrip(".") + "."}]}) + "\n")


@pytest.mark.slow
def test_the_readme_quickstart_runs_end_to_end(shared_eval: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    commands = quickstart_commands()
    assert [c.split()[1] for c in commands] == ["decontam", "curate", "tokenizer", "tokenize", "train", "eval",
                                                 "sft", "sft", "eval"]
    write_my_data(shared_eval, tmp_path / "my")
    monkeypatch.chdir(tmp_path)
    for command in commands:
        args = shlex.split(command)[1:]  # exactly as printed
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 0, f"{command}\n{out.output[-3000:]}"
    manifest = json.loads((tmp_path / "work/my/corpus/manifest.json").read_text())
    # Most of the real articles survive curation (the default quality model, which learned
    # content against boilerplate, drops about a fifth of these article bodies).
    assert manifest["totals"]["kept"] > manifest["totals"]["in"] / 2
    base = json.loads((tmp_path / "work/my/base.json").read_text())
    sft = json.loads((tmp_path / "work/my/sft.json").read_text())
    assert set(base["tasks"]) >= {"arc_easy", "piqa", "gsm8k"} and set(sft["tasks"]) == set(base["tasks"])
    # your copies were evaluated (not our demo items), and the results say which file
    mine = (tmp_path / "my" / "benchmarks").resolve()
    assert str(mine / "gsm8k-test.jsonl.gz") in base["data"]["gsm8k test"], base["data"]
    assert "the first 50 evaluated" in base["data"]["gsm8k test"]
    assert (tmp_path / "work/my/sft-run/model/config.json").exists()
