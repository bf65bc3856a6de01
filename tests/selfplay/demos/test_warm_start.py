"""The warm start's identity and its repo split, without Docker: a build whose demonstrations differ gets
another content key (and checkpoint directory), the manifest says what was trained, and no held-out repo
or seed can feed demonstrations, SFT or RL.

The build runs for real apart from its two expensive steps: `make_demos` records trajectories of the
real scaffold (scripted policy, local sandbox) instead of graded Docker episodes, and `train_sft` writes
its `sft.json` without training (tests/selfplay/learner/test_sft.py trains for real).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from selfplay.code_revision import code_revision
from selfplay.config.component_presets import preset_names, warm_start_size
from selfplay.demos import warm_start as ws
from selfplay.demos.warm_start import warm_start_checkpoint, warm_start_info
from selfplay.demos.warm_start_config import (
    HELDOUT_REPOS,
    HELDOUT_SEED_OFFSET,
    TRAIN_REPOS,
    WarmStartConfig,
)

SIZES = {name: warm_start_size(name) for name in preset_names("warm_start")}

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir

    return AutoTokenizer.from_pretrained(default_model_dir())


class FakeDemos:
    """Stands in for `collect.make_demos`: `solver[repo]` scripted solver demonstrations, each on its own
    stored task (operator `FlipComparison`, or `DropStatement` for the odd ones), and `injector` injector
    demonstrations with a validated artifact."""

    def __init__(self, tokenizer, tmp: Path, solver: int, injector: int = 0, offset: int = 0):
        self.tokenizer, self.tmp, self.solver, self.injector, self.calls = tokenizer, tmp, solver, injector, []
        self.offset = offset
        """Added to the call count that numbers the stored tasks, so that two fakes store different tasks."""

    def __call__(self, spec, n, store, out_dir, **kwargs):
        from agent_scaffold.agent import run_episode
        from agent_scaffold.policies.scripted import ScriptedPolicy
        from agent_scaffold.roles import load_role, solver_variables
        from agent_scaffold.trajectory import save_jsonl
        from selfplay.demos.collect import DemoReport
        from selfplay.store.rows import artifact_id_for
        from tests.agent_scaffold.local_sandbox import LocalSandbox
        from tests.selfplay.store.store_data import make_artifact, make_report

        self.calls.append((spec.name, kwargs))
        report = DemoReport(spec.name)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        base = 100 * (len(self.calls) + self.offset)
        for i in range(self.solver + self.injector):
            role = "solver" if i < self.solver else "injector"
            artifact = make_artifact(base + i)
            op = "DropStatement" if i % 2 else "FlipComparison"
            task_id = store.record_validation(artifact, spec.name, make_report(True, base + i), origin="procedural",
                                              strategy=op)
            sb = LocalSandbox(self.tmp / f"{spec.name}-{i}", {"a.py": f"x = {i}\n"})
            actions = ["Look.\n```bash\ncat a.py\n```", "Read.\n```edit\nview a.py\n```", "```submit\n```"]
            ep = run_episode(ScriptedPolicy(actions, tokenizer=self.tokenizer), sb, load_role("solver"),
                             solver_variables(f"spec {spec.name} {i}", "issue"))
            traj = replace(ep.trajectory, role=role, metadata={**ep.trajectory.metadata, "repo": spec.name})
            path = out / f"{role}-{i}.jsonl"
            save_jsonl([traj], path, append=False)
            store.record_attempt(task_id if role == "solver" else None, role=role, policy_version=0, reward=1.0,
                                 turns=3, tokens=len(traj.input_ids), termination="submitted",
                                 trajectory_path=str(path), source="demo",
                                 artifact_id=artifact_id_for(spec.name, artifact) if role == "injector" else None)
            (report.kept if role == "solver" else report.injector_kept).append(str(path))
        return report


@pytest.fixture
def fake_build(monkeypatch, tmp_path, tokenizer, empty_cache):
    """Patch the expensive steps; returns a function that sets how many demonstrations the next build keeps."""
    trained = []

    def fake_train(samples, out_dir, config, *, metadata=None, on_step=None):
        out = Path(out_dir)
        out.mkdir(parents=True)
        (out / "sft.json").write_text(json.dumps({"samples": len(samples), **(metadata or {})}, default=str))
        trained.append(samples)

    monkeypatch.setattr("selfplay.demos.warm_start.train_sft", fake_train)

    def set_demos(solver: int, injector: int = 0) -> FakeDemos:
        fake = FakeDemos(tokenizer, tmp_path / f"sb-{solver}-{injector}", solver, injector)
        monkeypatch.setattr("selfplay.demos.warm_start.make_demos", fake)
        return fake

    set_demos.trained = trained
    return set_demos


def test_other_content_gets_another_content_key_and_checkpoint(fake_build):
    config = WarmStartConfig(repos=("toolz",), n_per_repo=4, injector_per_repo=1, epochs=1)
    with pytest.raises(FileNotFoundError, match="selfplay warm-start"):
        warm_start_info(config)
    fake = fake_build(solver=2, injector=1)
    first = warm_start_checkpoint(config)
    info = warm_start_info(config)
    assert fake.calls == [("toolz", fake.calls[0][1])] and fake.calls[0][1]["injector"] == 1
    assert first == Path(info.model_dir) == ws.cache_dir(config) / f"model-{info.content_key}"
    assert info.config_key == ws.config_key(config) and ws.cache_dir(config).name == info.config_key
    assert info.demonstrations == {"solver": 2, "injector": 1} and info.samples == 3
    assert info.steps == 2  # the default batch of 2 (the cpu preset has 4), one epoch
    assert info.operators == {"DropStatement": 1, "FlipComparison": 1}
    assert set(info.budgets) == {"solver", "injector"} and info.budgets["solver"]["turns"] == 3
    assert 0 < info.budgets["solver"]["action_tokens"] < info.budgets["solver"]["tokens"] <= 2048
    assert info.code == code_revision() != ""  # which commit to check out to rebuild this content
    assert info.record() == {"config_key": info.config_key, "content_key": info.content_key,
                             "demonstrations": {"solver": 2, "injector": 1}, "steps": 2, "model_dir": str(first),
                             "code": info.code}
    sft = json.loads((first / "sft.json").read_text())
    assert sft["content_key"] == info.content_key and sft["warm_start"]["injector_per_repo"] == 1
    timings = json.loads((ws.cache_dir(config) / "timings.json").read_text())
    assert timings["operators"] == info.operators and timings["demos/toolz_injector_kept"] == 1
    # loss on the valid action turns of both roles
    assert {s.role for s in fake_build.trained[0]} == {"solver", "injector"}

    # cached: no second build
    assert warm_start_checkpoint(config) == first and len(fake.calls) == 1

    # the same config keeping other demonstrations (another machine, another load) is another warm start
    fake_build(solver=3, injector=1)
    second = warm_start_checkpoint(config, force=True)
    again = warm_start_info(config)
    assert again.config_key == info.config_key and again.content_key != info.content_key
    assert second != first and not first.exists() and Path(again.model_dir) == second
    assert again.demonstrations == {"solver": 3, "injector": 1}


def test_a_drills_build_trains_on_the_stored_demonstrations_of_the_same_build_without(fake_build, monkeypatch):
    from selfplay.learner.batch import Sample

    config = WarmStartConfig(repos=("toolz",), n_per_repo=4, injector_per_repo=0, epochs=1, locate="localize")
    fake = fake_build(solver=2)
    warm_start_checkpoint(config)
    played = len(fake.calls)
    drill = Sample(input_ids=(1, 2, 3), loss_mask=(0, 1, 1), old_logprobs=(0.0,) * 3, advantage=1.0)
    monkeypatch.setattr(ws, "_drills", lambda c: [drill] * c.drills)
    drilled = replace(config, drills=3)
    warm_start_checkpoint(drilled)
    assert len(fake.calls) == played  # no demonstration played again
    assert warm_start_info(drilled).samples == warm_start_info(config).samples + 3
    timings = json.loads((ws.cache_dir(drilled) / "timings.json").read_text())
    assert timings["demos_from"] == ws.config_key(config) and timings["drills"] == 3


def test_a_recovery_build_plays_its_recoveries_on_the_stored_tasks_of_the_build_without(fake_build, monkeypatch,
                                                                                       tokenizer, tmp_path):
    """`localize_recover` keeps the rank-1 build's demonstrations and seeds, and adds `recovery_demos` per repo
    in a copy of its store."""
    config = WarmStartConfig(repos=("toolz",), n_per_repo=4, injector_per_repo=0, epochs=1, locate="localize",
                             localize_ranks=1)
    fake = fake_build(solver=2)
    warm_start_checkpoint(config)
    played = len(fake.calls)
    recover = FakeDemos(tokenizer, tmp_path / "recover", solver=1, offset=10)
    monkeypatch.setattr(ws, "recovery_demos", recover)
    recovered = replace(config, localize_recover=5)
    warm_start_checkpoint(recovered)
    assert len(fake.calls) == played  # no direct demonstration played again
    assert [name for name, _ in recover.calls] == ["toolz"]
    assert recover.calls[0][1]["seed"] == 0
    assert warm_start_info(recovered).demonstrations["solver"] == warm_start_info(config).demonstrations["solver"] + 1
    timings = json.loads((ws.cache_dir(recovered) / "timings.json").read_text())
    assert timings["demos_from"] == ws.config_key(config) and timings["recovery/toolz_kept"] == 1


def test_content_key_pins_token_ids_masks_order_and_steps():
    from selfplay.learner.batch import Sample

    a = Sample(input_ids=(1, 2, 3), loss_mask=(0, 1, 1), old_logprobs=(0.0,) * 3, advantage=1.0, role="solver")
    b = Sample(input_ids=(1, 2, 4), loss_mask=(0, 1, 1), old_logprobs=(0.0,) * 3, advantage=1.0, role="solver")
    key = ws.content_key([a, b], 1)
    assert key == ws.content_key([a, b], 1)
    assert len({key, ws.content_key([b, a], 1), ws.content_key([a, b], 2), ws.content_key([a], 1),
                ws.content_key([a, Sample(input_ids=(1, 2, 4), loss_mask=(0, 0, 1), old_logprobs=(0.0,) * 3,
                                          advantage=1.0, role="solver")], 1)}) == 5


def test_config_key_changes_with_every_field_and_format(monkeypatch):
    base = WarmStartConfig()
    keys = {ws.config_key(base), ws.config_key(SIZES["full"]), ws.config_key(WarmStartConfig(injector_per_repo=0)),
            ws.config_key(WarmStartConfig(loss_turns="edit", injector_strategy="direct"))}
    assert len(keys) == 4
    monkeypatch.setattr(ws, "FORMAT", ws.FORMAT + 1)
    assert ws.config_key(base) not in keys


def test_injector_operators_enter_the_config_key_only_when_set(monkeypatch):
    """A field added after FORMAT 11 keeps the older configs' keys (so their cached checkpoints) at its
    default, and names another checkpoint when set, in any order a list gives it."""
    base = WarmStartConfig(injector_strategy="direct")
    legacy = {k: v for k, v in asdict(base).items() if k not in ("injector_operators", "locate", "localize_ranks",
                                                                      "drills", "localize_recover", "injector_strategy")}
    assert ws.config_key(base) == hashlib.sha256(
        json.dumps({**legacy, "format": ws.FORMAT}, sort_keys=True).encode()).hexdigest()[:16]
    drop = WarmStartConfig(injector_operators=("drop_statement",))
    assert ws.config_key(drop) not in {ws.config_key(base), ws.config_key(WarmStartConfig(
        injector_operators=("drop_statement", "flip_comparison")))}
    with pytest.raises(ValueError, match=r"injector_operators: unknown operator drop; choose from .*drop_statement"):
        WarmStartConfig(injector_operators=("drop",))
    assert ws.config_key(WarmStartConfig(locate="visible")) != ws.config_key(base)
    with pytest.raises(ValueError, match=r"locate must be any, visible or localize, got 'hidden'"):
        WarmStartConfig(locate="hidden")
    localize = WarmStartConfig(locate="localize")
    assert ws.config_key(localize) not in {ws.config_key(base), ws.config_key(WarmStartConfig(locate="visible"))}
    assert ws.config_key(WarmStartConfig(locate="localize", localize_ranks=1)) != ws.config_key(localize)
    with pytest.raises(ValueError, match="localize_ranks must be 1 to 5, got 0"):
        WarmStartConfig(locate="localize", localize_ranks=0)
    assert ws.config_key(WarmStartConfig(locate="localize", drills=300)) != ws.config_key(localize)
    with pytest.raises(ValueError, match="drills need locate: localize"):
        WarmStartConfig(drills=300)
    rank1 = WarmStartConfig(locate="localize", localize_ranks=1)
    assert ws.config_key(replace(rank1, localize_recover=8)) != ws.config_key(rank1)
    recovered, plain = ws.config_key(replace(rank1, localize_recover=8)), ws.config_key(rank1)
    monkeypatch.setattr(ws, "RECOVERY_FORMAT", ws.RECOVERY_FORMAT + 1)  # names the recovery builds only
    assert ws.config_key(replace(rank1, localize_recover=8)) != recovered and ws.config_key(rank1) == plain
    # the kit's version names the builds with kit injector demonstrations only; direct keeps its old key
    kit, direct = WarmStartConfig(), WarmStartConfig(injector_strategy="direct")
    kit_key, direct_key, none_key = (ws.config_key(c) for c in (kit, direct, replace(kit, injector_per_repo=0)))
    assert len({kit_key, direct_key}) == 2
    monkeypatch.setattr(ws, "KIT_FORMAT", ws.KIT_FORMAT + 1)
    assert ws.config_key(kit) != kit_key and ws.config_key(direct) == direct_key
    assert ws.config_key(replace(kit, injector_per_repo=0)) == none_key
    with pytest.raises(ValueError, match="injector_strategy must be direct or kit, got 'removal'"):
        WarmStartConfig(injector_strategy="removal")
    with pytest.raises(ValueError, match="a kit injector demonstration has none"):
        WarmStartConfig(loss_turns="edit")
    assert WarmStartConfig(loss_turns="edit", injector_per_repo=0).loss_turns == "edit"
    for bad in ({"localize_recover": 8}, {"localize_recover": 8, "locate": "localize"},
                {"localize_recover": -1, "locate": "localize", "localize_ranks": 1}):
        with pytest.raises(ValueError, match="localize_recover must be >= 0, and recovery demonstrations need"):
            WarmStartConfig(**bad)


# --- no held-out repo, task or seed feeds demonstrations, SFT or RL ----------------------------------------


def test_warm_start_config_refuses_a_heldout_repo():
    with pytest.raises(ValueError, match=r"warm_start\.config\.repos: parse is held out"):
        WarmStartConfig(repos=("toolz", "parse"))
    with pytest.raises(ValueError, match=r"warm_start\.config\.max_rounds"):
        WarmStartConfig(max_rounds=501)
    with pytest.raises(ValueError, match="unknown warm_start preset 'huge'; choose one of default, full, medium"):
        warm_start_size("huge")


def test_run_config_refuses_a_heldout_repo():
    from selfplay.config.loader import ConfigError, load_config

    with pytest.raises((ConfigError, ValueError), match=r"repos: humanize is held out"):
        load_config("default", ["repos=[toolz, humanize]"])
    with pytest.raises((ConfigError, ValueError), match=r"warm_start\.config\.repos: inflection is held out"):
        load_config("default", ["warm_start.config.repos=[toolz, inflection]"])
    # a held-out split of one's own (the bench's --repos) frees the default one
    cfg = load_config("default", ["repos=[toolz, parse]", "warm_start.config.heldout_repos=[humanize]"])
    assert cfg.repos == ("toolz", "parse")


def test_every_preset_and_warm_start_size_is_disjoint_from_the_heldout_repos():
    from selfplay.config.loader import PRESETS, load_config

    assert set(TRAIN_REPOS).isdisjoint(HELDOUT_REPOS)
    for size in SIZES.values():
        assert set(size.repos).isdisjoint(HELDOUT_REPOS)
    for name in PRESETS:
        cfg = load_config(name, ["store_url=sqlite:///x.db"] if name == "multi-node" else [])
        assert set(cfg.repos).isdisjoint(HELDOUT_REPOS), name
        assert set(cfg.warm_start.config.repos).isdisjoint(HELDOUT_REPOS), name
        assert set(cfg.warm_start.config.heldout_repos) == set(HELDOUT_REPOS), name


def test_the_default_run_shows_observations_as_long_as_the_demonstrations_did():
    """A policy trained on 1,500-character observations plays with the same limit (at the role's 8,000, one
    view filled most of a 2,048-token context)."""
    from selfplay.config.loader import load_config
    from selfplay.demos.injector import INJECTOR_LIMITS
    from selfplay.demos.solver import DEMO_LIMITS

    cfg = load_config("default", [])
    assert cfg.rollout.solver_limits.max_observation_chars == DEMO_LIMITS.max_observation_chars
    assert cfg.rollout.injector_limits.max_observation_chars == INJECTOR_LIMITS.max_observation_chars


def _seeds_drawn_by_make_demos(monkeypatch, tmp_path, config: WarmStartConfig) -> list[int]:
    """The SeedConfig seeds the real `make_demos` asks the seed cache for (every round comes back empty)."""
    from repos.listfile import get_repo
    from selfplay.demos.collect import make_demos

    drawn = []

    def fake_cached_seed(spec, k, *, config, **kwargs):
        drawn.append(config.seed)
        return [], False

    monkeypatch.setattr("selfplay.demos.collect.cached_seed", fake_cached_seed)
    monkeypatch.setattr("selfplay.demos.collect.repo_image", lambda spec: "image")
    make_demos(get_repo(config.repos[0]), config.n_per_repo, store=None, out_dir=tmp_path / "demos",
               seed=config.seed, max_rounds=config.max_rounds, tokenizer=object())
    return drawn


def test_more_injector_demonstrations_than_tasks_seed_more_artifacts(monkeypatch, tmp_path):
    """Injector demonstrations draw one seeded artifact each: with `injector` > `n`, a round asks the seed
    cache for `injector` artifacts, not `n` (solver demonstrations still take the first `n` tasks)."""
    from repos.listfile import get_repo
    from selfplay.demos.collect import make_demos

    asked = []

    def fake_cached_seed(spec, k, *, config, **kwargs):
        asked.append(k)
        return [], False

    monkeypatch.setattr("selfplay.demos.collect.cached_seed", fake_cached_seed)
    monkeypatch.setattr("selfplay.demos.collect.repo_image", lambda spec: "image")
    for n, injector, want in ((2, 10, 10), (6, 2, 6), (4, 0, 4)):
        asked.clear()
        make_demos(get_repo("toolz"), n, store=None, out_dir=tmp_path / "demos", max_rounds=2, tokenizer=object(),
                   injector=injector)
        assert asked == [want, want], (n, injector, asked)


def test_injector_operators_seed_the_injector_bugs_on_their_own(monkeypatch, tmp_path):
    """With `injector_operators`, each round seeds the solver's tasks with every operator and the injector's
    bugs with only those (the solver's tasks are never limited to them); every seeded bug of the second
    stream goes to an injector demonstration until enough are kept."""
    from agent_scaffold.mutation_operators import OPERATORS
    from repos.listfile import get_repo
    from selfplay.demos import collect

    asked, demonstrated = [], []

    def fake_cached_seed(spec, k, *, config, **kwargs):
        asked.append((k, config.operators, config.seed))
        limited = config.operators != tuple(op.name for op in OPERATORS)
        return ([SimpleNamespace(artifact=f"bug{i}") for i in range(k)] if limited else []), False

    def fake_demo(artifact, spec, store, out, tokenizer, image, seed, report, limits, *, wanted, strategy):
        assert wanted == 3
        demonstrated.append(artifact)
        report.injector_kept.append(artifact)

    monkeypatch.setattr(collect, "cached_seed", fake_cached_seed)
    monkeypatch.setattr(collect, "repo_image", lambda spec: "image")
    monkeypatch.setattr(collect, "_injector_demo", fake_demo)
    every = tuple(op.name for op in OPERATORS)
    collect.make_demos(get_repo("toolz"), 2, store=None, out_dir=tmp_path / "demos", max_rounds=2, tokenizer=object(),
                       injector=3, injector_operators=("drop_statement",))
    # round 0: the solver's 2 with every operator, the injector's 3 with drop_statement only (all kept);
    # round 1: the solver's still missing, the injector's done
    assert asked == [(2, every, 0), (3, ("drop_statement",), 0), (2, every, 1)]
    assert demonstrated == ["bug0", "bug1", "bug2"]


def _seeds_drawn_by_the_bench(monkeypatch, tmp_path, seed: int) -> list[int]:
    spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "scripts" / "bench_learning.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    drawn = []

    def fake_cached_seed(spec, k, *, config, **kwargs):
        drawn.append(config.seed)
        return [], False

    monkeypatch.setattr("selfplay.experiment.heldout.cached_seed", fake_cached_seed)
    monkeypatch.setattr("selfplay.experiment.heldout.repo_image", lambda spec: "image")
    bench.heldout_tasks(list(HELDOUT_REPOS), 4, seed, tmp_path / f"bench-{seed}", tokenizer=object())
    return drawn


def test_warm_start_seeds_never_coincide_with_the_heldout_bench_seeds(monkeypatch, tmp_path):
    """Seeded by the real code paths: the warm start's rounds (`1000 * seed + round`, round < max_rounds
    <= 500) and the bench's (`1000 * seed + 500 + round`), for the default and the full warm start."""
    bench = set()
    for seed in range(3):
        bench |= set(_seeds_drawn_by_the_bench(monkeypatch, tmp_path, seed))
    assert {500, 1500, 2500} <= bench
    for size in SIZES.values():
        for seed in range(3):
            config = replace(size, seed=seed)
            drawn = _seeds_drawn_by_make_demos(monkeypatch, tmp_path, config)
            assert drawn == list(config.seeds()) and len(drawn) == config.max_rounds
            assert bench.isdisjoint(drawn), (size, seed)
    # the bound holds for any max_rounds the config accepts
    widest = WarmStartConfig(max_rounds=HELDOUT_SEED_OFFSET).seeds()
    assert max(widest) < HELDOUT_SEED_OFFSET


def test_warm_start_command_builds_a_size_and_prints_path_and_manifest(fake_build, monkeypatch):
    from typer.testing import CliRunner

    from selfplay.cli import app

    fake_build(solver=2)
    fake_train = ws.train_sft

    def chatty_train(*args, **kw):  # as DeepSpeed logs "Setting accelerator to CPU" to stdout
        print("[WARNING] [real_accelerator.py] Setting accelerator to CPU.")
        return fake_train(*args, **kw)

    monkeypatch.setattr("selfplay.demos.warm_start.train_sft", chatty_train)
    res = CliRunner().invoke(app, ["warm-start", "--size", "full", "--repos", "boltons", "-n", "3", "--injector-n", "5"])
    assert res.exit_code == 0, res.output
    config = warm_start_size("full", repos=("boltons",), n_per_repo=3, injector_per_repo=5)
    info = warm_start_info(config)
    assert res.stdout == info.model_dir + "\n"  # the path alone: `MODEL=$(selfplay warm-start)`
    assert "Setting accelerator to CPU" in res.stderr
    assert info.content_key in res.output and info.demonstrations["solver"] == 2
    bad = CliRunner().invoke(app, ["warm-start", "--repos", "toolz,parse"])
    assert bad.exit_code == 2 and "parse is held out" in " ".join(bad.output.replace("│", " ").split())


def test_a_larger_models_warm_start_tokenizes_its_demonstrations_with_that_model(fake_build, tmp_path):
    """`selfplay warm-start --model DIR` (a larger model on a GPU machine): the demonstrations are rendered
    with DIR's tokenizer and DIR is the checkpoint SFT starts from; a directory with no model is refused."""
    from typer.testing import CliRunner

    from selfplay.cli import app
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "other-model")
    fake = fake_build(solver=2)
    res = CliRunner().invoke(app, ["warm-start", "--repos", "boltons", "-n", "2", "--model", str(model)])
    assert res.exit_code == 0, res.output
    assert fake.calls and all(Path(kw["tokenizer"].name_or_path) == model.resolve() for _, kw in fake.calls)
    sft = json.loads((Path(res.stdout.strip()) / "sft.json").read_text())
    assert sft["warm_start"]["model_dir"] == str(model.resolve())
    bad = CliRunner().invoke(app, ["warm-start", "--model", str(tmp_path)])
    words = " ".join(bad.output.replace("│", " ").split())  # rich wraps the message inside a box
    assert bad.exit_code == 2 and f"{tmp_path} has no config.json" in words


def test_the_builds_stdout_goes_to_stderr_at_the_file_descriptor_too():
    """`rft_cmd._stdout_to_stderr` in a real process: Python prints, a handler bound to stdout before the
    build, and native writes to fd 1 all land on stderr; stdout keeps only what comes after."""
    import subprocess
    import sys

    code = ("import logging, os, sys\n"
            "from selfplay.cli.rft_cmd import _stdout_to_stderr\n"
            "early = logging.StreamHandler(sys.stdout)\n"
            "with _stdout_to_stderr():\n"
            "    print('python print')\n"
            "    lg = logging.getLogger('ds'); lg.addHandler(logging.StreamHandler(sys.stdout)); lg.warning('late handler')\n"
            "    early.emit(logging.makeLogRecord({'msg': 'early handler'})); early.flush()\n"
            "    os.write(1, b'native write\\n')\n"
            "print('/the/path')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout == "/the/path\n", res.stdout
    for text in ("python print", "late handler", "early handler", "native write"):
        assert text in res.stderr, res.stderr
