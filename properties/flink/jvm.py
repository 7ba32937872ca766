"""The JVM of this process: the Flink jar, our Java helper compiled against it, JPype started once.

The helper (``properties/flink/java/cowcheck/bridge/*.java``, and ``Ops.java``
generated from the map's table by :mod:`cowcheck.flink.opcodes`) is compiled
with ``javac`` on first use into ``~/.cache/cowcheck/java/<hash of the
sources, the generated one included, and the Flink jar>/`` (the generated source
is kept there under ``generated/``; ``COWCHECK_CACHE_DIR`` or ``XDG_CACHE_HOME``
move it) and put on the class path next to the Flink of this process
(:func:`flink_jars`): ``flink-dist-2.3.0.jar`` from the ``apache-flink-libraries``
wheel (``pip install 'cowcheck[flink]'``; ``COWCHECK_FLINK_LIB`` points
elsewhere), a release's jar from the cache, or the jars of ``flink@PATH``; jars
given with ``--classpath`` go first, so that their classes replace Flink's.

One JVM per process: it starts on first use (creating a map, running a
batch), never at import or resolve, so a campaign driver can resolve the
spec and fork executors that each start their own JVM. A JVM cannot be used
across ``fork``: using the bridge in a child forked after the parent started
the JVM is a :class:`FlinkUnavailableError`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from cowcheck.core.limits import steps_through
from cowcheck.flink.opcodes import OPS_JAVA, ops_java
from cowcheck.flink.pojos import type_sources
from cowcheck.flink.releases import (DEFAULT_VERSION, FlinkBuild, cache_root, dist_jar, release_lib, selected_build,
                                    selected_release)

__all__ = ["FlinkUnavailableError", "JvmInfo", "available", "compile_helper", "jvm", "started", "JAVA_SOURCES", "Java",
           "helper_sources", "GENERATED", "flink_jars"]

FLINK_JAR = "flink-dist-2.3.0.jar"
JAVA_SOURCES = Path(__file__).with_name("java")
GENERATED = "generated"  # the directory of a compiled helper that holds the sources generated for it
_HELPER_CLASS = "cowcheck.bridge.MapHandle"
# The work on the Java side is many short calls: a quick JIT (C1) and the serial collector
# start and warm up faster than the server defaults (COWCHECK_JVM_OPTIONS replaces them).
_JVM_OPTIONS = tuple(os.environ.get("COWCHECK_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").split())
# Flink 1.x's Kryo (chill's serializers) reflects into java.util and java.lang, closed since JDK 17.
_OPENS = ("--add-opens=java.base/java.util=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED")


class FlinkUnavailableError(RuntimeError):
    """The Flink bridge cannot run here; ``.reason`` says why and how to fix it."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Flink bridge unavailable: {reason}")
        self.reason = reason


# ------------------------------------------------------------------ the JVM


@attrs.frozen
class JvmInfo:
    """How the JVM of this process came up: seconds to compile the helper (0 if
    cached), seconds to start the JVM and load the classes, the class path."""

    pid: int
    compile_seconds: float
    start_seconds: float
    classpath: tuple
    java_version: str
    flink_version: str = DEFAULT_VERSION  # the release, or the path of a build given by path
    build: FlinkBuild | None = None


_JVM: JvmInfo | None = None


def _installed_lib() -> Path:
    """The directory with the jar of the release the ``flink`` extra installs (``pyflink/lib``,
    or ``COWCHECK_FLINK_LIB``)."""
    override = os.environ.get("COWCHECK_FLINK_LIB")
    if override:
        candidates = [Path(override)]
    else:
        spec = importlib.util.find_spec("pyflink")
        candidates = [Path(p) / "lib" for p in (spec.submodule_search_locations or [])] if spec else []
    for lib in candidates:
        if (lib / FLINK_JAR).is_file():
            return lib
    raise FlinkUnavailableError(
        f"{FLINK_JAR} not found (looked in {', '.join(map(str, candidates)) or 'no pyflink package'}); "
        f"install it with: pip install 'cowcheck[flink]' (or set COWCHECK_FLINK_LIB to its directory)")


def flink_jars(build: FlinkBuild | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(Flink's jars, the log4j jars beside them)`` of ``build`` (the Flink this process runs by
    default, ``cowcheck.flink.releases``): the installed jar for the default release, the per-user
    cache (fetched on first use) for any other, the jars found at the path of ``flink@PATH``."""
    build = build or selected_build()
    if build.path:
        return build.jars, build.logging
    if build.release != DEFAULT_VERSION:
        try:
            lib = release_lib(build.release)
        except (RuntimeError, OSError, ValueError) as exc:
            raise FlinkUnavailableError(f"Flink {build.release}: {exc}") from None
        flink = dist_jar(lib)
    else:
        lib = _installed_lib()
        flink = lib / FLINK_JAR
    # log4j next to flink-dist silences SLF4J's "no provider" warnings.
    return (str(flink),), tuple(sorted(str(p) for p in lib.glob("log4j-*.jar")))


def available(build: FlinkBuild | None = None) -> str | None:
    """None if the bridge can start here on ``build`` (the Flink of this process by default): jpype1
    and the Flink jar are installed, or for another release than the default or a build given by
    path, jpype1 (the jar being fetched on first use, or there); else the reason. Cheap: starts no
    JVM, fetches and compiles nothing."""
    if importlib.util.find_spec("jpype") is None:
        return "jpype1 is not installed: pip install 'cowcheck[flink]'"
    build = build or selected_build()
    if build.path or build.release != DEFAULT_VERSION:
        return None
    try:
        _installed_lib()
    except FlinkUnavailableError as exc:
        return exc.reason
    return None


_cache_root = cache_root


def compile_helper() -> float:
    """Compile the helper against the selected release's jar now, if it is not compiled yet
    (seconds spent); starts no JVM. Resolving a spec does it, so that the first implementation
    built (under a step time limit) does not pay for javac on a loaded machine."""
    return _compiled_helper(flink_jars()[0])[1]


def helper_sources() -> list[tuple[str, str]]:
    """The helper's sources as ``(path relative to the source root, text)``: the hand-written
    ones, and ``Ops.java`` generated from the map's table (:func:`~cowcheck.flink.opcodes.ops_java`)."""
    written = sorted(JAVA_SOURCES.rglob("*.java"))
    if not written:
        raise FlinkUnavailableError(f"the bridge's Java sources are missing from this installation ({JAVA_SOURCES}); "
                                    f"reinstall cowcheck")
    sources = [(source.relative_to(JAVA_SOURCES).as_posix(), source.read_text(encoding="utf-8")) for source in written]
    if any(path == OPS_JAVA for path, _ in sources):
        raise FlinkUnavailableError(f"{JAVA_SOURCES / OPS_JAVA} must not exist: the helper's Ops.java is generated "
                                    f"from the map's table (cowcheck.flink.opcodes)")
    return sorted(sources + [(OPS_JAVA, ops_java())])


def _compiled_helper(classpath: tuple) -> tuple[Path, float]:
    """The directory with our compiled helper classes, compiling them on first use against
    ``classpath`` (Flink's jars; a user's jars placed before them replace Flink's classes at run time,
    with the API the helper was compiled against); ``(directory, seconds spent compiling)``.
    Keyed by a hash of the sources (the generated ``Ops.java`` included) and of each jar's name,
    size and modification time, so an edit, a change of the map's table, another Flink build or
    a rebuilt jar recompiles."""
    sources = helper_sources()
    types = type_sources()
    digest = hashlib.sha256()
    for path, text in sources + types:
        digest.update(path.encode() + b"\0" + text.encode("utf-8") + b"\0")
    for jar in classpath:
        stat = os.stat(jar)
        digest.update(f"{Path(jar).name}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    target = _cache_root() / "java" / digest.hexdigest()[:20]
    if (target / "COMPLETE").is_file():
        return target, 0.0
    javac = shutil.which("javac")
    if javac is None:
        raise FlinkUnavailableError("javac not found on PATH: the bridge compiles its Java helper on first use "
                                    "(install a JDK, 11 or newer)")
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        files = []
        for path, text in sources:  # the written sources from the package, the generated ones from the build
            if path == OPS_JAVA:
                file = scratch / GENERATED / path
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_text(text, encoding="utf-8")
            else:
                file = JAVA_SOURCES / path
            files.append(str(file))
        result = subprocess.run([javac, "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp", os.pathsep.join(classpath),
                                 "-d", str(scratch)] + files, capture_output=True, text=True)
        if result.returncode != 0:
            raise FlinkUnavailableError(f"javac failed on {JAVA_SOURCES}:\n{result.stderr.strip()}")
        _compile_types(javac, types, scratch)
        (scratch / "COMPLETE").write_text("")
        try:
            os.rename(scratch, target)  # atomic; another process may have won the race
        except OSError:
            if not (target / "COMPLETE").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target, time.perf_counter() - started


def _compile_types(javac: str, types: list, scratch: Path) -> None:
    """Each class version's sources into a directory of its own under ``scratch`` (cowcheck.flink.pojos):
    classes of one name in several versions, loaded by the helper with a class loader each."""
    versions: dict = {}
    for path, text in types:
        file = scratch / GENERATED / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
        versions.setdefault(Path(*Path(path).parts[:2]), []).append(str(file))
    for version, files in versions.items():
        result = subprocess.run([javac, "--release", "11", "-nowarn", "-encoding", "UTF-8", "-d",
                                 str(scratch / version)] + files, capture_output=True, text=True)
        if result.returncode != 0:
            raise FlinkUnavailableError(f"javac failed on the generated classes of {version}:\n{result.stderr.strip()}")


def jvm() -> JvmInfo:
    """Start the JVM of this process (once) with Flink and our helper on the class path."""
    global _JVM
    if _JVM is not None:
        if _JVM.pid != os.getpid():
            raise FlinkUnavailableError(
                f"the JVM was started in process {_JVM.pid}, which then forked this process {os.getpid()}; a JVM "
                f"does not survive fork: create Flink maps only in the process that uses them (each campaign "
                f"executor starts its own JVM on first use)")
        if _JVM.build != selected_build():
            raise FlinkUnavailableError(f"this process runs Flink {_JVM.flink_version}: one JVM per process, so "
                                        f"Flink {selected_release()} needs another process")
        return _JVM
    reason = available()
    if reason is not None:
        raise FlinkUnavailableError(reason)
    _JVM = _start()
    return _JVM


@steps_through
def _start() -> JvmInfo:
    """Compile the helper if need be and start the JVM: cowcheck's own start-up, not the
    implementation's time (the step time limit does not cut it short, which would leave a JVM
    half started in the process), bounded as the harness's own work is (``harness_bound``)."""
    import jpype

    build = selected_build()
    flink, logging = flink_jars(build)
    classes, compile_seconds = _compiled_helper(flink)
    # The user's jars first: their classes replace Flink's (the JVM loads the first it finds).
    classpath = (*build.user, *flink, *logging, str(classes))
    started = time.perf_counter()
    if jpype.isJVMStarted():
        raise FlinkUnavailableError("a JVM is already running in this process, started without Flink and the "
                                    "cowcheck helper on its class path (JPype allows one JVM per process)")
    jpype.startJVM(*_JVM_OPTIONS, *_OPENS, classpath=list(classpath), convertStrings=False)
    jpype.JClass(_HELPER_CLASS)  # load (and link) the helper and Flink's map now, not in the first operation
    jpype.JClass("cowcheck.bridge.Walk")
    version = str(jpype.java.lang.System.getProperty("java.version"))
    Java.load()
    return JvmInfo(os.getpid(), compile_seconds, time.perf_counter() - started, classpath, version,
                   build.label, build)


def started() -> JvmInfo | None:
    """How this process's JVM came up, or None if it has not started (in this process)."""
    return _JVM if _JVM is not None and _JVM.pid == os.getpid() else None


class Java:
    """Java classes and converters, bound once the JVM runs."""

    jpype: Any = None
    Integer: Any = None
    Long: Any = None
    Boolean: Any = None
    JString: Any = None
    int_array: Any = None
    object_array: Any = None
    MapHandle: Any = None
    Walk: Any = None
    Keys: Any = None
    Repr: Any = None
    Serializers: Any = None
    JException: Any = None
    CME: Any = None
    IllegalState: Any = None
    IllegalArgument: Any = None
    NullPointer: Any = None

    @classmethod
    def load(cls) -> None:
        import jpype

        cls.jpype = jpype
        cls.Integer = jpype.JClass("java.lang.Integer")
        cls.Long = jpype.JClass("java.lang.Long")
        cls.Boolean = jpype.JClass("java.lang.Boolean")
        cls.JString = jpype.JString
        cls.int_array = jpype.JArray(jpype.JInt)
        cls.object_array = jpype.JArray(jpype.JObject)
        cls.MapHandle = jpype.JClass(_HELPER_CLASS)
        cls.Walk = jpype.JClass("cowcheck.bridge.Walk")
        cls.Keys = jpype.JClass("cowcheck.bridge.Keys")
        cls.Repr = jpype.JClass("cowcheck.bridge.Repr")
        cls.Serializers = jpype.JClass("cowcheck.bridge.Serializers")
        cls.JException = jpype.JException
        cls.CME = jpype.JClass("java.util.ConcurrentModificationException")
        cls.IllegalState = jpype.JClass("java.lang.IllegalStateException")
        cls.IllegalArgument = jpype.JClass("java.lang.IllegalArgumentException")
        cls.NullPointer = jpype.JClass("java.lang.NullPointerException")


