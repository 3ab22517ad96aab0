"""The one bridge between Warp and PyTorch: a simulator step as a `torch.autograd.Function`.

Tensors are shared with Warp without copies (`wp.from_torch`); each call records its own tape,
and the backward pass replays it, so a torch loss over states backpropagates through any chain of
steps into the actions and the initial state. With bundling, a bundle's branches are simulator
state that torch does not see: a later step's backward leaves their gradients on the branch arrays
and the earlier step's backward carries them on (torch runs backwards in reverse step order).
Call `sim.segment.cut()` once the backward pass over a chain of steps is done, so the next chain
reuses the simulator's buffers.
Tensors are on the simulator's device, in its model's precision (`Model.types.torch`: float64 or
float32; inputs of another float dtype are cast, differentiably): q (N, nq), qd (N, nv), q_target
and tau (N, nj).
"""
from typing import Optional, Tuple

import torch
import warp as wp

from .kernels.device_model import Tape
from .kernels.dynamics import DynamicsKernels
from .segment import TapeMark
from .simulator import Simulator
from .state import Control, State
from .step_graphs import CapturedStep


def _in_precision(sim: Simulator, *tensors: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    """The tensors in the simulator's dtype (a differentiable cast where they differ)."""
    dtype = sim.model.types.torch
    return tuple(t.to(dtype) for t in tensors)


def _share(t: torch.Tensor, grad: bool) -> wp.array:
    """A Warp array of t's float dtype sharing its memory (with a zero adjoint when `grad`)."""
    t = t.detach().contiguous()
    return wp.from_torch(t, grad=torch.zeros_like(t) if grad else None)


def _inputs(sim: Simulator, q, qd, q_target, kp, kd, tau, grad: bool):
    """(state_in, control) sharing the tensors' memory (qd_target: zeros)."""
    s_in = State(_share(q, grad), _share(qd, grad), None, None)
    qd_target = wp.zeros(q_target.shape, dtype=sim.model.types.real, device=sim.model.device, requires_grad=grad)
    ctrl = Control(_share(q_target, grad), qd_target, _share(kp.expand_as(q_target), grad),
                   _share(kd.expand_as(q_target), grad), _share(tau, grad))
    return s_in, ctrl


def _copy_in(dst: wp.array, t: torch.Tensor) -> None:
    wp.copy(dst, _share(t.expand(dst.shape), grad=False))


def _captured_step(sim: Simulator, dt: float, q, qd, q_target, kp, kd, tau) -> Tuple[CapturedStep, Optional[TapeMark]]:
    """The inputs copied into the simulator's captured step for the segment's next position, run:
    (the step, its mark for `CapturedStep.backward`)."""
    step = sim.graphs.next_step()
    for dst, t in ((step.state_in.q, q), (step.state_in.qd, qd), (step.control.q_target, q_target),
                   (step.control.kp, kp), (step.control.kd, kd), (step.control.tau, tau)):
        _copy_in(dst, t)
    return step, step.forward(dt)


class _SimStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sim: Simulator, dt: float, kp: torch.Tensor, kd: torch.Tensor,
                q: torch.Tensor, qd: torch.Tensor, q_target: torch.Tensor, tau: torch.Tensor):
        if sim.graphs is not None:
            ctx.saved = _captured_step(sim, dt, q, qd, q_target, kp, kd, tau)
            s_out = ctx.saved[0].state_out
        else:
            s_in, ctrl = _inputs(sim, q, qd, q_target, kp, kd, tau, grad=True)
            s_out = sim.state()
            tape = Tape()
            with tape:
                sim.step(s_in, s_out, ctrl, dt)
            ctx.saved = (tape, s_in, s_out, ctrl)
        return wp.to_torch(s_out.q).clone(), wp.to_torch(s_out.qd).clone()

    @staticmethod
    def backward(ctx, grad_q, grad_qd):
        if isinstance(ctx.saved[0], CapturedStep):
            step, mark = ctx.saved
            mark.check()      # before the output adjoints overwrite a later step's
            s_in, ctrl = step.state_in, step.control
            _copy_in(step.state_out.q.grad, grad_q)
            _copy_in(step.state_out.qd.grad, grad_qd)
            step.backward(mark)
        else:
            tape, s_in, s_out, ctrl = ctx.saved
            tape.backward(grads={s_out.q: wp.from_torch(grad_q.contiguous(), dtype=s_out.q.dtype),
                                 s_out.qd: wp.from_torch(grad_qd.contiguous(), dtype=s_out.qd.dtype)})
        out = (wp.to_torch(s_in.q.grad).clone(), wp.to_torch(s_in.qd.grad).clone(),
               wp.to_torch(ctrl.q_target.grad).clone(), wp.to_torch(ctrl.tau.grad).clone())
        ctx.saved = None   # no tape.reset(): see diffsim.segment (bundles carry gradients to earlier steps)
        return (None, None, None, None) + out


class _BodyFrames(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sim: Simulator, q: torch.Tensor):
        m, t = sim.model, sim.model.types
        q_w = _share(q, grad=True)
        xrot = wp.zeros((q.shape[0], m.nb), dtype=t.quat, device=m.device, requires_grad=True)
        xpos = wp.zeros((q.shape[0], m.nb), dtype=t.vec3, device=m.device, requires_grad=True)
        tape = Tape()
        with tape:
            wp.launch(DynamicsKernels.of(t).body_frames, dim=q.shape[0], inputs=[sim.physics.kernel_model, q_w],
                      outputs=[xrot, xpos], device=m.device)
        ctx.saved = (tape, q_w, xrot, xpos)
        return wp.to_torch(xpos).clone(), wp.to_torch(xrot).clone()

    @staticmethod
    def backward(ctx, grad_pos, grad_rot):
        tape, q_w, xrot, xpos = ctx.saved
        tape.backward(grads={xpos: wp.from_torch(grad_pos.contiguous(), dtype=xpos.dtype),
                             xrot: wp.from_torch(grad_rot.contiguous(), dtype=xrot.dtype)})
        ctx.saved = None
        return None, wp.to_torch(q_w.grad).clone()


def body_frames(sim: Simulator, q: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Differentiable forward kinematics: body origins (N, nb, 3) [m] and orientations (N, nb, 4)
    (w x y z), world frame, bodies in `sim.model`'s order (MuJoCo's, base first), from q (N, nq)."""
    pos, quat_xyzw = _BodyFrames.apply(sim, *_in_precision(sim, q))
    return pos, quat_xyzw[..., [3, 0, 1, 2]]


def step_without_gradient(sim: Simulator, q: torch.Tensor, qd: torch.Tensor, q_target: torch.Tensor, dt: float,
                          kp: torch.Tensor, kd: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """`sim.step` (sim built with requires_grad=False) on tensors shared with Warp, no tape: (q_next, qd_next)."""
    q, qd, q_target, kp, kd = _in_precision(sim, q, qd, q_target, kp, kd)
    tau = torch.zeros_like(q_target)
    if sim.graphs is not None:
        s_out = _captured_step(sim, dt, q, qd, q_target, kp, kd, tau)[0].state_out
        return wp.to_torch(s_out.q).clone(), wp.to_torch(s_out.qd).clone()
    s_in, ctrl = _inputs(sim, q, qd, q_target, kp, kd, tau, grad=False)
    s_out = sim.state()
    sim.step(s_in, s_out, ctrl, dt)
    return wp.to_torch(s_out.q), wp.to_torch(s_out.qd)


def step(sim: Simulator, q: torch.Tensor, qd: torch.Tensor, q_target: torch.Tensor, dt: float,
         kp: torch.Tensor, kd: torch.Tensor, tau: torch.Tensor = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """One differentiable `sim.step` (sim built with requires_grad=True): returns (q_next, qd_next).

    kp, kd: (nj,) or (N, nj) gains [N m/rad, N m s/rad], not differentiated; tau: feed-forward torque
    (N, nj) [N m], zeros when omitted."""
    if not sim.requires_grad:
        raise ValueError("torch_bridge.step needs a Simulator built with requires_grad=True")
    q, qd, q_target, kp, kd = _in_precision(sim, q, qd, q_target, kp, kd)
    tau = torch.zeros_like(q_target) if tau is None else _in_precision(sim, tau)[0]
    return _SimStep.apply(sim, dt, kp, kd, q, qd, q_target, tau)
