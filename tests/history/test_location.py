"""Which store a command uses, and the change list's wording (no database needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oota.errors import InputError
from oota.history.location import locate
from oota.history.records import Inputs


@pytest.mark.parametrize(("flag", "env", "url", "source"), [
    (None, {}, "sqlite:///{root}/history.db", "default"),
    (None, {"OOTA_HISTORY": "sqlite:///x.db"}, "sqlite:///x.db", "OOTA_HISTORY"),
    ("postgresql://u:p%40ss@db:5433/h", {"OOTA_HISTORY": "sqlite:///x.db"},
     "postgresql+psycopg://u:p%40ss@db:5433/h", "--history"),
    ("postgresql+psycopg2://db/h", {}, "postgresql+psycopg://db/h", "--history"),
], ids=["default", "variable", "flag-wins-and-maps-driver", "psycopg2-maps"])
def test_where_the_history_is(flag: str | None, env: dict[str, str], url: str, source: str,
                              tmp_path: Path) -> None:
    found = locate(flag, env, tmp_path)
    assert (found.url, found.source) == (url.format(root=tmp_path.resolve()), source)


def test_a_password_is_never_shown() -> None:
    found = locate("postgresql://oota:s3cret@db.lab/history", {}, Path.cwd())
    assert found.shown == "postgresql+psycopg://oota:***@db.lab/history"
    with pytest.raises(InputError) as bad:
        locate("oracle://oota:s3cret@db.lab/history", {}, Path.cwd())
    assert "s3cret" not in str(bad.value) and "oota:***@db.lab" in str(bad.value)


def test_what_changed_names_each_input_old_and_new() -> None:
    before = Inputs(torch="2.13.0", toolkit="12.8", base="debian:bookworm", fingerprint="f1",
                    host="lab-a", suite="0.1.0", extensions=(("torch", "2.13.0"),
                                                             ("torch_npu", "2.13.0rc1")))
    after = Inputs(torch="2.13.0", toolkit="12.9", base="debian:bookworm", fingerprint="f2",
                   host="lab-b", suite="0.1.0", extensions=(("torch", "2.13.0"),
                                                            ("intel_ext", "1.0")))
    assert after.differences(before) == [
        "toolkit 12.8 -> 12.9", "fingerprint f1 -> f2", "host lab-a -> lab-b",
        "intel_ext - -> 1.0", "torch_npu 2.13.0rc1 -> -"]
    assert before.differences(before) == []


def test_a_file_store_is_shown_as_given() -> None:
    # redact() once turned sqlite:////abs/h.db into sqlite://abs/h.db (a host named 'abs').
    assert locate("sqlite:////srv/oota/history.db", {}, Path.cwd()).shown \
        == "sqlite:////srv/oota/history.db"
