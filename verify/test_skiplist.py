"""The vendor's skip list (vendors/<name>/skips.yaml, carried in cell.json) is still valid.

Matching tests are skipped by oota_suite.py with the entry's reason; this test fails the run
while any entry is past its ``expires`` date, so a skip cannot silently outlive its reason.
It runs whatever layers are selected.
"""

from oota_suite import SKIPS_KEY

LAYER = "skips"


def test_no_expired_entries(request, record_data):
    state = request.config.stash[SKIPS_KEY]
    expired = state.expired()
    record_data(entries=len(state.entries), expired=expired, today=state.today.isoformat())
    by_id = {e["id"]: e for e in state.entries}
    listed = "; ".join(f"{i} (expired {by_id[i]['expires']}, owner {by_id[i]['owner']})"
                       for i in expired)
    assert not expired, f"expired skip-list entries (renew or remove them in skips.yaml): {listed}"
