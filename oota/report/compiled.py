"""The compile layer's figures as report data: one row per model compiled in a cell.

verify/test_compile.py records them in its test's data (the backend, graphs compiled,
graph breaks, the compile time, the medians of timed eager and compiled passes and their
spread, the speedup); here they become typed rows for the cell page and results.json. A figure
the test did not record (a compile that failed before it was timed) is None and shown as '–'.
"""

from __future__ import annotations

from dataclasses import dataclass

from oota.report.workload import _number
from oota.results.jsonfields import JSONObject
from oota.vocab import Status

MODEL_TEST = "test_compiled_model"


@dataclass(frozen=True, kw_only=True, slots=True)
class CompileRow:
    """One model's compile figures in one cell (a test of the compile layer)."""

    model: str
    backend: str
    status: Status
    message: str
    graphs: int | None
    graph_breaks: int | None
    compile_s: float | None
    speedup: float | None
    eager_median_s: float | None
    compiled_median_s: float | None
    compiled_spread: float | None

    @classmethod
    def of(cls, test_id: str, status: Status, message: str, data: JSONObject
           ) -> CompileRow | None:
        """The row of a compiled model's outcome; None for any other test of the layer."""
        model, backend = data.get("model"), data.get("backend")
        if MODEL_TEST not in test_id or not isinstance(model, str) or not model:
            return None
        graphs, breaks = _number(data, "graphs"), _number(data, "graph_breaks")
        return cls(model=model, backend=backend if isinstance(backend, str) else "",
                   status=status, message=message,
                   graphs=None if graphs is None else int(graphs),
                   graph_breaks=None if breaks is None else int(breaks),
                   compile_s=_number(data, "compile_s"), speedup=_number(data, "speedup"),
                   eager_median_s=_number(data, "eager_median_s"),
                   compiled_median_s=_number(data, "compiled_median_s"),
                   compiled_spread=_number(data, "compiled_spread"))

    def to_json(self) -> JSONObject:
        return {"model": self.model, "backend": self.backend, "status": self.status,
                "graphs": self.graphs, "graph_breaks": self.graph_breaks,
                "compile_s": self.compile_s, "speedup": self.speedup,
                "eager_median_s": self.eager_median_s,
                "compiled_median_s": self.compiled_median_s,
                "compiled_spread": self.compiled_spread}
