"""The client of tests/forkserver.py: the `planc`, `planc-opt` and `filecheck` that lit runs when
PLANC_FORKSERVER names a fork server's folder (lit.cfg.py puts FOLDER/bin first on PATH).

`forkserver.install_clients` copies this file to FOLDER/bin/TOOL behind a `#!PYTHON -IS` line:
an isolated interpreter without `site` starts in ~20 ms, and this file imports only modules
built into it (no `socket`, whose `enum` and `selectors` imports cost more than the rest).

It finds the program that lit would have run without FOLDER/bin on PATH, sends the server that
path, its arguments, working folder, environment and standard descriptors, and exits as the
server's child did (with its exit code, or killed by its signal). Without PLANC_FORKSERVER, with
no server listening, or refused by the server (an environment the server cannot reproduce), it
execs the program itself: the command then runs exactly as it would without the server.
"""

import _signal
import _socket
import marshal
import os
import sys

PROTOCOL = 1
"""Bumped with any change to the request or the reply (tests/forkserver.py checks it)."""

LOST = 125
"""The exit code when the server went away after taking the request (the command may have run
in part, so running the program again is not an option)."""


def resolve(name: str, here: str) -> str | None:
    """The program `name` on PATH as lit would find it (its first file of that name), skipping
    this client's own folder `here`; None when there is none."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not folder or os.path.realpath(folder) == here:
            continue
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def request(socket_path: str, real: str) -> int | None:
    """Run the command in the server: the raw wait status of its child, or None when no server
    took the request (nothing ran)."""
    open_fds = []
    for fd in (0, 1, 2):                   # before the socket takes a closed one's number
        try:
            os.fstat(fd)
            open_fds.append(fd)
        except OSError:                    # closed (`planc ... >&-`): the child's stays closed
            pass
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
    except OSError:
        return None
    payload = marshal.dumps((PROTOCOL, os.fsencode(real), [os.fsencode(a) for a in sys.argv[1:]],
                             os.getcwdb(), list(os.environb.items()), open_fds))
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in open_fds)
    try:
        header = len(payload).to_bytes(4, "big")
        ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)] if fds else []
        sock.sendmsg([header], ancillary)
        sock.sendall(payload)
        reply = b""
        while len(reply) < 5:
            chunk = sock.recv(5 - len(reply))
            if not chunk:
                break
            reply += chunk
    except OSError:
        reply = b""
    if reply[:1] == b"R":                  # refused before anything ran
        return None
    if len(reply) != 5 or reply[:1] != b"S":
        sys.stderr.write(f"{os.path.basename(sys.argv[0])}: the fork server went away while "
                         "running this command\n")
        sys.stderr.flush()
        os._exit(LOST)
    return int.from_bytes(reply[1:], "big", signed=True)


def exit_as(status: int) -> None:
    """End this process as the child ended: its exit code, or its signal."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        try:
            _signal.signal(-code, _signal.SIG_DFL)
        except OSError:                    # SIGKILL, SIGSTOP: no handler to reset
            pass
        os.kill(os.getpid(), -code)
        code = 128 - code                  # a signal that does not end a process by default
    os._exit(code)


def main() -> None:
    name = os.path.basename(sys.argv[0])
    real = resolve(name, os.path.dirname(os.path.realpath(sys.argv[0])))
    if real is None:
        sys.stderr.write(f"{name}: command not found\n")
        sys.stderr.flush()
        os._exit(127)
    folder = os.environ.get("PLANC_FORKSERVER")
    if folder:
        status = request(os.path.join(folder, f"{name}.sock"), real)
        if status is not None:
            exit_as(status)
    os.execv(real, [real, *sys.argv[1:]])


if __name__ == "__main__":
    main()
