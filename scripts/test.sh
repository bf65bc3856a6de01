#!/usr/bin/env bash
# Installs everything the test suite needs (Docker engine, PostgreSQL, headless Chromium, the package with its
# train, dev, eval and dist extras, the embedded model), lints with ruff and runs the whole suite. This is what CI
# runs.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=train,dev,eval,dist bash scripts/install.sh
# `selfplay report` pages are checked in a real browser (tests/selfplay/report/test_report_browser.py).
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/ruff check .  # the lint selection lives in pyproject.toml
export SELFPLAY_TEST_POSTGRES_URL=${SELFPLAY_TEST_POSTGRES_URL:-$(bash scripts/postgres.sh)}
exec .venv/bin/python -m pytest -q "$@"
