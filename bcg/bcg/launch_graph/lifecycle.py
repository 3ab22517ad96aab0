"""What a launch does when one of its processes exits: the roles of `graph.py` as a pure state machine.

The launch_ros files (`ros.py`) turn each `Decision` into launch actions; `bcg launch`'s
`Supervisor` applies the same rules to the processes it owns:
- the main process ending cleanly stops the services (SIGINT; the policy node then damps), and the
  final processes start once every service has ended; a final's exit ends the launch with its code;
- a main process failing fails the launch, but first stops the services and runs the finals as a
  clean end would (mujoco_check's evaluator then says that the simulator stopped);
- a service exiting while the main one runs or failing while it is being stopped (any exit code
  but 0 and death by that SIGINT), or a final failing, fails the launch;
- in a graph without a main process, a service exiting ends the launch (failed unless it exited 0).
"""
import signal
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

from .graph import ProcessSpec


@dataclass(frozen=True)
class Decision:
    """The reaction to one exit. Empty: nothing to do."""

    signal: Tuple[str, ...] = ()
    """Processes to send SIGINT."""
    start: Tuple[str, ...] = ()
    """Processes to start."""
    shutdown: str = ""
    """End the launch, successfully, for this reason."""
    failure: str = ""
    """End the launch as failed (non-zero exit code), for this reason."""


class Lifecycle:
    """Tracks the processes of one launch; `exited` says what each exit leads to."""

    def __init__(self, specs: Sequence[ProcessSpec]):
        self.roles: Dict[str, str] = {s.name: s.role for s in specs}
        self.finals = tuple(s.name for s in specs if s.role == "final")
        self.has_main = any(s.role == "main" for s in specs)
        self.running_services = {s.name for s in specs if s.role == "service"}
        self.main_done = False
        self.main_failure = ""
        """Why the main process failed, when it did in a graph with finals (the launch fails after them)."""

    def _after_services(self, what: str) -> Decision:
        return Decision(start=self.finals) if self.finals else Decision(shutdown=what)

    def exited(self, name: str, returncode: int) -> Decision:
        role = self.roles[name]
        if role == "final":
            if self.main_failure:
                return Decision(failure=self.main_failure)
            return Decision(failure=f"{name} exited with {returncode}") if returncode else \
                Decision(shutdown=f"{name} finished")
        if role == "main":
            if returncode and not self.finals:
                return Decision(failure=f"{name} exited with {returncode}")
            self.main_done = True
            if returncode:
                self.main_failure = f"{name} exited with {returncode}"
            if self.running_services:
                return Decision(signal=tuple(sorted(self.running_services)))
            return self._after_services(f"{name} finished")
        self.running_services.discard(name)
        if not self.main_done and (self.has_main or returncode):
            return Decision(failure=f"{name} exited with {returncode}" +
                            (" while the main process was running" if self.has_main else ""))
        if self.main_done and not self.main_failure and returncode not in (0, -signal.SIGINT):
            return Decision(failure=f"{name} exited with {returncode} while being stopped")
        if self.running_services:
            return Decision()
        return self._after_services(f"{name} exited")
