"""The accounting rule: documents in = kept + rejected, per stage and in total.

The pipeline counts every PCollection it passes between stages (``<stage>.in``,
``<stage>.kept``, ``<stage>.rejected``) with Beam combiners, so the numbers are exact
and retried bundles are not double counted (a failed attempt's output is discarded by
the runner, and so are its counts). This module checks those counts, and the row counts
of the files actually written, and fails loudly when anything does not add up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from afm.console import console, print_table


class AccountingError(RuntimeError):
    """Documents went missing or were duplicated somewhere in the run."""


@dataclass
class StageCount:
    stage: str
    status: str
    docs_in: int
    kept: int
    rejected: int
    reasons: dict[str, int] = field(default_factory=dict)

    @property
    def balanced(self) -> bool:
        return self.docs_in == self.kept + self.rejected


@dataclass
class Accounting:
    ok: bool
    total_in: int
    kept: int
    rejected: int
    stages: list[StageCount]
    problems: list[str]
    checks: int

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["stages"] = [asdict(s) for s in self.stages]
        return out


def stage_counts(
    counts: dict[str, int],
    stage_status: list[tuple[str, str]],
    reasons: dict[str, int] | None = None,
) -> list[StageCount]:
    """Per-stage counts from the pipeline's labelled counts (missing labels count 0)."""
    reasons = reasons or {}
    out = []
    for name, status in stage_status:
        per_reason = {
            key.split("|", 2)[2]: n for key, n in sorted(reasons.items())
            if key.split("|", 2)[1] == name
        }
        out.append(StageCount(
            stage=name,
            status=status,
            docs_in=int(counts.get(f"{name}.in", 0)),
            kept=int(counts.get(f"{name}.kept", 0)),
            rejected=int(counts.get(f"{name}.rejected", 0)),
            reasons=per_reason,
        ))
    return out


def check_accounting(
    counts: dict[str, int],
    stage_status: list[tuple[str, str]],
    chain: dict[str, list[str]],
    files: list[dict[str, Any]],
    *,
    rejects_written: bool = True,
    reasons: dict[str, int] | None = None,
) -> Accounting:
    """Check every stage balances, stages connect (``chain``: the labels whose sum must
    equal a stage's input), the total balances, and the written rows match the counts."""
    stages = stage_counts(counts, stage_status, reasons)
    problems: list[str] = []
    checks = 0
    for s in stages:
        checks += 1
        if not s.balanced:
            problems.append(f"stage {s.stage}: in {s.docs_in} != kept {s.kept} + rejected "
                            f"{s.rejected} (difference {s.docs_in - s.kept - s.rejected:+d})")
        if s.reasons:
            checks += 1
            if sum(s.reasons.values()) != s.rejected:
                problems.append(f"stage {s.stage}: rejects by reason sum to "
                                f"{sum(s.reasons.values())}, not {s.rejected}")
    for name, labels in chain.items():
        checks += 1
        expected = sum(int(counts.get(label, 0)) for label in labels)
        got = int(counts.get(f"{name}.in", 0))
        if got != expected:
            problems.append(f"stage {name}: got {got} documents, but {' + '.join(labels)} "
                            f"= {expected} were passed to it")
    total_in = stages[0].docs_in if stages else 0
    kept = stages[-1].kept if stages else 0
    rejected = sum(s.rejected for s in stages)
    checks += 1
    if total_in != kept + rejected:
        problems.append(f"total: in {total_in} != kept {kept} + rejected {rejected}")
    written_docs = sum(f["rows"] for f in files if f["kind"] == "documents")
    checks += 1
    if written_docs != kept:
        problems.append(f"document shards hold {written_docs} rows, but {kept} were kept")
    if rejects_written:
        checks += 1
        written_rej = sum(f["rows"] for f in files if f["kind"] == "rejects")
        if written_rej != rejected:
            problems.append(f"reject shards hold {written_rej} rows, but {rejected} were "
                            "rejected")
    return Accounting(not problems, total_in, kept, rejected, stages, problems, checks)


def print_accounting(acc: Accounting, not_applicable: Iterable[str] = ()) -> None:
    """The per-stage funnel table and the verdict, on the console. Stages named in
    ``not_applicable`` (nothing of their kind in the input, e.g. extraction of document
    files) are left out of the table when they saw nothing and balance."""

    skip = set(not_applicable)
    rows = [[s.stage, s.status, s.docs_in, s.kept, s.rejected,
             "ok" if s.balanced else "MISMATCH"] for s in acc.stages
            if not (s.stage in skip and s.docs_in == 0 and s.balanced)]
    rows.append(["total", "", acc.total_in, acc.kept, acc.rejected,
                 "ok" if acc.total_in == acc.kept + acc.rejected else "MISMATCH"])
    print_table("accounting: documents in = kept + rejected",
                ["stage", "status", "in", "kept", "rejected", "check"], rows)
    if acc.ok:
        console.print(f"[green]accounting holds ({acc.checks} checks): "
                      f"{acc.total_in:,} in = {acc.kept:,} kept + {acc.rejected:,} rejected")
    else:
        console.print("[bold red]ACCOUNTING VIOLATED:")
        for p in acc.problems:
            console.print(f"[red]  - {p}")
