"""`Segment`: the simulator's record of the steps since the gradient graph was last cut.

A segment is the run of steps between two cuts of the gradient graph (a SHAC rollout window is one).
It owns what the simulator must keep or defer between `step` calls, so that no caller has to know it:
- gradient mode: every substep's intermediates, intermediate state and launch sites (for whatever
  else the substep launches, e.g. bundling's kernels), and a `BufferPool` of further buffers that
  all substeps share, kept for the backward pass and reused once `cut()` says that backward is done
  (or will never run); without `cut()` every taped substep allocates its own. The adjoints of reused
  buffers are zeroed when they are reused, so the per-step tapes that recorded them must not be
  reset by hand (`Tape.reset` would zero gradients that bundles carry back to earlier steps);
- no-gradient mode: one set of intermediates and launch sites, two intermediate states that
  alternate substep by substep (what a substep hands to the next stays intact), and the pool's
  buffers free again at every substep (but what the bundler carries to the next);
- a segment built with `substep_buffers=False` (a bundled simulator's: the host's bundler takes each
  substep's intermediates and states from the pool, sized to the environments and branches it runs
  together; the device's keeps its own per position) keeps only the launch sites, and without
  gradients the two alternating states;
- steps replayed from captured graphs (diffsim.step_graphs) do not ask for their buffers again:
  `advance` moves past the substeps they ran on the buffers they were captured with;
- both modes: the environments whose states were replaced from outside `step` (`restart`), whose
  open bundles the simulator closes at the next substep, recorded on that substep's tape (closing
  them at once would cut the other bundles' gradients);
- its `generation`, counted up by every `cut()`: a taped step holds a `TapeMark` of the generation
  it was taped in, and every backward pass through it (a tape's, launched kernel by kernel, or a
  captured graph's) checks the mark first and raises `StaleTapeError` once the segment was cut
  since (its buffers and graphs serve later steps: the gradient would be theirs, silently).
"""
from typing import Callable, List, Optional, Tuple

import numpy as np

from .errors import StaleTapeError
from .kernels.launch import LaunchSites
from .pool import BufferPool
from .state import State
from .substep import Scratch, Substep


class TapeMark:
    """The generation of `segment` a step was taped in; `check()` before its backward pass."""

    __slots__ = ("_segment", "_generation")

    def __init__(self, segment: "Segment"):
        self._segment, self._generation = segment, segment.generation

    def check(self) -> None:
        """StaleTapeError when the segment was cut since the step was taped."""
        now = self._segment.generation
        if now != self._generation:
            raise StaleTapeError(f"backward pass through a step taped before the segment's last cut (taped in "
                                 f"generation {self._generation}, cut {now - self._generation} time(s) since): its "
                                 "buffers serve later steps now; run the backward pass before segment.cut()")


class Segment:
    """See the module docstring. Built by the `Simulator`; reached as `sim.segment`."""

    def __init__(self, physics: Substep, num_envs: int, requires_grad: bool, substep_buffers: bool = True):
        self._physics, self._num_envs, self.requires_grad = physics, num_envs, requires_grad
        self._substep_buffers = substep_buffers
        self._taped: List[Tuple[Optional[Scratch], Optional[State], LaunchSites]] = []
        self._cursor = 0
        self._restarted: List[int] = []
        self._before_cut: List[Callable[[], None]] = []
        self.generation = 0
        """Cuts so far (see `TapeMark`)."""
        self.pool = BufferPool(physics, requires_grad)
        """The buffers all substeps share (see diffsim.pool)."""
        if not requires_grad:
            self._scratch = physics.scratch(num_envs, False) if substep_buffers else None
            self._between = (State.zeros(physics.model, num_envs), State.zeros(physics.model, num_envs))
            self._sites = LaunchSites(physics.model.device)
            self._substeps = 0

    def cut(self) -> None:
        """The segment's backward pass is done (or will never run): whatever reads its adjoints runs
        (`before_cut`), then its buffers serve the next one."""
        for read_adjoints in self._before_cut:
            read_adjoints()
        self.generation += 1
        self._cursor = 0
        self.pool.release()

    def mark(self) -> TapeMark:
        """The mark of a step taped now (its backward pass checks it)."""
        return TapeMark(self)

    @property
    def taped_substeps(self) -> int:
        """Substeps taped since the last `cut()` (0 without gradients)."""
        return self._cursor if self.requires_grad else 0

    def advance(self, substeps: int) -> None:
        """The next `substeps` substeps ran from a captured graph (diffsim.step_graphs) on the buffers
        they were captured with: the next substep takes the buffers after them."""
        if self.requires_grad:
            self._cursor += substeps
        else:
            self._substeps += substeps

    def before_cut(self, read_adjoints: Callable[[], None]) -> None:
        """Call `read_adjoints` at every `cut`, while the segment's buffers still hold their adjoints."""
        self._before_cut.append(read_adjoints)

    def restart(self, env_ids) -> None:
        """The states of `env_ids` (host indices: an int, a sequence, a numpy array or a CPU tensor)
        were replaced from outside `step` (a reset): their bundles close at the next substep (inside a
        bundle an environment continues from its branches)."""
        ids = np.asarray(env_ids, dtype=np.int64).ravel().tolist()   # a CPU tensor's data, not one int per id
        self._restarted = sorted(set(self._restarted) | set(ids))

    def take_restarted(self) -> List[int]:
        """The environments restarted since the last call (the simulator applies them)."""
        out, self._restarted = self._restarted, []
        return out

    @property
    def pending_restarts(self) -> List[int]:
        return list(self._restarted)

    def buffers(self) -> Tuple[Optional[Scratch], Optional[State], LaunchSites]:
        """For the next substep: zeroed intermediates, an intermediate state (not the one the previous
        substep got), and the launch sites of the substep's position, begun (with `substep_buffers`
        False: no intermediates, and with gradients no state)."""
        if not self.requires_grad:
            if self._scratch is not None:
                self._scratch.reuse(self._num_envs)
            self.pool.release()
            self._sites.begin()
            k = self._substeps
            self._substeps += 1
            return self._scratch, self._between[k % 2], self._sites
        if self._cursor == len(self._taped):
            sites = LaunchSites(self._physics.model.device)
            if self._substep_buffers:
                self._taped.append((self._physics.scratch(self._num_envs, True),
                                    State.zeros(self._physics.model, self._num_envs, True), sites))
            else:
                self._taped.append((None, None, sites))
        else:
            scratch, state, sites = self._taped[self._cursor]
            if scratch is not None:
                scratch.reuse(self._num_envs)
                state.zero_gradients()
        sites.begin()
        self._cursor += 1
        return self._taped[self._cursor - 1]
