"""A short, real RL run on CPU: proof that the learner learns (used by `selfplay learn-demo` and a test).

Task: the embedded SmolLM2-135M-Instruct is asked "Say yes or no." and sampled (temperature 1,
untruncated) for `max_new_tokens` tokens. Reward +1 if the answer's first word is the target ("no"),
-1 otherwise; the base policy says "no" about 20% of the time, so groups of 8 have reward variance.

Each step: HFPolicy samples a group per prompt (behaviour logprobs recorded) -> Trajectories ->
batch shaping (staleness, overlong, dynamic sampling, GRPO advantages) -> DeepSpeed step on the DAPO
loss -> weight sync into the same HFPolicy (in-memory state copy, or a checkpoint via load_weights)
-> next rollouts use the new version. With lr=0 the same loop must not improve.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policy import SamplingParams
from agent_scaffold.trajectory import Trajectory
from selfplay.learner.baseline import RunningMeanBaseline
from selfplay.learner.batch import BatchConfig, build_batch
from selfplay.learner.checkpoint import save_checkpoint
from selfplay.learner.config import EngineConfig
from selfplay.learner.weight_sync import HFPolicySync

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoConfig:
    prompts: tuple[str, ...] = ("Say yes or no.",)
    """User messages; each step samples one group per prompt."""
    target: str = "no"
    """Reward +1 when the completion's first word (lower-cased, punctuation stripped) equals this."""
    group_size: int = 8
    """Samples per prompt per step (G)."""
    max_new_tokens: int = 2
    """Tokens sampled per answer."""
    steps: int = 10
    """Optimizer steps."""
    lr: float = 3e-5
    """Learning rate (high, to see movement in few steps)."""
    seed: int = 0
    """Seeds sampling and torch."""
    sync: Literal["memory", "disk"] = "memory"
    """Weight sync into the rollout policy: memory (state copy) or disk (checkpoint + load_weights)."""
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(warmup_steps=1, weight_decay=0.0,
                                                                      gradient_checkpointing=False))
    """Engine settings (lr and seed are taken from this config's fields)."""

    def __post_init__(self) -> None:
        if self.sync not in ("memory", "disk"):
            raise ValueError(f"DemoConfig.sync must be 'memory' or 'disk', got {self.sync!r}")


def first_word_reward(text: str, target: str) -> float:
    words = re.findall(r"[a-zA-Z']+", text.lower())
    return 1.0 if words and words[0] == target else -1.0


def target_probability(policy: object, prompts: list[list[int]], target_ids: list[int],
                       lead_ids: frozenset[int] = frozenset(), min_lead: float = 1e-3) -> float:
    """Mean over prompts of the probability that the answer's first word is the target, over its first two
    tokens: a noise-free proxy of the expected reward. The first token is a target token, or a token with
    no letters (`lead_ids`: "-", "**", a space) of probability at least `min_lead` followed by a target
    token. ("No" + "ble" still counts as "no"; the sampled reward would not.) A policy that learns to answer
    "- No" raises the reward and, with the second term, this proxy too."""
    import torch

    total = 0.0
    with torch.no_grad():
        for prompt in prompts:
            logits = policy.model(input_ids=torch.tensor([prompt])).logits[0, -1].float()  # type: ignore[attr-defined]
            probs = torch.softmax(logits, -1)
            total += float(probs[target_ids].sum())
            leads = [i for i in torch.nonzero(probs >= min_lead).flatten().tolist() if i in lead_ids]
            if leads:
                ids = torch.tensor([[*prompt, i] for i in leads])
                second = torch.softmax(policy.model(input_ids=ids).logits[:, -1].float(), -1)  # type: ignore[attr-defined]
                total += float((probs[leads] * second[:, target_ids].sum(-1)).sum())
    return total / len(prompts)


def run_demo(config: DemoConfig, on_step: Callable[[int, dict[str, float]], None] | None = None) -> list[dict[str, float]]:
    """Run the loop; returns one metrics dict per step (incl. demo/reward_mean of that step's rollouts)."""
    from selfplay.learner.engine import LearnerEngine  # lazy: torch, transformers, deepspeed

    with LearnerEngine(replace(config.engine, lr=config.lr, seed=config.seed)) as engine:
        return _steps(engine, config, on_step)


def _steps(engine: Any, config: DemoConfig,
           on_step: Callable[[int, dict[str, float]], None] | None) -> list[dict[str, float]]:
    policy = HFPolicy(engine.model_dir)
    sync = HFPolicySync(policy, mode=config.sync)
    tok = policy.tokenizer
    prompts = [tok.encode(tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                  tokenize=False), add_special_tokens=False)
               for p in config.prompts]
    batch_cfg = BatchConfig(advantage="grpo")
    baseline = RunningMeanBaseline()
    history: list[dict[str, float]] = []
    target_ids = [i for i in range(len(tok)) if re.fullmatch(r"\s*" + re.escape(config.target) + r"[\s.,!]*",
                                                             tok.decode([i]).lower())]
    special = set(tok.all_special_ids)
    lead_ids = frozenset(i for i in range(len(tok))
                         if i not in special and not re.search(r"[a-zA-Z']", tok.decode([i])))  # no word starts
    probe = "model.layers.0.mlp.down_proj.weight"  # watched in the *rollout* policy: proves sync happened
    initial = policy.model.state_dict()[probe].clone()
    ckpt_root = Path(tempfile.mkdtemp(prefix="selfplay-demo-")) if config.sync == "disk" else None
    for step in range(config.steps):
        metrics_pre = {"demo/target_prob": target_probability(policy, prompts, target_ids, lead_ids)}
        params = SamplingParams(max_new_tokens=config.max_new_tokens, seed=config.seed * 100003 + step * 1009)
        trajectories = []
        for p_i, prompt in enumerate(prompts):
            for k, c in enumerate(policy.generate([prompt] * config.group_size, params.with_(seed=params.seed + 97 * p_i))):
                ids = tuple(prompt) + c.token_ids
                trajectories.append(Trajectory(
                    input_ids=ids, loss_mask=(0,) * len(prompt) + (1,) * len(c.token_ids),
                    logprobs=(0.0,) * len(prompt) + c.logprobs, turn_spans=((len(prompt), len(ids)),),
                    policy_version=c.policy_version, role="solver", termination="submitted",
                    reward=first_word_reward(c.text, config.target),
                    metadata={"group_id": f"{step}-{p_i}", "id": f"{step}-{p_i}-{k}"}))
        samples, metrics = build_batch(trajectories, engine.version, batch_cfg, baseline)
        metrics.update(metrics_pre)
        metrics["demo/reward_mean"] = sum(t.reward for t in trajectories) / len(trajectories)  # type: ignore[misc]
        if samples:
            metrics.update(engine.train_step(samples))
        else:
            engine.version += 1  # keep versions in step with the loop even when nothing was trainable
        if ckpt_root is not None:
            sync.push(engine.version, checkpoint_dir=save_checkpoint(engine, ckpt_root, optimizer=False))
        else:
            sync.push(engine.version, state_dict=engine.state_dict())
        metrics["demo/policy_version"] = float(policy.version)
        metrics["demo/rollout_versions"] = float(max(t.policy_version for t in trajectories))
        metrics["demo/policy_weight_change"] = float((policy.model.state_dict()[probe] - initial).abs().max())
        history.append(metrics)
        log.info("step %d reward %.3f loss %.4f", step, metrics["demo/reward_mean"], metrics.get("learner/loss", 0.0))
        if on_step:
            on_step(step, metrics)
    return history
