"""A real headless browser for layout checks (Debian's ``chromium``), or a skip that
says how to get one. ``page_width`` is the page's scroll width in a window of the given
width: larger than the window means the user scrolls sideways; ``page_size`` adds the
height (how far the user scrolls down)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
_PROBE = ("<script>addEventListener('load', () => {document.body.setAttribute('data-scroll-width', "
          "document.documentElement.scrollWidth); document.body.setAttribute('data-scroll-height', "
          "document.documentElement.scrollHeight)})</script>")


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless browser here (apt-get install chromium): the layout is checked on the image only")


def page_width(html_file: Path, window: int = 1280) -> int:
    return page_size(html_file, window)[0]


def page_size(html_file: Path, window: int = 1280) -> tuple[int, int]:
    """The page's scroll width and height, in pixels, in a window ``window`` wide."""
    exe = browser()
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "page.html"
        probe.write_text(html_file.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>")
                         if "</body>" in html_file.read_text(encoding="utf-8")
                         else html_file.read_text(encoding="utf-8") + _PROBE, encoding="utf-8")
        out = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}/profile",
                              f"--window-size={window},900", "--virtual-time-budget=3000", "--dump-dom",
                              probe.as_uri()], capture_output=True, text=True, timeout=120)
    width = re.search(r'data-scroll-width="(\d+)"', out.stdout)
    height = re.search(r'data-scroll-height="(\d+)"', out.stdout)
    assert width and height, f"the browser did not render the page: {out.stderr[-2000:]}"
    return int(width.group(1)), int(height.group(1))
