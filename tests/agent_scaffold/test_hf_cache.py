"""`hf_cache`: a model's KV cache passed and read under the name its transformers uses (`cache` in 5.x,
`past_key_values` in 4.x), so a forward logs no deprecation and continues from the cache it returned."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

from agent_scaffold.policies.hf_cache import returned_cache, with_cache


class _New:
    def forward(self, input_ids, cache=None, use_cache=False):
        pass


class _Old:
    def forward(self, input_ids, past_key_values=None, use_cache=False):
        pass


def test_the_cache_keyword_is_the_one_the_model_s_forward_takes():
    assert with_cache(_New(), "kv") == {"cache": "kv"}
    assert with_cache(_Old(), "kv") == {"past_key_values": "kv"}
    assert with_cache(object(), "kv") == {"past_key_values": "kv"}  # no forward to read: the name 4.x knows


def test_the_returned_cache_is_read_under_either_name():
    assert returned_cache(SimpleNamespace(cache="new")) == "new"
    assert returned_cache(SimpleNamespace(past_key_values="old")) == "old"


def test_a_real_forward_takes_the_cache_without_a_deprecation_and_continues_from_it(tiny_dir):
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    ids = torch.tensor([[5, 17, 42, 7, 99, 3]])
    with torch.inference_mode(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        whole = model(ids).logits[0, -1]
        head = model(ids[:, :-1], use_cache=True, **with_cache(model, DynamicCache()))
        step = model(ids[:, -1:], position_ids=torch.tensor([[5]]), use_cache=True,
                     **with_cache(model, returned_cache(head))).logits[0, -1]
    assert not [w for w in caught if "past_key_values" in str(w.message)], [str(w.message) for w in caught]
    assert torch.allclose(step, whole, atol=1e-4)
