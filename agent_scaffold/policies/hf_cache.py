"""The name under which a transformers model takes and returns its KV cache.

transformers 5 renamed a forward's `past_key_values` argument and output to `cache`; the old name still
works there but logs a deprecation from every call site (about 20 lines of a default run's log), and 5.40
drops it. The 4.x releases that the pin still allows know only `past_key_values`. So the name is read from
the model's own forward signature, once per model class.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

OLD_NAME = "past_key_values"
NEW_NAME = "cache"


@functools.cache
def _cache_name(cls: type) -> str:
    try:
        params = inspect.signature(cls.forward).parameters
    except (AttributeError, TypeError, ValueError):  # no forward, or a builtin one: keep what always worked
        return OLD_NAME
    return NEW_NAME if NEW_NAME in params else OLD_NAME


def with_cache(model: Any, cache: Any) -> dict[str, Any]:
    """The keyword argument that passes `cache` to `model`'s forward."""
    return {_cache_name(type(model)): cache}


def returned_cache(output: Any) -> Any:
    """The KV cache a forward returned, under the name its transformers gives it."""
    cache = getattr(output, NEW_NAME, None)
    return cache if cache is not None else getattr(output, OLD_NAME)
