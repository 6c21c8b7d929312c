"""What can go wrong while asking a package index, as exceptions of oota's one hierarchy.

Each message is redacted when the exception is made (:func:`oota.net.redact_text`), so no
caller can print a password or a token that an index URL carried."""

from __future__ import annotations

from oota.errors import EnvironmentProblem, InputError
from oota.net import redact_text


class IndexProblem(EnvironmentProblem):
    """The index did not answer in time, or refused (exit 3)."""

    def __init__(self, message: str):
        super().__init__(redact_text(message))


class BadAnswer(IndexProblem):
    """The index answered something that is not what the index API promises: JSON that is not
    an object, HTML that is not UTF-8, a METADATA file that is not core metadata."""


class NotOnIndex(InputError):
    """The index answers, but has no such project or release (exit 2: check the flag)."""

    def __init__(self, message: str):
        super().__init__(redact_text(message))
