"""The block extractor's sequence nets with fresh arrays each page against one thread's
reused arrays (``block_sequence.SequenceNets._arrays``): identical probabilities, and the
time and minor faults a page of each, on the features of real pages.

    MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072 \\
        python experiments/page-faults/nets_reuse.py CORPUS/all/*.warc.gz

(the environment as a local curate run's own process has it; without it glibc's adaptive
threshold hides the cost). Fresh arrays: ``SCRATCH_MAX_ROWS = 0``, so every page is above
the reuse cap.
"""

from __future__ import annotations

import resource
import sys
import time

import numpy as np

from afm.filters.extract import ExtractConfig, Extractor
from afm.filters.extraction import block_sequence
from afm.readers.warc import iter_warc_pages


def page_features(files: list[str]) -> tuple[block_sequence.SequenceNets, list[np.ndarray]]:
    """The shipped model's nets and the feature rows they see on every page of ``files``."""
    seen: list[np.ndarray] = []
    probability = block_sequence.SequenceNets.probability

    def grab(self: block_sequence.SequenceNets, x: np.ndarray) -> np.ndarray:
        seen.append(x.copy())
        return probability(self, x)

    block_sequence.SequenceNets.probability = grab  # type: ignore[method-assign]
    extractor = Extractor(ExtractConfig(method="blocks", early_language=[]))
    for f in files:
        for page in iter_warc_pages(f):
            extractor(page)
    block_sequence.SequenceNets.probability = probability  # type: ignore[method-assign]
    return extractor.block_model.sequence, seen


def timed(nets: block_sequence.SequenceNets, pages: list[np.ndarray], cap: int) -> tuple[list, float, float]:
    block_sequence.SCRATCH_MAX_ROWS = cap
    faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
    with block_sequence._one_blas_thread():
        out = [nets._forward(x) for x in pages]
    n = len(pages)
    return out, 1000 * (time.process_time() - start) / n, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / n


def main() -> None:
    nets, pages = page_features(sys.argv[1:])
    cap = block_sequence.SCRATCH_MAX_ROWS
    rows = np.array([len(x) for x in pages])
    print(f"{len(pages)} pages; blocks a page: median {np.median(rows):.0f}, 99th percentile "
          f"{np.percentile(rows, 99):.0f}, most {rows.max()}; above the reuse cap ({cap}): {(rows > cap).sum()}")
    for _ in range(2):
        fresh, fresh_ms, fresh_faults = timed(nets, pages, 0)
        reused, reused_ms, reused_faults = timed(nets, pages, cap)
        same = sum(np.array_equal(a, b) for a, b in zip(fresh, reused))
        print(f"fresh arrays {fresh_ms:.2f} ms, {fresh_faults:.0f} faults a page; reused {reused_ms:.2f} ms, "
              f"{reused_faults:.0f} faults a page; identical on {same} of {len(pages)} pages")


if __name__ == "__main__":
    main()
