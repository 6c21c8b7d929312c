"""The release check written out: a table for the terminal, Markdown for reports and issues,
JSON for machines. Pure: the check and the matrix update are data; these only write them."""

from __future__ import annotations

import json
import re
from typing import Any

from oota.errors import InputError
from oota.releases.check import ReleaseCheck, Row
from oota.releases.claims import Claim
from oota.releases.update import CacheUpdate, MatrixUpdate
from oota.report.text import md_text

FORMATS = ("table", "json", "markdown")


def check_format(fmt: str) -> None:
    """A bad ``--format`` is an input error before anything is asked of the network."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt}: expected {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")


def format_check(check: ReleaseCheck, fmt: str, update: MatrixUpdate | None = None,
                 cache: CacheUpdate | None = None) -> str:
    """The check, and what ``--update`` wrote (each file's change as a unified diff)."""
    check_format(fmt)
    if fmt == "json":
        data = as_dict(check)
        if update is not None:
            data["update"] = update_dict(update)
        if cache is not None:
            data["companions_update"] = {"file": cache.file, "changed": cache.changed,
                                         "read": cache.read, "diff": cache.diff}
        return json.dumps(data, indent=2)
    markdown = fmt == "markdown"
    text = _markdown(check) if markdown else _table(check)
    written = (update_lines(update, markdown) if update else []) \
        + (cache_lines(cache, markdown) if cache else [])
    return text + "\n\n" + "\n".join(written) if written else text


def _header(check: ReleaseCheck) -> list[str]:
    how = "detected" if check.detected else "given"
    prev = f", N-1 {check.previous}" if check.previous else ", no N-1 on the index"
    lines = [f"torch N {check.current} ({how}){prev} on {check.index}"]
    for t in check.torch:
        req = f" (Requires-Python {t.requires_python})" if t.requires_python else ""
        wheels = "; ".join(f"{plat.name} wheels for " + (", ".join(
            f"cp{p.major}{p.minor}" for p in pys) or "none") for plat, pys in t.wheels)
        lines.append(f"torch {t.version}: {wheels}{req}")
    return lines


def _table(check: ReleaseCheck) -> str:
    headers = ("vendor", "torch", "python", "platform", "stack", "source", "detail")
    table = [(r.vendor, str(r.torch), str(r.python), r.platform, "yes" if r.ok else "GAP",
              r.origins, r.detail) for r in check.rows]
    widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(headers)]
    out = _header(check) + ["", _line(headers, widths)] + [_line(row, widths) for row in table]
    out += ["", gaps_line(check, "the GAP rows above")] + companion_lines(check)
    out += unverified_lines(check) + [f"note: {n}" for n in check.notes]
    return "\n".join(out)


def unverified_lines(check: ReleaseCheck) -> list[str]:
    """The facts no source confirms, one line each: what they say, where, and why."""
    if not check.unverified:
        return []
    return [f"{len(check.unverified)} unverified fact(s) in the checked vendors' data:"] + \
        [f"  {fact.sentence}" for fact in check.unverified]


def companion_lines(check: ReleaseCheck) -> list[str]:
    """The companions cache against the index: one line per difference, or one that says it
    agrees."""
    found = check.companions
    if found is None:
        return []
    said = [f"companions: {line}" for line in found.vendor_data]
    if found.drift:
        return [f"companions: {line} (update it: release-check --update)"
                for line in found.drift] + said
    if found.compared:
        said.insert(0, f"companions ({', '.join(sorted(found.compared))}): "
                       f"vendors/companions.yaml agrees with {check.index}")
    return said


def gaps_line(check: ReleaseCheck, where: str) -> str:
    """'23 gap(s), in the GAP rows above: rocm 9, ascend 9, gaudi 5': each gap is said once,
    in its row (it was also listed after the table: 23 lines said twice)."""
    if not check.gaps:
        return "0 gap(s): every vendor has a working stack for each torch and Python checked"
    per = {v: sum(r.vendor == v for r in check.gaps) for v in dict.fromkeys(
        r.vendor for r in check.gaps)}
    return (f"{len(check.gaps)} gap(s), in {where}: "
            + ", ".join(f"{vendor} {n}" for vendor, n in per.items()))


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def _markdown(check: ReleaseCheck) -> str:
    out = ["## PyTorch release check", ""] + [f"- {_cell(line)}" for line in _header(check)]
    out += [""]
    out += ["| vendor | torch | python | platform | stack | source | detail |",
            "|---|---|---|---|---|---|---|"]
    out += [f"| {r.vendor} | {r.torch} | {r.python} | {r.platform} | {'✓' if r.ok else '✗'} | "
            f"{r.origins} | {_cell(r.detail)} |" for r in check.rows]
    out += ["", gaps_line(check, "the ✗ rows above")]
    if check.companions is not None:
        out += ["", "### Companions", ""] + [f"- {_cell(line)}"
                                             for line in companion_lines(check)]
    if check.unverified:
        out += ["", "### Unverified facts", ""] + [f"- {_cell(f.sentence)}"
                                                  for f in check.unverified]
    if check.notes:
        out += ["", "### Notes", ""] + [f"- {_cell(n)}" for n in check.notes]
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    """Text made inert for a table cell or a list item (what an index says reaches it): one
    line, ``|`` and markup escaped (:func:`oota.report.text.md_text`)."""
    return md_text(text, limit=2000)


# -- JSON ------------------------------------------------------------------------------------
def as_dict(check: ReleaseCheck) -> dict[str, Any]:
    return {"index": check.index, "current": str(check.current),
            "previous": str(check.previous) if check.previous else None,
            "detected": check.detected,
            "torch": [{"version": str(t.version), "requires_python": t.requires_python,
                       "wheels": {plat.name: [str(p) for p in pys] for plat, pys in t.wheels}}
                      for t in check.torch],
            "rows": [_row(r) for r in check.rows],
            "gaps": [r.sentence for r in check.gaps], "notes": list(check.notes),
            "companions": _companions(check),
            "unverified": [{"vendor": f.vendor, "where": f.where, "what": f.what,
                            "source": f.provenance.url, "reason": f.provenance.why_unverified}
                           for f in check.unverified]}


def _companions(check: ReleaseCheck) -> dict[str, Any] | None:
    found = check.companions
    if found is None:
        return None
    return {"drift": list(found.drift), "read": found.cache.read,
            "compared": list(found.compared), "vendor_data": list(found.vendor_data),
            "pairs": {name: {torch: {"version": p.version, "why": p.why}
                             for torch, p in c.pairs.items()}
                      for name, c in found.cache.companions.items()}}


def _row(row: Row) -> dict[str, Any]:
    return {"vendor": row.vendor, "torch": str(row.torch), "python": str(row.python),
            "platforms": [p.name for p in row.platforms], "ok": row.ok, "detail": row.detail,
            "claims": [_claim(c) for c in row.claims]}


def _claim(claim: Claim) -> dict[str, Any]:
    return {"text": claim.text, "source": claim.origin, "where": claim.where,
            "verified": claim.verified}


def update_dict(update: MatrixUpdate) -> dict[str, Any]:
    return {"file": str(update.file), "changed": {k: list(v) for k, v in update.changed.items()},
            "moved": list(update.moved), "kept": list(update.kept), "notes": list(update.notes),
            "diff": update.diff}


def update_lines(update: MatrixUpdate, markdown: bool = False) -> list[str]:
    head = (f"updated {update.file}: " + "; ".join(f"{name} torch [{', '.join(v)}]"
                                                    for name, v in update.changed.items())
            if update.changed else f"{update.file}: torch axes already up to date")
    return ([head] + [f"kept: {k}" for k in update.kept] + [f"moved: {m}" for m in update.moved]
            + [f"note: {n}" for n in update.notes] + diff_lines(update.diff, markdown))


def cache_lines(cache: CacheUpdate, markdown: bool = False) -> list[str]:
    if not cache.exists:
        return [f"{cache.file}: not written (no companion pair the index declares)"]
    if not cache.changed:
        return [f"{cache.file}: already up to date"]
    return [f"updated {cache.file} (read {cache.read} from {cache.index})"] \
        + diff_lines(cache.diff, markdown)


def diff_lines(diff: str, markdown: bool) -> list[str]:
    """A unified diff as it is printed; in Markdown, a fenced ``diff`` block whose fence is
    longer than any run of backticks in it."""
    lines = diff.splitlines()
    if not markdown or not lines:
        return lines
    fence = "`" * max([3] + [len(run) + 1 for run in re.findall(r"`+", diff)])
    return [f"{fence}diff", *lines, fence]
