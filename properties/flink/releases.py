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

``flink@PATH`` runs a Flink given by path instead (:func:`build_of_path`): a
``flink-dist*.jar`` or a directory of jars (a distribution's or a build's
``lib/``), read as it is and never fetched; what it can do is read from the
classes it holds (``cowcheck.flink.jars``), its version from the jar. Jars given
with ``--classpath`` go first on the class path of either
(:class:`FlinkBuild`'s ``user``).

One JVM per process: the Flink is chosen once (:func:`select_build`, called when
``flink@VERSION`` or ``flink@PATH`` is resolved) and a process that runs one
cannot switch to another; runs on different Flinks are different processes.
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

import attrs

from cowcheck.core.processes import module_command
from cowcheck.flink.jars import STATE_CLASSES, JarError, class_index, jar_version, replaced_classes

__all__ = ["DEFAULT_VERSION", "OLDEST_VERSION", "select_release", "selected_release", "release_lib", "dist_jar",
           "parse_version", "cache_root", "is_cached", "fetch_needed", "FlinkBuild", "build_of_path", "is_path",
           "select_build", "selected_build", "user_jars"]

DEFAULT_VERSION = "2.3.0"
OLDEST_VERSION = "1.13.6"
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


@attrs.frozen
class FlinkBuild:
    """The Flink a process runs: a ``release`` (``2.3.0`` installed by the ``flink`` extra, any
    other fetched into the cache), or a build given by ``path`` (``flink@PATH``: ``jars`` hold
    its classes, ``logging`` the log4j jars beside them, ``version`` and ``commit`` what the jar
    states); ``user``: jars put before Flink's on the class path (``--classpath``), replacing
    ``replaced`` of Flink's classes."""

    release: str = ""
    path: str = ""
    jars: tuple = ()
    logging: tuple = ()
    version: str | None = None
    commit: str | None = None
    user: tuple = ()
    replaced: tuple = ()

    @property
    def label(self) -> str:
        """The release, or the path as named (what messages call this Flink)."""
        return self.release or self.path

    def describe(self) -> str:
        """"Apache Flink 1.13.6", or for a path "Apache Flink 2.3-SNAPSHOT (commit abc1234) from PATH"."""
        if self.release:
            return f"Apache Flink {self.release}"
        stated = (f"{self.version}" + (f" (commit {self.commit})" if self.commit else "")
                  if self.version else "(its jar states no version)")
        return f"Apache Flink {stated} from {self.path}"

    @property
    def behaves_as(self) -> str:
        """The release whose documented behaviour the models expect of this Flink: the release, or
        for a build given by path the MAJOR.MINOR.PATCH its jar states (``2.3-SNAPSHOT`` -> ``2.3.0``),
        or the newest supported release when it states none."""
        if self.release:
            return self.release
        parts = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", self.version or "")
        return f"{parts[1]}.{parts[2]}.{parts[3] or 0}" if parts else DEFAULT_VERSION

    def describe_user(self) -> str:
        """What ``--classpath`` changes, in words ("" without it)."""
        if not self.user:
            return ""
        shown = ", ".join(self.replaced[:4]) + (f" and {len(self.replaced) - 4} more" if len(self.replaced) > 4 else "")
        return (f"; first on the class path: {', '.join(self.user)}, replacing "
                + (f"{len(self.replaced)} of Flink's classes: {shown}" if self.replaced else "none of Flink's classes"))


_SELECTED: FlinkBuild | None = None


def is_path(target: str) -> bool:
    """Whether ``flink@TARGET`` names a path (it has a slash or ends in .jar) rather than a release."""
    return "/" in target or os.sep in target or target.endswith(".jar") or target.startswith("~")


def _flink_jars_of(directory: Path) -> tuple[list[Path], list[Path]]:
    """A directory's jars holding Flink's classes and its log4j jars: its ``flink-dist*.jar`` if it
    has one (a distribution's ``lib/``), else every jar but log4j's (a build's module jars)."""
    jars = sorted(p for p in directory.glob("*.jar") if p.is_file())
    logging = [p for p in jars if p.name.startswith("log4j-")]
    dist = [p for p in jars if p.name.startswith("flink-dist")]
    return (dist or [p for p in jars if p not in logging]), logging


def build_of_path(target: str, user: tuple = ()) -> FlinkBuild:
    """The Flink at ``target`` (a jar, or a directory of jars), with ``user`` jars first; ValueError
    in one line for a path that does not exist, cannot be read, or holds no Flink state classes."""
    path = Path(os.path.expanduser(target))
    if not path.exists():
        raise ValueError(f"{target}: no such file or directory")
    if path.is_dir():
        jars, logging = _flink_jars_of(path)
        if not jars:
            raise ValueError(f"{target}: a directory with no jar in it (name a flink-dist*.jar or a lib/ "
                             f"directory of Flink's jars)")
    else:
        jars, logging = [path], sorted(p for p in path.parent.glob("log4j-*.jar") if p.is_file())
    try:
        index = class_index([str(j) for j in jars])
        lacking = [name for name in STATE_CLASSES if not index.has(name)]
        version, commit = jar_version(index.where(STATE_CLASSES[0]) or jars[0])
    except JarError as exc:
        raise ValueError(str(exc)) from None
    if lacking:
        raise ValueError(f"{target} holds none of Flink's state classes the bridge runs "
                         f"({', '.join(lacking)} missing): name a flink-dist*.jar or a lib/ directory of Flink's jars")
    return FlinkBuild(path=target, jars=tuple(str(j) for j in jars), logging=tuple(str(j) for j in logging),
                      version=version, commit=commit, user=tuple(user))


def user_jars(paths: tuple, flink_jars: tuple) -> tuple:
    """The Flink classes ``paths`` (``--classpath``) replace in ``flink_jars``; ValueError in one
    line for a jar that does not exist or cannot be read."""
    try:
        for path in paths:
            if not Path(path).is_file():
                raise JarError(path, "no such file" if not Path(path).exists() else "not a file")
        return tuple(replaced_classes(paths, flink_jars))
    except JarError as exc:
        raise ValueError(f"--classpath {exc}") from None


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
    check_version(version)
    select_build(FlinkBuild(release=version))


def select_build(build: FlinkBuild) -> None:
    """Make ``build`` the Flink this process runs; ValueError if another was chosen."""
    global _SELECTED
    if _SELECTED is not None and _SELECTED != build:
        other = "" if _SELECTED.label != build.label else " with other jars first on the class path"
        raise ValueError(f"this process already runs Flink {_SELECTED.label}: one JVM per process, so Flink "
                         f"{build.label}{other} needs another process")
    _SELECTED = build


def selected_build() -> FlinkBuild:
    """The Flink this process runs (the default release unless :func:`select_build` chose one)."""
    return _SELECTED or FlinkBuild(release=DEFAULT_VERSION)


def selected_release() -> str:
    """The release this process runs, or the path of the build it runs (:attr:`FlinkBuild.label`)."""
    return selected_build().label


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
