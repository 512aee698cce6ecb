"""isolate=True: the function runs in a worker process started with the "spawn" method (CUDA
does not survive fork). The worker rebuilds the same inputs from (op, workload, seed, dtype)
itself (a declared op from its declaration and the parent's fp64 reference: python/parity/
_case.py worker_spec), runs the probe calls and the judged call exactly as in-process
(python/parity/_harness.py), and sends back the outputs as numpy arrays; the parent judges them. A worker that dies (segfault, os._exit)
gives "crashed", one that does not answer within the timeout is killed and gives "timeout".
fn must be picklable by reference (a module-level function), as multiprocessing requires."""
from __future__ import annotations

import ast
import multiprocessing as mp
import signal
import sys
import time
from types import FrameType
from typing import Any, Optional

from ._harness import Outcome

_DEFAULT_TIMEOUT = 120.0  # seconds, as `parity check --timeout`'s default
_STARTUP = 60.0  # seconds for the worker's start-up before its first call (imports, the case)
_SLACK = 5.0  # seconds past the limit for a call's message and the copies around it


def _is_main_test(node: ast.expr) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)):
        return False
    sides = [node.left, node.comparators[0]]
    names = [x for x in sides if isinstance(x, ast.Name) and x.id == "__name__"]
    consts = [x for x in sides if isinstance(x, ast.Constant) and x.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def _guarded(stmts: "list[ast.stmt]", line: int) -> bool:
    """Whether `line` lies, within stmts, in the body of an `if __name__ == "__main__":`."""
    for st in stmts:
        end = getattr(st, "end_lineno", None) or st.lineno
        if not (st.lineno <= line <= end):
            continue
        if isinstance(st, ast.If) and _is_main_test(st.test):
            if any(x.lineno <= line <= (getattr(x, "end_lineno", None) or x.lineno) for x in st.body):
                return True
        for field in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt) and _guarded(sub, line):
                return True
            if field == "handlers" and isinstance(sub, list):
                for h in sub:
                    if _guarded(h.body, line):
                        return True
    return False


def check_main_guard(frame: Optional[FrameType] = None) -> None:
    """isolate=True starts its worker with multiprocessing's "spawn", which re-imports the main
    script in the worker: a call reached from the script's top level outside
    `if __name__ == "__main__":` would run again there, and the worker die starting (the kernel
    then got "crashed"). Raise RuntimeError saying so, before any worker starts. Interactive
    sessions, `python -c` and callers whose main module is guarded (pytest) pass."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not str(path).endswith(".py"):
        return
    f: Optional[FrameType] = frame or sys._getframe(1)
    top: Optional[FrameType] = None
    while f is not None:  # the outermost frame running the main module's top-level code
        if f.f_globals is main.__dict__ and f.f_code.co_name == "<module>":
            top = f
        f = f.f_back
    if top is None:
        return
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return
    line = top.f_lineno
    if _guarded(tree.body, line):
        return
    raise RuntimeError(
        "isolate=True runs fn in a worker started with multiprocessing's 'spawn' method, which "
        "re-imports the main script %s: its line %d, which leads to this parity.check, is not under "
        "`if __name__ == \"__main__\":`, so the worker would run it again and die starting. Put the "
        "script's top-level calls under\n\n    if __name__ == \"__main__\":\n        ...\n\n(fn itself "
        "stays at module level, where the worker imports it from)" % (path, line))


def _unsendable(fn: Any, e: BaseException) -> str:
    """Why fn cannot be sent to the worker, and what to write instead."""
    qn = getattr(fn, "__qualname__", "") or ""
    if "<lambda>" in qn or "<locals>" in qn:
        return ("cannot send fn to the worker: %s is a %s, which pickle cannot send by reference; "
                "isolate=True needs fn defined at the top level of a module (%s: %s)" % (
                    qn, "lambda" if "<lambda>" in qn else "function defined inside another function",
                    type(e).__name__, e))
    return "cannot send fn to the worker (isolate=True pickles fn by reference): %s: %s" % (type(e).__name__, e)


def _serve(conn: Any) -> None:
    from . import _case, _harness
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        fn, spec, name, seed, dtype, like, device, decoy, rerun, timeout, out_dtype = msg
        try:
            case = _case.case_from_spec(spec, name, seed, dtype)
            out = _harness.run_in_process(fn, case, like, device, decoy, rerun, None, out_dtype,
                                          on_call=lambda: conn.send(("call",)))
            outputs = None if out.outputs is None else [(a.copy(), dt) for a, dt in out.outputs]
            probe = None if out.probe is None else [(a.copy(), dt) for a, dt in out.probe]
            conn.send(("ok", out.status, out.detail, outputs, out.seconds, out.rerun, probe))
        except BaseException as e:  # report, then keep serving
            conn.send(("error", "crashed", "worker: %s: %s" % (type(e).__name__, e), None, 0.0, None, None))


def _signame(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return "signal %d" % -code


class Worker:
    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.p = ctx.Process(target=_serve, args=(child,), daemon=True, name="parity-worker")
        self.p.start()
        child.close()

    def run(self, fn: Any, spec: Any, name: str, seed: int, dtype: str, like: str, device: Any, decoy: bool,
            rerun: bool, timeout: Optional[float], out_dtype: str = "f32") -> Outcome:
        """fn on one workload in the worker: spec is _case.worker_spec's (a built-in op's name, or
        what the worker needs to build a declared op's case)."""
        limit = _DEFAULT_TIMEOUT if timeout is None else float(timeout)
        t0 = time.perf_counter()
        try:
            self.conn.send((fn, spec, name, seed, dtype, like, device, decoy, rerun, timeout, out_dtype))
        except Exception as e:
            return Outcome("crashed", _unsendable(fn, e), exc=e)
        # The worker says "call" before each call of fn: each must return within the limit (plus
        # _SLACK for the message and the copies around it). Before the first: its start-up
        # (importing numpy/torch, building the case; measured 1-3 s with torch) within _STARTUP.
        wait = limit + _STARTUP
        msg: Any = None
        while True:
            if not self.conn.poll(wait):
                self.p.kill()
                self.p.join(5)
                return Outcome("timeout", "a call of fn did not return within %g s (timeout %g s); the worker was "
                               "killed" % (wait, limit), seconds=time.perf_counter() - t0)
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):  # the worker died
                msg = None
                break
            if msg[0] != "call":
                break
            wait = limit + _SLACK
        if msg is None:
            self.p.join(5)
            code = self.p.exitcode
            if code is not None and code < 0:
                why = "killed by %s" % _signame(code)
            else:
                why = "exited with status %s" % code
            return Outcome("crashed", "the worker running fn %s" % why, seconds=time.perf_counter() - t0)
        kind, status, detail, outputs, secs, rerun, probe = msg
        if status == "ran" and timeout is not None and secs > timeout:
            return Outcome("timeout", "ran %.3g s, past timeout=%g s" % (secs, timeout), seconds=secs)
        return Outcome(status, detail, outputs, secs, rerun, probe=probe)  # type: ignore[arg-type]

    def close(self) -> None:
        try:
            if self.p.is_alive():
                try:
                    self.conn.send(None)
                except Exception:
                    pass
                self.p.join(2)
            if self.p.is_alive():
                self.p.kill()
                self.p.join(2)
        finally:
            self.conn.close()
