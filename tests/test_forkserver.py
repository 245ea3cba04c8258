"""The fork server of the lit suite (tests/forkserver.py): a command run through it gives the
same standard output, standard error and exit status as the program run as a process."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import EXAMPLES, ROOT

pytestmark = pytest.mark.skipif(not forkserver.supported(),
                                reason="the fork server needs Linux (pidfd_open, send_fds)")

BIN = Path(sys.executable).parent
"""Where the console scripts are (lit.cfg.py looks here first)."""

HANG_GUARD = 60
"""Seconds after which a wait that should end at once is a failure (a hang, not a timing)."""


def lit_environment(**extra: str) -> dict[str, str]:
    """The environment lit gives a RUN line (lit.cfg.py): none of the interpreter's settings
    but PYTHONPATH, the console scripts first on PATH."""
    env = forkserver.server_environment(os.environ)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return {**env, **extra}


def run_both(folder: str, tool: str, *args: str, stdin: bytes = b"",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `tool ARGS` as a program and through the server's client; assert the two agree
    (output, errors, exit status) and return the client's run."""
    env = env or lit_environment()
    real = subprocess.run([BIN / tool, *args], input=stdin, capture_output=True, cwd=ROOT,
                          env=env)
    served = subprocess.run([Path(folder) / "bin" / tool, *args], input=stdin,
                            capture_output=True, cwd=ROOT, timeout=HANG_GUARD,
                            env={**env, "PLANC_FORKSERVER": folder})
    assert (served.returncode, served.stdout.decode(), served.stderr.decode()) \
        == (real.returncode, real.stdout.decode(), real.stderr.decode())
    return served


def log(folder: str) -> str:
    with open(os.path.join(folder, "log")) as f:
        return f.read()


def assert_served(folder: str, tool: str, *args: str) -> None:
    """The server (not the program the client falls back to) ran `tool ARGS`."""
    assert f": {tool} {[*args]!r}\n" in log(folder)


def test_planc_succeeds_as_the_program_does(forkserver_folder: str | None) -> None:
    folder = forkserver_folder or pytest.skip("no fork server")
    args = ("check", str(EXAMPLES / "ffn.json"))
    served = run_both(folder, "planc", *args)
    assert served.returncode == 0 and served.stdout
    assert_served(folder, "planc", *args)


def test_planc_fails_as_the_program_does(forkserver_folder: str | None, tmp_path: Path) -> None:
    folder = forkserver_folder or pytest.skip("no fork server")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    served = run_both(folder, "planc", "check", str(bad))
    assert served.returncode == 1 and served.stdout == b""
    assert served.stderr.decode().startswith("planc: error: ") \
        and served.stderr.count(b"\n") == 1
    assert_served(folder, "planc", "check", str(bad))


def test_planc_opt_reads_stdin(forkserver_folder: str | None) -> None:
    folder = forkserver_folder or pytest.skip("no fork server")
    ir = (ROOT / "tests" / "filecheck" / "sched" / "roundtrip.mlir").read_bytes()
    served = run_both(folder, "planc-opt", stdin=ir)
    assert served.returncode == 0 and b"sched.schedule" in served.stdout
    assert_served(folder, "planc-opt")


def test_filecheck_fails_as_the_program_does(forkserver_folder: str | None) -> None:
    folder = forkserver_folder or pytest.skip("no fork server")
    check = str(ROOT / "tests" / "filecheck" / "ark" / "export.test")
    served = run_both(folder, "filecheck", check, stdin=b"hello\n")
    assert served.returncode == 1 and b"error: Couldn't match" in served.stderr
    # exit 2: no CHECK line with that prefix
    assert run_both(folder, "filecheck", check, "--check-prefix=NOPE", stdin=b"x\n"
                    ).returncode == 2
    assert_served(folder, "filecheck", check, "--check-prefix=NOPE")


@pytest.mark.slow
def test_an_uncaught_exception_gives_the_programs_traceback(forkserver_folder: str | None
                                                            ) -> None:
    """filecheck with a check file that is not there: Python's traceback (from the console
    script's frame on) and exit 1."""
    folder = forkserver_folder or pytest.skip("no fork server")
    served = run_both(folder, "filecheck", "/no/such/file", stdin=b"x\n")
    assert served.returncode == 1
    assert served.stderr.startswith(b'Traceback (most recent call last):\n  File "'
                                    + os.fsencode(BIN / "filecheck") + b'", line')


@pytest.mark.slow
def test_closed_stdout_stays_closed(forkserver_folder: str | None) -> None:
    """`planc --version >&-`: planc's one-line error about the closed output, exit 1."""
    folder = forkserver_folder or pytest.skip("no fork server")
    env = lit_environment()
    runs = [subprocess.run(["sh", "-c", 'exec "$0" --version >&-', str(program)],
                           capture_output=True, env={**env, "PLANC_FORKSERVER": folder})
            for program in (BIN / "planc", Path(folder) / "bin" / "planc")]
    assert runs[0].returncode == runs[1].returncode == 1
    assert runs[0].stderr == runs[1].stderr and b"standard output is closed" in runs[1].stderr


@pytest.mark.slow
def test_environments_it_cannot_reproduce_run_the_program(forkserver_folder: str | None,
                                                          tmp_path: Path) -> None:
    """A different interpreter setting (here PYTHONHASHSEED) is refused, and the client runs
    the program itself; so does a client whose server is gone."""
    folder = forkserver_folder or pytest.skip("no fork server")
    args = ("check", str(EXAMPLES / "ffn.json"))
    run_both(folder, "planc", *args, env=lit_environment(PYTHONHASHSEED="7"))
    assert "refused" in log(folder) and "PYTHONHASHSEED" in log(folder)
    gone = subprocess.run([Path(folder) / "bin" / "planc", *args], capture_output=True,
                          env=lit_environment(PLANC_FORKSERVER=str(tmp_path)))
    assert gone.returncode == 0 and gone.stdout == run_both(folder, "planc", *args).stdout


@pytest.mark.slow
def test_inherited_limits_it_cannot_reproduce_run_the_program(forkserver_folder: str | None
                                                              ) -> None:
    """lit's `ulimit` and `umask` change what the program inherits: the server refuses such a
    client, which runs the program itself."""
    folder = forkserver_folder or pytest.skip("no fork server")
    env = lit_environment(PLANC_FORKSERVER=folder)
    for setting, differs in (("ulimit -S -f 0", "RLIMIT_FSIZE"), ("umask 077", "umask")):
        runs = [subprocess.run(["sh", "-c", f'{setting}; exec "$0" check "$1"', str(program),
                                str(EXAMPLES / "ffn.json")], capture_output=True, env=env)
                for program in (BIN / "planc", Path(folder) / "bin" / "planc")]
        assert (runs[0].returncode, runs[0].stdout, runs[0].stderr) \
            == (runs[1].returncode, runs[1].stdout, runs[1].stderr)
        assert f"inherited process state differs: {differs}" in log(folder)


@pytest.mark.slow
def test_concurrent_requests(forkserver_folder: str | None) -> None:
    """Commands in flight at once keep their own descriptors: each reader sees the end of its
    input when its own writer is done, not when the last command is."""
    folder = forkserver_folder or pytest.skip("no fork server")
    env = lit_environment(PLANC_FORKSERVER=folder)
    client = Path(folder) / "bin"
    # planc-opt waits for stdin that the test holds open while other commands run and end.
    waiting = subprocess.Popen([client / "planc-opt"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    ir = (ROOT / "tests" / "filecheck" / "sched" / "roundtrip.mlir").read_bytes()
    commands = [(["planc", "check", str(EXAMPLES / "ffn.json")], b""), (["planc-opt"], ir),
                (["filecheck", str(ROOT / "tests" / "filecheck" / "ark" / "export.test")],
                 b"nothing\n")] * 3
    expected = {tuple(c): subprocess.run([BIN / c[0], *c[1:]], input=i, capture_output=True,
                                         env=env, cwd=ROOT)
                for c, i in commands[:3]}

    def served(command: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([client / command[0], *command[1:]], input=stdin,
                              capture_output=True, env=env, cwd=ROOT, timeout=HANG_GUARD)

    with ThreadPoolExecutor(len(commands)) as pool:
        runs = list(pool.map(lambda c: served(*c), commands))
    for (command, _), run in zip(commands, runs, strict=True):
        want = expected[tuple(command)]
        assert (run.returncode, run.stdout, run.stderr) \
            == (want.returncode, want.stdout, want.stderr)
    assert waiting.poll() is None
    out, err = waiting.communicate(ir, timeout=HANG_GUARD)
    assert waiting.returncode == 0 and out == expected[("planc-opt",)].stdout


@pytest.mark.slow
def test_signals_pass_both_ways(forkserver_folder: str | None) -> None:
    """A command killed by a signal ends its client by the same signal; a client killed (by
    lit's timeout, say) takes its command with it."""
    folder = forkserver_folder or pytest.skip("no fork server")
    env = lit_environment(PLANC_FORKSERVER=folder)
    for kill_command in (True, False):
        before = log(folder)
        client = subprocess.Popen([Path(folder) / "bin" / "planc-opt"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, env=env)
        pid = child_pid(folder, before)
        if kill_command:
            os.kill(pid, signal.SIGTERM)
            assert client.wait(timeout=HANG_GUARD) == -signal.SIGTERM
        else:
            pidfd = os.pidfd_open(pid)
            client.kill()
            client.wait()
            assert select.select([pidfd], [], [], HANG_GUARD)[0] == [pidfd]  # it ended
            os.close(pidfd)
        client.stdin.close()


def child_pid(folder: str, before: str) -> int:
    """The process id of the next command the server starts after its log read `before`."""
    with open(os.path.join(folder, "log")) as f:
        f.seek(len(before))
        for _ in range(HANG_GUARD * 100):
            line = f.readline()
            if line.startswith("planc-opt: ") and line.split(": ")[2].startswith("planc-opt"):
                return int(line.split(": ")[1])
            if not line:
                select.select([], [], [], 0.01)
    raise AssertionError("the server did not start the command")


@pytest.mark.slow
def test_a_script_ends_as_python_ends_it(tmp_path: Path) -> None:
    """`run_as_main` (what the server's child runs): SystemExit codes and messages, uncaught
    exceptions (traceback, exit 1), KeyboardInterrupt (killed by SIGINT), atexit, output
    flushed; as `python3 SCRIPT`."""
    bodies = ["print('out', end='')\nsys.exit(3)",
              "print('out')\nsys.exit('a message')",
              "atexit.register(print, 'at exit')\nraise ValueError('boom')",
              "sys.stdout.write('unflushed')\nraise KeyboardInterrupt",
              "sys.exit(None)"]
    for body in bodies:
        script = tmp_path / "script.py"
        script.write_text(f"import atexit\nimport sys\n{body}\n")
        real = subprocess.run([sys.executable, script, "arg"], capture_output=True)
        emulated = subprocess.run(
            [sys.executable, "-c", "import sys; from tests import forkserver as f; "
             "p = sys.argv[1]; sys.argv = sys.argv[1:]; "
             "f.run_as_main(f.Script(p, compile(open(p).read(), p, 'exec')))", script, "arg"],
            capture_output=True, cwd=ROOT)
        assert (emulated.returncode, emulated.stdout, emulated.stderr) \
            == (real.returncode, real.stdout, real.stderr), body


def test_the_tools_are_the_console_scripts() -> None:
    """The servers of planc and planc-opt import the modules pyproject.toml's console scripts
    name."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for tool, entry in scripts.items():
        assert forkserver.TOOLS[tool].modules[0] == entry.partition(":")[0]
        assert forkserver.TOOLS[tool].planc and forkserver.TOOLS[tool].in_lit


@pytest.mark.slow
def test_preload_leaves_out_numpy() -> None:
    """The planc servers import planc's modules but none that imports numpy (whose BLAS
    threads planc sets up before importing it)."""
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from tests import forkserver as f; "
         "refused = f.preload(f.TOOLS['planc']); "
         "print('numpy' in sys.modules, 'ground.dtypes' in refused, "
         "'dialects.ark' in sys.modules)"],
        capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.split() == ["False", "True", "True"]
