"""Third-party warnings reach a run's log file, never the console (a live view): Python warnings such as
transformers' FutureWarnings, and transformers' own `logger.warning_once` lines, which it prints through
a stderr handler of its own. With -v they are shown."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import logging, sys, warnings
    from pathlib import Path
    from selfplay.cli.third_party import route_third_party
    from selfplay.orchestration.rundir import attach_log_file, detach_log_file

    logging.basicConfig()  # the console handler the CLI sets up
    route_third_party(verbose=sys.argv[2] == "verbose")
    handler = attach_log_file(Path(sys.argv[1]))
    import transformers  # installs its stderr handler on the `transformers` logger
    warnings.warn("`past_key_values` will be removed", FutureWarning)
    logging.getLogger("transformers.utils.generic").warning("`past_key_values`/`cache_params` are deprecated")
    detach_log_file(handler)
""")


def _run(tmp_path: Path, mode: str) -> tuple[str, str]:
    log = tmp_path / f"{mode}.log"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(log), mode], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, log.read_text()


def test_warnings_go_to_the_log_file_not_the_console(tmp_path):
    console, log = _run(tmp_path, "quiet")
    assert "past_key_values" not in console and "FutureWarning" not in console, console
    assert "FutureWarning: `past_key_values` will be removed" in log
    assert "`past_key_values`/`cache_params` are deprecated" in log


def test_verbose_shows_them(tmp_path):
    console, _ = _run(tmp_path, "verbose")
    assert "`past_key_values` will be removed" in console
