"""Learner checkpoints: HF safetensors + tokenizer (what transformers, HFPolicy and `vllm serve` load),
plus DeepSpeed optimizer/scheduler state for resuming, under a monotonically increasing policy version.

Layout of root/v<version:06d>/:
    config.json, generation_config.json, model.safetensors, tokenizer files   <- HF checkpoint
    optimizer/                                                                 <- DeepSpeed state (resume)
    selfplay_learner.json   {"policy_version": N, "model_dir": ..., "state": {...}}
`state` is the caller's JSON-able training state that is not weights (the injector's running-mean
baselines, `baseline.RunningMeanBaseline.state_dict()`, under "injector_baseline"), so a resumed run
continues with the baselines it had. root/latest holds the name of the newest directory. A directory is written under a temporary name
and renamed when complete, so a crash never leaves a half checkpoint under a real name.

Only the newest checkpoint keeps optimizer/: a resume reads nothing else, and the state is about four
times the fp32 weights (DeepSpeed's copy of the module, ZeRO's fp32 master copy, Adam's two moments).
Once a newer checkpoint with optimizer state is complete and `latest` names it, the older checkpoints'
optimizer/ are deleted (renamed away first, so a checkpoint has the whole of it or none); their weights
stay, for evaluation and for seeding a new run. Resuming from a checkpoint without optimizer/ is refused
with that reason (`load_checkpoint`): a fresh Adam state would silently change the next updates.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from selfplay.learner.errors import LearnerError
from selfplay.learner.model_options import write_legacy_rope_key

log = logging.getLogger(__name__)

META = "selfplay_learner.json"
OPTIMIZER = "optimizer"
DROPPED = ".optimizer.dropped"
"""Where an older checkpoint's optimizer/ is moved before it is deleted."""


def checkpoint_name(version: int) -> str:
    return f"v{version:06d}"


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under `root`, or None."""
    pointer = Path(root) / "latest"
    if not pointer.exists():
        return None
    path = Path(root) / pointer.read_text().strip()
    return path if (path / META).exists() else None


def read_version(checkpoint_dir: str | Path) -> int:
    meta = Path(checkpoint_dir) / META
    if not meta.exists():
        raise LearnerError(f"{checkpoint_dir} is not a learner checkpoint (no {META}); pass a directory "
                           "written by LearnerEngine.save")
    return int(json.loads(meta.read_text())["policy_version"])


def save_hf(engine: Any, target: Path) -> None:
    """Weights (safetensors) + tokenizer + config with the learner's model options."""
    state = engine.state_dict()
    engine.module.save_pretrained(target, state_dict=state, safe_serialization=True)
    engine.tokenizer.save_pretrained(target)
    write_legacy_rope_key(target)


def save_checkpoint(engine: Any, root: Path, *, optimizer: bool = True,
                    state: dict[str, Any] | None = None) -> Path:
    """Write root/v<engine.version> (with `state`, JSON-able, alongside); refuses to go back in versions."""
    try:
        state_json = json.dumps(state or {})
    except TypeError as exc:
        raise LearnerError(f"checkpoint state must be JSON-serialisable (dicts, lists, numbers, strings): {exc}") from exc
    root.mkdir(parents=True, exist_ok=True)
    latest = latest_checkpoint(root)
    if latest is not None and read_version(latest) >= engine.version:
        raise LearnerError(f"checkpoint version {engine.version} is not newer than {latest}; policy versions "
                           "must increase (resume from the latest checkpoint instead of restarting at 0)")
    final = root / checkpoint_name(engine.version)
    tmp = root / f".{final.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_hf(engine, tmp)
    if optimizer:
        engine.engine.save_checkpoint(str(tmp / OPTIMIZER), tag="state",
                                      client_state={"policy_version": engine.version})
    meta = {"policy_version": engine.version, "model_dir": engine.model_dir, "state": json.loads(state_json)}
    (tmp / META).write_text(json.dumps(meta) + "\n")
    tmp.rename(final)
    pointer = root / ".latest.tmp"
    pointer.write_text(final.name + "\n")
    os.replace(pointer, root / "latest")
    log.info("saved checkpoint %s", final)
    if optimizer:
        drop_older_optimizer_states(root, final)
    return final


def has_optimizer_state(checkpoint_dir: str | Path) -> bool:
    return (Path(checkpoint_dir) / OPTIMIZER).is_dir()


def drop_older_optimizer_states(root: Path, newest: Path) -> list[Path]:
    """Delete optimizer/ of every checkpoint under `root` other than `newest` (which must hold one); returns
    the checkpoints that lost it. Each is renamed to .optimizer.dropped first, so a kill mid-delete leaves
    a checkpoint with no optimizer/ rather than part of one; leftovers of such a kill go too."""
    if not has_optimizer_state(newest):
        raise LearnerError(f"{newest} has no optimizer/ state; the older checkpoints' state is what a resume "
                           "would need")
    dropped = []
    for ckpt in sorted(p for p in root.glob("v*") if p.is_dir() and p.name != newest.name):
        if has_optimizer_state(ckpt):
            shutil.rmtree(ckpt / DROPPED, ignore_errors=True)
            (ckpt / OPTIMIZER).rename(ckpt / DROPPED)
            dropped.append(ckpt)
        shutil.rmtree(ckpt / DROPPED, ignore_errors=True)
    if dropped:
        log.info("dropped the optimizer state of %s (only %s, the newest, keeps it for a resume)",
                 ", ".join(p.name for p in dropped), newest.name)
    return dropped


def read_state(checkpoint_dir: str | Path) -> dict[str, Any]:
    """The training state saved with a checkpoint ({} for checkpoints saved without one)."""
    read_version(checkpoint_dir)  # names the problem when this is not a checkpoint
    return dict(json.loads((Path(checkpoint_dir) / META).read_text()).get("state") or {})


def load_checkpoint(engine: Any, checkpoint_dir: Path) -> dict[str, Any]:
    """Restore model, optimizer and scheduler state and the policy version; return the saved `state`."""
    version = read_version(checkpoint_dir)
    opt_dir = checkpoint_dir / OPTIMIZER
    if not opt_dir.is_dir():
        raise LearnerError(f"{checkpoint_dir} has no optimizer/ state (saved with optimizer=False, or an older "
                           "checkpoint whose state was dropped when a newer one was written: only the newest "
                           "keeps it), so it cannot resume a run: resume from the newest checkpoint, or load "
                           "these weights into a new run (EngineConfig.model_dir)")
    path, _ = engine.engine.load_checkpoint(str(opt_dir), tag="state", load_optimizer_states=True,
                                            load_lr_scheduler_states=True)
    if path is None:
        raise LearnerError(f"DeepSpeed found no state in {opt_dir}")
    engine.version = version
    return read_state(checkpoint_dir)
