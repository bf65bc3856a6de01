"""The report in headless Chromium (Debian's `chromium`): the page's script runs under its own
Content-Security-Policy, the viewer opens the episode named in `#episode=<id>`, and hostile model text in
that episode shows as text without running.

Outside CI a missing browser skips; under CI=true the skip is a failure (tests/conftest.py).
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
import report_run
from report_run import HOSTILE, HOSTILE_ID, RUN_ID

from selfplay.report import build_report


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium binary on PATH (Debian: apt-get install -y chromium)")


def dump_dom(page: Path, fragment: str, profile: Path) -> str:
    url = page.resolve().as_uri() + fragment
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    return build_report(report_run.write_run(tmp_path_factory.mktemp("runs")))


def test_viewer_opens_the_episode_in_the_hash(page, tmp_path):
    dom = dump_dom(page, "#episode=" + quote(HOSTILE_ID), tmp_path / "profile")
    assert 'data-viewer="ready"' in dom  # the script ran: its CSP hash matches
    status = re.search(r'id="viewer-status">([^<]*)<', dom).group(1)
    assert status.startswith("7 of 7 embedded episodes match")
    assert len(re.findall(r'<tr data-id="', dom)) == 7
    view = re.search(r'<article id="episode-view" data-episode="([^"]+)">(.*?)</article>', dom, re.S)
    assert view and view.group(1) == HOSTILE_ID
    text = html.unescape(re.sub(r"<[^>]+>", "", view.group(2)))
    # its turns: the commands the scaffold parsed, the observations, the diff and the grading reason
    assert "$ sed -i s/a/b/ toolz/x.py" in text and "turn 2" in text and "observation 1" in text
    assert f"output {HOSTILE}" in text and f"+{HOSTILE}" in text and f"error: {HOSTILE}" in text
    # the hostile text stayed text: no element it describes exists, no handler of it ran
    assert "data-pwned" not in dom
    assert dom.count("<script") == 2 and "<img" not in dom and "<b>bold" not in dom


def test_page_without_hash_lists_episodes_and_opens_none(page, tmp_path):
    dom = dump_dom(page, "", tmp_path / "profile")
    assert 'data-viewer="ready"' in dom
    assert '<article id="episode-view" hidden=""></article>' in dom
    assert f'<tr data-id="{RUN_ID}-it1-injector-0"' in dom
    assert f'<a href="#episode={RUN_ID}-it1-injector-0">it1-injector-0</a>' in dom  # each row links its episode


def test_unknown_episode_says_it_is_not_embedded(page, tmp_path):
    dom = dump_dom(page, "#episode=" + quote("<img src=x>"), tmp_path / "profile")
    assert "is not embedded in this page" in dom and "<img" not in dom


def test_policy_blocks_a_script_that_slipped_into_the_page(page, tmp_path):
    # Defence in depth: were the escaping ever wrong, the Content-Security-Policy admits only the page's own
    # script (by hash), so an injected inline script or handler still does not run.
    forged = tmp_path / "forged.html"
    injected = ("<script>document.body.dataset.pwned='inline'</script>"
                "<img src=x onerror=\"document.body.dataset.pwned='handler'\">")
    forged.write_text(page.read_text(encoding="utf-8").replace("</body>", injected + "</body>"), encoding="utf-8")
    dom = dump_dom(forged, "", tmp_path / "profile")
    assert 'data-viewer="ready"' in dom and "data-pwned" not in dom
