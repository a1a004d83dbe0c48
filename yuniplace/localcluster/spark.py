"""Apache Spark's own spark-submit, for trying Spark against a local cluster the way a user would.

spark-submit comes from PyPI's pyspark, which ships Spark's jars (its Kubernetes client included) and
launch scripts: it is installed once per pinned version into the cache, beside the control plane. A
Java runtime is the one thing it needs from the machine (Debian: `apt-get install default-jre-headless`).
The spark-operator (operators.py) runs spark-submit from the same pyspark.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from yuniplace.localcluster.build import cache_root

PYSPARK_VERSION = "4.3.0"
MIN_JAVA = 17  # Spark 4 runs on Java 17 and later
INSTALL_TIMEOUT_S = 900
JRE_HINT = "install a Java runtime, e.g. `apt-get install default-jre-headless` on Debian or Ubuntu"


class SparkError(RuntimeError):
    """Spark cannot be run here; the message says why and what to do."""


@dataclass(frozen=True)
class Spark:
    home: Path  # SPARK_HOME: pyspark's package directory, with bin/ and jars/
    version: str
    java: Path

    @property
    def submit(self) -> Path:
        return self.home / "bin" / "spark-submit"

    def env(self) -> dict[str, str]:
        """Environment for spark-submit (and for anything that runs it): Spark's home and the Java found."""
        return {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "PATH": f"{self.java.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }


def java() -> Path:
    """The Java runtime spark-submit will use (JAVA_HOME first, as Spark's scripts do), checked to be new enough."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if home and not Path(str(found)).is_file():
        raise SparkError(f"JAVA_HOME={home} has no bin/java: point it at a Java {MIN_JAVA}+ runtime, or {JRE_HINT}")
    if not found:
        raise SparkError(f"spark-submit needs a Java {MIN_JAVA}+ runtime and none is on PATH: {JRE_HINT}")
    result = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr)
    major = int(match.group(1)) if match else 0
    if major < MIN_JAVA:
        raise SparkError(
            f"{found} is Java {major or '(unknown)'}; Spark {PYSPARK_VERSION} needs {MIN_JAVA}+: {JRE_HINT}"
        )
    return Path(found).resolve()


def ensure_spark(*, quiet: bool = False) -> Spark:
    """pyspark's Spark, installed into the cache on first use (a 450 MB download); later calls only look."""
    java_path = java()
    target = cache_root() / "spark" / f"pyspark-{PYSPARK_VERSION}"
    if not (target / "complete").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (target / "complete").exists():
                _install(target, quiet=quiet)
    return Spark(target / "pyspark", PYSPARK_VERSION, java_path)


def _install(target: Path, *, quiet: bool) -> None:
    started = time.monotonic()
    if not quiet:
        print(
            f"Installing pyspark {PYSPARK_VERSION} (spark-submit) from PyPI into {target} (about a minute).",
            file=sys.stderr,
            flush=True,
        )
    staging = Path(tempfile.mkdtemp(prefix="install-", dir=target.parent))
    try:
        # --target, not a virtualenv: the directory is renamed into place, and spark-submit is a shell
        # script that needs nothing from Python once SPARK_HOME is set.
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(staging),
            f"pyspark=={PYSPARK_VERSION}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
        if result.returncode != 0:
            raise SparkError(
                f"pip could not install pyspark {PYSPARK_VERSION} (exit {result.returncode}):\n"
                f"{result.stderr.strip()[-3000:]}"
            )
        if not (staging / "pyspark" / "bin" / "spark-submit").is_file():
            raise SparkError(f"pyspark {PYSPARK_VERSION} installed without bin/spark-submit")
        (staging / "complete").write_text(PYSPARK_VERSION + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not quiet:
        print(f"  installed pyspark in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)


def main() -> int:
    """`python -m yuniplace.localcluster.spark`: install (or find) spark-submit and print SPARK_HOME."""
    try:
        print(ensure_spark().home)
    except SparkError as error:
        print(f"spark: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
