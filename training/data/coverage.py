"""How much data a run has against how much it will read: the warnings a user needs
before spending hours on 26 documents.

Two things go wrong silently at small scale: the corpus is tiny for the model (fewer
tokens than the model has parameters: it can memorise it), and the run goes over the
same data many times (an SFT stage of 200 steps over 40 conversations reads each one
40 times). Both are known before the first step from the shards' footers (the token
column's value count, no data read) and the run's shape, so :func:`data_warnings` says
them at the start, with what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Passes over the data above which a run is said to repeat it. A few epochs are common
# practice for small, high-quality sets (SFT); many more mostly memorise.
REPEAT_WARN_PASSES = 4.0


@dataclass(frozen=True)
class DataCoverage:
    """The data one run has and what it reads."""

    documents: int  # rows (documents or conversations) in the shards
    tokens: int  # tokens in the shards (from the footers)
    read_tokens: int  # tokens the run's steps read (padding included, for conversation rows)
    passes: float  # how many times the run goes over the data

    def describe(self) -> dict[str, Any]:
        return {"documents": self.documents, "tokens": self.tokens,
                "read_tokens": self.read_tokens, "passes": round(self.passes, 2)}


def shard_tokens(index: Any) -> int:
    """Tokens in every shard of a :class:`~afm.training.data.shards.ShardIndex`, from the
    Parquet footers: the ``tokens`` column's value count per row group."""
    total = 0
    for fi in range(len(index.files)):
        meta = index.handles.get(fi).metadata
        leaf = _tokens_leaf(meta)
        if leaf is None:
            continue
        for rg in range(meta.num_row_groups):
            total += int(meta.row_group(rg).column(leaf).num_values)
    return total


def _tokens_leaf(meta: Any) -> int | None:
    for i in range(meta.num_columns):
        path = meta.schema.column(i).path
        if path == "tokens" or path.startswith("tokens."):
            return i
    return None


def coverage(index: Any, *, steps: int, global_batch: int, seq_len: int,
             conversation_rows: bool) -> DataCoverage:
    """What ``steps`` steps of ``global_batch`` rows read of the data in ``index``: rows
    of ``seq_len`` tokens from a stream, or one conversation a row (SFT packing)."""
    documents = sum(index.documents.values())
    tokens = shard_tokens(index)
    rows = steps * global_batch
    read_tokens = rows * seq_len
    if conversation_rows:
        passes = rows / documents if documents else 0.0
    else:
        passes = read_tokens / tokens if tokens else 0.0
    return DataCoverage(documents, tokens, read_tokens, passes)


def data_warnings(cov: DataCoverage, params: int) -> list[str]:
    """One line per problem: a corpus with fewer tokens than the model has parameters,
    and a run that goes over its data more than :data:`REPEAT_WARN_PASSES` times."""
    out = []
    if cov.tokens and cov.tokens < params:
        out.append(
            f"tiny corpus: {cov.tokens:,} tokens in {cov.documents:,} documents for a model of "
            f"{params:,} parameters (fewer tokens than parameters: it can memorise them; "
            f"compute-optimal training wants about {20 * params:,}). Curate more documents, or "
            "relax the stages that rejected most (afm curate's summary names them)")
    if cov.passes > REPEAT_WARN_PASSES:
        out.append(
            f"data repeats: the run's steps read {cov.read_tokens:,} tokens, {cov.passes:.1f} passes "
            f"over {cov.documents:,} documents ({cov.tokens:,} tokens). Give more data, or fewer "
            "steps (--steps, or --set total_steps=N)")
    return out


__all__ = ["REPEAT_WARN_PASSES", "DataCoverage", "coverage", "data_warnings", "shard_tokens"]
