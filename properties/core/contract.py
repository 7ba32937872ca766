"""The contract the suite checks, read from ``docs/contract.md`` (shipped in the package).

``docs/contract.md`` is the one place where the rules are written at length:
every property and invariant of every machine and every other code a failure
can carry, each with its rule, the harm it guards against, how the suite
checks it, a short program that breaks it and the usual causes. This module
reads that document (the copy installed with the package,
``properties/core/contract.md``, which a test keeps identical to the one in
``docs/``), so ``cowcheck explain`` works outside the checkout and prints
the same words a reader of the repository sees.

An entry is a level-3 heading that is just the code (``### P6``), inside a
numbered section (``## 9. ...``); its first paragraph is its title, then
paragraphs that start with a bold label (``**Rule.**``, ``**Harm.**``,
``**Checked.**``, ``**Breaks it.**`` followed by a fenced program,
``**Usual causes.**``). GitHub names the heading's anchor after the code in
lower case, which is what :func:`pointer` links to, without reading the file.

>>> pointer("P6")
'see: cowcheck explain P6 (docs/contract.md#p6)'
>>> entries()["I9"].section.startswith("8.")
True
"""

from __future__ import annotations

import functools
import re
import textwrap
from importlib import resources

import attrs

__all__ = ["CONTRACT", "FIELDS", "Entry", "parse", "entries", "contract_text", "pointer", "render", "similar"]

CONTRACT = "docs/contract.md"  # where the document lives in the repository (pointers name it)
FIELDS = ("Rule", "Harm", "Checked", "Breaks it", "Usual causes")

_CODE_HEADING = re.compile(r"^### (\S+)\s*$")
_SECTION_HEADING = re.compile(r"^## (.+?)\s*$")
_LABEL = re.compile(r"^\*\*([^*]+?)\.\*\*\s*(.*)$")


@attrs.frozen
class Entry:
    """One code of the contract: its ``title`` (a line), the ``section`` it sits in,
    its labelled ``fields`` (Markdown text) and the program of its example (or "")."""

    code: str
    title: str
    section: str
    fields: dict
    example: str = ""

    @property
    def anchor(self) -> str:
        return self.code.lower()

    @property
    def link(self) -> str:
        return f"{CONTRACT}#{self.anchor}"


def contract_text() -> str:
    """The contract as installed with the package."""
    return resources.files("cowcheck.core").joinpath("contract.md").read_text(encoding="utf-8")


def parse(text: str) -> dict[str, Entry]:
    """The entries of a contract document, in order (see the module docstring)."""
    out: dict[str, Entry] = {}
    section = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _SECTION_HEADING.match(line)
        if heading:
            section = heading.group(1)
        code = _CODE_HEADING.match(line)
        i += 1
        if not code:
            continue
        body = []
        while i < len(lines) and not lines[i].startswith("## ") and not lines[i].startswith("### "):
            body.append(lines[i])
            i += 1
        entry = _entry(code.group(1), section, body)
        if entry.code in out:
            raise ValueError(f"contract: {entry.code} has two entries")
        out[entry.code] = entry
    return out


def _entry(code: str, section: str, body: list[str]) -> Entry:
    paragraphs: list[list[str]] = []
    example: list[str] = []
    fence = None
    for line in body:
        if fence is not None:
            if line.strip() == fence:
                fence = None
            else:
                example.append(line)
            continue
        if line.strip().startswith("```"):
            fence = "```"
            example.clear()
            continue
        if not line.strip():
            paragraphs.append([])
        elif paragraphs and paragraphs[-1]:
            paragraphs[-1].append(line.strip())
        else:
            paragraphs.append([line.strip()])
    texts = [" ".join(p) for p in paragraphs if p]
    title = texts[0] if texts and not _LABEL.match(texts[0]) else ""
    fields = {}
    for paragraph in texts:
        label = _LABEL.match(paragraph)
        if label:
            fields[label.group(1)] = label.group(2)
    return Entry(code, title, section, fields, "\n".join(example))


@functools.lru_cache(maxsize=1)
def entries() -> dict[str, Entry]:
    """The entries of the installed contract, by code."""
    return parse(contract_text())


def pointer(code: str) -> str:
    """The line that sends a reader of a failure to the contract's entry for ``code``."""
    return f"see: cowcheck explain {code} ({CONTRACT}#{code.lower()})"


def similar(code: str, known) -> list[str]:
    """Known codes that look like ``code`` (a typo, another case, a neighbour's number)."""
    import difflib

    folded = {k.lower(): k for k in known}
    return [folded[k] for k in difflib.get_close_matches(code.lower(), list(folded), n=3, cutoff=0.5)]


def _plain(markdown: str) -> str:
    """Markdown inline text as terminal text: no bold marks, links as ``text (target)``."""
    text = markdown.replace("**", "")
    return re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"\1 (\2)", text)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` wrapped, never inside a `quoted span` (a command or a value stays on one line)."""
    kept = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), text)
    lines = textwrap.wrap(kept, width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
    return [line.replace("\0", " ") for line in lines]


def render(entry: Entry, width: int = 100) -> str:
    """An entry as ``cowcheck explain`` prints it."""
    out = [f"{entry.code}: {_plain(entry.title)}", f"  ({_plain(entry.section)}; {entry.link})", ""]
    for name in FIELDS:
        if name not in entry.fields:
            continue
        out += _wrap(f"{name}: {_plain(entry.fields[name])}", width)
        if name == "Breaks it" and entry.example:
            out += ["    " + line for line in entry.example.splitlines()]
        out.append("")
    if entry.example:
        out += _wrap("(An example runs on a seeded mutant, mutant:NAME, or on a one-mistake implementation "
                     "of tests/test_contract_examples.py in the repository, which replays it.)", width) + [""]
    return "\n".join(out)
