"""Where things are, for tests at any depth: the checkout's root and the tests' shared data.

Tests are laid out like the code (``tests/<tier>/<area>/<room>/``), so a file's depth says
nothing about where the repository starts; every test names these instead of counting parents.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
TEST_DATA = TESTS / "data"
CHAT_TOKENIZER = TEST_DATA / "chat"  # the small chat tokenizer the training tests share

__all__ = ["CHAT_TOKENIZER", "ROOT", "TESTS", "TEST_DATA"]
