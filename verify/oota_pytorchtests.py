"""What PyTorch's own tests decide about an entry of its module and optimizer databases, read
from the decorators the entry attaches to one test (``ModuleInfo.get_decorators``,
``OptimizerInfo.get_decorators``, as PyTorch's ``@modules`` and ``@optims`` apply them).

Only two kinds decide anything here: ``unittest.skip(reason)`` (a skip, with its reason) and
``unittest.expectedFailure`` (PyTorch expects the comparison to fail). The others are ignored,
each for its reason: PyTorch's tolerance and precision overrides (the layers judge by oota's
float64 rule, as the models layer does), ``skipIfTorchDynamo`` (it skips only under
TorchDynamo, which the suite does not run) and the decorators of other device types
(``skipMPS``, ``skipMeta``, ``expectedFailureMPS``). On torch 2.13.0 those are all the kinds
``module_db`` attaches to ``test_cpu_gpu_parity`` and ``test_memory_format`` and ``optim_db``
to the tests the optimizers layer follows (listed with a script over both databases,
2026-11-28).

Standard library only: the toolkit's unit tests check it with stand-in decorators.
"""

from __future__ import annotations

import sys
import types
import unittest
from collections.abc import Iterable
from typing import Any

SKIP = "skip.<locals>.decorator"  # what unittest.skip(reason) returns
EXPECTED_FAILURE = "expectedFailure"  # unittest.expectedFailure itself


def stand_in_expecttest() -> None:
    """PyTorch's test databases import ``expecttest`` for a TestCase base class that they never
    use; images install only what the suite runs, so a missing expecttest is stood in for by a
    plain unittest.TestCase rather than failing the whole layer."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase  # type: ignore[attr-defined]
        sys.modules["expecttest"] = stand_in


def _skip_reason(decorator: Any) -> str:
    cells = [c.cell_contents for c in getattr(decorator, "__closure__", None) or ()]
    return next((c for c in cells if isinstance(c, str)), "no reason given")


def decision(decorators: Iterable[Any], test: str) -> str:
    """Why PyTorch's ``test`` skips (or expects to fail) what these decorators decorate; ''
    when it runs it."""
    for decorator in decorators:
        name = getattr(decorator, "__qualname__", "")
        if name == EXPECTED_FAILURE and getattr(decorator, "__module__", "") == "unittest.case":
            return f"PyTorch's {test} expects this comparison to fail"
        if name == SKIP:
            return f"PyTorch's {test} skips this comparison: {_skip_reason(decorator)}"
    return ""
