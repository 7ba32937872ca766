"""What a set of Flink jars holds, read without a JVM: classes, their methods, the build's version.

The bridge decides what a Flink can do from the classes it finds, never from a
version string (a build of one's own says ``2.3-SNAPSHOT``, or nothing): a
:class:`ClassIndex` lists the ``.class`` entries of the jars of a class path,
first jar first as the JVM looks them up, and reads a class's methods,
constructors and fields from its class file (:func:`members`) — enough for
"does this release's controller take an epoch mode", "does ``processNonRecord``
take a final action". Reading the names of a 200 MB flink-dist takes about
0.3-0.5 s; an index is kept per jar (path, size, modification time).

:func:`jar_version`: the version and commit a Flink jar says it is, as
Flink's own ``EnvironmentInformation`` reads them
(``.flink-runtime.version.properties``), else the manifest's
``Implementation-Version``. :func:`replaced_classes`: the Flink classes that
jars placed first on the class path replace.

>>> import io, zipfile
>>> data = io.BytesIO()
>>> with zipfile.ZipFile(data, "w") as z:
...     z.writestr(".flink-runtime.version.properties",
...                "project.version=2.3-SNAPSHOT\\ngit.commit.id.abbrev=abc1234\\n")
>>> jar_version(data)
('2.3-SNAPSHOT', 'abc1234')
"""

from __future__ import annotations

import os
import re
import struct
import zipfile
from pathlib import Path

import attrs

__all__ = ["JarError", "ClassIndex", "Member", "class_index", "jar_version", "replaced_classes", "classes_in",
           "STATE_CLASSES"]

# What makes a jar (or a directory of jars) a Flink the bridge can run: its heap state classes,
# present in every release from 1.13.6 to 2.3.0.
STATE_CLASSES = ("org.apache.flink.runtime.state.heap.CopyOnWriteStateMap",
                 "org.apache.flink.runtime.state.heap.CopyOnWriteStateTable",
                 "org.apache.flink.runtime.state.heap.HeapKeyedStateBackendBuilder")
_VERSIONED = re.compile(r"^META-INF/versions/\d+/")  # flink-dist is a multi-release jar
_VERSION_FILE = ".flink-runtime.version.properties"  # not the root .version.properties (1.13.6's is a dependency's)


class JarError(ValueError):
    """A jar that cannot be read as one (missing, unreadable, not a zip); ``.path`` and ``.reason``."""

    def __init__(self, path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


def _open(path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise JarError(path, "no such file") from None
    except IsADirectoryError:
        raise JarError(path, "a directory, not a jar") from None
    except PermissionError:
        raise JarError(path, "cannot be read (permission denied)") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise JarError(path, f"not a jar ({exc})") from None


def classes_in(path) -> frozenset:
    """The class names (``a.b.C``, ``a.b.C$D``) a jar holds, versioned entries folded in."""
    with _open(path) as jar:
        return frozenset(_VERSIONED.sub("", name)[:-6].replace("/", ".") for name in jar.namelist()
                         if name.endswith(".class") and not name.endswith("module-info.class"))


def jar_version(path) -> tuple[str | None, str | None]:
    """``(version, commit)`` a Flink jar states (either None when it states none)."""
    with _open(path) as jar:
        names = set(jar.namelist())
        if _VERSION_FILE in names:
            props = _properties(jar.read(_VERSION_FILE).decode("utf-8", "replace"))
            version = props.get("project.version", "")
            if version and not version.startswith("$"):  # "${project.version}": the build filled nothing in
                commit = props.get("git.commit.id.abbrev", "")
                return version, (commit if commit and not commit.startswith("$") else None)
        if "META-INF/MANIFEST.MF" in names:
            manifest = re.sub(r"\r?\n ", "", jar.read("META-INF/MANIFEST.MF").decode("utf-8", "replace"))
            found = re.search(r"^Implementation-Version:\s*(\S+)", manifest, re.M)
            if found:
                return found.group(1), None
    return None, None


def _properties(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


@attrs.frozen
class Member:
    """A method, constructor (``<init>``) or field of a class: its name, its JVM descriptor, and the
    number of parameters (methods)."""

    name: str
    descriptor: str

    @property
    def parameters(self) -> list[str]:
        """The parameter types of a method descriptor, as JVM type descriptors."""
        inside = self.descriptor[1:self.descriptor.index(")")]
        return re.findall(r"\[*(?:L[^;]+;|[ZBCSIJFD])", inside)


def members(data: bytes) -> tuple[str, list[str], list[Member], list[Member]]:
    """``(class name, its super class (if any) and interfaces, methods, fields)`` of a class file's bytes."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    utf8: dict[int, str] = {}
    classes: dict[int, int] = {}
    at, index = 10, 1
    while index < count:
        tag = data[at]
        if tag == 1:
            length = struct.unpack_from(">H", data, at + 1)[0]
            utf8[index] = data[at + 3: at + 3 + length].decode("utf-8", "replace")  # modified UTF-8: names are ASCII
            at += 3 + length
        elif tag == 7:
            classes[index] = struct.unpack_from(">H", data, at + 1)[0]
            at += 3
        elif tag in (5, 6):  # long and double take two entries
            at += 9
            index += 1
        else:
            at += {3: 5, 4: 5, 8: 3, 9: 5, 10: 5, 11: 5, 12: 5, 15: 4, 16: 3, 17: 5, 18: 5, 19: 3, 20: 3}[tag]
        index += 1
    _, this, parent, count = struct.unpack_from(">HHHH", data, at)
    interfaces = [utf8[classes[i]].replace("/", ".") for i in struct.unpack_from(f">{count}H", data, at + 8)]
    at += 8 + 2 * count

    def read_members() -> list[Member]:
        nonlocal at
        (n,) = struct.unpack_from(">H", data, at)
        at += 2
        out = []
        for _ in range(n):
            _, name, descriptor, attributes = struct.unpack_from(">HHHH", data, at)
            at += 8
            for _ in range(attributes):
                at += 6 + struct.unpack_from(">I", data, at + 2)[0]
            out.append(Member(utf8[name], utf8[descriptor]))
        return out

    fields = read_members()
    methods = read_members()
    name = utf8[classes[this]].replace("/", ".")
    supers = ([utf8[classes[parent]].replace("/", ".")] if parent else []) + interfaces
    return name, supers, methods, fields


class ClassIndex:
    """The classes of a class path's jars, looked up first jar first (as the JVM does)."""

    def __init__(self, jars) -> None:
        self.jars = tuple(str(j) for j in jars)
        self._names = [classes_in(j) for j in self.jars]
        self._parsed: dict = {}

    def has(self, name: str) -> bool:
        """Whether some jar holds class ``name`` (``a.b.C`` or ``a.b.C$D``)."""
        return any(name in names for names in self._names)

    def where(self, name: str) -> str | None:
        """The jar the JVM would load class ``name`` from, or None."""
        return next((jar for jar, names in zip(self.jars, self._names) if name in names), None)

    def _class(self, name: str):
        if name not in self._parsed:
            jar = self.where(name)
            if jar is None:
                self._parsed[name] = None
            else:
                with _open(jar) as z:
                    self._parsed[name] = members(z.read(name.replace(".", "/") + ".class"))
        return self._parsed[name]

    def _lineage(self, name: str, inherited: bool):
        """Class ``name``'s parsed class file, then (if ``inherited``) its super classes' and
        interfaces' found in these jars."""
        todo, seen = [name], set()
        while todo:
            parsed = self._class(todo.pop(0))
            if parsed is None or parsed[0] in seen:
                continue
            seen.add(parsed[0])
            yield parsed
            if not inherited:
                return
            todo += parsed[1]

    def methods(self, name: str, method: str, inherited: bool = True) -> list[Member]:
        """The methods (or constructors: ``<init>``) called ``method`` of class ``name``, those its
        super classes and interfaces found in these jars declare too unless ``inherited`` is False."""
        inherited = inherited and method != "<init>"
        return [m for parsed in self._lineage(name, inherited) for m in parsed[2] if m.name == method]

    def has_field(self, name: str, field: str) -> bool:
        """Whether class ``name`` or a super class in these jars declares ``field``."""
        return any(f.name == field for parsed in self._lineage(name, True) for f in parsed[3])


_INDEXES: dict = {}


def class_index(jars) -> ClassIndex:
    """The :class:`ClassIndex` of ``jars``, kept per (path, size, modification time) of each
    (JarError for a jar that cannot be read)."""
    key = []
    for jar in jars:
        try:
            stat = os.stat(jar)
        except OSError as exc:
            raise JarError(jar, exc.strerror.lower() if exc.strerror else "cannot be read") from None
        key.append((str(Path(jar).resolve()), stat.st_size, stat.st_mtime_ns))
    key = tuple(key)
    index = _INDEXES.get(key)
    if index is None:
        index = _INDEXES[key] = ClassIndex(jars)
    return index


def replaced_classes(user_jars, flink_jars) -> list[str]:
    """The classes of ``flink_jars`` that ``user_jars`` (first on the class path) replace, sorted."""
    theirs = class_index(flink_jars)
    mine = set().union(*(classes_in(j) for j in user_jars)) if user_jars else set()
    return sorted(name for name in mine if theirs.has(name))
