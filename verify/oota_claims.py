"""What a vendor's device claims of PyTorch's runtime contract (cell.json
``verify.capabilities``: streams, events, fused optimizers, ...). A claimed capability is tested
and must hold; one the vendor does not claim is skipped as "not claimed", naming the key that
would claim it, never passed. Standard library and pytest only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import oota_summary  # noqa: F401 - first: it makes oota_vocab importable in a checkout too
import pytest
from oota_vocab import NOT_CLAIMED_PREFIX

# The skip reason of a capability the vendor does not claim: oota gives such a test the status
# 'not-claimed' (oota_vocab.normalized), counted apart, never a pass.
NOT_CLAIMED = NOT_CLAIMED_PREFIX
# Every capability the suite knows (schema/vendor-v1.json verify.capabilities).
CAPABILITIES = ("streams", "events", "event_timing", "memory_stats", "empty_cache",
                "pinned_memory", "generator_state", "foreach", "fused", "autocast", "dlpack",
                "cpp_extension", "fork")


def claimed(spec: Mapping[str, Any], name: str) -> Any:
    """The vendor's claim of ``name`` (False where it makes none; ``fork`` is 'fails' or
    'works')."""
    if name not in CAPABILITIES:
        raise KeyError(f"unknown capability {name!r}; known: {', '.join(CAPABILITIES)}")
    return (spec.get("capabilities") or {}).get(name, False)


def require(spec: Mapping[str, Any], name: str, what: str) -> Any:
    """The claim of ``name``, or skip the running test as not claimed (``what`` says what it
    would have checked)."""
    claim = claimed(spec, name)
    if claim is False:
        pytest.skip(f"{NOT_CLAIMED}{what}: the vendor does not claim {name} "
                    f"(verify.capabilities.{name} in its vendor.yaml)")
    return claim
