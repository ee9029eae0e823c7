"""Several preference pairs per row (DPO / IPO): less padding, the same loss.

An unpacked pair batch spends a ``seq_len`` row on every chosen and every rejected reply,
however short (TRL's ``DPOTrainer`` pads each to the longest in the batch and cannot
pack). Here a row holds up to ``max_pairs`` pairs one after another: pair slot ``j``'s
chosen sequence is segment ``2j + 1`` and its rejected sequence segment ``2j + 2``, with
positions restarting at each segment, so attention never crosses a sequence (the
model's document masking) and each sequence's reply log-probability is a per-segment
sum. Rows are filled in the shuffled pair order, a pair starting a new row when it does
not fit; the global batch is a fixed number of rows and so a varying number of pairs
(the loss is a sum over pairs, weighted by their count, as unpacked).

Fields: ``tokens``, ``segments``, ``positions``, ``response`` (1 on reply tokens) [rows,
seq_len]; ``pair_weight`` [rows, max_pairs] (1 on a filled slot); with precomputed
reference log-probs ``ref_chosen_logps`` / ``ref_rejected_logps`` [rows, max_pairs].
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from afm.training.data.loader import LoaderState
from afm.training.data.preferences import PairLoader, PreferenceDataError, TokenizedPairs


def pack_rows(data: TokenizedPairs, order: np.ndarray, rows: int, seq_len: int, max_pairs: int,
              pad_id: int) -> tuple[dict[str, np.ndarray], int]:
    """Fill ``rows`` rows with the pairs ``order[0], order[1], ...``; returns the batch and
    how many pairs of ``order`` it holds (the rest start the next batch)."""
    out = {
        "tokens": np.full((rows, seq_len), pad_id, np.int32), "segments": np.zeros((rows, seq_len), np.int32),
        "positions": np.zeros((rows, seq_len), np.int32), "response": np.zeros((rows, seq_len), np.float32),
        "pair_weight": np.zeros((rows, max_pairs), np.float32),
    }
    refs = data.ref_logps is not None
    if refs:
        out["ref_chosen_logps"] = np.zeros((rows, max_pairs), np.float32)
        out["ref_rejected_logps"] = np.zeros((rows, max_pairs), np.float32)
    used, row, at, slot = 0, 0, 0, 0
    while used < len(order) and row < rows:
        i = int(order[used])
        c, r = data.chosen[i], data.rejected[i]
        if at + c.size + r.size > seq_len or slot == max_pairs:
            row, at, slot = row + 1, 0, 0
            continue
        for seg, ids, reply in ((2 * slot + 1, c, data.chosen_reply[i]), (2 * slot + 2, r, data.rejected_reply[i])):
            span = slice(at, at + ids.size)
            out["tokens"][row, span] = ids
            out["segments"][row, span] = seg
            out["positions"][row, span] = np.arange(ids.size)
            out["response"][row, span] = reply
            at += ids.size
        out["pair_weight"][row, slot] = 1.0
        if refs:
            out["ref_chosen_logps"][row, slot], out["ref_rejected_logps"][row, slot] = data.ref_logps[i]
        slot, used = slot + 1, used + 1
    return out, used


class PackedPairLoader(PairLoader):
    """Endless shuffled epochs of packed pair rows; this host's rows of each global batch.
    Epoch order, the checkpointed position (epoch, next pair) and its checks are the
    unpacked :class:`PairLoader`'s; only how a batch is filled differs."""

    kind = "packed-pairs"

    def __init__(self, data: TokenizedPairs, *, seq_len: int, global_batch: int, max_pairs: int, pad_id: int,
                 seed: int, process_index: int = 0, process_count: int = 1, state: Any = None):
        super().__init__(data, seq_len=seq_len, global_batch=global_batch, pad_id=pad_id, seed=seed,
                         process_index=process_index, process_count=process_count, state=state)
        self.max_pairs = max_pairs

    def __next__(self) -> dict[str, np.ndarray]:
        order = self._order(self.epoch)
        ahead = np.concatenate([order[self.pos:], self._order(self.epoch + 1)])  # a batch may span epochs
        batch, used = pack_rows(self.data, ahead, self.global_batch, self.seq_len, self.max_pairs, self.pad_id)
        self.pos += used
        if self.pos >= order.size:
            self.epoch, self.pos = self.epoch + 1, self.pos - order.size
        per = self.global_batch // self.pc
        return {k: v[self.pi * per:(self.pi + 1) * per] for k, v in batch.items()}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_pairs_per_row": self.max_pairs}


class PackedPairEvalInput:
    """Every held-out pair once, in file order, packed; then empty (weight-0) batches."""

    def __init__(self, data: TokenizedPairs, *, seq_len: int, global_batch: int, max_pairs: int, pad_id: int,
                 process_index: int = 0, process_count: int = 1):
        if len(data.level) == 0:
            raise PreferenceDataError("no usable held-out preference pair (every record was rejected)")
        self.data, self.seq_len, self.max_pairs, self.pad_id = data, seq_len, max_pairs, pad_id
        self.rows, self.pi, self.pc = global_batch, process_index, process_count
        self.at = 0

    def batches_needed(self) -> int:
        at, n = 0, 0
        order = np.arange(len(self.data.level))
        while at < order.size:
            _, used = pack_rows(self.data, order[at:], self.rows, self.seq_len, self.max_pairs, self.pad_id)
            at, n = at + used, n + 1
        return n

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        order = np.arange(self.at, len(self.data.level))
        batch, used = pack_rows(self.data, order, self.rows, self.seq_len, self.max_pairs, self.pad_id)
        self.at += used
        per = self.rows // self.pc
        return {k: v[self.pi * per:(self.pi + 1) * per] for k, v in batch.items()}

    def state(self) -> LoaderState:
        return LoaderState({"kind": "packed-pairs-eval"}, np.asarray([[0, self.at, 0, 0]], np.int64))

    def describe(self) -> dict[str, Any]:
        return {"pairs": len(self.data.level)}

    def close(self) -> None:
        pass


__all__ = ["PackedPairEvalInput", "PackedPairLoader", "pack_rows"]
