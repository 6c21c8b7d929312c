"""When PyTorch released each torch version: the upload time of its first file on PyPI (PEP 700's
``upload-time`` in the JSON simple index, https://pypi.org/simple/torch/), as recorded on
2026-11-28 in tests/unit/data/pypi-index.json.gz (``tests/unit/test_score_history.py`` holds this
table to that recording). The scorecard's same-day-release item compares the day a vendor's
cells first passed with these; a release missing here is "not measured", never guessed. Add a
release after recording the index again (``python -m tests.unit.indexreplay``).
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from oota import times

SOURCE: Final = ("PyPI, https://pypi.org/simple/torch/ (upload-time of the first file), read "
                 "2026-11-28")
RELEASED: Final[dict[str, str]] = {
    "2.0.0": "2023-03-15T15:56:59Z",
    "2.0.1": "2023-05-08T16:28:47Z",
    "2.1.0": "2023-10-04T16:37:27Z",
    "2.1.1": "2023-11-15T16:42:26Z",
    "2.1.2": "2023-12-14T21:46:00Z",
    "2.2.0": "2024-01-30T17:28:30Z",
    "2.2.1": "2024-02-22T19:14:18Z",
    "2.2.2": "2024-03-27T21:06:18Z",
    "2.3.0": "2024-04-24T15:43:59Z",
    "2.3.1": "2024-06-05T16:39:11Z",
    "2.4.0": "2024-07-24T15:26:35Z",
    "2.4.1": "2024-09-04T19:10:42Z",
    "2.5.0": "2024-10-17T14:44:26Z",
    "2.5.1": "2024-10-29T17:32:34Z",
    "2.6.0": "2025-01-29T16:17:26Z",
    "2.7.0": "2025-04-23T14:30:40Z",
    "2.7.1": "2025-06-04T17:34:39Z",
    "2.8.0": "2025-08-06T14:53:10Z",
    "2.9.0": "2025-10-15T15:45:59Z",
    "2.9.1": "2025-11-12T15:19:56Z",
    "2.10.0": "2026-01-21T16:20:49Z",
    "2.11.0": "2026-03-23T18:07:18Z",
    "2.12.0": "2026-05-13T14:51:07Z",
    "2.12.1": "2026-06-17T21:04:57Z",
    "2.13.0": "2026-07-08T16:01:59Z",
    "2.14.0": "2026-09-02T13:42:48Z",
    "2.14.1": "2026-09-30T17:43:48Z",
    "2.15.0": "2026-10-28T15:16:25Z",
}


def released(version: str) -> dt.datetime | None:
    """When ``version`` (2.15.0) first appeared on PyPI, in UTC; None when not in the table."""
    when = RELEASED.get(version)
    return times.parse(when) if when else None
