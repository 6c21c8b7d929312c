"""A nightly build's date and age, read from its version, as PyTorch's own smoke test does.

PyTorch versions its nightlies ``X.Y.Z.devYYYYMMDD`` (with a local tag such as ``+cpu``);
``.ci/pytorch/smoke_test/smoke_test.py`` (pytorch/pytorch) fails a nightly more than 3 days
old (its NIGHTLY_ALLOWED_DELTA), so an index that stopped updating is caught rather than a
week-old build reported as "nightly". The compat layer (test_compat.py) applies the rule with
the cell's ``channel.max_age_days``; oota's report reads the same date from the recorded version.

Standard library only, like the rest of the suite's helpers.
"""

from __future__ import annotations

import datetime as dt
import re

_DEV = re.compile(r"^\d+(?:\.\d+)*\.dev(\d{8})(?:\+[A-Za-z0-9.]+)?$")


def nightly_date(version: str) -> dt.date | None:
    """The day in ``2.13.0.dev20261123+cpu``; None for a version that is not a dated nightly."""
    match = _DEV.match(version.strip())
    if not match:
        return None
    try:
        return dt.datetime.strptime(match.group(1), "%Y%m%d").date()
    except ValueError:
        return None


def age_problem(version: str, today: dt.date, max_age_days: int) -> str | None:
    """None when ``version`` is a nightly at most ``max_age_days`` old on ``today`` (UTC);
    otherwise one line saying what is wrong and what it means."""
    built = nightly_date(version)
    if built is None:
        return (f"torch {version} is not a nightly (no .devYYYYMMDD in its version): the "
                "channel's index served a release, or pip took torch from another source")
    age = (today - built).days
    if age > max_age_days:
        return (f"torch {version} is the nightly of {built.isoformat()}, {age} days old on "
                f"{today.isoformat()}: more than the {max_age_days} days allowed "
                "(channel.max_age_days); the index no longer publishes new nightlies, or the "
                "build took an old one from a cache or mirror")
    if age < -1:  # a day of skew between time zones is normal; more means a wrong clock
        return (f"torch {version} is dated {built.isoformat()}, after today "
                f"({today.isoformat()}): check this machine's clock")
    return None
