"""The workload layer's figures as report data: one row per model a cell ran it for.

verify/test_workload.py records them in its test's data (loss curve ends, the largest
difference from the CPU's curve, inference latency, training throughput, peak device memory);
here they become typed rows for the cell page and results.json. A figure the test did not
record is None and shown as such ('–'), never as 0: a device that keeps no memory statistics
has no peak, not a peak of 0 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from oota.results.jsonfields import JSONObject
from oota.vocab import Status


def _number(data: JSONObject, key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadRow:
    """One model's workload figures in one cell (a test of the workload layer)."""

    model: str
    status: Status
    message: str
    dtype: str | None
    train_steps: int | None
    loss_first: float | None
    loss_final: float | None
    loss_max_dev_vs_cpu: float | None
    vs_cpu: str   # 'compared', or why there is no comparison ('n/a: the device is the CPU')
    latency_median_s: float | None
    latency_p90_s: float | None
    train_steps_per_s: float | None
    peak_device_bytes: int | None

    @classmethod
    def of(cls, status: Status, message: str, data: JSONObject) -> WorkloadRow | None:
        """The row of a workload test's outcome; None for one that recorded no model (the
        placeholder a vendor without a workload gets, or a test skipped before it ran)."""
        model = data.get("model")
        if not isinstance(model, str) or not model:
            return None
        steps, peak = _number(data, "train_steps"), _number(data, "peak_device_bytes")
        dtype, vs_cpu = data.get("dtype"), data.get("vs_cpu")
        return cls(model=model, status=status, message=message,
                   dtype=dtype if isinstance(dtype, str) else None,
                   train_steps=None if steps is None else int(steps),
                   loss_first=_number(data, "loss_first"),
                   loss_final=_number(data, "loss_final"),
                   loss_max_dev_vs_cpu=_number(data, "loss_max_dev_vs_cpu"),
                   vs_cpu=vs_cpu if isinstance(vs_cpu, str) else "",
                   latency_median_s=_number(data, "latency_median_s"),
                   latency_p90_s=_number(data, "latency_p90_s"),
                   train_steps_per_s=_number(data, "train_steps_per_s"),
                   peak_device_bytes=None if peak is None else int(peak))

    @property
    def versus_cpu(self) -> str:
        """The curve comparison as shown: the largest difference, or why there is none."""
        if self.loss_max_dev_vs_cpu is not None:
            return f"{self.loss_max_dev_vs_cpu:.3g}"
        return self.vs_cpu if self.vs_cpu.startswith("n/a") else "–"

    def to_json(self) -> JSONObject:
        return {"model": self.model, "status": self.status, "dtype": self.dtype,
                "train_steps": self.train_steps, "loss_first": self.loss_first,
                "loss_final": self.loss_final, "loss_max_dev_vs_cpu": self.loss_max_dev_vs_cpu,
                "vs_cpu": self.vs_cpu, "latency_median_s": self.latency_median_s,
                "latency_p90_s": self.latency_p90_s,
                "train_steps_per_s": self.train_steps_per_s,
                "peak_device_bytes": self.peak_device_bytes}
