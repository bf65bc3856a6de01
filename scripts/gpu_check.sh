#!/usr/bin/env bash
# The GPU regression check of docs/benchmarks.md ("Learner and rollouts on a GPU"), for a GPU machine with
# torch and transformers but no network and no DeepSpeed.
#
#   bash scripts/gpu_check.sh prepare   # here: wheels into .whl/, the embedded model's config and
#                                       # tokenizer into .gpu/smollm2/ (both git-ignored; carry them)
#   bash scripts/gpu_check.sh           # there: install the wheels, write a random-init SmolLM2 from the
#                                       # carried config, run the gpu tests and the two bench tables
# Logs go to $OUT (or ./gpu-check-out).
set -o pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = prepare ]; then
    py=.venv/bin/python
    model=$($py -c "from agent_scaffold.embedded import default_model_dir; print(default_model_dir())") || exit 1
    mkdir -p .whl .gpu/smollm2
    cp "$model"/{chat_template.jinja,config.json,generation_config.json,tokenizer.json,tokenizer_config.json} .gpu/smollm2/
    # The versions the venv (and so CI) runs, not pins of their own that could drift from it.
    pin() { $py -c "import importlib.metadata as m; print('$1==' + m.version('$1'))"; }
    # DeepSpeed ships only an sdist: build a pure-Python wheel (its ops compile on first use, if ever).
    DS_BUILD_OPS=0 $py -m pip wheel -q --no-deps --no-build-isolation -w .whl "$(pin deepspeed)" || exit 1
    for name in pydantic pydantic_core hjson annotated-types typing-inspection; do
        $py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$(pin $name)" || exit 1
    done
    du -sh .whl .gpu
    exit 0
fi

export PYTHONUNBUFFERED=1
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD SELFPLAY_CACHE=/tmp/spc
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, transformers, deepspeed; print('torch', torch.__version__, 'transformers', transformers.__version__, 'deepspeed', deepspeed.__version__)"; } 2>&1 | tee "$OUT/tests.log"
python3 - <<'PY' || exit 1
import shutil
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

# The real weights (538 MB) cannot travel; the tests need the shape and the tokenizer, not the weights.
d = Path("/tmp/spc/models/SmolLM2-135M-Instruct")
d.parent.mkdir(parents=True, exist_ok=True)
shutil.copytree(".gpu/smollm2", d, dirs_exist_ok=True)
torch.manual_seed(0)
AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(d)).save_pretrained(d)
PY
rc=0  # every step runs; the script fails if any did
timeout 180 python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/selfplay/learner/test_engine_options.py \
    tests/agent_scaffold/test_policies.py tests/agent_scaffold/test_llama_step.py 2>&1 | tee -a "$OUT/tests.log" || rc=1
timeout 240 python3 scripts/bench_learner.py --gpu-only --gpu-lengths '' --rollout-model smollm2 \
    --rollout-batches 1,8,32 --rollout-decodes fast,hf --repeats 3 --tokenizer .gpu/smollm2 2>&1 | tee "$OUT/rollouts.log" || rc=1
timeout 170 python3 scripts/bench_learner.py --gpu-only --gpu-models 0.5b --gpu-lengths 8192 \
    --gpu-sides learner,hf --repeats 1 --rollout-batches '' --tokenizer .gpu/smollm2 2>&1 | tee "$OUT/learner.log" || rc=1
exit $rc
