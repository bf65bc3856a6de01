"""Context compaction (`EpisodeLimits.on_context_full="compact"`) with the real SmolLM2 tokenizer and chat
template, through the full loop (scripted policy on the LocalSandbox test double).

The property that matters to the learner: every sampled token sits, with mask 1, in exactly one segment,
and the ids before it in that segment are exactly the prompt the policy was given.
"""

from itertools import pairwise

import pytest

from agent_scaffold.agent import run_episode
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.policy import Completion
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
from agent_scaffold.trajectory import Trajectory
from agent_scaffold.transcript import ELIDED, Transcript, render


class RecordingPolicy(ScriptedPolicy):
    """The scripted policy, also keeping each prompt it was asked to continue."""

    def __init__(self, actions, tokenizer):
        super().__init__(actions, tokenizer)
        self.prompts = []

    def generate(self, prompts, params):
        self.prompts += [list(p) for p in prompts]
        return super().generate(prompts, params)


def _seq(n):
    return f"```bash\nseq {n} {n + 120}\n```"


@pytest.fixture
def prompt_len(tokenizer, local_sandbox):
    ep = run_episode(ScriptedPolicy(["```submit\n```"], tokenizer), local_sandbox, load_role("solver"),
                     solver_variables("spec"))
    return ep.trajectory.turn_spans[0][0]


def test_compaction_starts_token_exact_segments(local_sandbox, tokenizer, prompt_len):
    actions = [_seq(1000 * i) for i in range(1, 7)] + ["```submit\n```"]
    policy = RecordingPolicy(actions, tokenizer)
    limits = EpisodeLimits(max_context_tokens=prompt_len + 1400, on_context_full="compact", keep_observations=2)
    ep = run_episode(policy, local_sandbox, load_role("solver"), solver_variables("spec"), limits=limits)
    traj = ep.trajectory
    assert ep.termination == "submitted" and ep.turns == 7
    n_comp = traj.metadata["compactions"]
    assert n_comp >= 1 and len(traj.segments) == n_comp + 1 and len(traj.metadata["elided_observations"]) == n_comp
    # Segments tile input_ids, each starts with the same prompt (mask 0) and fits the context budget.
    assert traj.segments[0][0] == 0 and traj.segments[-1][1] == len(traj.input_ids)
    assert all(a[1] == b[0] for a, b in pairwise(traj.segments))
    first_prompt = traj.input_ids[:prompt_len]
    for s, e in traj.segments:
        assert e - s <= limits.max_context_tokens
        assert traj.input_ids[s:s + prompt_len] == first_prompt and not any(traj.loss_mask[s:s + prompt_len])
    # Each sampled turn: mask 1 exactly on it, inside one segment, conditioned on exactly that segment's prefix.
    masked = [i for i in range(len(traj.input_ids)) if traj.loss_mask[i]]
    assert masked == [i for s, e in traj.turn_spans for i in range(s, e)]
    assistant = [m["content"] for m in traj.messages if m["role"] == "assistant"]
    for (s, e), content, prompt in zip(traj.turn_spans, assistant, policy.prompts, strict=True):
        seg_start = max(a for a, b in traj.segments if a <= s)
        assert list(traj.input_ids[seg_start:s]) == prompt
        assert tokenizer.decode(list(traj.input_ids[s:e])) == content + tokenizer.eos_token
    # A later segment is the chat-template rendering of the conversation with old observations elided.
    s, e = traj.segments[1]
    turns_before = sum(1 for a, _ in traj.turn_spans if a < s)  # turns sampled in segment 0
    elided = set(traj.metadata["elided_observations"][0])
    msgs = list(traj.messages[:2])
    for t in range(1, turns_before + 1):
        obs = traj.messages[2 * t + 1]["content"]
        msgs += [traj.messages[2 * t], {"role": "user", "content": ELIDED.format(turn=t) if t in elided else obs}]
    seg_text = tokenizer.decode(list(traj.input_ids[s:e]))
    assert seg_text.startswith(render(tokenizer, msgs, True))
    assert elided == set(range(1, turns_before - limits.keep_observations + 1))  # all but the 2 newest
    assert ELIDED.format(turn=1) in seg_text and "1000\n1001\n" not in seg_text
    # Nothing is lost from the readable view: every observation is there in full.
    assert all(f"{1000 * i}\n{1000 * i + 1}\n" in traj.messages[2 * i + 1]["content"] for i in range(1, 7))
    # The learner's view: one sequence per segment; all of it survives JSON.
    seqs = traj.sequences()
    assert [len(ids) for ids, _, _ in seqs] == [e - s for s, e in traj.segments]
    assert sum(sum(mask) for _, mask, _ in seqs) == sum(traj.loss_mask)
    back = Trajectory.from_json(traj.to_json())
    assert back == traj and back.sequences() == seqs


def test_compaction_that_cannot_make_room_ends_the_episode(local_sandbox, tokenizer, prompt_len):
    huge = "```bash\nseq 100000 101500\n```"  # one observation larger than the whole budget
    limits = EpisodeLimits(max_context_tokens=prompt_len + 600, on_context_full="compact", max_observation_chars=20000)
    ep = run_episode(ScriptedPolicy([_seq(1), huge], tokenizer), local_sandbox, load_role("solver"),
                     solver_variables("spec"), limits=limits)
    assert ep.termination == "context_exhausted" and ep.turns == 2
    assert ep.trajectory.metadata["compactions"] == 0 and ep.trajectory.segments == ()
    assert "101500" in ep.trajectory.metadata["unsent_observation"]
    assert len(ep.trajectory.sequences()) == 1


def test_stop_is_the_default_and_bad_values_are_named():
    assert EpisodeLimits().on_context_full == "stop"
    with pytest.raises(ValueError, match=r"on_context_full must be one of \('stop', 'compact'\), got 'drop'"):
        EpisodeLimits(on_context_full="drop")
    with pytest.raises(ValueError, match="keep_observations must be positive"):
        EpisodeLimits(keep_observations=0)


def test_compact_keeps_observations_shorter_than_the_marker_and_never_unelides(tokenizer):
    tr = Transcript(tokenizer, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])

    def turn(text):
        ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
        tr.add_completion(Completion(tuple(ids), (-0.1,) * len(ids), text, "stop", 0))

    long = "\n".join(str(i) for i in range(200))
    for obs in ("ok", long):
        turn("```bash\nx\n```")
        tr.add_observation(obs)
    turn("```bash\ny\n```")
    new = "new output"
    assert tr.compact(new, tr.observation_ids(new), keep=1, limit=len(tr) - 10) == [2]
    context = tokenizer.decode(tr.context_ids)
    assert "<|im_start|>user\nok<|im_end|>" in context and ELIDED.format(turn=2) in context and "199" not in context
    assert context.endswith("new output<|im_end|>\n<|im_start|>assistant\n")
    assert tr.segments == [(0, tr.segment_starts[1]), (tr.segment_starts[1], len(tr.input_ids))]
    assert tr.compact("x", tr.observation_ids("x"), keep=1, limit=5) is None  # too small: nothing changes
    assert len(tr.segments) == 2
    turn("```bash\nz\n```")
    assert tr.compact(long, tr.observation_ids(long), keep=5, limit=10_000) == []  # turn 2 stays elided
    assert ELIDED.format(turn=2) in tokenizer.decode(tr.context_ids) and len(tr.segments) == 3
