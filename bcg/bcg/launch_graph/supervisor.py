"""Runs a `LaunchGraph` as supervised child processes (the `bcg launch` way, no ROS 2 needed).

Lifecycle (see `graph.py` for the roles): services and the main process start together; a service
or main process failing stops the others and the launch exits non-zero; the main process ending
cleanly stops the services (SIGINT, so the policy node sends its damping) and then runs the final
processes, whose exit code is the launch's. SIGINT / SIGTERM to the supervisor stops everything.
Each child's output is copied line by line, prefixed with its name.
"""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import List, Optional

from .graph import ProcessSpec

STOP_GRACE_S = 5.0
"""Seconds a child gets after SIGINT before SIGTERM, and again before SIGKILL."""
EXIT_INTERRUPTED = 130


class Child:
    def __init__(self, spec: ProcessSpec, out):
        exe = shutil.which(spec.console) or os.path.join(os.path.dirname(sys.executable), spec.console)
        self.spec = spec
        self.proc = subprocess.Popen([exe, *spec.arguments], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, bufsize=1, text=True)
        self.pump = threading.Thread(target=self._copy, args=(out,), daemon=True)
        self.pump.start()

    def _copy(self, out):
        for line in self.proc.stdout:
            out.write(f"[{self.spec.name}] {line}")
            out.flush()

    def poll(self) -> Optional[int]:
        return self.proc.poll()

    def signal(self, sig) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass


def stop_all(children: List[Child], grace_s: float = STOP_GRACE_S) -> None:
    """SIGINT every running child, then SIGTERM, then SIGKILL, `grace_s` apart."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        running = [c for c in children if c.poll() is None]
        if not running:
            break
        for c in running:
            c.signal(sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(c.poll() is None for c in running):
            time.sleep(0.05)
    for c in children:
        c.proc.wait()
        c.pump.join(timeout=1.0)


class Supervisor:
    def __init__(self, processes: List[ProcessSpec], out=None, log=None, poll_s: float = 0.05):
        self.processes, self.out = processes, out or sys.stdout
        self.log = log or (lambda msg: print(f"[bcg launch] {msg}", file=sys.stderr, flush=True))
        self.poll_s = poll_s
        self.interrupted: Optional[str] = None

    def _interrupt(self, signum, _frame):
        self.interrupted = signal.Signals(signum).name

    def run(self) -> int:
        """Run the graph; returns the launch's exit code."""
        old = {s: signal.signal(s, self._interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run()
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def _start(self, specs) -> List[Child]:
        children = []
        for spec in specs:
            self.log(f"starting {spec.name}: {spec.console} {' '.join(spec.arguments)}")
            children.append(Child(spec, self.out))
        return children

    def _run(self) -> int:
        first = [p for p in self.processes if p.role != "final"]
        finals = [p for p in self.processes if p.role == "final"]
        children = self._start(first)
        code = self._watch(children)
        if code is not None:
            return code
        for spec in finals:
            (child,) = self._start([spec])
            code = self._watch([child], final=True)
            if code:
                return code
        return 0

    def _watch(self, children: List[Child], final: bool = False) -> Optional[int]:
        """Wait for the end of this stage: None when the main process ended cleanly, else an exit code."""
        while True:
            if self.interrupted:
                self.log(f"{self.interrupted}: stopping {', '.join(c.spec.name for c in children)}")
                stop_all(children)
                return EXIT_INTERRUPTED
            for c in children:
                rc = c.poll()
                if rc is None:
                    continue
                if final:
                    c.pump.join(timeout=1.0)
                    self.log(f"{c.spec.name} exited with {rc}")
                    return rc
                if c.spec.role == "main" and rc == 0:
                    self.log(f"{c.spec.name} finished; stopping the others")
                    stop_all([o for o in children if o is not c])
                    failed = {o.spec.name: o.poll() for o in children if o is not c and o.poll() not in (0, -2)}
                    if failed:
                        self.log(f"exited non-zero while stopping: {failed}")
                        return 1
                    return None
                self.log(f"{c.spec.name} exited with {rc} (role {c.spec.role}); stopping the others")
                stop_all([o for o in children if o is not c])
                return rc if rc > 0 else 1
            time.sleep(self.poll_s)
