"""Issue 44: what the early language check saves on pages in one language each, with
Common Crawl's share of English, measured as `afm bench curate` measures (steady state,
one worker, start-up apart): every stage with the check (the default) and without it
(`extract.params.early_language=[]`), on the same generated pages, interleaved.

    python experiments/early-language/run.py --shared ../shared --workdir work/early-language

Pages: `afm bench curate`'s generator with `english_share` (each page's paragraphs drawn
from pages of its template's language; 45% English templates, Common Crawl's share).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from afm.app.bench.pipelines.curate import (
    PAGES_PER_FILE,
    SteadyState,
    build_web_corpus,
    decontam_index,
    measure,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--pages", type=int, default=10 * PAGES_PER_FILE)
    ap.add_argument("--english-share", type=float, default=0.45)
    args = ap.parse_args()
    small, big = build_web_corpus(args.shared, args.workdir, args.pages, args.english_share)
    index = decontam_index(args.shared, args.workdir)
    kinds = {"early check on (default)": {}, "early check off": {"extract": {"params": {"early_language": []}}}}
    runs: dict[str, list] = {k: [] for k in kinds}
    for label, inputs in (("first", small), ("all", big)):
        for name, config in kinds.items():
            out = args.workdir / "out" / f"{'on' if not config else 'off'}-{label}"
            m = measure("afm-all", inputs, out, {"decontam_index": index, "config": config})
            print(f"{name}, {label}: {m.pages} pages, {m.kept} kept, {m.cpu_s:.1f} CPU s, load {os.getloadavg()[0]:.2f}",
                  flush=True)
            runs[name].append(m)
    result = {}
    for name, (s, b) in runs.items():
        st = SteadyState(name, s, b)
        counts = json.loads(Path(b.manifest).read_text())["counts"]
        result[name] = {"pages_per_cpu_s": round(st.pages_per_cpu_s, 1), "startup_cpu_s": round(st.startup_cpu_s, 1),
                        "pages": b.pages, "kept": b.kept,
                        "extract_rejected": counts.get("extract.rejected", 0),
                        "language_rejected": counts.get("language.rejected", 0)}
        print(name, result[name])
    result["load_average"] = os.getloadavg()
    (args.workdir / "result.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
