"""Flink releases for ``--impl flink@VERSION``: which one this process runs, and its jars.

``flink`` is the release the ``flink`` extra installs (2.3.0, from the
installed ``pyflink`` package). Any other release from 1.13.6 to 2.3.0 is
fetched on first use: ``pip download`` of ``apache-flink-libraries==VERSION``
(an sdist of about 200 MB; nothing is installed into the environment), of
which only ``deps/lib/flink-dist*.jar`` (named ``flink-dist_2.12-X.jar`` in
older releases, ``flink-dist-X.jar`` in newer ones) and the log4j jars are
kept, in ``~/.cache/cowcheck/flink/VERSION/`` (``COWCHECK_CACHE_DIR`` or
``XDG_CACHE_HOME`` move it). The bridge's Java helper is compiled once per
release against that jar (``cowcheck.flink.jvm``).

One JVM per process: the release is chosen once (:func:`select_release`,
called when ``flink@VERSION`` is resolved) and a process that runs one
release cannot switch to another; runs on different releases are different
processes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import TextIO

from cowcheck.core.processes import module_command

__all__ = ["DEFAULT_VERSION", "OLDEST_VERSION", "select_release", "selected_release", "release_lib", "dist_jar",
           "parse_version", "cache_root", "is_cached", "fetch_needed"]

DEFAULT_VERSION = "2.3.0"
OLDEST_VERSION = "1.13.6"
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_SELECTED: str | None = None


def parse_version(text: str) -> tuple[int, ...]:
    """``"1.13.6"`` -> ``(1, 13, 6)``; ValueError naming the expected form otherwise."""
    if not _VERSION.match(text):
        raise ValueError(f"a Flink release is MAJOR.MINOR.PATCH (e.g. {OLDEST_VERSION}), got {text!r}")
    return tuple(int(part) for part in text.split("."))


def check_version(version: str) -> None:
    """ValueError unless ``version`` is a release the bridge supports (1.13.6 to 2.3.0)."""
    if not parse_version(OLDEST_VERSION) <= parse_version(version) <= parse_version(DEFAULT_VERSION):
        raise ValueError(f"Flink {version} is outside the releases the bridge supports "
                         f"({OLDEST_VERSION} to {DEFAULT_VERSION})")


def select_release(version: str) -> None:
    """Make ``version`` the release this process runs; ValueError if another was chosen
    (or its JVM already runs): one JVM, one release per process."""
    global _SELECTED
    check_version(version)
    if _SELECTED is not None and _SELECTED != version:
        raise ValueError(f"this process already runs Flink {_SELECTED}: one JVM per process, so Flink {version} "
                         f"needs another process")
    _SELECTED = version


def selected_release() -> str:
    """The release this process runs (the default unless :func:`select_release` chose one)."""
    return _SELECTED or DEFAULT_VERSION


def cache_root() -> Path:
    override = os.environ.get("COWCHECK_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cowcheck"


def dist_jar(lib: Path) -> Path | None:
    """The ``flink-dist`` jar in ``lib`` (either naming), or None."""
    found = sorted(lib.glob("flink-dist*.jar"))
    return found[0] if found else None


def is_cached(version: str) -> bool:
    """Whether ``version``'s jars are in the cache (nothing to fetch)."""
    target = cache_root() / "flink" / version
    return (target / "COMPLETE").is_file() and dist_jar(target) is not None


def fetch_needed(rest: str) -> str | None:
    """What resolving ``flink`` + ``rest`` (``@VERSION``, ``@VERSION:corrupt=NAME``...) would
    fetch: a release that is neither the installed one nor cached; None otherwise (also for a
    spec that names no valid release: resolving it fails before fetching)."""
    if not rest.startswith("@"):
        return None
    version = rest[1:].partition(":")[0]
    try:
        check_version(version)
    except ValueError:
        return None
    if version == DEFAULT_VERSION or is_cached(version):
        return None
    return (f"Flink {version} is not in the cache {cache_root() / 'flink'}; fetching it downloads about 200 MB "
            f"with pip")


def release_lib(version: str, progress: TextIO | None = None) -> Path:
    """The directory holding ``version``'s flink-dist and log4j jars, fetched into the
    cache on first use (a progress line on ``progress``, stderr by default).
    Raises RuntimeError with one line if the index cannot be reached or has no
    such release."""
    check_version(version)
    target = cache_root() / "flink" / version
    if is_cached(version):
        return target
    out = progress if progress is not None else sys.stderr
    out.write(f"cowcheck: fetching Flink {version} (apache-flink-libraries {version}, about 200 MB, pip download; "
              f"kept: its flink-dist and log4j jars in {target}) ...\n")
    out.flush()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"fetch-{version}-", dir=target.parent))
    try:
        download = scratch / "download"
        run = subprocess.run(module_command("pip", "download", "--no-deps", "--no-binary", ":all:",
                                            "--disable-pip-version-check", "-q", f"apache-flink-libraries=={version}",
                                            "-d", str(download)), capture_output=True, text=True)
        if run.returncode != 0:
            lines = [line for line in (run.stderr or run.stdout).splitlines()
                     if line.strip() and not line.startswith("WARNING: Location")]
            raise RuntimeError(f"pip download apache-flink-libraries=={version} failed: "
                               f"{lines[-1].strip() if lines else f'exit {run.returncode}'}")
        # apache-flink-libraries-X.tar.gz up to 2.0.0, apache_flink_libraries-X.tar.gz from 2.0.1
        archives = sorted(download.glob("apache[-_]flink[-_]libraries-*.tar.gz"))
        if not archives:
            raise RuntimeError(f"pip download apache-flink-libraries=={version} gave no source archive")
        jars = scratch / "lib"
        jars.mkdir()
        with tarfile.open(archives[0], "r:gz") as archive:
            for member in archive:
                name = Path(member.name)
                if (member.isfile() and name.parent.name == "lib" and name.parent.parent.name == "deps"
                        and (name.name.startswith("flink-dist") or name.name.startswith("log4j-"))
                        and name.suffix == ".jar"):
                    with archive.extractfile(member) as source, open(jars / name.name, "wb") as sink:
                        shutil.copyfileobj(source, sink, 1 << 20)
        if dist_jar(jars) is None:
            raise RuntimeError(f"apache-flink-libraries {version} holds no deps/lib/flink-dist*.jar")
        (jars / "COMPLETE").write_text(version)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(jars, target)  # atomic: a concurrent fetch of the same release loses the race harmlessly
    except OSError:
        if not (target / "COMPLETE").is_file():
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out.write(f"cowcheck: Flink {version} ready: {dist_jar(target).name}\n")
    out.flush()
    return target
