"""A fork server for the lit suite (tests/filecheck): its `planc`, `planc-opt` and `filecheck`
processes pay Python's start-up and their imports once per server instead of once per RUN line.

    python3 tests/forkserver.py FOLDER &         # serves until its stdin closes, or SIGTERM
    PLANC_FORKSERVER=FOLDER lit tests/filecheck

FOLDER/bin holds a client for each tool (tests/forkserver_client.py), which lit.cfg.py puts first
on lit's PATH while PLANC_FORKSERVER is set; FOLDER/TOOL.sock is the unix socket of the tool's
server. tests/test_lit.py starts one per pytest worker, and runs lit itself through it too
(`call`): lit's start-up (the interpreter's, and its imports) was half of what a lit file cost
once the tools ran in the server.

Each tool has a server process of its own (planc and planc-opt share one), so that `filecheck`
never shares planc's imports: it imports what the tool's console script imports, and every
planc module that does not bring in numpy & co. (`preload`), then forks a child per request. The child takes the client's
standard descriptors, working folder, environment and arguments, runs the tool's console
script as `__main__` and ends as the interpreter would (SystemExit, a traceback and exit 1,
atexit, flushing the standard streams); the server replies with its wait status. The server
itself never runs a command, so each starts from the same freshly imported state.

What a forked child cannot reproduce, the server refuses (the client then runs the program
itself): another program than the one its PATH names, an environment whose interpreter
settings differ (`interpreter_settings`: PYTHON*, LANG, LC_ALL, LC_CTYPE), and a client
whose inherited process state differs (`inherited`: lit's `ulimit` and `umask`, say).
"""

from __future__ import annotations

import atexit
import builtins
import gc
import importlib
import io
import marshal
import os
import pkgutil
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn


@dataclass(frozen=True)
class Tool:
    """A program the fork server runs."""

    modules: tuple[str, ...]
    """What its server imports up front: its console script's module (pyproject.toml's
    [project.scripts]; the tool's own package for filecheck and lit) and what it imports later."""
    planc: bool = False
    """Its server also imports every planc module that imports none of `NOT_PRELOADED`: planc's
    commands import their modules when they need them."""
    in_lit: bool = True
    """Run by lit (a client in FOLDER/bin, lit's reduced environment), not by pytest."""
    server: str = ""
    """The server process that runs it, when one runs several tools (its own name if empty):
    planc's and planc-opt's import the same modules."""


TOOLS = {
    "planc": Tool(("compiler.driver",), planc=True, server="planc"),
    "planc-opt": Tool(("compiler.opt",), planc=True, server="planc"),
    "filecheck": Tool(("filecheck.main",)),
    # lit itself, for tests/test_lit.py (`call`): one lit per lit file; what `lit.run` imports
    # once it runs its tests too.
    "lit": Tool(("lit.main", "multiprocessing.pool", "multiprocessing.popen_fork",
                 "multiprocessing.queues", "multiprocessing.synchronize", "resource"),
                in_lit=False),
}

PROJECT = ("ground", "devices", "dialects", "targets", "frontends", "passes", "backends",
           "compiler")
"""planc's packages, bottom to top: planc's commands import their modules lazily, so the
servers of `planc` and `planc-opt` import them all up front."""

NOT_PRELOADED = frozenset({"numpy", "scipy", "onnx", "onnxruntime", "torch", "matplotlib",
                           "networkx", "ray", "optuna"})
"""Packages the servers do not import, nor the planc modules that import them: numpy reads its
BLAS thread count once, when imported, from variables that `planc` sets first
(`single_threaded_blas`); the others start threads or are rarely needed and slow to load."""

PROTOCOL = 1
"""The request and reply format (tests/forkserver_client.py has the same number)."""

CLIENT = Path(__file__).with_name("forkserver_client.py")


def interpreter_settings(environ: Mapping[bytes, bytes]) -> dict[bytes, bytes]:
    """The variables the interpreter reads once, at start-up: the server's must equal the
    request's for a forked child to behave as the program would."""
    return {k: v for k, v in environ.items()
            if k.startswith(b"PYTHON") or k in (b"LANG", b"LC_ALL", b"LC_CTYPE")}


def server_environment(environ: Mapping[str, str],
                       passed: tuple[str, ...] = ("PYTHONPATH",)) -> dict[str, str]:
    """`environ` without the interpreter's settings that lit does not pass on (lit gives each
    test a reduced environment; lit.cfg.py passes PYTHONPATH): a server started with it serves
    the commands lit runs."""
    settings = interpreter_settings({os.fsencode(k): b"" for k in environ})
    return {k: v for k, v in environ.items() if os.fsencode(k) not in settings or k in passed}


def inherited(pid: int) -> dict[str, object]:
    """What a program inherits from the process that starts it besides its environment,
    descriptors and working folder: resource limits, umask, niceness, CPU affinity."""
    import resource

    state: dict[str, object] = {name: resource.prlimit(pid, getattr(resource, name))
                                for name in dir(resource) if name.startswith("RLIMIT_")}
    with open(f"/proc/{pid}/status") as f:
        state["umask"] = next((line.split()[1] for line in f if line.startswith("Umask:")), None)
    state["niceness"] = os.getpriority(os.PRIO_PROCESS, pid)
    state["affinity"] = os.sched_getaffinity(pid)
    return state


def peer_pid(conn: socket.socket) -> int:
    """The process id of the client at the other end of `conn`."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[:4], sys.byteorder, signed=True)


# ---------------------------------------------------------------------------------------------
# The server of some tools
# ---------------------------------------------------------------------------------------------


@dataclass
class Script:
    """A tool's console script: the program lit runs as TOOL."""

    path: str
    code: types.CodeType


def find_script(tool: str) -> Script | str:
    """The tool's console script where lit.cfg.py looks first (beside this interpreter), else on
    PATH; or why there is none to serve (not a Python script of this interpreter)."""
    folders = [os.path.dirname(sys.executable), *os.environ.get("PATH", "").split(os.pathsep)]
    for folder in folders:
        path = os.path.join(folder, tool)
        if folder and os.path.isfile(path) and os.access(path, os.X_OK):
            break
    else:
        return f"no {tool} beside {sys.executable} or on PATH"
    with open(path, "rb") as f:
        source = f.read()
    interpreter = source.split(b"\n", 1)[0][2:].split()[:1] if source.startswith(b"#!") else []
    if not interpreter \
            or os.path.realpath(os.fsdecode(interpreter[0])) != os.path.realpath(sys.executable):
        return f"{path} is not a Python script run by {sys.executable}"
    return Script(path, compile(source, path, "exec", dont_inherit=True))


def preload(tool: Tool) -> list[str]:
    """Import the tool's modules and, for planc's tools, every planc module that imports none
    of `NOT_PRELOADED`; the modules refused."""
    for module in tool.modules:
        importlib.import_module(module)
    if not tool.planc:
        return []
    refused: list[str] = []
    blocker = _Blocker()
    sys.meta_path.insert(0, blocker)
    try:
        for package in PROJECT:
            module = importlib.import_module(package)
            for info in pkgutil.walk_packages(module.__path__, f"{package}."):
                blocker.refused.clear()
                try:
                    importlib.import_module(info.name)
                except ImportError:
                    if not blocker.refused:
                        raise
                    refused.append(info.name)
                    continue
                if blocker.refused:          # imported anyway: it must not fall back silently
                    raise RuntimeError(f"importing {info.name} went on without "
                                       f"{blocker.refused[0]}: preload it not")
    finally:
        sys.meta_path.remove(blocker)
    return refused


class _Blocker:
    """A meta path finder that refuses `NOT_PRELOADED` (and records each refusal)."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in NOT_PRELOADED:
            self.refused.append(name)
            raise ImportError(f"not preloaded: {name}", name=name)


@dataclass
class Request:
    pid: int
    real: str
    args: list[bytes]
    cwd: bytes
    environ: dict[bytes, bytes]
    open_fds: list[int]
    fds: list[int]


def read_request(conn: socket.socket) -> Request:
    """The request on `conn` (ValueError: not one; OSError: the client went away)."""
    header, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
    try:
        while len(header) < 4:
            more = conn.recv(4 - len(header))
            if not more:
                raise ValueError("truncated request")
            header += more
        size = int.from_bytes(header, "big")
        payload = bytearray()
        while len(payload) < size:
            more = conn.recv(min(size - len(payload), 1 << 20))
            if not more:
                raise ValueError("truncated request")
            payload += more
        protocol, real, args, cwd, environ, open_fds = marshal.loads(payload)
        if protocol != PROTOCOL or len(open_fds) != len(fds):
            raise ValueError(f"protocol {protocol} with {len(fds)} descriptors for {open_fds}")
        return Request(peer_pid(conn), os.fsdecode(real), args, cwd, dict(environ), open_fds,
                       fds)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


@dataclass
class ToolServer:
    """The server of some tools: accepts requests on each tool's listener, forks a child for
    each, and replies with the child's wait status; ends when `control` (its stdin) closes."""

    scripts: dict[str, Script]
    listeners: dict[str, socket.socket]
    control: int = 0
    log: int | None = None
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    running: dict[int, tuple[int, socket.socket]] = field(default_factory=dict)
    """pidfd -> (pid, the client's connection)."""

    def __post_init__(self) -> None:
        self.settings = interpreter_settings(os.environb)
        self.inherited = inherited(os.getpid())
        self.streams = [(s.encoding, s.errors) if s else ("utf-8", "strict")
                        for s in (sys.__stdin__, sys.__stdout__, sys.__stderr__)]
        self.unbuffered = bool(sys.__stdout__ and sys.__stdout__.write_through)

    def serve(self) -> None:
        for tool, listener in self.listeners.items():
            self.selector.register(listener, selectors.EVENT_READ, ("accept", tool))
        self.selector.register(self.control, selectors.EVENT_READ, "control")
        while True:
            for key, _ in self.selector.select():
                if key.data[0] == "accept":
                    self.accept(key.data[1])
                elif key.data == "control":
                    if not os.read(self.control, 4096):
                        return
                elif key.data[0] == "child":
                    self.reap(key.data[1])
                else:                              # the client went away: end its command
                    self.abandon(key.data[1])

    def accept(self, tool: str) -> None:
        try:
            conn, _ = self.listeners[tool].accept()
        except OSError:
            return
        conn.settimeout(30)
        try:
            request = read_request(conn)
        except (OSError, ValueError) as error:
            self.note(f"{tool}: bad request: {error}")
            conn.close()
            return
        try:
            refusal = self.refusal(self.scripts[tool], request)
            if refusal:
                self.note(f"{tool}: refused {request.args}: {refusal}")
                conn.sendall(b"R")
                conn.close()
                return
            self.start(tool, request, conn)
        finally:
            for fd in request.fds:
                os.close(fd)

    def refusal(self, script: Script, request: Request) -> str | None:
        """Why a forked child would not run the request as the program would; None if it
        would."""
        if os.path.realpath(request.real) != os.path.realpath(script.path):
            return f"PATH names {request.real}, not {script.path}"
        theirs = interpreter_settings(request.environ)
        if theirs != self.settings:
            differ = sorted(k.decode(errors="replace") for k in theirs.keys() ^ self.settings.keys()
                            | {k for k in theirs if theirs[k] != self.settings.get(k)})
            return f"interpreter settings differ: {', '.join(differ)}"
        try:
            theirs = inherited(request.pid)
        except OSError as error:
            return f"cannot read the client's process state: {error}"
        differ = sorted(k for k in theirs if theirs[k] != self.inherited.get(k))
        if differ:
            return f"inherited process state differs: {', '.join(differ)}"
        return None

    def start(self, tool: str, request: Request, conn: socket.socket) -> None:
        for stream in (sys.stdout, sys.stderr):    # nothing of the server's for the child
            stream.flush()
        pid = os.fork()
        if pid == 0:
            self.close_in_child(conn)
            run_child(self, self.scripts[tool], request)   # never returns
        pidfd = os.pidfd_open(pid)
        self.running[pidfd] = (pid, conn)
        self.selector.register(pidfd, selectors.EVENT_READ, ("child", pidfd))
        self.selector.register(conn, selectors.EVENT_READ, ("client", pidfd))
        self.note(f"{tool}: {pid}: {tool} {[os.fsdecode(a) for a in request.args]}")

    def reap(self, pidfd: int) -> None:
        pid, conn = self.running.pop(pidfd)
        self.selector.unregister(pidfd)
        if conn.fileno() in self.selector.get_map():
            self.selector.unregister(conn)
        os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        self.note(f"{pid}: exit {os.waitstatus_to_exitcode(status)}, "
                  f"{usage.ru_utime + usage.ru_stime:.3f} CPU s")
        try:
            conn.sendall(b"S" + status.to_bytes(4, "big", signed=True))
        except OSError:
            pass
        conn.close()

    def abandon(self, pidfd: int) -> None:
        """The client's connection closed before its command ended (lit killed it): kill the
        command, as killing the program would."""
        pid, conn = self.running[pidfd]
        self.selector.unregister(conn)
        self.note(f"{pid}: client gone, killed")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close_in_child(self, conn: socket.socket) -> None:
        """Close what the server holds, through the objects that hold it (closing only the
        descriptors would let their finalizers close a descriptor of the command's later)."""
        conn.close()
        self.selector.close()
        for listener in self.listeners.values():
            listener.close()
        for pidfd, (_, other) in self.running.items():
            os.close(pidfd)
            other.close()
        for fd in (self.control, self.log):
            if fd is not None and fd > 2:
                os.close(fd)

    def note(self, line: str) -> None:
        if self.log is not None:
            os.write(self.log, f"{line}\n".encode(errors="replace"))


# ---------------------------------------------------------------------------------------------
# The child: one command
# ---------------------------------------------------------------------------------------------


def run_child(server: ToolServer, script: Script, request: Request) -> NoReturn:
    """Become the program of `request` and end as it would; never returns."""
    try:
        for fd in (0, 1, 2):
            if fd in request.open_fds:
                os.dup2(request.fds[request.open_fds.index(fd)], fd)
            else:
                os.close(fd)
        for fd in request.fds:
            os.close(fd)
        os.chdir(request.cwd)
        os.environ.clear()
        for key, value in request.environ.items():
            os.environb[key] = value
        sys.argv = [request.real, *map(os.fsdecode, request.args)]
        standard_streams(server)
    except BaseException:                         # a bug of the server's: say so, exit 2
        try:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(2)
    run_as_main(script)


def run_as_main(script: Script) -> NoReturn:
    """Run the script as the program `python3 SCRIPT` would (with this process' sys.argv and
    standard streams), and end this process as the program would end."""
    status = finalize(run_script(script))
    if status < 0:                                 # an uncaught KeyboardInterrupt
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


def standard_streams(server: ToolServer) -> None:
    """sys.stdin, sys.stdout and sys.stderr over descriptors 0-2, as the interpreter makes them
    at start-up (create_stdio in Python/pylifecycle.c): None for a closed descriptor."""
    made = []
    for fd, name, (encoding, errors) in zip((0, 1, 2), ("<stdin>", "<stdout>", "<stderr>"),
                                            server.streams, strict=True):
        try:
            os.fstat(fd)
        except OSError:
            made.append(None)
            continue
        write = fd != 0
        buffer = open(fd, "wb" if write else "rb", 0 if write and server.unbuffered else -1,
                         closefd=False)
        raw = buffer.raw if isinstance(buffer, io.BufferedIOBase) else buffer
        raw.name = name
        stream = io.TextIOWrapper(buffer, encoding, errors, "\n",
                                  not server.unbuffered and (fd == 2 or raw.isatty()),
                                  server.unbuffered)
        stream.mode = "w" if write else "r"
        made.append(stream)
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made


def run_script(script: Script) -> int:
    """Run the console script as `__main__`; the exit status as the interpreter makes it
    (negative: the signal to end with)."""
    main = types.ModuleType("__main__")
    main.__file__ = script.path
    main.__cached__ = None
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    try:
        exec(script.code, main.__dict__)
    except SystemExit as stop:
        return exit_status(stop.code)
    except BaseException as error:
        error.with_traceback(error.__traceback__.tb_next)  # from the script on, as Python shows
        sys.excepthook(type(error), error, error.__traceback__)
        return -signal.SIGINT if isinstance(error, KeyboardInterrupt) else 1
    return 0


def exit_status(code: object) -> int:
    """The status of `sys.exit(code)` (Python/pythonrun.c, _Py_HandleSystemExit)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    if sys.stderr is not None:
        sys.stderr.write(f"{code}\n")
    return 1


def finalize(status: int) -> int:
    """What the interpreter does at exit that a command can see (Py_FinalizeEx): wait for
    threads, run atexit, flush stdout and stderr (a failure makes the status 120)."""
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None or stream.closed:
            continue
        try:
            stream.flush()
        except Exception as error:  # noqa: BLE001 -- reported as Python reports it
            status = 120 if status >= 0 else status  # (an interrupted program still ends so)
            if stream is sys.stdout and sys.stderr is not None:
                try:
                    sys.stderr.write(f"Exception ignored in: {stream!r}\n"
                                     f"{type(error).__name__}: {error}\n")
                    sys.stderr.flush()
                except Exception:  # noqa: BLE001, S110 -- nowhere left to say it
                    pass
    return status


def serve(folder: str, name: str, log: str | None) -> int:
    """Run the server `name` (of the tools whose `Tool.server` it is) on FOLDER/TOOL.sock until
    stdin closes."""
    scripts: dict[str, Script] = {}
    for tool in (tool for tool in TOOLS if (TOOLS[tool].server or tool) == name):
        script = find_script(tool) if supported() else "needs Linux"
        if scripts and not isinstance(script, str):
            beside = next(iter(scripts.values())).path
            if os.path.dirname(script.path) != os.path.dirname(beside):
                script = f"{script.path} is not beside {beside}"
        if isinstance(script, str):
            print(f"not serving {tool}: {script}", file=sys.stderr)
        else:
            scripts[tool] = script
    if not scripts:
        return 3
    sys.path[0] = os.path.dirname(next(iter(scripts.values())).path)  # as for the program
    for tool in scripts:
        preload(TOOLS[tool])
    gc.collect()
    gc.freeze()                # the children's collections skip (and copy) none of the imports
    listeners = {}
    for tool in scripts:
        path = os.path.join(folder, f"{tool}.sock")
        if os.path.exists(path):
            os.unlink(path)
        listeners[tool] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listeners[tool].bind(path)
        listeners[tool].listen(64)
    log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT) if log else None
    server = ToolServer(scripts, listeners, log=log_fd)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        server.serve()
    finally:
        for tool in listeners:
            os.unlink(os.path.join(folder, f"{tool}.sock"))
    return 0


# ---------------------------------------------------------------------------------------------
# All tools: what tests/test_lit.py starts
# ---------------------------------------------------------------------------------------------


def install_clients(folder: str) -> None:
    """FOLDER/bin/TOOL for each tool: tests/forkserver_client.py run by this interpreter."""
    source = CLIENT.read_text()
    os.makedirs(os.path.join(folder, "bin"), exist_ok=True)
    for tool in (name for name, tool in TOOLS.items() if tool.in_lit):
        path = os.path.join(folder, "bin", tool)
        with open(path, "w") as f:
            f.write(f"#!{sys.executable} -IS\n{source}")
        os.chmod(path, 0o755)


def serve_all(folder: str, log: str | None) -> int:
    """Install the clients, start the servers, say "ready" once they are, and stop them when
    stdin closes (or on SIGTERM)."""
    install_clients(folder)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    command = [sys.executable, __file__, folder, *(["--log", log] if log else []), "--server"]
    under_lit = server_environment(os.environ)
    names = {tool.server or name: tool.in_lit for name, tool in TOOLS.items()}
    servers = {name: subprocess.Popen([*command, name], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=under_lit if in_lit else None)
               for name, in_lit in names.items()}
    try:
        for name, server in servers.items():
            if server.stdout.readline() != b"ready\n":
                server.wait()
                print(f"forkserver: the tools of {name} run without a server", file=sys.stderr)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        for server in servers.values():
            server.stdin.close()
        for server in servers.values():
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    return 0


class Servers:
    """`serve_all` in a process of its own (the session fixture of tests/test_lit.py)."""

    def __init__(self, folder: str, log: str | None = None) -> None:
        self.folder = folder
        self.process = subprocess.Popen(
            [sys.executable, __file__, folder, *(["--log", log] if log else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self.process.stdout.readline() != b"ready\n":
            self.stop()
            raise RuntimeError(f"the fork server did not start (exit {self.process.returncode})")

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait()
        self.process.stdout.close()

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def call(folder: str, tool: str, args: list[str], *, cwd: str | os.PathLike[str],
         env: Mapping[str, str]) -> subprocess.CompletedProcess[str] | None:
    """Run `tool` with `args` in its server (stdin empty, the output captured as text), as
    `subprocess.run([TOOL, *args], ...)` would run its console script beside this interpreter;
    None when no server took the request (nothing ran)."""
    real = os.path.join(os.path.dirname(sys.executable), tool)
    with open(os.devnull, "rb") as stdin, tempfile.TemporaryFile() as stdout, \
            tempfile.TemporaryFile() as stderr:
        status = request(os.path.join(folder, f"{tool}.sock"), real, args, cwd, env,
                         [stdin.fileno(), stdout.fileno(), stderr.fileno()])
        if status is None:
            return None
        output = []
        for stream in (stdout, stderr):
            stream.seek(0)
            output.append(stream.read().decode(errors="replace"))
    return subprocess.CompletedProcess([real, *args], os.waitstatus_to_exitcode(status),
                                       *output)


def request(path: str, real: str, args: list[str], cwd: str | os.PathLike[str],
            env: Mapping[str, str], fds: list[int]) -> int | None:
    """The raw wait status of the command run by the server at `path`; None when no server
    took it. (tests/forkserver_client.py speaks the same protocol without `socket`.)"""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
        except OSError:
            return None
        payload = marshal.dumps((PROTOCOL, os.fsencode(real), [os.fsencode(a) for a in args],
                                 os.fsencode(cwd),
                                 [(os.fsencode(k), os.fsencode(v)) for k, v in env.items()],
                                 [0, 1, 2]))
        socket.send_fds(sock, [len(payload).to_bytes(4, "big")], fds)
        sock.sendall(payload)
        reply = b""
        while len(reply) < 5 and (chunk := sock.recv(5 - len(reply))):
            reply += chunk
    if reply == b"R":
        return None
    if len(reply) != 5 or reply[:1] != b"S":
        raise RuntimeError(f"the fork server of {real} went away while running it")
    return int.from_bytes(reply[1:], "big", signed=True)


def supported() -> bool:
    """Whether this platform can run the server (unix sockets passing descriptors, pidfds)."""
    return hasattr(os, "pidfd_open") and hasattr(socket, "send_fds") and hasattr(os, "fork")


def main(argv: list[str]) -> int:
    folder, rest = argv[0], argv[1:]
    log = rest[rest.index("--log") + 1] if "--log" in rest else None
    if "--server" in rest:
        return serve(folder, rest[rest.index("--server") + 1], log)
    return serve_all(folder, log)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
