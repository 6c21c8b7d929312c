"""invoke's collection in this checkout (``invoke build --vendor=gaudi``): the tasks of
``oota/tasks.py``, which the installed ``oota`` command runs in any folder. A task is added
there, and a flag in its request (``oota/api/requests.py``)."""

from oota.tasks import (
    build,
    generate,
    history,
    hosts,
    init,
    judge,
    keygen,
    known_failures,
    lint,
    lock,
    matrix,
    publish,
    pull,
    release_check,
    report,
    test,
    verify,
)

__all__ = ["build", "generate", "history", "hosts", "init", "judge", "keygen", "known_failures",
           "lint", "lock", "matrix", "publish", "pull", "release_check", "report", "test",
           "verify"]
