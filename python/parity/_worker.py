"""isolate=True: the function runs in a worker process started with the "spawn" method (CUDA
does not survive fork). The worker rebuilds the same inputs from (op, workload, seed, dtype)
itself, runs the decoy, the judged call and the rerun exactly as in-process, and sends back
the outputs as numpy arrays; the parent judges them. A worker that dies (segfault, os._exit)
gives "crashed", one that does not answer within the timeout is killed and gives "timeout".
fn must be picklable by reference (a module-level function), as multiprocessing requires."""
import multiprocessing as mp
import signal
import time

from ._harness import Outcome

_DEFAULT_TIMEOUT = 120.0  # seconds, as `parity check --timeout`'s default


def _serve(conn):
    from . import _case, _harness
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        if msg[0] == "custom":  # a declared op (python/parity/custom_run.py): outputs back, judged there
            try:
                from . import custom_run
                conn.send(("ok", custom_run.execute(*msg[1:])))
            except BaseException as e:
                conn.send(("error", {"status": "crashed", "detail": "worker: %s: %s" % (type(e).__name__, e),
                                     "seconds": 0.0}))
            continue
        fn, op, name, seed, dtype, like, device, decoy, rerun, timeout, out_dtype = msg
        try:
            case = _case.Case(op, name, seed, dtype)
            out = _harness.run_in_process(fn, case, like, device, decoy, rerun, None, out_dtype)
            outputs = None if out.outputs is None else [(a.copy(), dt) for a, dt in out.outputs]
            conn.send(("ok", out.status, out.detail, outputs, out.seconds, out.rerun))
        except BaseException as e:  # report, then keep serving
            conn.send(("error", "crashed", "worker: %s: %s" % (type(e).__name__, e), None, 0.0, None))


def _signame(code):
    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return "signal %d" % -code


class Worker:
    def __init__(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.p = ctx.Process(target=_serve, args=(child,), daemon=True, name="parity-worker")
        self.p.start()
        child.close()

    def run(self, fn, op, name, seed, dtype, like, device, decoy, rerun, timeout, out_dtype="f32"):
        limit = _DEFAULT_TIMEOUT if timeout is None else float(timeout)
        # The worker's first answer includes importing numpy/torch and building the case: the
        # limit covers the calls, so allow the start-up on top (measured: 1-3 s with torch).
        t0 = time.perf_counter()
        try:
            self.conn.send((fn, op, name, seed, dtype, like, device, decoy, rerun, timeout, out_dtype))
        except Exception as e:
            return Outcome("crashed", "cannot send fn to the worker (isolate=True needs a module-level, "
                           "picklable function): %s: %s" % (type(e).__name__, e))
        calls = (1 + int(decoy) + int(rerun))
        deadline = limit * calls + 30.0
        if not self.conn.poll(deadline):
            self.p.kill()
            self.p.join(5)
            return Outcome("timeout", "no answer within %g s (timeout %g s per call, %d calls); the worker was "
                           "killed" % (deadline, limit, calls), seconds=time.perf_counter() - t0)
        try:
            kind, status, detail, outputs, secs, rerun = self.conn.recv()
        except (EOFError, OSError):
            self.p.join(5)
            code = self.p.exitcode
            if code is not None and code < 0:
                why = "killed by %s" % _signame(code)
            else:
                why = "exited with status %s" % code
            return Outcome("crashed", "the worker running fn %s" % why, seconds=time.perf_counter() - t0)
        if status == "ran" and timeout is not None and secs > timeout:
            return Outcome("timeout", "ran %.3g s, past timeout=%g s" % (secs, timeout), seconds=secs)
        return Outcome(status, detail, outputs, secs, rerun)

    def run_custom(self, fn, spec, like, device, small, timeout):
        """A declared op's workload (custom_run.execute in the worker): its result dict, or a
        crashed/timeout one when the worker dies or does not answer."""
        limit = _DEFAULT_TIMEOUT if timeout is None else float(timeout)
        t0 = time.perf_counter()
        try:
            self.conn.send(("custom", fn, spec, like, device, small))
        except Exception as e:
            return {"status": "crashed", "seconds": 0.0, "detail": "cannot send fn to the worker (isolate=True "
                    "needs a module-level, picklable function): %s: %s" % (type(e).__name__, e)}
        calls = 1 + 2 * int(small)
        deadline = limit * calls + 30.0  # start-up on top, as run()
        if not self.conn.poll(deadline):
            self.p.kill()
            self.p.join(5)
            return {"status": "timeout", "seconds": time.perf_counter() - t0, "detail": "no answer within %g s "
                    "(timeout %g s per call, %d calls); the worker was killed" % (deadline, limit, calls)}
        try:
            _, ex = self.conn.recv()
        except (EOFError, OSError):
            self.p.join(5)
            code = self.p.exitcode
            why = "killed by %s" % _signame(code) if code is not None and code < 0 else "exited with status %s" % code
            return {"status": "crashed", "detail": "the worker running fn %s" % why,
                    "seconds": time.perf_counter() - t0}
        if ex["status"] == "ran" and timeout is not None and ex["seconds"] > timeout:
            return {"status": "timeout", "detail": "ran %.3g s, past timeout=%g s" % (ex["seconds"], timeout),
                    "seconds": ex["seconds"]}
        return ex

    def close(self):
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
