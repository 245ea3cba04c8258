# lit configuration for planc's FileCheck tests (tests/filecheck). Run: lit -v tests/filecheck
import os
import shutil
import sys

import lit.formats

config.name = "planc"
config.test_format = lit.formats.ShTest(execute_external=False)  # lit's internal shell
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Inputs", "examples", "docs", "bench", "build"]
# pytest runs each lit file in its own lit process, several at once (tests/test_lit.py): each
# gets its own exec root, so their Output/ files and lit's `.lit_test_times.txt` (rewritten by
# every run, and refused as "malformed timing data" when read half written) are not shared.
if os.environ.get("PLANC_LIT_EXEC_ROOT"):
    config.test_exec_root = os.environ["PLANC_LIT_EXEC_ROOT"]

# lit gives tests a reduced environment: put the tools of the running Python first on PATH
# (planc, planc-opt and filecheck are console scripts installed next to it).
tool_dirs = [os.path.dirname(sys.executable)]
for tool in ("planc", "planc-opt", "filecheck"):
    found = shutil.which(tool)
    if found:
        tool_dirs.append(os.path.dirname(found))
# PLANC_FORKSERVER=FOLDER (tests/forkserver.py, which tests/test_lit.py starts): FOLDER/bin holds
# clients that run planc, planc-opt and filecheck in a server that imported them once.
forkserver = os.environ.get("PLANC_FORKSERVER")
if forkserver:
    tool_dirs.insert(0, os.path.join(forkserver, "bin"))
    config.environment["PLANC_FORKSERVER"] = forkserver
config.environment["PATH"] = os.pathsep.join(
    [*dict.fromkeys(tool_dirs), config.environment.get("PATH", os.environ.get("PATH", ""))])
for passthrough in ("HOME", "PYENV_VERSION", "PYENV_ROOT", "PYTHONPATH"):
    if passthrough in os.environ:
        config.environment[passthrough] = os.environ[passthrough]

# IR round trip: print generic, re-parse, print custom, compare with the CHECK lines.
config.substitutions.append(
    ("%roundtrip", "planc-opt %s --print-op-generic | planc-opt | filecheck %s"))
