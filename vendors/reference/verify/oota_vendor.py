"""refdev's verify hook (verify/oota_hooks.py loads it before the suite uses the device).

``fallback_counts()``: refdev computes every operator it has no kernel of its own for on the
host, through its boxed CPU fallback, which counts each call (``torch_refdev
.fallback_op_counts()``, keyed ``aten::NAME.OVERLOAD``). The ops layer reads it around each
sample's device run: a pair refdev computed on the host ran on the CPU, and is reported so.
"""

from __future__ import annotations

import torch_refdev

PREFIX = "aten::"


def fallback_counts() -> dict[str, int]:
    """{aten operator: calls} computed by refdev's host fallback since the start."""
    return {name.removeprefix(PREFIX): int(count)
            for name, count in torch_refdev.fallback_op_counts().items()}
