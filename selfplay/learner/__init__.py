"""The DAPO learner: advantages, batch shaping, the clipped token-level loss, a DeepSpeed engine,
checkpoints and weight sync to rollout engines.

Pure modules (no torch): `advantages`, `baseline`, `overlong`, `staleness`, `dynamic_sampling`, `batch`,
`microbatch`, `minibatches`, `config`. Torch modules, imported only when used: `losses`, `logprobs`, `packing`,
`model_options`, `engine`, `checkpoint`, `weight_sync` (its HTTP backend needs only httpx), `demo`.
This `__init__` imports nothing, so `import selfplay.learner` never loads torch.

See docs/learner.md for the formulas and how they depart from DAPO, Nebius and SSR.
"""

TRAIN_EXTRA_HINT = "the learner needs torch, transformers and deepspeed: pip install 'selfplay-swe[train]'"
