"""The torch axis of matrix.yaml: releases, pinned releases and channels (its form is in
:mod:`oota.config.matrix`'s docstring), and the ``pinned`` rules ``release-check --update``
keeps. Each entry is checked where it is written, every problem located and reported at once.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from oota.config.fields import Fields, parse_version
from oota.config.yamlsrc import Doc, Path_, did_you_mean, path_str

NIGHTLY = "nightly"
TEST = "test"            # release candidates (PyTorch's /whl/test/...)
CHANNELS = (NIGHTLY, TEST)
DEFAULT_MAX_AGE_DAYS = 3        # pytorch/pytorch .ci/pytorch/smoke_test: a nightly is <= 3 days old
_CHANNEL_KEYS = ("channel", "index", "max_age_days", "version")
_RELEASE_KEYS = ("release", "pinned")
PINNED = "pinned"
_PINNABLE_RULES = ("include", "default")


@dataclass(frozen=True, kw_only=True, slots=True)
class Channel:
    """Torch from a channel instead of a pinned release (see the module docstring)."""

    name: str
    index_url: str | None = None    # None: derived from the vendor's release index
    max_age_days: int = DEFAULT_MAX_AGE_DAYS
    version: str | None = None      # test: the release the candidate must be ('2.16.0')


@dataclass(frozen=True, kw_only=True, slots=True)
class Pin:
    """A torch release that ``release-check --update`` keeps: an axis entry or a rule marked
    ``pinned: REASON`` in matrix.yaml."""

    torch: str
    reason: str
    at: str          # '33:9: vendors.cpu.torch[2]' (line:column: path in matrix.yaml)
    rule: str = ""   # 'default[0]' for a pinned rule ('' for an axis entry)


def torch_axis(doc: Doc, path: Path_, value: Any, pins: list[Pin]
                ) -> tuple[tuple[str, ...], tuple[Channel, ...]]:
    """The torch axis: releases as strings (or pinned: ``{release: X, pinned: REASON}``),
    channel entries as mappings. A channel's value on the axis (what rules and ids use) is its
    name. Pinned releases are added to ``pins``."""
    items = [value] if isinstance(value, (str, dict)) else value
    if not isinstance(items, list):
        doc.error(path, "expected a list of releases and channels",
                  'write it like ["2.15.0", {channel: nightly}]')
        return (), ()
    values: list[str] = []
    channels: list[Channel] = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and "channel" not in item and _is_release_entry(item):
            release = _load_pinned_release(doc, path + (i,), item)
            if release is not None:
                values.append(release.torch)
                pins.append(release)
        elif isinstance(item, dict):
            channel = _load_channel(doc, path + (i,), item)
            if channel is None:
                continue
            if any(c.name == channel.name for c in channels):
                doc.error(path + (i,), f"channel '{channel.name}' is listed twice",
                          "keep one entry")
                continue
            channels.append(channel)
            values.append(channel.name)
        elif isinstance(item, (str, int)) and not isinstance(item, bool):
            values.append(str(item))
        else:
            doc.error(path + (i,), "expected a release (a string), a pinned release "
                      "({release: '2.13.0', pinned: REASON}) or a channel ({channel: nightly})")
    return tuple(values), tuple(channels)


def _is_release_entry(item: dict[str, Any]) -> bool:
    """Is a mapping on the torch axis meant as a pinned release (its keys, or their typos, are
    the release form's rather than the channel form's)?"""
    def close(key: str, keys: tuple[str, ...]) -> bool:
        return bool(difflib.get_close_matches(str(key), keys, n=1, cutoff=0.6))
    return any(close(k, _RELEASE_KEYS) and not close(k, _CHANNEL_KEYS) for k in item)


def _pin_reason(doc: Doc, path: Path_, value: Any) -> str | None:
    """A ``pinned`` value: the reason, a string that is not empty."""
    if isinstance(value, str) and value.strip() and value.isprintable():
        return value.strip()
    doc.error(path, "expected the reason for the pin, a string that is not empty",
              'say why the release must stay, e.g. pinned: "the wheel our hosts can install"')
    return None


def _load_pinned_release(doc: Doc, path: Path_, value: dict[str, Any]) -> Pin | None:
    reported = len(doc.problems)
    f = Fields(doc, path, value, allowed=_RELEASE_KEYS, required=_RELEASE_KEYS)
    raw = f.raw("release")
    release = str(raw) if isinstance(raw, (str, int)) and not isinstance(raw, bool) else ""
    if f.has("release") and not release:
        doc.error(path + ("release",), f"expected a release such as '2.13.0', got {raw!r}")
    reason = _pin_reason(doc, path + (PINNED,), f.raw(PINNED)) if f.has(PINNED) else None
    if len(doc.problems) != reported or reason is None:
        return None
    return Pin(torch=release, reason=reason, at=_at(doc, path))


def _load_channel(doc: Doc, path: Path_, value: dict[str, Any]) -> Channel | None:
    f = Fields(doc, path, value, allowed=_CHANNEL_KEYS, required=("channel",))
    reported = len(doc.problems)
    name = f.str("channel")
    if f.has("channel") and len(doc.problems) == reported and name not in CHANNELS:
        doc.error(path + ("channel",), f"unknown channel '{name}'", did_you_mean(name, CHANNELS))
    index = f.str("index") if f.has("index") else None
    if index is not None and (not index.startswith(("https://", "http://"))
                              or not index.isprintable() or " " in index):
        doc.error(path + ("index",), f"'{index}' is not an index URL",
                  "write it like https://download.pytorch.org/whl/nightly/cpu")
    age = f.int("max_age_days", DEFAULT_MAX_AGE_DAYS)
    if f.has("max_age_days") and age < 0:
        doc.error(path + ("max_age_days",), f"{age} is not an age in days",
                  "give 0 or more (PyTorch's smoke test uses 3)")
    version = f.str("version") if f.has("version") else None
    if version is not None and name != TEST:
        doc.error(path + ("version",), f"only the {TEST} channel names the version it stands for",
                  "remove version:, or use channel: test")
    elif version is not None:
        parse_version(doc, path + ("version",), version)
    if len(doc.problems) != reported:
        return None
    return Channel(name=name, index_url=index, max_age_days=age, version=version)


def rule_pin(doc: Doc, path: Path_, f: Fields, pins: list[Pin]) -> None:
    """A rule's ``pinned: REASON``: only default and include entries that name a release."""
    rule = str(path[-2])
    if rule not in _PINNABLE_RULES:
        doc.error(path + (PINNED,), f"an {rule} entry cannot be pinned",
                  "pin the torch axis entry ({release: ..., pinned: ...}) or a default or "
                  "include entry")
        return
    reason = _pin_reason(doc, path + (PINNED,), f.raw(PINNED))
    torch = f.raw("torch")
    if not isinstance(torch, (str, int)) or isinstance(torch, bool) or str(torch) in CHANNELS:
        doc.error(path + (PINNED,), "a pin keeps a torch release through release-check "
                  "--update, and this entry names none", "add torch: RELEASE, or drop pinned")
        return
    if reason is not None:
        pins.append(Pin(torch=str(torch), reason=reason, rule=f"{rule}[{path[-1]}]",
                        at=_at(doc, path)))


def _at(doc: Doc, path: Path_) -> str:
    """'line:column: yaml.path' of ``path``, without the file (the update names it)."""
    return f"{doc.where(path).removeprefix(doc.file + ':')}: {path_str(path)}"
