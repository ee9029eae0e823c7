"""Minor page faults per curate stage, in one process: the stage clocks
(``pipelines/beam/cputime.py``) count the thread's minor faults (``RUSAGE_THREAD``) in place
of nanoseconds, so the manifest's per-stage "CPU seconds" are faults. Every stage,
``method=blocks``, one worker in process, as the curate bench runs it.

    python experiments/page-faults/fault_stages.py CORPUS/all INDEX

Prints faults per page read, per stage and for the whole process (start-up included: run it
on all files, or subtract a run on the first file).
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
from pathlib import Path

import afm.pipelines.beam.cputime as cputime


class _FaultClock:
    @staticmethod
    def thread_time_ns() -> int:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt * 10**9


def main() -> None:
    inputs, index = sys.argv[1], sys.argv[2]
    cputime.time = _FaultClock  # type: ignore[assignment] - the clocks read faults now
    from afm.app.bench.pipelines.curate import _child

    with tempfile.TemporaryDirectory() as tmp:
        result = _child({"kind": "afm-all", "inputs": inputs, "out": str(Path(tmp) / "out"),
                         "decontam_index": index, "config": {"extract": {"params": {"method": "blocks"}}}})
        costs = json.loads(Path(result["manifest"]).read_text())["costs"]
    pages = result["pages"]
    print(f"{pages} pages; the process: {resource.getrusage(resource.RUSAGE_SELF).ru_minflt / pages:.0f} "
          "minor faults a page")
    for stage in costs["stages"]:
        print(f"  {stage['stage']:16s} {stage['cpu_s'] / pages:8.1f} faults a page read")


if __name__ == "__main__":
    main()
