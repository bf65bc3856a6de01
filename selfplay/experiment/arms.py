"""The two arms: the same self-play loop (`run_selfplay`) from the same warm start, with the same seeds,
at LR > 0 ("rl") and at LR = 0 ("control").

Each arm runs in stages of `eval_every` iterations (a stage resumes the arm's run directory, as
`selfplay run --resume` does); after each stage its newest checkpoint is evaluated on the held-out tasks.
Evaluations are cached by a hash of the weights' values: the control arm's weights are bit-identical to
the warm start's (tested), so its held-out episodes, seeded per task and sample, are the warm start's and
are played once. Everything lands in `<work>/results.json`, rewritten after every stage.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from selfplay.code_revision import code_revision
from selfplay.config.loader import load_config
from selfplay.experiment.failures import injector_outcome, turn_kinds, turn_table, with_unsent
from selfplay.experiment.heldout import EpisodeRow, EvalSettings, evaluate, row_dict, row_from_dict, summarize
from selfplay.experiment.stats import fisher_exact, mcnemar_exact
from selfplay.learner.checkpoint import latest_checkpoint
from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.rundir import read_trajectories
from selfplay.rollout.policy_factory import resolve_device
from selfplay.store import open_store
from selfplay.task import bug_key, count_bugs

log = logging.getLogger(__name__)

ARMS = (("rl", None), ("control", 0.0))
"""Arm names and their LR (None: the experiment's `lr`)."""


@dataclass(frozen=True)
class ExperimentConfig:
    """One learning experiment."""

    model_dir: str
    """The warm-start checkpoint both arms start from."""
    work: Path
    """Where arms, held-out tasks and results go."""
    repos: tuple[str, ...]
    """Training repos of the loop (disjoint from `heldout`)."""
    heldout: tuple[str, ...]
    """Held-out repos."""
    iterations: int = 4
    """Loop iterations per arm."""
    eval_every: int = 2
    """Evaluate the arm's checkpoint on the held-out tasks every this many iterations (and at the end)."""
    lr: float = 1e-5
    """The RL arm's learning rate (the control's is 0)."""
    seed: int = 0
    """Seeds the loop of both arms and the held-out split."""
    preset: str = "default"
    """The `selfplay run` preset the arms start from."""
    overrides: tuple[str, ...] = ()
    """Further `KEY=VALUE` overrides of the arms' run config (both arms)."""
    eval: EvalSettings = field(default_factory=EvalSettings)
    """Held-out evaluation budgets."""
    arms: tuple[str, ...] = ("rl", "control")
    """Which arms to run."""
    control_learner: bool = True
    """Run the control arm's learner at LR 0 (True), or switch it off (`learner.enabled=false`): its weights
    stay the warm start's either way (AdamW's step and weight decay are both scaled by the LR), and off saves
    the control every update's forward and backward passes, so it costs only its rollouts."""
    train_eval: int = 0
    """Training-stratum tasks per training repo (`stratum.training_tasks`: the loop's own procedural seeds)
    evaluated at every stage with the held-out settings, so the arms' training solve rates can be paired;
    0 evaluates none."""

    def __post_init__(self) -> None:
        shared = sorted(set(self.repos) & set(self.heldout))
        if shared:
            raise ValueError(f"--repos and --heldout share {shared}: a held-out repo must feed no RL step; "
                             "drop it from one of them")
        if self.iterations < 1 or self.eval_every < 1 or self.train_eval < 0:
            raise ValueError("iterations and eval_every must be >= 1, train_eval >= 0")
        bad = [a for a in self.arms if a not in dict(ARMS)]
        if bad or not self.arms:
            raise ValueError(f"unknown arm(s) {bad or 'none named'}; choose from {[a for a, _ in ARMS]}")
        if not (math.isfinite(self.lr) and self.lr >= 0):
            raise ValueError(f"the rl arm's lr must be a finite number >= 0, got {self.lr}")


def check_experiment(cfg: ExperimentConfig) -> None:
    """Raise ValueError (a ConfigError where a key is at fault) naming the first thing the experiment refers
    to that does not resolve: each arm's run config (preset, `--set` keys and values), the repos (training
    and held-out) in its repo list, the warm-start folder, the store and the runs directory. The experiment seeds its held-out tasks (minutes)
    before an arm starts; a bad name found there, or when an arm's loop loads its config, would cost those
    minutes and leave a half-made work directory. Reads files, creates nothing."""
    from repos.errors import RepoError  # lazy: the checks read the repo list
    from selfplay.config.loader import ConfigError
    from selfplay.config.refs import check_references
    from selfplay.experiment.heldout import unlisted_repos

    for arm in cfg.arms:
        check_references(arm_config(cfg, arm, cfg.iterations))
    try:  # the arms' list was read by check_references: it can be read
        problem = unlisted_repos(cfg.heldout, heldout_list(cfg))
    except RepoError as exc:
        raise ConfigError(str(exc), "heldout") from None
    if problem:
        raise ConfigError(problem, "heldout")


def heldout_list(cfg: ExperimentConfig) -> str | None:
    """The repo list that names the held-out repos: the arms' `repo_list` (None: the bundled one), so a user's
    own list holds out its own repos."""
    return arm_config(cfg, cfg.arms[0], cfg.iterations).repo_list


def arm_config(cfg: ExperimentConfig, arm: str, iterations: int) -> Any:
    lr = dict(ARMS)[arm]
    overrides = [f"policy.model_dir={cfg.model_dir}", "warm_start.enabled=false", f"iterations={iterations}",
                 f"seed={cfg.seed}", f"runs_dir={cfg.work / 'arms'}", f"name={arm}", "eval.every=0",
                 f"repos=[{', '.join(cfg.repos)}]", f"learner.engine.lr={cfg.lr if lr is None else lr}",
                 # the arms start from `model_dir` (no warm start is built); the split is stated for the checks
                 f"warm_start.config.repos=[{', '.join(cfg.repos)}]",
                 f"warm_start.config.heldout_repos=[{', '.join(cfg.heldout)}]",
                 *cfg.overrides, *(["learner.enabled=false"] if arm == "control" and not cfg.control_learner else [])]
    config = load_config(cfg.preset, overrides)
    leaked = sorted(set(config.repos) & set(cfg.heldout))
    if leaked:
        raise ValueError(f"the arms' config trains on held-out repos {leaked}; remove them from the overrides")
    return config


def weights_hash(model_dir: str | Path) -> str:
    """sha256 over the weights' names and values (not the file bytes, whose metadata may differ)."""
    from safetensors import safe_open  # lazy: the train extra (safetensors, torch)

    h = hashlib.sha256()
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            for name in sorted(f.keys()):
                h.update(name.encode())
                h.update(f.get_tensor(name).contiguous().view(-1).numpy().tobytes())
    return h.hexdigest()[:16]


def stages(iterations: int, every: int) -> list[int]:
    """Iteration counts after which an arm is evaluated: every `every`, and the last."""
    return sorted({*range(every, iterations + 1, every), iterations})


def training_curve(metrics_path: Path) -> list[dict[str, Any]]:
    """Per-iteration training figures of an arm, from its metrics.jsonl."""
    keys = ("solve_rate/all", "injector/validity", "reward/solver_mean", "reward/injector_mean",
            "rollout/solver_rounds", "rollout/signal_groups", "batch/solver/samples_trained",
            "batch/injector/samples_trained", "batch/solver/groups_with_variance", "batch/solver/groups_dropped",
            "batch/kept_groups", "learner/loss", "learner/grad_norm", "learner/steps", "learner/clipfrac",
            "learner/skipped_empty_batch", "policy_version", "iteration/wall_s")
    out = []
    if not metrics_path.is_file():
        return out
    for line in metrics_path.read_text().splitlines():
        rec = json.loads(line)
        out.append({"iteration": rec["iteration"], **{k: rec[k] for k in keys if k in rec}})
    return out


def arm_turns(run_dir: Path) -> dict[str, Any]:
    """Turn-by-turn actions of an arm's solver episodes (from its trajectory files), with their outcomes."""
    kinds, solved, episodes = [], 0, 0
    for path in sorted((run_dir / "trajectories").glob("*-solver.jsonl.gz")):
        for t in read_trajectories(path):
            if t.metadata.get("infra_failure"):
                continue
            episodes += 1
            solved += bool((t.metadata.get("grade") or {}).get("resolved"))
            kinds.append(turn_kinds(with_unsent(t.messages, t.metadata)))
    return {"episodes": episodes, "solved": solved, "turns": turn_table(kinds),
            "submitted": sum(bool(k) and k[-1] == "submit" for k in kinds)}


def arm_injectors(run_dir: Path) -> dict[str, Any]:
    """An arm's injector episodes (from its trajectory files): valid bugs per iteration, how many of them are
    distinct (a policy can earn the valid reward again with a bug it wrote before, verbatim or reworded:
    `distinct_bugs`), one outcome label per episode (`failures.injector_outcome`) and their actions turn
    by turn."""
    kinds: list[tuple[str, ...]] = []
    outcomes: dict[str, int] = {}
    bugs: list[str] = []  # the task id of each valid bug, in order: a repeated bug has the same id
    by_iteration: dict[str, list[int]] = {}  # iteration -> [valid, episodes]
    # finished iterations only: `itNNNNN-injector.pending.gz` holds an iteration's injector episodes until
    # their rewards are known, so a stopped arm's unfinished iteration is left out
    for path in sorted((run_dir / "trajectories").glob("*-injector.jsonl.gz")):
        for t in read_trajectories(path):
            label = injector_outcome(t.termination, t.metadata.get("validation"),
                                     bool(t.metadata.get("infra_failure")))
            outcomes[label] = outcomes.get(label, 0) + 1
            if label == "infra":
                continue
            it = by_iteration.setdefault(str(t.metadata.get("iteration", "?")), [0, 0])
            it[0] += label == "valid"
            it[1] += 1
            if label == "valid":
                bugs.append(str(t.metadata.get("task_id")))
            kinds.append(turn_kinds(with_unsent(t.messages, t.metadata)))
    return {"episodes": sum(n for _, n in by_iteration.values()), "valid": sum(v for v, _ in by_iteration.values()),
            "distinct_valid": distinct_bugs(run_dir / "store.db", bugs), "bugs": bugs, "by_iteration": by_iteration,
            "outcomes": outcomes, "turns": turn_table(kinds)}


def distinct_bugs(store_db: Path, task_ids: Sequence[str]) -> int:
    """How many different bugs `task_ids` are: one id is one bug, and so are tasks that are one bug in other
    words (`selfplay.task.keys_match`; read from the arm's store, when it has one)."""
    ids = list(dict.fromkeys(task_ids))
    if len(ids) < 2 or not store_db.is_file():
        return len(ids)
    with open_store(f"sqlite:///{store_db}", create=False, upgrade=False) as store:
        tasks = store.get_tasks(ids)
    return count_bugs([bug_key(t) for t in tasks]) + len(ids) - len(tasks)  # an id the store lacks: its own bug


def arm_figures(run_dir: Path) -> dict[str, Any]:
    """What an arm's run directory says of it: its training curve, its solver turns and its injector episodes."""
    return {"curve": training_curve(run_dir / "metrics.jsonl"), "solver_turns": arm_turns(run_dir),
            "injectors": arm_injectors(run_dir)}


def injector_comparison(results: dict[str, Any], after: int = 1) -> dict[str, Any] | None:
    """The rl arm's valid-bug rate from iteration `after` on (episodes sampled after its first update)
    against the control's over all its iterations (the same policy throughout), and distinct valid bugs per
    episode over each whole arm: Fisher's exact tests. Injector
    episodes are not paired (each draws its own repo and bug), so no paired test applies."""
    arms = results.get("arms", {})
    rl, control = (arms.get(a, {}).get("injectors") for a in ("rl", "control"))
    if not rl or not control:
        return None
    k1 = sum(v for it, (v, _) in rl["by_iteration"].items() if it.isdigit() and int(it) >= after)
    n1 = sum(n for it, (_, n) in rl["by_iteration"].items() if it.isdigit() and int(it) >= after)
    k2, n2 = control["valid"], control["episodes"]
    # the same test on distinct bugs over each whole arm: a policy that writes one valid bug again and again
    # raises the first rate and not this one
    d1, d2 = rl.get("distinct_valid", 0), control.get("distinct_valid", 0)
    distinct = fisher_exact(d1, rl["episodes"], d2, n2)
    return {"rl_valid": k1, "rl_episodes": n1, "control_valid": k2, "control_episodes": n2, "from_iteration": after,
            **fisher_exact(k1, n1, k2, n2), "rl_distinct": d1, "rl_all_episodes": rl["episodes"],
            "control_distinct": d2, "distinct_p_greater": distinct["p_greater"]}


def saved_results(work: Path, resume: bool) -> dict[str, Any] | None:
    """What `work`/results.json holds for an experiment that resumes it (None: no such file). It is the
    experiment's only record of its evaluations, so a start without `resume` refuses to overwrite it, and
    a file that does not parse is refused rather than started over (ValueError naming it, each time)."""
    path = work / "results.json"
    if not path.is_file():
        return None
    if not resume:
        raise ValueError(f"{work} already holds an experiment ({path}); continue it with --resume, or give a "
                         "new --work (nothing was overwritten)")
    try:
        saved = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path} cannot be read as an experiment's results ({e}); restore it, or start over "
                         "in a new --work") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("evals"), dict):
        raise ValueError(f"{path} holds no experiment's results (no 'evals'); name the --work of one")
    return saved


class Experiment:
    """Runs the arms and their evaluations; `results` is what results.json holds."""

    def __init__(self, cfg: ExperimentConfig, tasks: Sequence[tuple[Any, Any]],
                 run: Callable[..., Path] | None = None, train_tasks: Sequence[tuple[Any, Any]] = (),
                 resume: bool = False) -> None:
        """`resume`: continue the experiment that `cfg.work`/results.json holds (stopped, say, by a killed
        process) instead of starting over: evaluations it saved are kept, each arm's loop resumes from its
        run directory (`selfplay run --resume`), and only what is missing is played."""
        self.cfg, self.tasks, self.train_tasks = cfg, list(tasks), list(train_tasks)
        self.run = run or run_selfplay
        self.path = cfg.work / "results.json"
        config = asdict(cfg)
        # where the evaluations sample is the machine's, not the experiment's: one stopped on a CPU resumes
        # on a GPU (and one saved before the setting existed resumes at all); each evaluation records its own
        config["eval"].pop("device")
        self.results: dict[str, Any] = {
            "config": {k: str(v) for k, v in config.items()},
            "tasks": [t.task_id for _, t in self.tasks], "evals": {}, "arms": {}}
        if self.train_tasks:
            self.results.update(train_tasks=[t.task_id for _, t in self.train_tasks], train_evals={})
        # (weights hash, "evals" or "train_evals") -> rows: equal weights play equal seeded episodes
        self.by_weights: dict[tuple[str, str], list[dict[str, Any]]] = {}
        saved = saved_results(cfg.work, resume)
        self.resumed = saved is not None
        if saved is not None:
            self._adopt(saved)
        elif resume:
            log.info("%s does not exist: nothing to resume, the experiment starts", self.path)

    def _adopt(self, saved: dict[str, Any]) -> None:
        """Take over a stopped experiment's results, after checking that they are this experiment's."""
        mine = self.results
        differ = sorted(k for k in mine["config"] if saved.get("config", {}).get(k) != mine["config"][k])
        differ += [k for k in ("tasks", "train_tasks") if saved.get(k) != mine.get(k)]
        if differ:
            raise ValueError(f"{self.path} holds another experiment: its {', '.join(differ)} differ from these "
                             "options; resume with the options it was started with, or give a new --work")
        self.results = saved
        for kind in ("evals", "train_evals"):
            for entry in saved.get(kind, {}).values():
                self.by_weights.setdefault((entry["weights"], kind), entry["rows"])
        log.info("resuming %s: %s evaluated, arm(s) %s started", self.path, sorted(saved["evals"]),
                 sorted(saved["arms"]))

    def save(self) -> None:
        self.cfg.work.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        self.results["code"] = code_revision()  # of the process that wrote it last (a resume may run later code)
        tmp.write_text(json.dumps(self.results, indent=1) + "\n")
        tmp.replace(self.path)

    def evaluate(self, label: str, model_dir: str | Path) -> dict[str, Any]:
        """The checkpoint on the held-out tasks and, when there are any, the training-stratum tasks (an
        evaluation a resumed experiment saved before it stopped is kept)."""
        digest = ""
        for kind, tasks in (("evals", self.tasks), ("train_evals", self.train_tasks)):
            if not tasks or label in self.results[kind]:
                continue
            digest = digest or weights_hash(model_dir)
            self._evaluate(kind, tasks, label, model_dir, digest)
        return self.results["evals"][label]

    def _evaluated(self, label: str) -> bool:
        return label in self.results["evals"] and (not self.train_tasks or label in self.results["train_evals"])

    def _evaluate(self, kind: str, tasks: Sequence[tuple[Any, Any]], label: str, model_dir: str | Path,
                  digest: str) -> dict[str, Any]:
        cached = (digest, kind) in self.by_weights
        t0 = time.monotonic()
        if not cached:
            rows: list[EpisodeRow] = evaluate(str(model_dir), tasks, self.cfg.eval)
            self.by_weights[digest, kind] = [row_dict(r) for r in rows]
        rows_json = self.by_weights[digest, kind]
        summary = summarize([row_from_dict(r) for r in rows_json])
        entry = {"model": str(model_dir), "weights": digest, "reused": cached,
                 "device": resolve_device(self.cfg.eval.device),
                 "wall_s": round(time.monotonic() - t0, 1), "summary": summary, "rows": rows_json}
        self.results[kind][label] = entry
        self.save()
        log.info("%s %s (%s%s): %s", "held-out" if kind == "evals" else "training stratum", label, digest,
                 ", same weights as before" if cached else "",
                 {k: summary.get(k) for k in ("greedy", "pass_at_k", "sample")})
        return entry

    def run_arm(self, arm: str) -> None:
        t0 = time.monotonic()
        info: dict[str, Any] = self.results["arms"].setdefault(arm, {})
        path = Path(info["run_dir"]) if info.get("run_dir") else self._stopped_run(arm)
        # the arm's time, its evaluations included; a resumed arm adds to what its earlier process saved the
        # iterations that process finished after its last save (their own `iteration/wall_s`, kept in the run's
        # metrics.jsonl); the iteration it was killed in and its model loading are not counted
        before = float(info.get("wall_s", 0.0))
        if path is not None:
            saved = {r["iteration"] for r in info.get("curve", ())}
            before += sum(float(r.get("iteration/wall_s", 0.0)) for r in training_curve(path / "metrics.jsonl")
                          if r["iteration"] not in saved)
        for stop in stages(self.cfg.iterations, self.cfg.eval_every):
            if self._evaluated(f"{arm}@{stop}"):
                continue  # saved before a resume: trained and evaluated
            path = self.run(arm_config(self.cfg, arm, stop), resume=path)
            info.update(run_dir=str(path), wall_s=round(before + time.monotonic() - t0, 1),
                        **arm_figures(path))
            self.save()
            ckpt = latest_checkpoint(path / "checkpoints")
            self.evaluate(f"{arm}@{stop}", ckpt if ckpt is not None else self.cfg.model_dir)
            info["wall_s"] = round(before + time.monotonic() - t0, 1)  # with the stage's evaluation
        info["train_wall_s"] = round(float(info.get("wall_s", 0.0)) - sum(
            e["wall_s"] for kind in ("evals", "train_evals") for k, e in self.results.get(kind, {}).items()
            if k.startswith(f"{arm}@")), 1)
        self.save()

    def _stopped_run(self, arm: str) -> Path | None:
        """The run directory of an arm whose process stopped before its first stage was saved: resumed
        rather than started again, when this experiment resumes and the directory is unambiguous."""
        if not self.resumed:
            return None
        found = sorted(p for p in (self.cfg.work / "arms").glob(f"{arm}-*") if (p / "config.yaml").is_file())
        if len(found) > 1:
            raise ValueError(f"arm {arm} has {len(found)} run directories under {self.cfg.work / 'arms'} and "
                             f"{self.path} names none: {[p.name for p in found]}; move the ones not to resume away")
        if not found:
            return None
        from selfplay.orchestration.resume import check_resumable

        check_resumable(found[0])
        log.info("arm %s: resuming its run %s", arm, found[0])
        return found[0]

    def execute(self) -> dict[str, Any]:
        self.evaluate("start", self.cfg.model_dir)
        for arm in self.cfg.arms:
            self.run_arm(arm)
        self.results["paired"] = paired(self.results, self.cfg.iterations)
        self.results["injector_comparison"] = injector_comparison(self.results)
        self.save()
        return self.results


MERGE_KEYS = ("model_dir", "repos", "heldout", "iterations", "eval_every", "seed", "preset", "eval", "train_eval")
"""Settings two experiments must share for their arms to be merged into one (the overrides are compared apart:
`learner.enabled=false` is how a control arm runs without its learner, which `control_learner` says; such a
control may differ from the rl arm in `learner.*` overrides, which it never read)."""


def saved_overrides(config: Mapping[str, Any]) -> list[str]:
    """The saved config's overrides (a tuple's repr) as a list."""
    return list(ast.literal_eval(config.get("overrides") or "()"))


def merge_results(results: dict[str, Any], other: dict[str, Any]) -> None:
    """Add `other`'s arms (and their held-out evaluations) to `results`: two arms run as two processes, each
    with `--arms`, make one experiment. Both must have evaluated the same warm start on the same tasks."""
    mine, theirs = results["evals"].get("start"), other["evals"].get("start")
    if not mine or not theirs or mine["weights"] != theirs["weights"]:
        raise ValueError("its start is not this experiment's (a different warm start, or no "
                         "start evaluation); merge only arms run from the same --model")
    if sorted(r["task"] for r in mine["rows"]) != sorted(r["task"] for r in theirs["rows"]):
        raise ValueError("its held-out tasks differ; run both with the same --heldout, -n and --seed")
    differ = [k for k in MERGE_KEYS if results["config"].get(k) != other["config"].get(k)]
    if differ:
        raise ValueError(f"its settings differ in {differ}; both arms must run the same loop")
    mine_o, theirs_o = (set(saved_overrides(r["config"])) - {"learner.enabled=false"} for r in (results, other))
    if mine_o != theirs_o:
        differ = sorted(mine_o ^ theirs_o)
        control, learner = (results, other) if _learner_free_control(results) else (other, results)
        if not (_learner_free_control(control) and all(o.startswith("learner.") for o in differ)):
            raise ValueError(f"its overrides differ: {differ}; both arms must run the same loop (only a control "
                             "run without its learner may differ from the rl arm, in learner.* settings only)")
    clash = sorted(a for a in set(results["arms"]) & set(other["arms"])
                   if results["arms"][a].get("run_dir") != other["arms"][a].get("run_dir"))  # merged before: fine
    if clash:
        raise ValueError(f"both hold arm(s) {clash}; run each arm in one --work only")
    if mine_o != theirs_o:
        # the control never built a learner, so settings read only by one cannot have touched its loop; the
        # merged experiment is the rl arm's, and says which of its overrides the control did not carry
        results["config"]["overrides"] = learner["config"]["overrides"]
        results["control_overrides_differ"] = differ
        log.info("merged a control run without its learner whose learner.* overrides differ: %s", differ)
    results["arms"].update(other["arms"])
    for label, entry in other["evals"].items():
        results["evals"].setdefault(label, entry)


def _learner_free_control(results: Mapping[str, Any]) -> bool:
    """Whether `results` holds a control arm only, run without its learner (`control_learner` off)."""
    return set(results["arms"]) == {"control"} and str(results["config"].get("control_learner")) == "False"


def paired(results: dict[str, Any], iterations: int) -> dict[str, Any]:
    """RL vs control at the end, exact McNemar: per held-out task (greedy, pass@k) and, when the training
    stratum was evaluated, per training task greedy and per sampled episode (the two arms' episodes of a
    task and sample index share their seed, so they pair)."""
    out = _paired_tasks(results["evals"], iterations, "")
    if results.get("train_evals"):
        out.update(_paired_tasks(results["train_evals"], iterations, "train_"))
        a, b = results["train_evals"].get(f"rl@{iterations}"), results["train_evals"].get(f"control@{iterations}")
        if a is not None and b is not None:
            ea, eb = _by_episode(a, "sample"), _by_episode(b, "sample")
            keys = sorted(set(ea) & set(eb))
            if keys:
                out["train_episodes"] = mcnemar_exact([ea[k] for k in keys], [eb[k] for k in keys])
    return out


def _by_episode(entry: dict[str, Any], mode: str) -> dict[tuple[str, int], bool]:
    return {(r["task"], r["sample"]): r["reward"] > 0 for r in entry["rows"] if r["mode"] == mode}


def _paired_tasks(evals: dict[str, Any], iterations: int, prefix: str) -> dict[str, Any]:
    a, b = evals.get(f"rl@{iterations}"), evals.get(f"control@{iterations}")
    if a is None or b is None:
        return {}
    out = {}
    for mode in ("greedy", "sample"):
        def solved(entry: dict[str, Any], mode: str = mode) -> dict[str, bool]:
            by: dict[str, bool] = {}
            for r in entry["rows"]:
                if r["mode"] == mode:
                    by[r["task"]] = by.get(r["task"], False) or r["reward"] > 0
            return by
        sa, sb = solved(a), solved(b)
        tasks = sorted(set(sa) & set(sb))
        if tasks:
            out[prefix + ("greedy" if mode == "greedy" else "pass_at_k")] = mcnemar_exact(
                [sa[t] for t in tasks], [sb[t] for t in tasks])
    return out
