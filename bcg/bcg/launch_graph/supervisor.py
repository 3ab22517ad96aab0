"""Runs a `LaunchGraph` as supervised child processes (the `bcg launch` way, no ROS 2 needed).

Services and the main process start together; at each exit `lifecycle.Lifecycle` decides what
happens (the rules, shared with the launch_ros files, are in its docstring): stop the services
(SIGINT, so the policy node sends its damping), start the final processes, or end the launch,
failed (the exit code of the process that failed, 1 if it was killed) or not (0). SIGINT /
SIGTERM to the supervisor stops everything (exit 130). Each child's output is copied line by
line, prefixed with its name.
"""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

from .graph import ProcessSpec
from .lifecycle import Lifecycle

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
    """Runs the graph's processes and applies `Lifecycle`'s decision at each exit, as the launch_ros
    files do: the same rules, so `bcg launch` and `ros2 launch` end the same way with the same code.
    A process asked to stop (SIGINT) gets `STOP_GRACE_S` before SIGTERM, and again before SIGKILL."""

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

    def _start(self, specs) -> Dict[str, Child]:
        children = {}
        for spec in specs:
            self.log(f"starting {spec.name}: {spec.console} {' '.join(spec.arguments)}")
            children[spec.name] = Child(spec, self.out)
        return children

    def _run(self) -> int:
        life = Lifecycle(self.processes)
        specs = {p.name: p for p in self.processes}
        children = self._start([p for p in self.processes if p.role != "final"])
        escalations: Dict[str, list] = {}
        """name -> [time of the next signal, the signals left] for the processes asked to stop."""
        while True:
            running = [c for c in children.values() if c.poll() is None]
            if self.interrupted:
                self.log(f"{self.interrupted}: stopping {', '.join(c.spec.name for c in running) or 'nothing'}")
                stop_all(running)
                return EXIT_INTERRUPTED
            for name, child in list(children.items()):
                rc = child.poll()
                if rc is None:
                    continue
                del children[name]
                escalations.pop(name, None)
                child.pump.join(timeout=1.0)
                self.log(f"{name} exited with {rc}")
                decision = life.exited(name, rc)
                if decision.failure or decision.shutdown:
                    rest = list(children.values())
                    self.log(("launch failed: " if decision.failure else "launch done: ") +
                             (decision.failure or decision.shutdown) +
                             (f"; stopping {', '.join(children)}" if rest else ""))
                    stop_all(rest)
                    return (rc if rc > 0 else 1) if decision.failure else 0
                for other in decision.signal:
                    children[other].signal(signal.SIGINT)
                    escalations[other] = [time.monotonic() + STOP_GRACE_S, [signal.SIGTERM, signal.SIGKILL]]
                children.update(self._start([specs[n] for n in decision.start]))
            now = time.monotonic()
            for name, (due, left) in escalations.items():
                if now >= due and left:
                    children[name].signal(left.pop(0))
                    escalations[name][0] = now + STOP_GRACE_S
            time.sleep(self.poll_s)
