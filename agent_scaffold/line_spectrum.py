"""A pytest plugin that runs in the sandbox (never imported by this package): per test, its outcome and the
lines of the repository's non-test code it ran. `agent_scaffold.localize` ranks them.

Only `line` events are kept (a `def` line's `call` event is no statement), and only between a test's setup
and teardown, so code run at import (module-level tables) belongs to no test. Written to $LINE_SPECTRUM_OUT
as {"files": [path, ...], "tests": [[failed, [[file index, line], ...]], ...]}.
"""

import json
import os
import sys
import threading

import pytest

ROOT = os.getcwd() + os.sep
_lines = set()
_failed = set()
_tests = []
_kept = {}


def _keep(filename):
    keep = _kept.get(filename)
    if keep is None:
        rel = filename[len(ROOT):] if filename.startswith(ROOT) else ""
        parts = rel.split("/")
        keep = rel.endswith(".py") and not any(p in ("test", "tests", "testing") for p in parts[:-1]) \
            and not parts[-1].startswith("test_") and not parts[-1].endswith("_test.py") \
            and parts[-1] != "conftest.py"
        _kept[filename] = keep
    return keep


def _local(frame, event, arg):
    if event == "line":
        _lines.add((frame.f_code.co_filename, frame.f_lineno))
    return _local


def _global(frame, event, arg):
    return _local if _keep(frame.f_code.co_filename) else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _lines.clear()
    previous = sys.gettrace()
    sys.settrace(_global)
    threading.settrace(_global)
    try:
        yield
    finally:
        sys.settrace(previous)
        threading.settrace(None)
    _tests.append((item.nodeid in _failed, sorted(_lines)))


def pytest_runtest_logreport(report):
    if report.failed:
        _failed.add(report.nodeid)


def pytest_sessionfinish(session):
    files = sorted({f for _, lines in _tests for f, _ in lines})
    index = {f: i for i, f in enumerate(files)}
    out = {"files": [f[len(ROOT):] for f in files],
           "tests": [[failed, [[index[f], n] for f, n in lines]] for failed, lines in _tests]}
    with open(os.environ["LINE_SPECTRUM_OUT"], "w") as fh:
        json.dump(out, fh)
