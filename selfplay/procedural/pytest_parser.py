"""Built-in test parser for pytest output (`-rA` short summary, or `-v` lines), stdlib only.

This file is both a module (`parse(text)`) and the `test_parser.py` that procedural artifacts carry:
it reads pytest output on stdin and prints {test_id: "passed" | "failed"} as JSON. XFAIL counts as
passed (the test behaves as declared), XPASS as passed (non-strict), ERROR as failed; skipped tests
are left out, since a skip carries no verdict.
"""

import json
import re
import sys

_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+::.+?)(?: - .*)?$")
_VERBOSE = re.compile(r"^(\S+::\S+?) (PASSED|FAILED|ERROR|XFAIL|XPASS)(?:\s+\[\s*\d+%\])?\s*$")
_VERDICT = {"PASSED": "passed", "XFAIL": "passed", "XPASS": "passed", "FAILED": "failed", "ERROR": "failed"}


def parse(text):
    """Map each test id found in `text` to "passed" or "failed"; a failure wins over a pass."""
    out = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _SUMMARY.match(line)
        if m:
            status, test_id = m.group(1), m.group(2).strip()
        else:
            m = _VERBOSE.match(line)
            if not m:
                continue
            test_id, status = m.group(1), m.group(2)
        verdict = _VERDICT[status]
        # A test can pass its call and error in teardown: then it is failed.
        if out.get(test_id) != "failed":
            out[test_id] = verdict
    return out


if __name__ == "__main__":
    json.dump(parse(sys.stdin.read()), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
