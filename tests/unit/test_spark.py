"""Finding the Java runtime spark-submit needs, and saying how to get one."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuniplace.localcluster import spark


def fake_java(home: Path, version_line: str) -> Path:
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)
    return java


def test_missing_java_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(
        spark.SparkError, match=r"needs a Java 17\+ runtime and none is on PATH: .*apt-get install default-jre-headless"
    ):
        spark.java()


def test_java_home_wins_and_must_be_new_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "old"))
    fake_java(tmp_path / "old", 'openjdk version "11.0.22" 2024-01-16')
    with pytest.raises(spark.SparkError, match=r"is Java 11; Spark 4.* needs 17\+"):
        spark.java()
    new = fake_java(tmp_path / "new", 'openjdk version "21.0.5" 2024-10-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "new"))
    assert spark.java() == new.resolve()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    with pytest.raises(spark.SparkError, match=r"JAVA_HOME=.*none has no bin/java"):
        spark.java()
