"""Chat templates whose end of turn is not EOS, or that refuse a system message: token-exact episodes,
demonstrations and drills under the templates of Llama-3 (as first published: EOS `<|end_of_text|>`, turns
closed by `<|eot_id|>`), Gemma 2 (`<end_of_turn>`, no system role) and Phi-3 (`<|end|>`, EOS appended
after the last turn), each set on the embedded SmolLM2 tokenizer with the family's special tokens added.
SmolLM2's own ChatML template is the control: its end of turn is EOS."""

from __future__ import annotations

import pytest

from agent_scaffold.agent import run_episode
from agent_scaffold.chat_format import chat_format
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.policy import Completion
from agent_scaffold.roles import load_role, solver_variables
from agent_scaffold.transcript import Transcript, render

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
GEMMA2 = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
          "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
          "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
PHI3 = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + "
        "'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
        "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}"
        "{% endif %}")
FAMILIES = {
    "llama3": (LLAMA3, {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                        "additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]},
               "<|eot_id|>", True),
    "gemma2": (GEMMA2, {"bos_token": "<bos>", "eos_token": "<eos>",
                        "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]}, "<end_of_turn>", False),
    "phi3": (PHI3, {"eos_token": "<|endoftext|>",
                    "additional_special_tokens": ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]},
             "<|end|>", True),
}
ACTIONS = ["Look first.\n```bash\ncat pkg/mod.py\n```",
           "```edit\nstr_replace pkg/mod.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
           ">>>>>>> REPLACE\n```",
           "```submit\n```"]


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    """(name, a fresh embedded tokenizer with the family's template and special tokens, its turn end)."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir

    template, special, end, _ = FAMILIES[request.param]
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    tokenizer.add_special_tokens(special)
    tokenizer.chat_template = template
    return request.param, tokenizer, end


def test_the_turn_end_and_system_role_are_read_from_the_template(family, tokenizer):
    name, tok, end = family
    fmt = chat_format(tok)
    assert (fmt.turn_end, fmt.system_role) == (end, FAMILIES[name][3])
    assert fmt.turn_end_id == tok.convert_tokens_to_ids(end) != tok.eos_token_id
    assert fmt.stop_ids == {fmt.turn_end_id, tok.eos_token_id}
    native = chat_format(tokenizer)  # the control: ChatML closes a turn with EOS
    assert (native.turn_end_id, native.stop_ids, native.system_role) == (
        tokenizer.eos_token_id, {tokenizer.eos_token_id}, True)


def test_an_episode_is_token_exact_under_the_template(local_sandbox, family):
    name, tok, end = family
    end_id = tok.convert_tokens_to_ids(end)
    ep = run_episode(ScriptedPolicy(ACTIONS, tok), local_sandbox, load_role("solver"),
                     solver_variables("add(1, 2) returns -1 instead of 3", kind="issue"))
    assert ep.termination == "submitted" and "+    return a + b" in ep.submission
    traj = ep.trajectory
    assert all(traj.input_ids[e - 1] == end_id for _, e in traj.turn_spans)  # turns end as the template ends them
    # Appending deltas gives the text of rendering the whole conversation at once: no second end-of-turn
    # token glued after a sampled one, the system prompt where the template puts it. (Text, not ids: a
    # generation prompt ending in "\n\n" is one token when the policy continues it, and splits before the
    # next word in a render of the whole; the ids are the ones the policy was conditioned on.)
    text = tok.decode(list(traj.input_ids), skip_special_tokens=False)
    assert render(tok, list(traj.messages), False).startswith(text)
    assert tok.eos_token_id not in traj.input_ids
    if not FAMILIES[name][3]:  # folded into the first user message, not dropped
        assert "You are" in tok.decode(traj.input_ids[:traj.turn_spans[0][0]])


def test_a_turn_stopped_on_eos_gets_the_turn_end_glued_after_it(family):
    _, tok, end = family
    tr = Transcript(tok, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    ids = [*tok.encode("```bash\nls\n```", add_special_tokens=False), tok.eos_token_id]
    content = tr.add_completion(Completion(tuple(ids), (-0.1,) * len(ids), "", "stop", 0))
    assert content == "```bash\nls\n```"  # the stop token is not part of the message
    glue = len(tr.input_ids)
    tr.add_observation("done")
    assert tr.input_ids[glue] == tok.convert_tokens_to_ids(end) and tr.loss_mask[glue] == 0
    assert sum(tr.loss_mask) == len(ids)  # the sampled EOS stays, trained as sampled


def test_the_agent_stops_sampling_on_the_turn_end(local_sandbox, family):
    _, tok, end = family
    seen = []

    class Recording(ScriptedPolicy):
        def generate(self, prompts, params):
            seen.append(params.stop_token_ids)
            return super().generate(prompts, params)

    run_episode(Recording(ACTIONS, tok), local_sandbox, load_role("solver"), solver_variables("spec"))
    assert seen and all(tok.convert_tokens_to_ids(end) in s and tok.eos_token_id in s for s in seen)


def test_a_drill_sample_ends_its_loss_on_the_turn_end(family):
    from selfplay.demos.drills import drill_sample

    _, tok, end = family
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "```submit\n```"}]
    sample = drill_sample(tok, messages)
    last = max(i for i, m in enumerate(sample.loss_mask) if m)
    assert sample.input_ids[last] == tok.convert_tokens_to_ids(end)
    assert tok.decode([i for i, m in zip(sample.input_ids, sample.loss_mask) if m]) == "```submit\n```" + end


def test_the_hf_policy_stops_on_the_turn_end(family, tmp_path):
    from agent_scaffold.policies.hf import HFPolicy
    from selfplay.learner.tiny_model import save_tiny_model

    _, tok, end = family
    policy = HFPolicy(model_dir=save_tiny_model(tmp_path / "tiny", tokenizer=tok, max_position_embeddings=256))
    assert {tok.convert_tokens_to_ids(end), tok.eos_token_id} <= policy.eos_ids
    assert chat_format(policy.tokenizer) == chat_format(tok)  # the saved template reads back the same
