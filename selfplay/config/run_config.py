"""`RunConfig`: the one tree of settings of a self-play run (`selfplay run`).

Every default lives here, once, with a docstring; YAML presets (`selfplay/config/presets/`) and
dotted command-line overrides (`learner.engine.lr=3e-6`) only change values (`loader.py`). Nested
component configs are the components' own dataclasses (validation, grading, rewards, sampling, the
learner's engine and batch), so a field is never declared twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Literal

from agent_scaffold.policies.base_url import base_url_problem
from selfplay.config.bounds import check_bounds
from selfplay.demos.warm_start_config import WarmStartConfig
from selfplay.higher_order import HigherOrderConfig
from selfplay.judge.grader import GraderConfig
from selfplay.judge.rewards import RewardConfig
from selfplay.learner.batch import BatchConfig
from selfplay.learner.config import EngineConfig
from selfplay.learner.minibatches import MinibatchSplit
from selfplay.store.sampling import SamplingConfig
from selfplay.validation.config import ValidationConfig

Backend = Literal["hf", "openai", "vllm", "scripted"]
Executor = Literal["local", "ray"]
LoopMode = Literal["sync", "async"]
RepoSampling = Literal["round_robin", "weighted"]
ShareBy = Literal["stride", "rotate"]
SyncMode = Literal["memory", "disk"]


@dataclass(frozen=True)
class PolicyConfig:
    """Which model plays both roles, and how rollouts reach it."""

    backend: Backend = "hf"
    """hf (local checkpoint, in process), openai or vllm (HTTP endpoints), scripted (tests)."""
    model_dir: str | None = None
    """hf: checkpoint to start from. None: the warm-start checkpoint when `warm_start.enabled`, else the
    embedded SmolLM2-135M-Instruct. The learner trains the same weights. openai/vllm: the served checkpoint,
    whose tokenizer renders the prompts (None: the served model's name when it is a folder or hub id, else
    the embedded model's tokenizer, with a warning)."""
    endpoints: tuple[str, ...] = ()
    """openai/vllm: base URLs of OpenAI-compatible servers, load-balanced round robin."""
    model_name: str | None = None
    """openai/vllm: the served model name."""
    device: str = "auto"
    """hf: torch device for rollouts (auto: cuda when available, else cpu)."""
    max_batch: int = 8
    """hf: prompts sampled together at most (continuous batching: a request joins the running batch at the
    next decode step, a finished row leaves at once)."""
    batch_wait_s: float = 0.05
    """Gathered batching only (in-process policies without continuous batching): how long the first request
    of a batch waits for others; the hf backend batches continuously and never waits."""
    kv_cache_mb: int = 1024
    """hf: memory cap (MiB) of the KV caches kept between an episode's turns, so a turn prefills only its new
    tokens (least recently used first out; dropped when the weights change); 0 turns the reuse off."""
    cpu_threads: int = 0
    """hf on CPU: torch threads per forward of the sampler (0: torch's count, i.e. the cores)."""
    adapt_threads: bool = False
    """hf on CPU: before each forward, lower the sampler's torch threads to the cores that other processes
    (the sandboxes' test runs) left free over the last 0.5 s (`ThreadGovernor`). A step split over a core
    that a busy loop holds took 3x longer on the 2-core box, but in a default run the other processes kept
    a core busy in only 11% of half-second windows, and one run with it on sampled no faster
    (docs/benchmarks.md), so it is off."""
    fast_decode: bool = True
    """hf: decode Llama-architecture models through `LlamaStep` (the decoder written out over the batch's
    KV buffers, 1.05-1.19x faster a step on CPU, logits equal to float rounding); other models, or false,
    decode through the HF forward."""
    decode_engine: str = "torch"
    """hf: what runs a decode step of a model `fast_decode` writes out: "torch" (`LlamaStep`) or
    "onnxruntime" (`OrtStep`: the same step as one ONNX Runtime graph, 1.2-1.8x as fast a step at 1-16
    rows on the 2-core box and 1.18-1.25x the rollout tokens/s, logprobs equal to float rounding; CPU
    float32 only and one position a row, so lookup_tokens must be 0; rebuilt from the weights in every
    sync, 3.4-3.8 s). Needs the `ort` extra: pip install -e '.[ort]'. Not the default: the default's
    lookup drafts gain as much at T = 0.5 and are torch-only (docs/benchmarks.md)."""
    lookup_tokens: int = 0
    """hf: speculative decoding with prompt-lookup drafts: a step feeds each row's sampled token and up to
    this many tokens that followed the latest earlier occurrence of its last 3, 2 or 1 tokens, and keeps
    the drafted tokens its verification accepts (the sampled distribution is unchanged;
    agent_scaffold/policies/lookup.py). 0 is off. Llama models decoding through `LlamaStep` only."""
    lookup_rows: int = 24
    """hf: the most positions a lookup step feeds, all rows together: at B rows, lookup_rows - B drafted
    positions, given one at a time to the row whose next drafted token is likeliest kept (its keep rate so
    far); a row's product rows are only the positions it feeds. So a batch of B >= lookup_rows drafts
    nothing."""
    gil_switch_ms: float = 0.5
    """hf: Python's GIL switch interval (ms) while the in-process sampler runs; its decode thread re-takes the
    GIL after every torch op, and at Python's default (5 ms) the episode threads keep it waiting. 0 leaves
    Python's default."""
    scripted_actions: str | None = None
    """scripted: a JSON file, {"injector": [[action, ...], ...], "solver": [[action, ...], ...]}: the
    action lists are used in turn, one per episode of that role."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"batch_wait_s": 0})
        if not re.fullmatch(r"auto|cpu|mps|(cuda|xpu)(:\d+)?", self.device):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N (or mps, xpu), got {self.device!r}")


@dataclass(frozen=True)
class LimitsOverride:
    """Episode budgets that replace the role's defaults from prompts/roles.toml; None keeps the default.
    `max_context_tokens` is always clamped to the model's context window."""

    max_turns: int | None = None
    """Assistant turns per episode."""
    max_new_tokens: int | None = None
    """Sampled tokens per turn."""
    max_context_tokens: int | None = None
    """Context budget in tokens."""
    command_timeout: float | None = None
    """Seconds per bash command."""
    wall_clock: float | None = None
    """Seconds per episode."""
    max_observation_chars: int | None = None
    """Longest observation in characters (longer command output is cut in its middle; a view without END
    shows a page that fits, `editor.page_last`). Keep it at the demonstrations' when a warm start's
    policy plays (1,500 for the solver, 1,200 for the injector): at the role's default of 8,000 one
    observation can fill a 2,048-token context."""
    refused_submits: int | None = None
    """Incomplete submits answered with what is missing before a submit ends the episode as it is
    (`EpisodeLimits.refused_submits`). For the injector, with `refuse_unreadable_specs`, a complete artifact
    whose spec the solver could not read is refused the same way, with the reason validation would give."""
    max_repeats: int | None = None
    """Consecutive repeats of the previous action, answered with the same observation, before the episode
    ends with `repeated` (`EpisodeLimits.max_repeats`). None keeps the role's default, which never ends
    an episode for repeating; the `default` preset sets 2 for both roles."""
    submit_on_limit: bool | None = None
    """Grade the sandbox's state when an episode runs out of turns, context or time
    (`EpisodeLimits.submit_on_limit`). The episode still ends truncated, so the learner's
    `learner.batch.overlong` handling applies to it: its default `negative` mode trains it at -1 whatever
    its grade and `mask` drops it, so pair this with another mode (or a `truncated_terminations` without
    the ending) for the grade to reach the advantages."""

    def __post_init__(self) -> None:
        # refused when the config loads, by the checks of the limits these become, not per episode
        from agent_scaffold.roles import EpisodeLimits

        EpisodeLimits().overridden(**{f.name: getattr(self, f.name) for f in fields(self)})


@dataclass(frozen=True)
class RolloutConfig:
    """Episodes per iteration and where they run."""

    injector_episodes: int = 2
    """Injector episodes per iteration."""
    solver_tasks: int = 2
    """Tasks drawn per iteration; each gets `reward.group_size` solver attempts."""
    redraw_rounds: int = 0
    """DAPO dynamic sampling at the rollout level: up to this many extra solver rounds per iteration, each
    on `solver_tasks` newly drawn tasks (G attempts each), played while fewer than `min_signal_groups`
    of the iteration's solver groups have reward variance. 0 only filters (no redraw)."""
    min_signal_groups: int = 1
    """Solver groups with reward variance an iteration aims for before it stops redrawing."""
    redraw_ahead: bool = False
    """Draw the `redraw_rounds` rounds' tasks with the first round's and play them all at once (DAPO's
    over-sampling, as verl's generation batch does) instead of only while groups lack variance: more
    episodes sample together and no round waits for the previous one's slowest episode, at the cost of
    playing the extra rounds also when the first already had `min_signal_groups`."""
    overlap_injectors: bool = False
    """Play the drawn solver tasks beside the iteration's injector episodes instead of after them, so the
    few long injector episodes no longer sample alone (a decode batch of 2 in the `default` preset). The
    iteration's valid bugs then get their G attempts in a round of their own once the injectors end, on top
    of the `solver_tasks` drawn (sequentially they take drawn slots). A resumed iteration plays sequentially."""
    strategies: tuple[str, ...] = ("removal", "history")
    """Injection strategies drawn at random per injector episode (SSR: removal + history). Also "direct"
    (a short prompt: break any code, CPU warm starts) and "kit" (direct, with the artifact kit writing the
    test files, the bug diff and the weakening, and listing the operators' changes to a function:
    `agent_scaffold.artifact_kit`, the default preset's)."""
    kit_store_view: bool = False
    """Tell `kit` injector episodes which lines the store's bugs of their repo already change (as the
    iteration starts), so that the kit's `mutate NAME` lists no change that touches one of them (any line
    from its first to its last, as the store's duplicate rule compares them): a listed change is then not
    a bug the store holds, though episodes of one iteration can still write the same new one. The store's duplicate rule still judges every artifact."""
    kit_next_function: bool = False
    """With `kit_store_view`: when every change of the function an episode names is on such a line, the
    kit's `mutate NAME` lists (and `mutate NAME K` applies) the changes of the next function of the file
    that has one elsewhere, instead of refusing; a function with no change at all moves on the same way.
    Without the view it does nothing."""
    kit_spread: bool = False
    """With `kit_next_function`: the n `kit` injector episodes of one repo in one iteration, which all see the
    same store, each get a share (k, n) of every function's fresh changes (`artifact_kit.KitView.share`,
    listed as `kit_share_by` says), so that they do not all write the iteration's one new bug. Without the
    move-on it does nothing."""
    kit_share_by: ShareBy = "stride"
    """With `kit_spread`: "stride" lists episode k every n-th fresh change from the k-th (disjoint listings,
    each about 1/n as long); "rotate" lists them all, starting k/n of the way in and wrapping round, so the
    same `mutate NAME K` applies a different change in each episode while each listing keeps its length."""
    solver_localize: bool = False
    """Give solver episodes the `localize` tool (`agent_scaffold.localize`: spectrum-based fault localization
    over the spec's tests), as a `locate: localize` warm start's demonstrations had it."""
    refuse_unreadable_specs: bool = True
    """An injector's artifact whose spec (its reversed test_weaken.diff) makes the solver's prompt too long
    for a first turn (less than the solver's `min_turn_tokens` left of its context, clamped to the model's
    window: `agent_scaffold.agent.first_turn_room`) is invalid, before any suite runs: every solver attempt
    on it would end `context_exhausted` before sampling a token, so it is no bug a solver can be asked to
    fix. False validates it, and its task is scored as unsolved (the injector's reward is then -alpha, not
    the -1 of an invalid bug). With `injector_limits.refused_submits`, the injector is told so at its submit
    and may weaken again before the episode ends. A stored task with such a spec (a procedural seed, a task
    from before the rule, or from a run with a larger solver context or another model) is retired when
    drawn, unplayed, with the reason (`selfplay tasks show`; summary.json's `unreadable_tasks`)."""
    temperature: float = 1.0
    """Sampling temperature of every training episode (top-p, top-k and min-p stay off). The learner
    computes its logprobs at the same temperature (`learner.engine.temperature` follows it), so the policy
    trained is the one sampled. Below 1 trades diversity for actions a weak warm start gets right."""
    repo_sampling: RepoSampling = "round_robin"
    """How repos are picked per episode: round robin over `repos`, or at random by `repo_weights`."""
    repo_weights: dict[str, float] = field(default_factory=dict)
    """weighted: relative weight per repo name (missing repos weigh 1)."""
    workers: int = 2
    """Episodes in flight at once (threads locally, actors on Ray)."""
    sandboxes_per_repo: int = 2
    """Warm sandboxes per repo image (episodes, validation and grading share them)."""
    injector_limits: LimitsOverride = field(default_factory=LimitsOverride)
    """Budget overrides of injector episodes."""
    solver_limits: LimitsOverride = field(default_factory=LimitsOverride)
    """Budget overrides of solver episodes."""
    episode_retries: int = 1
    """Times an episode lost to an infrastructure failure (dead sandbox, lost worker) is redone."""
    executor: Executor = "local"
    """local threads, or Ray actors (needs the `dist` extra)."""
    ray_address: str | None = None
    """Ray cluster address (executor ray; under the local executor it is unused, with a warning); None starts
    a local Ray."""
    docker_host: str | None = None
    """DOCKER_HOST for the workers' sandboxes; None uses the node's engine."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"injector_episodes": 0, "solver_tasks": 0, "episode_retries": 0})


@dataclass(frozen=True)
class CurriculumConfig:
    """Which tasks the solver gets."""

    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Band, retirement and caps of drawing stored tasks."""
    fresh_first: bool = True
    """Tasks validated in this iteration are attempted before stored ones."""
    seed_per_repo: int = 2
    """Procedural seeds validated per repo while the store is thin."""
    min_active_tasks: int = 2
    """The store counts as thin while it holds fewer active tasks than this."""
    demonstrated_tasks: bool = False
    """Start the store with the warm start's demonstrated solver tasks (those its expert repaired in a kept
    demonstration), before any procedural seed: an easier training stratum, since the policy has seen their
    repairs. Only when the policy starts from that warm start (no `policy.model_dir`), or from the one whose
    store `demonstrated_store` names. Held-out measurement never uses it."""
    demonstrated_store: str = ""
    """The store.db of the warm start whose demonstrated tasks `demonstrated_tasks` imports, for a run that
    starts from its checkpoint through `policy.model_dir` (the learning experiment's arms); only tasks of
    this run's `repos` are imported. Empty: the store of `warm_start.config`'s warm start."""
    higher_order: HigherOrderConfig = field(default_factory=HigherOrderConfig)
    """Which failed attempts become higher-order tasks."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"seed_per_repo": 0, "min_active_tasks": 0})


@dataclass(frozen=True)
class LearnerConfig:
    """The policy update."""

    enabled: bool = True
    """False runs rollouts and grading only (no torch needed)."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Optimizer, ZeRO and loss settings (the model is `policy.model_dir`'s)."""
    batch: BatchConfig = field(default_factory=BatchConfig)
    """Advantages, staleness, overlong handling and dynamic sampling."""
    mode: LoopMode = "sync"
    """sync: generate, then train (Nebius); async: rollouts continue while the learner trains, with
    staleness bounded by `batch.max_staleness`."""
    weight_sync: SyncMode = "memory"
    """In-process policies: copy the state dict (memory) or reload the saved checkpoint (disk). HTTP and
    vLLM endpoints always reload from disk."""
    steps_per_update: int = 1
    """Optimizer steps per learner update: the iteration's batch is split (seeded, as `minibatches` says)
    into this many mini-batches, one step each, every ratio taken against the policy that sampled (Nebius:
    2-8 steps per iteration). More steps than samples gives one step per sample."""
    minibatches: MinibatchSplit = "group"
    """How an update's samples are split into its steps' mini-batches (`selfplay.learner.minibatches`):
    group keeps each group's samples in one mini-batch (verl's contiguous mini-batches; a group's shared
    prompt then runs once an update), balancing the mini-batches' tokens, and splits samples as `sample`
    does when there are fewer groups than steps; sample shuffles the samples and deals them round-robin
    (before 2026-12-07 the only split: the learning experiments recorded before then used it)."""
    measure_shift: bool = False
    """After each update, one more forward pass over its samples (and one before, when TIS has not made
    it): `learner/shift_kl`, the KL per trained token between the policy before the update's first step
    and after its last, and `learner/shift_dlogp_pos` / `_neg`, the mean logprob change of the tokens of
    samples with positive / negative advantage (selfplay.learner.update_shift). The loss's `approx_kl`
    reads 0 with one step an update; this says how far the update moved the policy, and which way."""
    checkpoint_every: int = 1
    """Save a checkpoint every this many learner updates (1 or more)."""
    keep_checkpoints: int = 2
    """Checkpoints kept (older ones are deleted; the newest is always kept). Only the newest keeps the
    optimizer state a resume needs; the others keep their weights."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"checkpoint_every": 1, "keep_checkpoints": 0})


@dataclass(frozen=True)
class EvalSettings:
    """Periodic SWE-bench-format evaluation of checkpoints."""

    every: int = 0
    """Evaluate every this many checkpoints; 0 is off."""
    dataset: str | None = None
    """A datasets hub name or a SWE-bench-format JSON/JSONL/parquet file (e.g. one written by `selfplay
    tasks export --format swebench` or `selfplay eval offline-dataset`); None is SWE-bench Verified."""
    split: Literal["verified", "verified-50"] = "verified-50"
    """verified (every instance of the dataset) or verified-50 (the fixed 50-instance subset)."""
    runs: int = 1
    """Attempts per instance."""
    max_turns: int | None = None
    """Turns per evaluation episode; None is the run's `rollout.solver_limits` (then the role's default)."""
    max_new_tokens: int | None = None
    """Tokens per turn; None is the run's `rollout.solver_limits` (then the role's default)."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"every": 0, "runs": 1, "max_turns": 1, "max_new_tokens": 1})


@dataclass(frozen=True)
class WarmStartSettings:
    """The warm-start checkpoint the default run starts from."""

    enabled: bool = True
    """Start hf runs without `policy.model_dir` from the cached warm-start checkpoint (built on first use)."""
    config: WarmStartConfig = field(default_factory=WarmStartConfig)
    """Its demonstrations and SFT recipe (the cache key)."""


@dataclass(frozen=True)
class RetentionConfig:
    """Bounded disk over long runs."""

    keep_trajectory_files: int = 200
    """Newest compressed trajectory files kept under trajectories/ (0 keeps all)."""
    retire_every: int = 10
    """Run the store's retirement sweep every this many iterations (0 is off)."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"keep_trajectory_files": 0, "retire_every": 0})


@dataclass(frozen=True)
class MetricsConfig:
    """Where metrics go besides metrics.jsonl."""

    tensorboard: bool = True
    """Write TensorBoard event files under logs/tensorboard (skipped with a warning when no writer is
    installed)."""
    wandb_project: str | None = None
    """Weights & Biases project; None is off."""
    wandb_entity: str | None = None
    """Weights & Biases entity (team or user)."""


@dataclass(frozen=True)
class RunConfig:
    """A whole self-play run."""

    name: str = "selfplay"
    """Prefix of the run id (`<name>-<utc time>`)."""
    runs_dir: str = "runs"
    """Parent directory of run directories."""
    repo_list: str | None = None
    """Repo list TOML; None is the bundled repos/default.toml."""
    repos: tuple[str, ...] = ("toolz",)
    """Names from the repo list to play on."""
    iterations: int = 2
    """Iterations before the run finishes (0: until stopped)."""
    max_hours: float | None = None
    """Finish within this many hours of run time, the warm start included when this run builds it: an
    iteration starts only if one as slow as the slowest so far would end within them. None is no limit."""
    seed: int = 0
    """Seeds repo, strategy and task draws and sampling."""
    store_url: str | None = None
    """SQLAlchemy URL of the store; None is SQLite inside the run directory."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """The model."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Episodes."""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    """Tasks."""
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    """Consistency checks of injected bugs."""
    grader: GraderConfig = field(default_factory=GraderConfig)
    """Grading of solver predictions."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Rewards of both roles; `reward.group_size` is the number of solver attempts per task (G)."""
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    """Policy updates."""
    warm_start: WarmStartSettings = field(default_factory=WarmStartSettings)
    """Warm start of the default run."""
    eval: EvalSettings = field(default_factory=EvalSettings)
    """Periodic evaluation."""
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    """Disk bounds."""
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    """Metric sinks."""

    @property
    def starts_from_warm_start(self) -> bool:
        """Whether the policy starts from the warm-start checkpoint of `warm_start.config`: an `hf` run with
        `warm_start.enabled` and no `policy.model_dir` (the learning experiment's arms name one)."""
        return not self.policy.model_dir and self.policy.backend == "hf" and self.warm_start.enabled

    def __post_init__(self) -> None:
        if not self.repos:
            raise ValueError("repos: name at least one repo of the repo list")
        heldout = sorted(set(self.repos) & set(self.warm_start.config.heldout_repos))
        if heldout:  # the held-out bench measures generalisation on them: no RL episode may train on them
            raise ValueError(f"repos: {', '.join(heldout)} {'is' if len(heldout) == 1 else 'are'} held out (warm_start.config.heldout_repos = "
                             f"{list(self.warm_start.config.heldout_repos)}); play on other repos, or set "
                             "warm_start.config.heldout_repos to the held-out split of your own")
        if self.iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {self.iterations}")
        from agent_scaffold.roles import injector_strategies  # reads the roles file: a toml parse

        known = injector_strategies()
        unknown = [s for s in self.rollout.strategies if s not in known]
        if unknown or not self.rollout.strategies:
            raise ValueError(f"rollout.strategies: {', '.join(unknown) or 'an empty list'} is not an injection "
                             f"strategy; choose from {', '.join(known)}")
        if self.max_hours is not None and not self.max_hours > 0:
            raise ValueError(f"max_hours must be > 0 (null is no limit), got {self.max_hours}")
        if self.rollout.workers < 1 or self.rollout.sandboxes_per_repo < 1:
            raise ValueError("rollout.workers and rollout.sandboxes_per_repo must be >= 1")
        if self.rollout.redraw_rounds < 0 or self.rollout.min_signal_groups < 1:
            raise ValueError(f"rollout.redraw_rounds must be >= 0 and rollout.min_signal_groups >= 1, got "
                             f"{self.rollout.redraw_rounds} and {self.rollout.min_signal_groups}")
        if not 0 < self.rollout.temperature <= 2:
            raise ValueError(f"rollout.temperature must be in (0, 2] (0 is greedy, which has no logprobs to train "
                             f"on), got {self.rollout.temperature}")
        if self.learner.engine.temperature not in (1.0, self.rollout.temperature):
            raise ValueError(f"learner.engine.temperature ({self.learner.engine.temperature}) differs from "
                             f"rollout.temperature ({self.rollout.temperature}); set rollout.temperature only, "
                             "the learner takes it from there")
        if self.learner.steps_per_update < 1:
            raise ValueError(f"learner.steps_per_update must be >= 1, got {self.learner.steps_per_update}")
        if self.policy.gil_switch_ms < 0:
            raise ValueError(f"policy.gil_switch_ms must be >= 0 (0 leaves Python's), got {self.policy.gil_switch_ms}")
        if self.policy.cpu_threads < 0:
            raise ValueError(f"policy.cpu_threads must be >= 0 (0 keeps torch's count), got "
                             f"{self.policy.cpu_threads}")
        if self.policy.max_batch < 1 or self.policy.kv_cache_mb < 0:
            raise ValueError(f"policy.max_batch must be >= 1 and policy.kv_cache_mb >= 0 (MiB; 0 is off), got "
                             f"{self.policy.max_batch} and {self.policy.kv_cache_mb}")
        if not 0 <= self.policy.lookup_tokens <= 32 or self.policy.lookup_rows < 0:
            raise ValueError(f"policy.lookup_tokens must be in [0, 32] (0 is off) and policy.lookup_rows >= 0, got "
                             f"{self.policy.lookup_tokens} and {self.policy.lookup_rows}")
        if self.policy.decode_engine not in ("torch", "onnxruntime"):
            raise ValueError(f"policy.decode_engine must be 'torch' or 'onnxruntime', got {self.policy.decode_engine!r}")
        if self.policy.decode_engine == "onnxruntime":
            import importlib.util

            missing = [m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None]
            if missing:
                raise ValueError(f"policy.decode_engine = 'onnxruntime' needs {' and '.join(missing)}, not installed: "
                                 "pip install -e '.[ort]' (or set policy.decode_engine = 'torch')")
            if self.policy.lookup_tokens:
                raise ValueError("policy.decode_engine = 'onnxruntime' feeds one position a row a step: set "
                                 f"policy.lookup_tokens = 0 (got {self.policy.lookup_tokens}) or decode with 'torch'")
        if self.policy.backend in ("openai", "vllm") and not self.policy.endpoints:
            raise ValueError(f"policy.endpoints: the {self.policy.backend} backend needs at least one base URL")
        for url in self.policy.endpoints:
            if problem := base_url_problem(url):
                raise ValueError(f"policy.endpoints: {problem}")
