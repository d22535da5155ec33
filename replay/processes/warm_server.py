"""The warm interpreter's server: run in the grader's own interpreter as ``python -c SOURCE FD``.

This file is never imported by evalstore: :mod:`evalstore.replay.processes.warm` reads its text and hands
it to the interpreter a code grader or converter names, so ``sys.executable``, ``sys.path``, the
site-packages and the venv are that interpreter's, not evalstore's. It uses the standard library only
and must run on any Python 3.9+ (the grader's interpreter may be older than evalstore's).

The server forks one child per call and runs nothing of the grader itself: every call starts from the same
state (the interpreter started, the protocol's own modules and ``json`` imported, ``evalstore.grader``
imported when the interpreter has it), and whatever a script does to its modules dies with its child.

Protocol, on the Unix socket ``FD`` (a stream):

* the server first sends one JSON line: ``{"pid", "environ", "orig_argv0"}``, the environment the
  interpreter started with (what its launcher, ``uv run`` or a pyenv shim, added or changed), so each
  call's environment can be given the same changes;
* a request is a 4-byte big-endian length and that many bytes of JSON (``script``, ``argv``, ``cwd``,
  ``env``, ``orig_argv``), its first byte carrying four descriptors (``SCM_RIGHTS``): the child's stdin,
  stdout and stderr, and a socket of the call's own on which the server sends ``{"pid": N}`` once the child
  is forked and ``{"status": S}`` (its ``waitpid`` status) once it has ended (``{"error": ...}`` when the
  fork failed);
* the server ends when the socket closes: evalstore ended or has no more calls for it.

The child is what ``python SCRIPT ARGS`` started in a new session would be: its own process group, its
cwd and environment, the three descriptors as 0, 1 and 2 and nothing else open, ``sys.argv``,
``sys.path[0]`` the script's folder, the script run as ``__main__`` (a new module), its exit status as
the interpreter's (``SystemExit``, an uncaught exception's traceback on stderr and 1, threads joined,
``atexit`` run, stdio flushed).
"""

from __future__ import annotations

# try/except/pass rather than contextlib.suppress: contextlib would be one more module in every child.
# ruff: noqa: SIM105
import sys

_STARTUP = frozenset(sys.modules)
"""The modules the interpreter loads before any script: those imported here beyond them are the server's."""
_MAIN_KEYS = [k for k in globals() if k.startswith("__") and k.endswith("__")]
"""The names the interpreter puts in ``__main__``, in its order."""

import json  # noqa: E402  (after the snapshot of the interpreter's own modules)
import os  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402

TYPE_CHECKING = False  # typing is not imported at run time: each module the server imports is one more in every child
if TYPE_CHECKING:
    from typing import Any, NoReturn

_SAFE_PATH = bool(getattr(sys.flags, "safe_path", False))
_cwd_entry = None if _SAFE_PATH or not sys.path else sys.path.pop(0)  # "" (-c): the SDK is not looked for in the cwd
try:  # the SDK, imported once here rather than by every child (only if this interpreter has it)
    import evalstore.grader  # noqa: F401
except Exception:
    pass
finally:
    if _cwd_entry is not None:
        sys.path.insert(0, _cwd_entry)


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _request(ctrl: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    fds: list[int] = []
    msg, ancdata, _flags, _addr = ctrl.recvmsg(4, socket.CMSG_SPACE(4 * struct.calcsize("i")))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            count = len(data) // struct.calcsize("i")
            fds.extend(struct.unpack(f"{count}i", data[: count * struct.calcsize("i")]))
    if not msg:
        for fd in fds:
            os.close(fd)
        return None
    if len(msg) < 4:
        rest = _recv_exact(ctrl, 4 - len(msg))
        if rest is None:
            return None
        msg += rest
    body = _recv_exact(ctrl, struct.unpack(">I", msg)[0])
    if body is None or len(fds) != 4:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(body.decode("utf-8")), fds


def _send(sock: socket.socket, obj: dict[str, Any]) -> None:
    try:
        sock.sendall((json.dumps(obj) + "\n").encode("utf-8"))
    except OSError:
        pass


def _run_child(
    request: dict[str, Any], fds: list[int], ctrl: socket.socket, calls: dict[int, tuple[socket.socket, int]]
) -> NoReturn:
    """In the forked child: become ``python SCRIPT ARGS`` and never return."""
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        ctrl.close()
        for sock, _pidfd in calls.values():
            sock.close()
        _close_others()
        os.environ.clear()
        os.environ.update(request["env"])
        script = request["script"]
        sys.argv = list(request["argv"])
        if hasattr(sys, "orig_argv"):
            sys.orig_argv = list(request["orig_argv"])
        if not _SAFE_PATH:
            folder = os.path.dirname(os.path.realpath(script))
            sys.path[0] = folder
            _forget_shadowed(folder)
        path = os.path.abspath(script)
        with open(path, "rb") as f:
            source = f.read()
        import importlib.machinery
        import types

        module = types.ModuleType("__main__")
        namespace = module.__dict__
        for key in _MAIN_KEYS:
            if key not in namespace:
                namespace[key] = None
        namespace.update(
            __name__="__main__",
            __doc__=None,
            __package__=None,
            __loader__=importlib.machinery.SourceFileLoader("__main__", path),
            __spec__=None,
            __builtins__=sys.modules["builtins"],
            __file__=path,
            __cached__=None,
        )
        if "__annotations__" in _MAIN_KEYS:
            namespace["__annotations__"] = {}
        sys.modules["__main__"] = module
        code = _main(source, path, namespace)
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
        finally:
            code = 1
    os._exit(_finish(code))


def _forget_shadowed(folder: str) -> None:
    """A module the server imported that the script's folder shadows (its own ``json.py``) is dropped, so
    the script imports its own, as it would in an interpreter of its own."""
    try:
        names = {entry.split(".", 1)[0] for entry in os.listdir(folder)}
    except OSError:
        return
    extra = [name for name in sys.modules if name not in _STARTUP]
    shadowed = {name.split(".", 1)[0] for name in extra} & names
    for name in extra:
        if name.split(".", 1)[0] in shadowed:
            del sys.modules[name]


def _main(source: bytes, path: str, namespace: dict[str, Any]) -> int:
    """Compile and run the script as the interpreter's main does; its exit code."""
    try:
        code_object = compile(source, path, "exec")
    except SyntaxError as exc:  # reported without a traceback, as the interpreter reports it
        exc.__traceback__ = None
        try:
            sys.excepthook(type(exc), exc, None)
        except BaseException:
            pass
        return 1
    try:
        exec(code_object, namespace)
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except BaseException as exc:
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # this frame is not the script's
        exc.__traceback__ = tb
        try:
            sys.excepthook(type(exc), exc, tb)
        except BaseException:
            pass
        if isinstance(exc, KeyboardInterrupt):
            import signal

            _finish(0)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return 1


def _exit_code(exc: SystemExit) -> int:
    value = exc.code
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    try:
        sys.stderr.write(str(value) + "\n")
    except BaseException:
        pass
    return 1


def _finish(code: int) -> int:
    """The interpreter's shutdown: wait for threads, run atexit, flush stdio (a failed flush is 120)."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            if stream is sys.stdout:
                code = 120
    return code


def _close_others() -> None:
    """Close every descriptor but 0, 1 and 2, as a spawned process has them: those /proc lists (a
    ``closerange`` up to the descriptor limit costs a millisecond where the kernel's ``close_range`` is
    not used)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):
        try:
            limit = os.sysconf("SC_OPEN_MAX")
        except (ValueError, OSError):
            limit = 1024
        os.closerange(3, limit)
        return
    for fd in fds:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed already


def serve(fd: int) -> None:
    ctrl = socket.socket(fileno=fd)
    if not (hasattr(os, "fork") and hasattr(os, "pidfd_open")):
        return  # no hello: evalstore spawns this interpreter's calls
    hello = {
        "pid": os.getpid(),
        "environ": dict(os.environ),
        "orig_argv0": getattr(sys, "orig_argv", [sys.executable])[0],
    }
    ctrl.sendall((json.dumps(hello) + "\n").encode("utf-8"))
    calls: dict[int, tuple[socket.socket, int]] = {}  # pid -> (call socket, pidfd)
    while True:
        readable = [ctrl] + [pidfd for _sock, pidfd in calls.values()]
        ready, _w, _x = select.select(readable, [], [])
        for item in ready:
            if item is ctrl:
                got = _request(ctrl)
                if got is None:
                    return
                request, fds = got
                call = socket.socket(fileno=fds[3])
                try:
                    pid = os.fork()
                except OSError as exc:
                    _send(call, {"error": f"fork failed: {exc}"})
                    call.close()
                    for fd_ in fds[:3]:
                        os.close(fd_)
                    continue
                if pid == 0:
                    _run_child(request, fds, ctrl, calls)
                for fd_ in fds[:3]:
                    os.close(fd_)
                calls[pid] = (call, os.pidfd_open(pid))
                _send(call, {"pid": pid})
            else:
                for pid, (call, pidfd) in list(calls.items()):
                    if pidfd == item:
                        _pid, status = os.waitpid(pid, 0)
                        os.close(pidfd)
                        del calls[pid]
                        _send(call, {"status": status})
                        call.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
