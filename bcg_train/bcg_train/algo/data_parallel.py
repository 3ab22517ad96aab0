"""Data-parallel training across processes (torch.distributed, e.g. `torchrun`).

Every rank steps its own environments with the same networks; what the ranks learn is averaged, so
that W ranks of N environments make the update one process with W * N environments would make:
gradients are averaged before clipping and stepping (the losses are means over equal numbers of
samples per rank), running statistics are summed, and the logged metrics are combined. Parameters
start equal (broadcast from rank 0) and stay equal, because every rank applies the same averaged
gradient. `Ranks` is the one place an algorithm talks to the other processes; without
torch.distributed (or with a world of one process) each of its operations returns at once and
changes nothing, so one code path serves both.

Collectives must be issued in the same order on every rank: the algorithms issue them at points
every rank reaches (e.g. every minibatch of an update has the same count on every rank), each
thread through its own process group (`Ranks.for_another_thread`).
"""
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Union

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass
class Ratio:
    """A metric numerator / denominator whose parts are summed over ranks before dividing (e.g. the
    mean return of the episodes that ended, over every rank's episodes). 0 / 0 gives NaN."""

    numerator: Tensor
    denominator: Tensor


@dataclass
class Total:
    """A metric summed over ranks (e.g. how many episodes ended)."""

    value: Tensor


Metric = Union[float, Tensor, Ratio, Total]
"""What an algorithm reports per iteration before it reaches the host: plain numbers and tensors are
averaged over ranks, `Ratio` and `Total` combine as they say."""


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


class Ranks:
    """This process's place among the ranks: `rank`, `world_size`, and the collectives the
    algorithms need (no-ops for a world of one)."""

    def __init__(self, group=None):
        self.group = group
        self.world_size = dist.get_world_size(group) if is_distributed() else 1
        self.rank = dist.get_rank() if is_distributed() else 0

    def for_another_thread(self) -> "Ranks":
        """The same processes with a process group of their own, for collectives issued from a second
        thread while this one issues its own (every rank must call this at the same point)."""
        if self.world_size == 1:
            return Ranks()
        return Ranks(dist.new_group(list(range(self.world_size))))

    def broadcast_(self, tensors: Iterable[Tensor]) -> None:
        """Overwrite `tensors` with rank 0's."""
        if self.world_size == 1:
            return
        for t in tensors:
            dist.broadcast(t.data, src=0, group=self.group)

    def sum_(self, tensors: Sequence[Tensor]) -> None:
        """Replace each tensor by its sum over ranks, in place."""
        if self.world_size == 1:
            return
        for t in tensors:
            dist.all_reduce(t, group=self.group)

    def average_gradients(self, params: Sequence[nn.Parameter], loss: Tensor) -> Tensor:
        """Average the gradients of `params` (a missing gradient counts as zeros) over ranks, and the
        scalar `loss` with them, in one all-reduce; returns the averaged loss (non-finite if any
        rank's was, so that every rank skips the same steps)."""
        if self.world_size == 1:
            return loss
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads] + [loss.detach().reshape(1).to(grads[0].dtype)])
        dist.all_reduce(flat, group=self.group)
        flat /= self.world_size
        offset = 0
        for p in params:
            p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        return flat[-1]

    def any(self, flag: bool) -> bool:
        """True on every rank when `flag` is true on some rank (e.g. a stop request)."""
        if self.world_size == 1:
            return flag
        t = torch.tensor([float(flag)])
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return bool(t.item())

    def from_first(self, obj: object) -> object:
        """Rank 0's `obj` (picklable) on every rank."""
        if self.world_size == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather_to_first(self, obj: object) -> Optional[List[object]]:
        """Every rank's `obj` (picklable; tensors included), in rank order, on rank 0; None on the others."""
        if self.world_size == 1:
            return [obj]
        gathered = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(obj, gathered, dst=0, group=self.group)
        return gathered

    def metrics_to_host(self, metrics: Dict[str, Metric], device: torch.device) -> Dict[str, float]:
        """The metrics combined over ranks (see `Metric`) as floats, with one device-to-host transfer."""
        names = list(metrics)
        parts: List[Tensor] = []
        for name in names:
            m = metrics[name]
            if isinstance(m, Ratio):
                parts += [m.numerator, m.denominator]
            else:
                value = m.value if isinstance(m, Total) else m
                scale = 1.0 if isinstance(m, Total) or self.world_size == 1 else 1.0 / self.world_size
                parts.append(torch.as_tensor(value, dtype=torch.float64, device=device) * scale)
        flat = torch.stack([torch.as_tensor(p, dtype=torch.float64, device=device).reshape(()) for p in parts])
        if self.world_size > 1:
            dist.all_reduce(flat, group=self.group)
        values = flat.tolist()
        out, i = {}, 0
        for name in names:
            if isinstance(metrics[name], Ratio):
                num, den = values[i], values[i + 1]
                out[name] = num / den if den else float("nan")
                i += 2
            else:
                out[name] = values[i]
                i += 1
        return out
