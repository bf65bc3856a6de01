"""Metric sinks: metrics.jsonl always, TensorBoard when a writer is installed, Weights & Biases when
configured. A record is a flat dict of namespaced keys (`solve_rate/all`, `learner/loss`) plus `iteration`,
`time` and `policy_version`; non-numeric values go to the JSON file only.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from selfplay.config.run_config import MetricsConfig

log = logging.getLogger(__name__)


class MetricsSink(Protocol):
    def write(self, record: Mapping[str, Any], step: int) -> None: ...

    def close(self) -> None: ...


def _numeric(record: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in record.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or k in ("time", "iteration"):
            continue
        if math.isfinite(float(v)):
            out[k] = float(v)
    return out


class JsonlSink:
    """One JSON object per line, appended and flushed (the file survives a crash line by line)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = open(path, "a", encoding="utf-8")

    def write(self, record: Mapping[str, Any], step: int) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        self._fh.write(json.dumps(clean, sort_keys=True, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class TensorBoardSink:
    def __init__(self, logdir: Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            from tensorboardX import SummaryWriter  # type: ignore[no-redef]
        self._writer = SummaryWriter(str(logdir))

    def write(self, record: Mapping[str, Any], step: int) -> None:
        for k, v in _numeric(record).items():
            self._writer.add_scalar(k, v, step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbSink:
    def __init__(self, config: MetricsConfig, run_id: str, run_config: Mapping[str, Any], resume: bool) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise ImportError("metrics.wandb_project is set but wandb is not installed; `pip install wandb` "
                              "or unset metrics.wandb_project") from exc
        self._run = wandb.init(project=config.wandb_project, entity=config.wandb_entity, name=run_id, id=run_id,
                               config=dict(run_config), resume="allow" if resume else None)

    def write(self, record: Mapping[str, Any], step: int) -> None:
        self._run.log(_numeric(record), step=step)

    def close(self) -> None:
        self._run.finish()


class Metrics:
    """Fans records out to every sink; `log` stamps `time`."""

    def __init__(self, sinks: list[MetricsSink]) -> None:
        self.sinks = sinks
        self._step = 0

    def log(self, record: Mapping[str, Any], step: int | None = None) -> dict[str, Any]:
        self._step = self._step + 1 if step is None else step
        full = {"time": time.time(), **record}
        for sink in self.sinks:
            try:
                sink.write(full, self._step)
            except Exception:  # a metrics backend must not end a days-long run
                log.exception("metrics sink %s failed", type(sink).__name__)
        return full

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:
                log.exception("closing metrics sink %s failed", type(sink).__name__)


def tensorboard_available() -> bool:
    if importlib.util.find_spec("tensorboard") is not None and importlib.util.find_spec("torch") is not None:
        return True
    return importlib.util.find_spec("tensorboardX") is not None


def make_metrics(config: MetricsConfig, metrics_path: Path, tensorboard_dir: Path, *, run_id: str,
                 run_config: Mapping[str, Any], resume: bool = False) -> Metrics:
    sinks: list[MetricsSink] = [JsonlSink(metrics_path)]
    if config.tensorboard:
        if tensorboard_available():
            try:
                sinks.append(TensorBoardSink(tensorboard_dir))
            except ImportError as exc:
                log.warning("TensorBoard metrics are off: %s", exc)
        else:
            log.warning("TensorBoard metrics are off: neither tensorboard (with torch) nor tensorboardX is "
                        "installed; `pip install tensorboard` or set metrics.tensorboard=false")
    if config.wandb_project:
        sinks.append(WandbSink(config, run_id, run_config, resume))
    return Metrics(sinks)
