"""Templates whose generation prompt opens the reasoning section (DeepSeek-R1's distills, Qwen3's
Thinking-2507 models): the reply holds the reasoning, `</think>` and the action, never the opening tag.
Each template is set on the embedded SmolLM2 tokenizer; its own ChatML template, and one whose generation
prompt opens and closes the section (Qwen3's non-thinking prompt), are the controls."""

from __future__ import annotations

import pytest

from agent_scaffold.actions import FormatError, parse_action
from agent_scaffold.agent import run_episode
from agent_scaffold.chat_format import chat_format
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.policy import Completion, SamplingParams
from agent_scaffold.roles import load_role, solver_variables
from agent_scaffold.transcript import Transcript

_CHATML = ("{% for message in messages %}{% set content = message['content'] %}"
           "{% if message['role'] == 'assistant' and '</think>' in content %}"
           "{% set content = content.split('</think>')[-1].lstrip('\n') %}{% endif %}"
           "{{ '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' }}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' + GEN }}{% endif %}")
OPENS = _CHATML.replace("GEN", "'<think>\n'")
"""Qwen3-Thinking-2507's shape: the generation prompt ends inside `<think>`; old turns keep their answer."""
CLOSES = _CHATML.replace("GEN", "'<think>\n\n</think>\n\n'")
"""Qwen3's non-thinking shape: the generation prompt opens and closes an empty section."""
_PARAMS = SamplingParams(max_new_tokens=64)
ACTIONS = ["```bash\ncat pkg/mod.py\n```",
           "```edit\nstr_replace pkg/mod.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
           ">>>>>>> REPLACE\n```",
           "```submit\n```"]


def _with_template(template):
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir

    tok = AutoTokenizer.from_pretrained(default_model_dir())
    tok.chat_template = template
    return tok


@pytest.fixture(scope="module")
def opens(tokenizer):
    return _with_template(OPENS)


def test_the_opened_section_is_read_from_the_template(tokenizer, opens):
    assert chat_format(opens).reply_opening == "<think>\n"
    assert chat_format(_with_template(CLOSES)).reply_opening == ""
    assert chat_format(tokenizer).reply_opening == ""  # SmolLM2's own template opens nothing
    # read after a system message where the template has that role: some refuse a conversation without one
    needs_system = _with_template("{% if messages[0]['role'] != 'system' %}{{ raise_exception('no system') }}"
                                  "{% endif %}" + OPENS)
    assert chat_format(needs_system).reply_opening == "<think>\n"


def test_a_sampled_reply_is_parsed_after_its_reasoning(opens):
    tr = Transcript(opens, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    reply = "The test fails; I could try\n```bash\nrm -rf pkg\n```\nno, submit.\n</think>\n\n```submit\n```"
    ids = [*opens.encode(reply, add_special_tokens=False), opens.eos_token_id]
    content = tr.add_completion(Completion(tuple(ids), (-0.1,) * len(ids), reply, "stop", 0))
    assert content == "<think>\n" + reply and tr.messages[-1]["content"] == content
    assert parse_action(content).tool == "submit"  # the block it only thought about is not its action
    with pytest.raises(FormatError, match="2 action blocks"):  # the control: the sampled text on its own
        parse_action(reply)
    assert sum(tr.loss_mask) == len(ids)  # the opening is the prompt's: not sampled, not trained


def test_an_episode_under_the_template_closes_the_section_and_solves(local_sandbox, opens, tokenizer):
    ep = run_episode(ScriptedPolicy(ACTIONS, opens), local_sandbox, load_role("solver"),
                     solver_variables("add(1, 2) returns -1 instead of 3", kind="issue"))
    assert ep.termination == "submitted" and "+    return a + b" in ep.submission
    traj = ep.trajectory
    replies = [m["content"] for m in traj.messages if m["role"] == "assistant"]
    assert replies == [f"<think>\n\n</think>\n\n{a}" for a in ACTIONS]
    prompt = opens.decode(list(traj.input_ids[:traj.turn_spans[0][0]]), skip_special_tokens=False)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")  # the generation prompt opened it
    for (start, end), reply in zip(traj.turn_spans, replies):  # each turn's sampled ids are its reply
        assert opens.decode(list(traj.input_ids[start:end]), skip_special_tokens=False) == (
            reply.removeprefix("<think>\n") + "<|im_end|>")
    control = run_episode(ScriptedPolicy(ACTIONS, tokenizer), local_sandbox, load_role("solver"),
                          solver_variables("add(1, 2) returns -1 instead of 3", kind="issue"))
    assert [m["content"] for m in control.trajectory.messages if m["role"] == "assistant"] == ACTIONS


def test_a_drill_sample_trains_the_tokens_of_a_scripted_turn(opens):
    from selfplay.demos.drills import drill_sample

    messages = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "```submit\n```"}]
    sample = drill_sample(opens, messages)
    tr = Transcript(opens, messages[:1])
    turn = ScriptedPolicy([messages[1]["content"]], opens).generate([tr.context_ids], _PARAMS)[0]
    assert sample.input_ids == (*tr.context_ids, *turn.token_ids)  # the prompt and reply an episode has
    trained = [i for i, m in zip(sample.input_ids, sample.loss_mask) if m]
    assert opens.decode(trained, skip_special_tokens=False) == "\n</think>\n\n```submit\n```<|im_end|>"
