"""Nothing in the repository points outside it, or at a path of it that does not exist.

A clone has only what is committed: a doc, docstring or comment that names
the old outside contract or a module that has moved sends the reader nowhere.
Checked over every committed (or new, not ignored) text file:

- no mention of the old contract outside the repository (its file name, its
  section signs, the directory it lived in): the contract is docs/contract.md;
- every path that starts with one of the repository's top-level directories
  (``properties/map/ops.py``, ``docs/zoo.md``, ``tests/zoo/``) names a file or
  directory that exists, and every quoted dotted module name
  (``cowcheck.map.ops``) a module that exists;
- every relative Markdown link resolves inside the repository to something that
  exists, and its ``#anchor``, if it has one, to a heading of the Markdown
  file it points to (the anchors GitHub makes).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = ("reference", "model", "properties", "spark_fuzz", "tests", "benchmarks", "docs")
TEXT = (".md", ".py", ".java", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml")
# The package's copy of the contract (its links are the document's, checked there) and this file,
# which has to spell out what it looks for.
SKIPPED = ("properties/core/contract.md", "tests/test_doc_paths.py")

OUTSIDE = re.compile("SPEC" + r"(?:\.md| §)|\.\./shared\b")
MENTION = re.compile(r"(?<![\w./\-~])((?:%s)/[\w.\-/]*)(?![\w.\-/\\])" % "|".join(TOP))
MODULE = re.compile(r"`~?((?:cowcheck|properties|reference|model|spark_fuzz)(?:\.\w+)+)")
# Installed names and the folders they live in (pyproject.toml's package-dir), longest first.
FOLDERS = (("cowcheck.reference", "reference"), ("cowcheck.model", "model"), ("cowcheck.spark_fuzz", "spark_fuzz"),
           ("cowcheck", "properties"))
# Dotted names under cowcheck that are not Python modules: the entry-point group of commands and the
# Java package of the Flink bridge's helper.
NOT_MODULES = ("cowcheck.commands", "cowcheck.bridge", "cowcheck.types")  # an entry-point group, Java packages
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def repository_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in sorted(set(listed))
            if name.endswith(TEXT) and name not in SKIPPED and (ROOT / name).is_file()]


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    return {slug(line.lstrip("#")) for _, line in prose(markdown, markdown.read_text(encoding="utf-8"))
            if line.startswith("#")}


def prose(path: Path, text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of the text; for Markdown, outside fenced blocks (program output)."""
    lines = text.splitlines()
    if path.suffix != ".md":
        return list(enumerate(lines, 1))
    out, fenced = [], False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((number, line))
    return out


def module_exists(dotted: str) -> bool:
    """Whether ``cowcheck.b.c...`` names a module of the repository (the rest may be its attributes);
    the old top-level names (``properties.x``) name nothing: nothing is installed under them."""
    if any(dotted == name or dotted.startswith(name + ".") for name in NOT_MODULES):
        return True
    for name, folder in FOLDERS:
        if dotted == name or dotted.startswith(name + "."):
            rest = dotted[len(name):].split(".")[1:]
            path = ROOT / folder
            break
    else:
        return False
    for name in rest:
        if not path.is_dir():
            return True  # a module: what follows are its attributes
        if (path / name).is_dir() or (path / f"{name}.py").is_file():
            path = path / name if (path / name).is_dir() else path / f"{name}.py"
            continue
        init = path / "__init__.py"  # a name the package itself defines or imports
        return init.is_file() and re.search(rf"\b{re.escape(name)}\b", init.read_text(encoding="utf-8")) is not None
    return True


def problems_of(path: Path, text: str | None = None) -> list[str]:
    """What in ``path`` (its ``text``, if given) points outside the repository or nowhere."""
    text = path.read_text(encoding="utf-8") if text is None else text
    where = path.relative_to(ROOT)
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if OUTSIDE.search(line):
            out.append(f"{where}:{number}: points outside the repository: {line.strip()[:100]}")
    for number, line in prose(path, text):
        for mention in MENTION.findall(line):
            name = mention.rstrip(".-")
            if not (ROOT / name).exists():
                out.append(f"{where}:{number}: names {name}, which does not exist")
        for dotted in MODULE.findall(line):
            if not module_exists(dotted):
                out.append(f"{where}:{number}: names the module {dotted}, which does not exist")
        if path.suffix != ".md":
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if ROOT not in resolved.parents and resolved != ROOT:
                out.append(f"{where}:{number}: links {target}, outside the repository")
            elif not resolved.exists():
                out.append(f"{where}:{number}: links {target}, which does not exist")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                out.append(f"{where}:{number}: links {target}, but {resolved.name} has no heading #{anchor}")
    return out


def test_no_file_points_outside_the_repository_or_at_a_path_that_does_not_exist():
    problems = [problem for path in repository_files() for problem in problems_of(path)]
    assert problems == []


@pytest.mark.parametrize("text, found", [
    ("The contract is `../" + "shared/SPEC.md`.", "points outside"),
    ("checked as SPEC" + " §6 says", "points outside"),
    ("see properties/map/no_such_module.py for the rule", "does not exist"),
    ("see ``properties.no_such_module.run``", "does not exist"),
    ("[the rule](contract.md#no-such-heading)", "has no heading"),
    ("[the rule](no-such-file.md)", "does not exist"),
    ("[elsewhere](../../outside.md)", "outside the repository"),
])
def test_the_check_catches_each_kind_of_bad_reference(text, found):
    problems = problems_of(ROOT / "docs" / "probe.md", text)
    assert len(problems) == 1 and found in problems[0]


def test_good_references_pass():
    text = ("[P6](contract.md#p6), [the API](contract.md#15-the-map-api), `properties/map/ops.py`, "
            "``cowcheck.map.ops.MAP_OPS``, ``cowcheck.core.errors.UsageError``, tests/zoo/, a regex "
            "tests/zoo\\.py, [a site](https://flink.apache.org/)\n```\nproperties/not_checked_in_output\n```")
    assert problems_of(ROOT / "docs" / "probe.md", text) == []
    assert problems_of(ROOT / "docs" / "ARCHITECTURE.md") == []


CODE = re.compile(r"\b(?:P[1-7]|I[0-9]|T[1-3]|C[1-5]|A1[01]|A[1-9])\b")


def test_every_document_that_names_a_contract_code_links_the_contract():
    # docs/contract.md is the one place the rules are written at length: a document that names a
    # property or invariant leads the reader there instead of restating it.
    unlinked = [path.relative_to(ROOT).as_posix() for path in repository_files()
                if path.suffix == ".md" and path.name != "contract.md"
                and any(CODE.search(line) for _, line in prose(path, path.read_text(encoding="utf-8")))
                and "contract.md" not in path.read_text(encoding="utf-8")]
    assert unlinked == []
