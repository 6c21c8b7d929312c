"""A cell page names the image its tag points to, and says how the base image was got, in
words."""

from __future__ import annotations

import html
import re

from oota.report.htmlpages import cell_page
from oota.report.imageview import image_view
from oota.results.model import BaseImage, Image, Sealed
from tests.reports import build_report
from tests.unit.test_report import DIGEST, case, make_result, typed

SEALED = "sha256:" + "a52c1e2f35b4" + "0" * 52
PULL_FAILED = "pull failed: no such host registry-1.docker.io"


def _page(image: dict[str, object]) -> str:
    result = make_result("cpu", tests=[case("test_install.py::test_imports", "install")])
    result["image"] = image
    [group] = build_report(typed([result]), []).groups
    return html.unescape(re.sub(r"<[^>]+>", "", cell_page(group, "../results")))


def test_the_page_leads_with_the_image_the_tag_names_then_what_it_was_built_as():
    text = _page({"tag": "oota/cpu:c", "digest": DIGEST,
                  "sealed": {"id": SEALED, "file": "/opt/oota/expected.json"},
                  "base": {"ref": "oota/base:debian12", "how": "bootstrapped-earlier",
                           "note": PULL_FAILED}})
    image = text[text.index("Image\n"):text.index("Installed")]
    assert "imagea52c1e2f35b4 the image the tag named" in image
    assert f"full id: {SEALED}" in image
    assert f"built as{DIGEST} the build's output" in image
    assert ("baseoota/base:debian12, built by an earlier run with debootstrap from the Debian "
            f"archive{PULL_FAILED}") in image
    assert "{" not in image  # no raw JSON


def test_an_unsealed_image_is_its_build_output():
    view = image_view(Image(tag="t", digest=DIGEST, base=BaseImage(ref="debian:bookworm-slim",
                                                                     how="pulled")))
    assert (view.id, view.built_as, view.short_id) == (DIGEST, "", "ab" * 6)
    assert view.base == "debian:bookworm-slim, pulled from its registry"
    sealed = image_view(Image(tag="t", digest=DIGEST, sealed=Sealed(id=SEALED)))
    assert (sealed.id, sealed.built_as) == (SEALED, DIGEST)
