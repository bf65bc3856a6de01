"""One rank of the sequence-parallel check (run as a script by test_sequence_parallel.py).

    python sp_worker.py MODEL_DIR SP OUT_JSON     (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the env)

Takes one learner step on fixed samples and writes its metrics and a digest of the updated weights.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    model_dir, sp, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    import torch

    from selfplay.learner.batch import Sample
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine

    engine = LearnerEngine(EngineConfig(model_dir=model_dir, sequence_parallel_size=sp, lr=1e-3, warmup_steps=1,
                                        dtype="fp32", attn_implementation="sdpa", gradient_checkpointing=False,
                                        token_budget=64, logprob_chunk=8))
    g = torch.Generator().manual_seed(0)
    samples = []
    for i, n in enumerate((13, 21, 7)):
        ids = torch.randint(0, 500, (n,), generator=g).tolist()
        h = n // 3
        samples.append(Sample(tuple(ids), (0,) * h + (1,) * (n - h), (0.0,) * h + (-6.0,) * (n - h),
                              1.0 if i % 2 == 0 else -0.5))
    before = engine.logprobs([s.input_ids for s in samples])
    metrics = engine.train_step(samples)
    state = engine.state_dict()
    digest = {k: float(v.double().sum()) for k, v in state.items() if "layers.1." in k or "embed" in k}
    with open(out, "w") as f:
        json.dump({"metrics": metrics, "logprobs": before, "digest": digest,
                   "rank": torch.distributed.get_rank(), "sp_group": engine.sp_group is not None}, f)


if __name__ == "__main__":
    main()
