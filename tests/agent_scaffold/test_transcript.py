"""Token exactness with the real SmolLM2 tokenizer and chat template, through the full loop (scripted policy
on the LocalSandbox test double)."""

from agent_scaffold.agent import run_episode
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.policy import Completion
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
from agent_scaffold.transcript import Transcript, render


def _check_exact(traj, tokenizer):
    n = len(traj.input_ids)
    assert len(traj.loss_mask) == n and len(traj.logprobs) == n
    masked = [i for i in range(n) if traj.loss_mask[i]]
    assert masked == [i for s, e in traj.turn_spans for i in range(s, e)]  # mask 1 exactly on the spans
    assistant = [m["content"] for m in traj.messages if m["role"] == "assistant"]
    assert len(assistant) == len(traj.turn_spans)
    for (s, e), content in zip(traj.turn_spans, assistant):
        assert tokenizer.decode(list(traj.input_ids[s:e])) == content + tokenizer.eos_token
    assert all(traj.logprobs[i] == 0.0 for i in range(n) if not traj.loss_mask[i])


def test_episode_tokens_equal_the_chat_template_render(local_sandbox, tokenizer):
    actions = ["Look first.\n```bash\ncat pkg/mod.py\n```",
               "```edit\nstr_replace pkg/mod.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
               ">>>>>>> REPLACE\n```",
               "```submit\n```"]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, load_role("solver"),
                     solver_variables("add(1, 2) returns -1 instead of 3", kind="issue"))
    assert ep.termination == "submitted" and ep.turns == 3 and not ep.infra_failure
    assert "+    return a + b" in ep.submission
    traj = ep.trajectory
    _check_exact(traj, tokenizer)
    # Appending deltas gives exactly the tokens of rendering the whole conversation at once.
    whole = tokenizer.encode(render(tokenizer, list(traj.messages), False), add_special_tokens=False)
    assert list(traj.input_ids) == whole[: len(traj.input_ids)]
    assert "return a - b" in traj.messages[3]["content"] and "[exit code 0]" in traj.messages[3]["content"]


def test_length_cut_turn_gets_end_of_turn_glue_with_mask_0(tokenizer):
    tr = Transcript(tokenizer, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    ids = tokenizer.encode("```bash\nls", add_special_tokens=False)
    tr.add_completion(Completion(tuple(ids), (-0.5,) * len(ids), "```bash\nls", "length", 0))
    end = len(tr)
    tr.add_observation("Format error")
    assert tr.input_ids[end] == tokenizer.eos_token_id and tr.loss_mask[end] == 0  # glue, not sampled
    assert tokenizer.decode(tr.input_ids[end:]).startswith("<|im_end|>\n<|im_start|>user\nFormat error<|im_end|>")
    assert tr.logprobs[end - 1] == -0.5 and sum(tr.loss_mask) == len(ids)


def test_format_errors_end_the_episode_and_are_answered(local_sandbox, tokenizer):
    policy = ScriptedPolicy(["I will fix it.", "```python\nx\n```", "still no block"], tokenizer)
    ep = run_episode(policy, local_sandbox, load_role("solver"), solver_variables("spec"),
                     limits=EpisodeLimits(max_format_errors=3))
    assert (ep.termination, ep.format_errors, ep.submission) == ("format_errors", 3, None)
    observations = [m["content"] for m in ep.trajectory.messages[3::2]]
    assert len(observations) == 2 and all(o.startswith("Format error: ") for o in observations)
    assert "```submit" in observations[0]  # the observation explains the format
    _check_exact(ep.trajectory, tokenizer)


def test_limits_end_the_episode_with_recorded_reasons(local_sandbox, tokenizer):
    bash = "```bash\necho " + "x" * 3000 + "\n```"
    ep = run_episode(ScriptedPolicy([bash] * 2, tokenizer), local_sandbox, load_role("solver"),
                     solver_variables("spec"), limits=EpisodeLimits(max_turns=2, max_observation_chars=500))
    assert ep.termination == "max_turns" and ep.turns == 2
    assert "characters truncated" in ep.trajectory.messages[3]["content"]
    prompt_len = len(Transcript(tokenizer, list(ep.trajectory.messages[:2])))
    tight = EpisodeLimits(max_context_tokens=prompt_len + 1500, max_observation_chars=500)
    ep = run_episode(ScriptedPolicy([bash] * 5, tokenizer), local_sandbox, load_role("solver"),
                     solver_variables("spec"), limits=tight)
    assert ep.termination == "context_exhausted"
    assert len(ep.trajectory.input_ids) <= tight.max_context_tokens
    ep = run_episode(ScriptedPolicy(["```bash\nsleep 0.2\n```"] * 3, tokenizer), local_sandbox,
                     load_role("solver"), solver_variables("spec"), limits=EpisodeLimits(wall_clock=0.1))
    assert ep.termination == "timeout" and ep.turns == 1
