#!/usr/bin/env bash
# Installs everything the test suite needs (Docker engine, PostgreSQL, the package with its train, dev and eval
# extras, the embedded model), lints with ruff and runs the whole suite. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=train,dev,eval bash scripts/install.sh
.venv/bin/ruff check .  # the lint selection lives in pyproject.toml
export SELFPLAY_TEST_POSTGRES_URL=${SELFPLAY_TEST_POSTGRES_URL:-$(bash scripts/postgres.sh)}
exec .venv/bin/python -m pytest -q "$@"
