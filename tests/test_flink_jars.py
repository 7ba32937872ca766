"""A Flink given by path (``flink@PATH``) and jars before Flink's (``--classpath``), without a JVM:
what a jar holds (cowcheck.flink.jars), what a path must hold, and the one-line refusals (exit 2,
nothing fetched) of a wrong path, a file that is not a jar, a jar without Flink's state classes;
a counterexample file that names a path is not run from the file."""

import io
import json
import zipfile
from pathlib import Path

import pytest

import cowcheck.flink  # noqa: F401  (registers flink)
from cowcheck.cli import main
from cowcheck.core.impls import loads_code
from cowcheck.flink.jars import JarError, jar_version, replaced_classes
from cowcheck.flink.jvm import flink_jars
from cowcheck.flink.releases import build_of_path

ROOT = Path(__file__).resolve().parent.parent
FINDING = ROOT / "docs" / "findings" / "flink-26853-stale-copier.json"


def _jar(path: Path, entries: dict) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_a_jar_states_its_version_as_flink_reads_it_else_its_manifest_else_none(tmp_path):
    unfilled = _jar(tmp_path / "a.jar", {".flink-runtime.version.properties": "project.version=${project.version}\n",
                                         ".version.properties": "git.build.version=1.10.1\n",
                                         "META-INF/MANIFEST.MF": "Manifest-Version: 1.0\nImplementation-Version: 2.3"
                                                                "-SNAP\n SHOT\n"})
    assert jar_version(unfilled) == ("2.3-SNAPSHOT", None)
    assert jar_version(_jar(tmp_path / "b.jar", {"x.class": b""})) == (None, None)
    assert jar_version(flink_jars()[0][0]) == ("2.3.0", "c0f8d1a")


def test_a_path_without_flink_state_classes_is_refused_in_one_line(tmp_path):
    no_state = _jar(tmp_path / "flink-dist-x.jar", {"org/apache/flink/api/common/Foo.class": b""})
    (tmp_path / "not-a.jar").write_text("hello")
    (tmp_path / "empty").mkdir()
    for target, problem in [(tmp_path / "nope.jar", "no such file"), (tmp_path / "not-a.jar", "not a jar"),
                            (no_state, "holds none of Flink's state classes"), (tmp_path / "empty", "no jar in it")]:
        with pytest.raises(ValueError, match=problem):
            build_of_path(str(target))


def test_a_wrong_path_is_bad_usage_in_one_line_and_nothing_is_fetched(tmp_path, monkeypatch):
    monkeypatch.setenv("COWCHECK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "not-a.jar").write_text("hello")
    for bad in (tmp_path / "nope.jar", tmp_path / "not-a.jar"):
        for argv in (["check", "--machine", "table", "--impl", f"flink@{bad}", "--examples", "1"],
                     ["versions", str(FINDING), "--versions", f"1.14.3,{bad}"],
                     ["check", "--machine", "table", "--impl", "flink", "--classpath", str(bad), "--examples", "1"]):
            code, out, err = run(*argv)
            assert (code, out, err.count("\n")) == (2, "", 1), (argv, out, err)
    assert not (tmp_path / "cache" / "flink").exists()


def test_classpath_applies_to_flink_only():
    code, _, err = run("check", "--impl", "reference", "--classpath", "/tmp/x.jar", "--examples", "1")
    assert code == 2 and "--classpath" in err


def test_the_classes_a_user_jar_replaces_are_named(tmp_path):
    mine = _jar(tmp_path / "mine.jar", {"org/apache/flink/runtime/state/VoidNamespace.class": b"",
                                        "META-INF/versions/11/org/apache/flink/runtime/state/heap/StateMap.class": b"",
                                        "com/example/Mine.class": b""})
    assert replaced_classes([str(mine)], flink_jars()[0]) == ["org.apache.flink.runtime.state.VoidNamespace",
                                                             "org.apache.flink.runtime.state.heap.StateMap"]
    with pytest.raises(JarError, match="no such file"):
        replaced_classes([str(tmp_path / "gone.jar")], flink_jars()[0])


def test_a_file_naming_a_build_by_path_or_jars_is_not_run_from_the_file(tmp_path):
    data = json.loads(FINDING.read_text())
    for spec in ("flink@/somewhere/flink-dist.jar", "flink@1.13.6:classpath=/somewhere/patch.jar"):
        assert loads_code(spec) is not None
        data["implementation"]["spec"] = spec
        path = tmp_path / "named.json"
        path.write_text(json.dumps(data))
        code, out, err = run("replay", str(path))
        assert (code, out, err.count("\n")) == (2, "", 1) and "--impl" in err
    assert loads_code("flink@1.13.6") is None and loads_code("flink") is None


def test_a_directory_is_its_flink_dist_and_the_log4j_jars_beside_it(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "flink-dist-2.3.0.jar").symlink_to(flink_jars()[0][0])  # a distribution's lib/
    _jar(lib / "log4j-api-2.0.jar", {"a.class": b""})
    _jar(lib / "flink-table-planner.jar", {"b.class": b""})
    build = build_of_path(str(lib))
    assert [Path(j).name for j in build.jars] == ["flink-dist-2.3.0.jar"]
    assert [Path(j).name for j in build.logging] == ["log4j-api-2.0.jar"]
    assert (build.version, build.commit) == ("2.3.0", "c0f8d1a")
    assert build.describe() == f"Apache Flink 2.3.0 (commit c0f8d1a) from {lib}"
