"""SWE-bench instances: loading (hub name or local JSON/JSONL/parquet via `datasets`), normalisation, image names.

swebench 5.x `make_test_spec` needs `image`, `eval_script`, `log_parser` and `eval_type` on every instance.
`normalise` derives `image` (from the namespace), `log_parser` (swebench's per-repo parser) and `eval_type`
when an older copy lacks them, and decodes FAIL_TO_PASS/PASS_TO_PASS from JSON strings or lists.
`eval_script` cannot be derived with 5.0.2 (the per-repo test commands left the package): an instance
without one is an error that says where to get a copy that has it.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from selfplay.eval.errors import EvalError

log = logging.getLogger(__name__)

VERIFIED = "SWE-bench/SWE-bench_Verified"
SPLITS = ("verified", "verified-50")
NAMESPACES = {
    "swebench": "swebench/sweb.eval.x86_64.{id_1776}:latest",
    "epoch": "ghcr.io/epoch-research/swe-bench.eval.x86_64.{id}:latest",
    "logicstar": "logicstar/sweb.eval.x86_64.{id_1776}:latest",
}
"""Image name templates of the per-instance images: the official Docker Hub ones, Epoch AI's smaller ghcr
mirror, LogicStar's compressed ones. Any other value of `--namespace` is itself a template with `{id}`
(the instance id) and `{id_1776}` (the id with `__` replaced by `_1776_`, lower-cased)."""
REQUIRED = ("instance_id", "repo", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS")
_INSTANCE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def verified_50() -> tuple[str, ...]:
    """The fixed 50-instance subset of SWE-bench Verified: every 10th id (0, 10, ..., 490) of the 500
    Verified ids sorted as strings. Shipped in `verified_50.txt`; see docs/eval.md."""
    text = (Path(__file__).parent / "verified_50.txt").read_text()
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def image_name(instance_id: str, namespace: str = "swebench") -> str:
    """The per-instance image of `instance_id` in `namespace` (a key of NAMESPACES or a template)."""
    template = NAMESPACES.get(namespace, namespace)
    if "{id" not in template:
        raise EvalError(f"unknown image namespace {namespace!r}: use one of {', '.join(NAMESPACES)} or a "
                        "template containing {id} or {id_1776}")
    return template.format(id=instance_id, id_1776=instance_id.replace("__", "_1776_").lower())


def _tests(value: Any, field: str, instance_id: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise EvalError(f"instance {instance_id}: {field} is a string but not JSON ({exc.msg})") from exc
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise EvalError(f"instance {instance_id}: {field} must be a list of test ids (or its JSON)")
    return list(value)


def normalise(instance: dict[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
    """A copy of `instance` with every field `make_test_spec` needs; FAIL_TO_PASS/PASS_TO_PASS as lists.
    `namespace` rewrites `image` of official instances (ids `owner__repo-N`); our own `selfplay-task-*`
    images are kept."""
    inst = dict(instance)
    iid = inst.get("instance_id") or "?"
    missing = [k for k in REQUIRED if inst.get(k) is None]
    if missing:
        raise EvalError(f"instance {iid}: missing field(s) {', '.join(missing)}; is this a SWE-bench dataset?")
    if not isinstance(iid, str) or not _INSTANCE_ID.fullmatch(iid):
        # it names files under --out and the instance's image: a slash or a leading dot would leave both
        raise EvalError(f"instance_id {iid!r}: use letters, digits, '.', '_' and '-' only, not starting with "
                        "'.' or '-' (SWE-bench ids look like owner__repo-1234)")
    inst["FAIL_TO_PASS"] = _tests(inst["FAIL_TO_PASS"], "FAIL_TO_PASS", iid)
    inst["PASS_TO_PASS"] = _tests(inst["PASS_TO_PASS"], "PASS_TO_PASS", iid)
    inst.setdefault("version", "")
    inst["version"] = str(inst["version"] or "")
    ours = str(inst.get("image") or "").startswith("selfplay-task-")
    if not ours and (namespace or not inst.get("image")):
        inst["image"] = image_name(iid, namespace or "swebench")
    if not inst.get("log_parser"):
        inst["log_parser"] = _derive_parser(inst["repo"], iid)
    inst["eval_type"] = inst.get("eval_type") or "pass_and_fail"
    if not inst.get("eval_script"):
        raise EvalError(
            f"instance {iid} has no eval_script, which swebench 5.x needs and cannot derive: load the "
            f"dataset revision published for swebench>=5 (e.g. {VERIFIED}), or generate the scripts with "
            "swebench==4.1.0's make_eval_script_list_py and add them as an `eval_script` column")
    return inst


def _derive_parser(repo: str, iid: str) -> str:
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    fn = MAP_REPO_TO_PARSER_PY.get(repo)
    if fn is None:
        raise EvalError(f"instance {iid}: no log_parser and swebench knows no parser for repo {repo!r}; "
                        "add a `log_parser` column (a key of swebench's PARSER_REGISTRY)")
    return fn.__name__


def load_instances(dataset: str | None = None, *, split: str = "verified",
                   instance_ids: list[str] | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
    """Normalised instances of `dataset` (a hub name or a .json/.jsonl/.parquet file; default SWE-bench
    Verified) restricted to `split` ("verified": all, "verified-50": the fixed subset) and `instance_ids`.
    Raises EvalError naming a missing file or the unknown ids."""
    if split not in SPLITS:
        raise EvalError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    rows = _read(dataset or VERIFIED)
    by_id: dict[str, dict[str, Any]] = {}
    for row in rows:
        by_id.setdefault(str(row.get("instance_id")), row)
    wanted = list(instance_ids) if instance_ids else list(by_id)
    if split == "verified-50":
        subset = set(verified_50())
        wanted = [i for i in wanted if i in subset] if instance_ids else sorted(subset)
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        sample = ", ".join(sorted(by_id)[:5])
        raise EvalError(f"instance id(s) not in {dataset or VERIFIED}: {', '.join(unknown)} "
                        f"(it has {len(by_id)} instances, e.g. {sample})")
    return [normalise(by_id[i], namespace=namespace) for i in wanted]


def _read(dataset: str) -> list[dict[str, Any]]:
    path = Path(dataset)
    suffix = path.suffix.lower()
    local = suffix in (".json", ".jsonl", ".parquet") or path.exists() or "/" not in dataset
    if local and not path.exists():
        raise EvalError(f"dataset file {dataset} does not exist; pass a .json, .jsonl or .parquet file or a "
                        f"hub name such as {VERIFIED}")
    if path.exists() and suffix in (".json", ".jsonl"):
        return read_json_rows(path)
    try:
        import datasets
    except ImportError as exc:
        raise EvalError("loading a parquet file or a hub dataset needs the eval extra: pip install "
                        "'selfplay-swe[eval]' (or pass a .jsonl file)") from exc
    if path.exists():
        if suffix != ".parquet":
            raise EvalError(f"dataset file {dataset}: unknown format; use .json, .jsonl or .parquet")
        try:
            ds = datasets.load_dataset("parquet", data_files=str(path), split="train")
        except Exception as exc:  # the reader's own error, named and cut short
            raise EvalError(f"dataset file {dataset} cannot be read as parquet ({exc.__class__.__name__}: "
                            f"{str(exc)[:300]})") from exc
    else:
        log.info("loading %s from the hub", dataset)
        try:
            ds = datasets.load_dataset(dataset, split="test")
        except Exception as exc:  # offline, unknown name, no access: all mean "use a file"
            raise EvalError(f"could not load {dataset} (split test) from the Hugging Face hub "
                            f"({exc.__class__.__name__}: {str(exc)[:300]}); without hub access, save the dataset "
                            "on a machine that has it and pass --dataset FILE (.jsonl or .parquet)") from exc
    return [dict(row) for row in ds]


def read_json_rows(path: Path) -> list[dict[str, Any]]:
    """The objects of a .json array or a JSON-lines file; EvalError names the first bad line (or the array's
    error position) and what is wrong with it."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalError(f"dataset file {path} is not UTF-8 text (byte {exc.start})") from None
    if text.lstrip()[:1] == "[":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvalError(f"dataset file {path}: line {exc.lineno} is not valid JSON ({exc.msg}); a .json "
                            "dataset is one array of instance objects") from None
        numbered = list(enumerate(rows, start=1))
        what = "entry"
    else:
        numbered = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                numbered.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise EvalError(f"dataset file {path}: line {number} is not valid JSON ({exc.msg}); a .jsonl "
                                "dataset holds one instance object a line") from None
        what = "line"
    for number, row in numbered:
        if not isinstance(row, dict):
            raise EvalError(f"dataset file {path}: {what} {number} is a JSON {type(row).__name__}, not an "
                            "instance object")
    if not numbered:
        raise EvalError(f"dataset file {path} holds no instances")
    return [row for _, row in numbered]
