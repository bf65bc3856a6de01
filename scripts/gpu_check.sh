#!/usr/bin/env bash
# The GPU checks of docs/benchmarks.md ("Learner and rollouts on a GPU"), for a GPU machine with torch and
# transformers but no network, no Docker and no DeepSpeed.
#
#   bash scripts/gpu_check.sh prepare [WARM RUN]    # here: wheels into .whl/, the embedded model's config and
#                                                   # tokenizer into .gpu/smollm2/ (both git-ignored; carry
#                                                   # them); with a warm start's directory (its store.db and
#                                                   # demos/) and a run directory, also those, for the pipeline
#   bash scripts/gpu_check.sh            # there: the gpu tests and the two bench tables, on a random-init
#                                        # SmolLM2 written from the carried config
#   bash scripts/gpu_check.sh pipeline   # there: the gpu tests, then the experiment's GPU half at a larger
#                                        # shape: SFT on the store's demonstrations, the run's update replayed
#                                        # at LR 0 and > 0, and a held-out evaluation's policy sampling
#   bash scripts/gpu_check.sh decode     # there: the two decode paths' step, paired in one process
# Logs go to $OUT (or ./gpu-check-out).
set -o pipefail
cd "$(dirname "$0")/.."

# dist:module pairs of pyproject's dependencies (and theirs) that `selfplay rft` and the replay import
BASE_DEPS="pyyaml:yaml sqlalchemy:sqlalchemy alembic:alembic mako:mako markupsafe:markupsafe typer:typer click:click
shellingham:shellingham rich:rich markdown-it-py:markdown_it mdurl:mdurl pygments:pygments unidiff:unidiff
gitpython:git gitdb:gitdb smmap:smmap docker:docker httpx:httpx httpcore:httpcore anyio:anyio h11:h11 idna:idna
certifi:certifi packaging:packaging"

if [ "${1:-}" = prepare ]; then
    py=.venv/bin/python
    model=$($py -c "from agent_scaffold.embedded import default_model_dir; print(default_model_dir())") || exit 1
    mkdir -p .whl .gpu/smollm2
    cp "$model"/{chat_template.jinja,config.json,generation_config.json,tokenizer.json,tokenizer_config.json} .gpu/smollm2/
    # The versions the venv (and so CI) runs, not pins of their own that could drift from it.
    pin() { $py -c "import importlib.metadata as m; print('$1==' + m.version('$1'))"; }
    # DeepSpeed ships only an sdist: build a pure-Python wheel (its ops compile on first use, if ever).
    DS_BUILD_OPS=0 $py -m pip wheel -q --no-deps --no-build-isolation -w .whl "$(pin deepspeed)" || exit 1
    # the wheel of dist $2 at the venv's version into $1, for the GPU machine's Python
    wheel() { $py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$1" "$(pin "$2")"; }
    for name in pydantic pydantic_core hjson annotated-types typing-inspection; do
        wheel .whl $name || exit 1
    done
    # The project's own dependencies, installed there only where the machine lacks them.
    for pair in $BASE_DEPS; do
        wheel .whl/base "${pair%%:*}" || exit 1
    done
    if [ -n "${2:-}" ]; then
        [ -f "$2/store.db" ] && [ -d "$2/demos" ] && [ -f "$3/config.yaml" ] \
            || { echo "prepare: WARM must be a warm start's directory (store.db, demos/) and RUN a run's"; exit 2; }
        rm -rf .gpu/run .gpu/warm && mkdir -p .gpu/run .gpu/warm
        cp -r "$2"/store.db "$2"/demos .gpu/warm/
        # the store names its demonstrations' files by absolute path: the pipeline puts them back there
        realpath "$2" > .gpu/warm_root
        cp -r "$3"/config.yaml "$3"/trajectories .gpu/run/
    fi
    du -sh .whl .gpu
    exit 0
fi

export PYTHONUNBUFFERED=1
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
missing=$(BASE_DEPS="$BASE_DEPS" python3 - <<'PY'
import importlib.util, os
from pathlib import Path

wheels = {p.name.split("-")[0].lower(): p for p in Path(".whl/base").glob("*.whl")}
for pair in os.environ["BASE_DEPS"].split():
    dist, module = pair.split(":")
    if importlib.util.find_spec(module) is None:
        print(wheels[dist.lower().replace("-", "_")])
PY
) || exit 1
echo "installed for the project: ${missing:-none}"
[ -z "$missing" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site $missing || exit 1
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
[ "${1:-}" = decode ] || timeout 180 python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/selfplay/learner/test_engine_options.py \
    tests/agent_scaffold/test_policies.py tests/agent_scaffold/test_llama_step.py \
    tests/selfplay/experiment/test_eval_device.py tests/selfplay/learner/test_learner_architectures.py 2>&1 | tee -a "$OUT/tests.log" || rc=1

if [ "${1:-}" = pipeline ]; then
    [ -f .gpu/warm_root ] && [ -f .gpu/run/config.yaml ] || { echo "pipeline: run prepare WARM RUN here first"; exit 2; }
    root=$(cat .gpu/warm_root)
    [ -e "$root" ] || { mkdir -p "$(dirname "$root")" && ln -s "$PWD/.gpu/warm" "$root"; } || exit 1
    # A larger shape with the embedded tokenizer, so the carried episodes' token ids are its own: SmolLM2-1.7B's.
    timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/pipeline.log" || exit 1
import shutil
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

d = Path("/tmp/m17")
shutil.copytree(".gpu/smollm2", d, dirs_exist_ok=True)
config = AutoConfig.from_pretrained(d)
for k, v in dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
                 num_key_value_heads=32, head_dim=64).items():
    setattr(config, k, v)
torch.manual_seed(0)
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
print(f"random-init SmolLM2-1.7B shape: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters")
model.save_pretrained(d)
PY
    start=$(date +%s)
    timeout 240 python3 -c 'from selfplay.cli import main; main()' rft --store "$root/store.db" --source demo \
        --preset nebius --lr 1e-4 --batch-size 8 --epochs 2 --model /tmp/m17 --out /tmp/sft17 2>&1 \
        | grep -v "INFO" | tee -a "$OUT/pipeline.log" || rc=1
    echo "rft wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/pipeline.log"
    start=$(date +%s)
    timeout 200 python3 scripts/replay_update.py --run .gpu/run --iteration 0 --model /tmp/sft17 --lr 0 1e-5 \
        --json "$OUT/replay.json" 2>&1 | tee -a "$OUT/pipeline.log" || rc=1
    echo "replay wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/pipeline.log"
    timeout 120 python3 - <<'PY' 2>&1 | tee -a "$OUT/pipeline.log" || rc=1
import time
from pathlib import Path

import torch

from agent_scaffold.policy import SamplingParams
from selfplay.experiment.heldout import EvalSettings, eval_policy
from selfplay.orchestration.rundir import read_trajectories

# The held-out evaluation's policy on the SFT checkpoint, fed the carried run's first solver prompts.
prompts = [t.input_ids[:t.turn_spans[0][0]]
           for t in read_trajectories(Path(".gpu/run/trajectories/it00000-solver.jsonl.gz"))][:8]
t0 = time.perf_counter()
policy = eval_policy("/tmp/sft17", EvalSettings(workers=8))
load = time.perf_counter() - t0
try:
    device = next(policy.policy.model.parameters()).device
    assert device.type == "cuda", f"the evaluation's policy is on {device}"
    t0 = time.perf_counter()
    out = policy.generate(prompts, SamplingParams(max_new_tokens=128, temperature=0.5, seed=1))
    wall = time.perf_counter() - t0
    made = sum(len(c.token_ids) for c in out)
    print(f"eval policy on {device} ({torch.cuda.get_device_name()}): loaded in {load:.1f} s; {len(prompts)} prompts "
          f"of {min(map(len, prompts))}-{max(map(len, prompts))} tokens, {made} tokens in {wall:.1f} s")
finally:
    policy.close()
PY
    exit $rc
fi
if [ "${1:-}" = decode ]; then  # both decode paths in one process, alternating: a paired A/B
    timeout 300 python3 scripts/bench_decode_step.py --model /tmp/spc/models/SmolLM2-135M-Instruct --device cuda \
        --dtype bfloat16 --batches 1,8,32 --repeats 9 --json "$OUT/decode_step.json" 2>&1 | tee "$OUT/decode.log" || rc=1
    exit $rc
fi
timeout 240 python3 scripts/bench_learner.py --gpu-only --gpu-lengths '' --rollout-model smollm2 \
    --rollout-batches 1,8,32 --rollout-decodes fast,hf --repeats 3 --tokenizer .gpu/smollm2 2>&1 | tee "$OUT/rollouts.log" || rc=1
timeout 170 python3 scripts/bench_learner.py --gpu-only --gpu-models 0.5b --gpu-lengths 8192 \
    --gpu-sides learner,hf --repeats 1 --rollout-batches '' --tokenizer .gpu/smollm2 2>&1 | tee "$OUT/learner.log" || rc=1
exit $rc
