#!/usr/bin/env bash
# Installs everything the test suite needs (Docker engine, PostgreSQL, headless Chromium, the package with its
# train, dev, eval, dist and ort extras, the embedded model), lints with ruff and runs the whole suite. This is what CI
# runs.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=train,dev,eval,dist,ort bash scripts/install.sh
# `selfplay report` pages are checked in a real browser (tests/selfplay/report/test_report_browser.py).
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/ruff check .  # the lint selection lives in pyproject.toml
export SELFPLAY_TEST_POSTGRES_URL=${SELFPLAY_TEST_POSTGRES_URL:-$(bash scripts/postgres.sh)}
if [ "$#" -gt 0 ]; then exec .venv/bin/python -m pytest -q "$@"; fi
# One pytest process per part: the in-process models, learners and policy servers of a part are freed when
# its process ends (a single process over the whole suite grew past 20 GB and was killed by the OOM killer).
lane() {
  local failed=0 part
  for part in "$@"; do
    echo "== pytest $part"
    # --durations: the slowest 40 tests of each part go to the log, to keep the whole run inside CI's 40 minutes
    # shellcheck disable=SC2086  # the part is a word list on purpose
    .venv/bin/python -m pytest -q --durations=40 $part || failed=1
  done
  return "$failed"
}
# Two lanes at once, each line prefixed with its lane: the Docker-bound tests leave about 40% of 2 cores idle
# while containers start and run, which the other lane fills (docs/benchmarks.md, "CI in two lanes").
lane "tests/selfplay --ignore=tests/selfplay/learner --ignore=tests/selfplay/orchestration" 2>&1 | sed -u 's/^/[lane 1] /' &
first=$!
lane "tests/agent_scaffold tests/repos tests/sandboxes tests/test_ci_skips.py tests/test_imports.py tests/test_test_names.py" \
     "tests/selfplay/learner" "tests/selfplay/orchestration" 2>&1 | sed -u 's/^/[lane 2] /' &
second=$!
failed=0
wait "$first" || failed=1
wait "$second" || failed=1
exit "$failed"
