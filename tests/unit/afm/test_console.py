"""Issue 56: progress off a terminal (piped, a log file, a scheduler) is plain lines, so a
long ``afm train`` or judging run is never silent in its log."""

from __future__ import annotations

from afm.console import PlainProgress, console


def test_plain_progress_prints_lines_with_the_task_its_counts_and_rate() -> None:
    with console.capture() as captured:
        with PlainProgress(every_s=0.0) as progress:  # every update is due: no clock involved
            task = progress.add_task("train tiny", total=4, rate="")
            progress.update(task, rate="loss 3.2104 lr 1.00e-03 9,812 tok/s")
            progress.advance(task)
            progress.update(task, advance=1, description="train tiny (resumed)")
    lines = captured.get().splitlines()
    assert lines and all("elapsed" in line for line in lines)
    assert "train tiny 0/4 (0%) loss 3.2104 lr 1.00e-03 9,812 tok/s" in lines[0]
    assert "train tiny 1/4 (25%)" in lines[1] and "left" in lines[1]
    assert "train tiny (resumed) 2/4 (50%)" in lines[-1]


def test_a_run_shorter_than_the_interval_prints_nothing_and_a_long_one_ends_with_its_last_state() -> None:
    with console.capture() as captured:
        with PlainProgress(every_s=3600.0) as progress:
            task = progress.add_task("judging", total=None, rate="")
            progress.advance(task, 7)
    assert captured.get() == ""  # nothing reported yet: the summary that follows says it all
    with console.capture() as captured:
        with PlainProgress(every_s=0.0) as progress:
            task = progress.add_task("judging", total=None, rate="")
            progress.advance(task, 7)
            progress.tasks[task]["next"] = float("inf")  # later updates fall between two lines
            progress.advance(task, 5)
    lines = captured.get().splitlines()
    assert "judging 7," in lines[0] and "judging 12," in lines[-1]  # the end is always said
