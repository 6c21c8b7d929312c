"""Which failures are the environment's, not the stack's (an unreachable registry, a full
disk), read from the words the Docker Engine and the tools it runs use for them.

A cell whose step failed for one of these is an 'error' (oota.errors.EnvironmentFault): shown
apart from 'failed' in every report, not blamed in the history, retried by the next run.
"""

from __future__ import annotations

import re

# The registry did not answer: a name that does not resolve, a refused or timed-out connection,
# a proxy or registry that failed in between. (A registry that answers "not found" or
# "denied" is an answer: the image name or the credentials are wrong, the cell failed.)
_UNREACHABLE = re.compile(
    r"no such host|lookup \S+ on|dial tcp|connection refused|connection reset|i/o timeout|"
    r"network is unreachable|temporary failure in name resolution|TLS handshake timeout|"
    r"context deadline exceeded|Client\.Timeout|50[234] (Bad Gateway|Service Unavailable|"
    r"Gateway Time-?out)", re.IGNORECASE)
_DISK_FULL = re.compile(r"no space left on device|ENOSPC|disk quota exceeded", re.IGNORECASE)


def unreachable(why: str) -> bool:
    """Does an Engine's pull error say the registry could not be reached?"""
    return bool(_UNREACHABLE.search(why))


def disk_full(text: str) -> str:
    """'the disk is full (...)' when a step's message or log says so, else ''."""
    found = _DISK_FULL.search(text)
    return f"the disk is full ({found.group(0)})" if found else ""
