"""A policy built from checkpoint N reports version N: after a resume, a policy that said 0 would make
every rollout look stale to the learner."""

from __future__ import annotations

import pytest

from agent_scaffold.policies import make_policy
from agent_scaffold.policy import TRAINING


def test_hf_policy_reports_the_version_it_was_built_with(hf_policy):
    assert hf_policy.version == 0  # the default: the embedded model, no checkpoint yet
    policy = make_policy("hf", model_dir=hf_policy.model_dir, version=7)
    assert policy.version == 7
    prompt = hf_policy.tokenizer.encode("Hello, my name is")
    completion = policy.generate([prompt], TRAINING.with_(max_new_tokens=2, seed=0))[0]
    assert completion.policy_version == 7
    with pytest.raises(ValueError, match="non-negative int"):
        make_policy("hf", model_dir=hf_policy.model_dir, version=-1)


def test_scripted_policy_takes_a_version_too():
    assert make_policy("scripted", actions=["```submit\n```"], version=3).version == 3
