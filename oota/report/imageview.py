"""How a cell page names its image: the image its tag points to (what ``docker images`` lists
for the tag), the build output it was made from, and the base image in words.

A verified image is two images: the build's output, and the sealed image oota makes from it by
adding the verification as one layer (``/opt/oota/expected.json``), to which the tag then
moves. ``image.digest`` in a result is the build output's id (it names the software; sealing
adds results, not software), so a page showing only it named an image that ``docker images``
lists as ``<none>``; the page leads with the image the tag names.
"""

from __future__ import annotations

from dataclasses import dataclass

from oota.results.model import BaseImage, Image

# BaseImage.how (oota/execute/bases.py), as a reader says it.
HOW = {"pulled": "pulled from its registry",
       "local": "found on the Docker Engine",
       "bootstrapped": "built by this run with debootstrap from the Debian archive",
       "bootstrapped-earlier": "built by an earlier run with debootstrap from the Debian archive",
       "reused": "as the up-to-date image's label names it (the image was not rebuilt)"}


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageView:
    tag: str
    id: str = ""         # the image the tag pointed to when the result was written
    built_as: str = ""   # the build's output, when sealing made another image of it
    base: str = ""       # 'oota/base:debian12, built by ... from the Debian archive'
    base_note: str = ""  # why (e.g. the pull that failed)

    @property
    def short_id(self) -> str:
        """As ``docker images`` shows IMAGE ID: 12 hex digits."""
        return self.id.removeprefix("sha256:")[:12]


def base_text(base: BaseImage | None) -> tuple[str, str]:
    if base is None or not base.ref:
        return "", ""
    how = HOW.get(base.how, base.how)
    return (f"{base.ref}, {how}" if how else base.ref), base.note


def image_view(image: Image) -> ImageView:
    sealed = image.sealed.id if image.sealed and image.sealed.id else None
    tagged = sealed or image.id or image.digest or ""
    built = image.digest if sealed and image.digest and image.digest != sealed else ""
    base, note = base_text(image.base)
    return ImageView(tag=image.tag, id=tagged, built_as=built, base=base, base_note=note)
