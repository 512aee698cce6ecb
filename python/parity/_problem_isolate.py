"""Compiled solutions (C++ built with torch's extension loader) run in a child process
(docs/problems.md, "C++ and CUDA solutions"): a C++ kernel that writes through a null pointer or
loops forever must give a verdict, not end or hang the command. Python solutions stay in the
command's process (a crash there is rare, and the benchmark's own check runs them in-process too).

The child is a fresh interpreter (`python -c`, not a fork: torch and the bridge hold threads)
that loads the same problem (load()'s own arguments) and the same solution, which finds its build
done (the extension's build folder is named by the hash of its sources: _problem_build). The
parent sends each call's tensors over a socket pair and gets back the outputs and the arguments
as the call left them: edits (destination-passing outputs, an input the kernel writes) are copied
back into the parent's tensors, so the harness sees them. A child that dies is a RuntimeError
naming the signal (the harness's `crashed`) and the next call starts another; one that does not
answer within PARITY_PROBLEM_TIMEOUT seconds (default 300) is killed, the same way. Whatever the
solution prints goes to standard error, never into the report."""
from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from typing import Any, Callable, Dict, List, Optional

CHILD_ENV = "PARITY_PROBLEM_CHILD"  # set in the child: it runs the solution itself


def _send(conn: Connection, obj: Any) -> None:
    """Plain pickle (tensors by value): Connection.send's pickler would share torch tensors through
    file descriptors and a resource-sharer thread, which a dying child must not be part of."""
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _recv(conn: Connection) -> Any:
    return pickle.loads(conn.recv_bytes())


def _stderr_fd() -> Optional[int]:
    """The child's standard output: this process's standard error (a solution's prints must not
    land in the report), or inherited when standard error has no descriptor."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _timeout() -> float:
    try:
        return max(1.0, float(os.environ.get("PARITY_PROBLEM_TIMEOUT", "300")))
    except ValueError:
        return 300.0


class IsolatedCall:
    """call(args) -> outputs, made in a child process that loaded (problem load_args, contract,
    solution path) itself."""

    def __init__(self, load_args: Dict[str, Any], contract: str, solution: str, built_after: float) -> None:
        self.spec = (dict(load_args), contract, solution)
        self.built_after = built_after  # when this process began building the solution
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.conn: Optional[Connection] = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env[CHILD_ENV] = repr(self.built_after)
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(x for x in (pkg, env.get("PYTHONPATH", "")) if x)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from parity._problem_solutions import serve_child; "
                              "serve_child(int(sys.argv[1]))",
             str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
            stdout=_stderr_fd())
        theirs.close()
        self.conn = Connection(ours.detach())
        _send(self.conn, ("load",) + self.spec)
        self._answer("loading the solution")

    def _died(self, what: str, late: bool = False) -> RuntimeError:
        assert self.proc is not None
        rc = self.proc.poll()
        if rc is None and not late:  # its end of the socket closed: it is exiting
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = None
        if rc is None:  # no answer in time (or no exit after closing): killed
            self.proc.kill()
            self.proc.wait()
            why = "did not answer within %g s (PARITY_PROBLEM_TIMEOUT) and was killed" % _timeout()
        elif rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = "signal %d" % -rc
            why = "died of %s" % name
        else:
            why = "exited with status %d" % rc
        self.close()
        return RuntimeError("the compiled solution's process %s while %s" % (why, what))

    def _answer(self, what: str) -> Any:
        assert self.conn is not None and self.proc is not None
        deadline = time.monotonic() + _timeout()
        while True:
            try:
                if self.conn.poll(0.05):
                    msg = _recv(self.conn)
                    break
            except (EOFError, OSError):
                raise self._died(what) from None
            if self.proc.poll() is not None:
                raise self._died(what)
            if time.monotonic() > deadline:
                raise self._died(what, late=True)
        if msg[0] == "error":
            raise RuntimeError(msg[1])
        return msg[1:]

    def __call__(self, args: Dict[str, Any]) -> List[Any]:
        import torch
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.conn is not None
        try:
            _send(self.conn, ("call", args))
        except (OSError, ValueError):
            raise self._died("receiving a call") from None
        outs, after = self._answer("running a call")
        for k, v in after.items():  # what the call wrote into its arguments, written here too
            mine = args.get(k)
            if isinstance(mine, torch.Tensor) and isinstance(v, torch.Tensor) and not torch.equal(mine, v):
                mine.copy_(v)
        return list(outs)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def _trust_parent_builds(after: float) -> None:
    """torch's JIT loader builds again in every new process (torch 1.13 keeps the versions it has
    built in memory; load_inline rewrites its source first, so ninja rebuilds it: 14 s for a small
    KernelBench kernel). In the child, an extension the parent built or checked for this solution
    (its library newer than when the parent began) is loaded as it is."""
    from torch.utils import cpp_extension as ce
    orig = getattr(ce, "_write_ninja_file_and_build_library", None)
    if orig is None:  # pragma: no cover - another torch: it builds as it does
        return

    def build(*args: Any, **kw: Any) -> Any:
        so = os.path.join(str(kw.get("build_directory", "")), "%s.so" % kw.get("name", ""))
        if not args and os.path.isfile(so) and os.path.getmtime(so) >= after:
            return None
        return orig(*args, **kw)
    ce._write_ninja_file_and_build_library = build


def serve(fd: int, loader: Callable[[Dict[str, Any], str, str], Callable[[Dict[str, Any]], List[Any]]]) -> None:
    """The child: loader(load_args, contract, solution) -> the solution's call, made once; then
    answer calls until the parent closes (_problem_solutions.serve_child starts it)."""
    conn = Connection(fd)
    try:
        _trust_parent_builds(float(os.environ.get(CHILD_ENV, "inf")))
    except (ImportError, ValueError):  # pragma: no cover
        pass
    call = None
    while True:
        try:
            msg = _recv(conn)
        except (EOFError, OSError):
            return
        try:
            if msg[0] == "load":
                call = loader(msg[1], msg[2], msg[3])
                _send(conn, ("ok",))
            else:
                args = msg[1]
                assert call is not None
                outs = call(args)
                _send(conn, ("ok", outs, args))
        except Exception as e:  # the parent's harness gives it its verdict
            _send(conn, ("error", "%s: %s" % (type(e).__name__, e)))
