"""Byte layouts of an IDL struct, derived from its ``cyclonedds.idl.IdlStruct`` annotations.

Two layouts of the same message:

- **C layout** (``c_dtype``): the little-endian C struct the robot computes its CRC over; each
  member aligned to its own alignment (at most 4 here), every struct padded at its end to its
  alignment, padding bytes zero. Exposed as a nested numpy structured dtype with explicit
  offsets, so ``rec['motor_cmd']['q']`` is a float32 (35,) view.
- **XCDR1 wire layout** (``wire_dtype``): what Cyclone DDS puts on the wire after the 4-byte
  encapsulation header. CDR aligns each primitive to its own size relative to the payload start
  and does *not* pad the end of nested structs, so the two layouts differ (LowState's 54-byte
  IMUState is followed directly by the first MotorState.mode). A nested struct inside an array
  may therefore start at different alignments, so the wire dtype is flat: one field per leaf,
  named by its path, e.g. ``'motor_state[3].q'``.

`CopyPlan` maps one layout onto the other as a few contiguous byte runs (3 for each G1
message), which is what makes the codec fast.
"""
import dataclasses
import typing
from dataclasses import dataclass
from typing import List, Mapping, NamedTuple, Tuple, Union

import numpy as np
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import array as idl_array

_PRIMITIVES = {
    "int8": "i1", "uint8": "u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4",
    "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float32": "<f4", "float64": "<f8",
}


Element = Union[np.dtype, type]
"""A member's element: a numpy dtype (primitive) or an IdlStruct subclass."""


def _fields(struct: type) -> List[Tuple[str, object]]:
    """(name, annotation) of every member of `struct`, in declaration order."""
    hints = typing.get_type_hints(struct, include_extras=True)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(struct)]


def members(struct: type) -> List[Tuple[str, Element, int]]:
    """(name, element, count) of every member of `struct`: element is a numpy dtype (primitive)
    or an IdlStruct subclass, count the array length or 0 for a scalar."""
    return [(name,) + _parse(annotation) for name, annotation in _fields(struct)]


def _parse(annotation) -> Tuple[Element, int]:
    """(element, count): element is a numpy dtype (primitive) or an IdlStruct subclass; count is
    the array length, or 0 for a scalar member."""
    if isinstance(annotation, type) and issubclass(annotation, IdlStruct):
        return annotation, 0
    meta = getattr(annotation, "__metadata__", None)
    if meta and isinstance(meta[0], idl_array):
        element, count = _parse(meta[0].subtype)
        if count:
            raise TypeError(f"{annotation}: nested arrays are not supported")
        return element, meta[0].length
    if meta and meta[0] in _PRIMITIVES:
        return np.dtype(_PRIMITIVES[meta[0]]), 0
    raise TypeError(f"{annotation}: unsupported IDL member type (only primitives, structs and "
                    "fixed arrays of them)")


def _align_up(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment


def struct_fields(dtype: np.dtype) -> Mapping[str, Tuple]:
    """name -> (dtype, offset) of a structured dtype's fields; TypeError for another dtype."""
    if dtype.fields is None:
        raise TypeError(f"{dtype}: not a structured dtype")
    return dtype.fields


def c_dtype(struct: type) -> np.dtype:
    """Nested numpy dtype of `struct` as a C struct (natural alignment, end padding)."""
    names, formats, offsets = [], [], []
    offset, struct_align = 0, 1
    for name, annotation in _fields(struct):
        element, count = _parse(annotation)
        edt = c_dtype(element) if not isinstance(element, np.dtype) else element
        align = edt.alignment if isinstance(element, np.dtype) else _c_alignment(element)
        offset = _align_up(offset, align)
        names.append(name)
        formats.append((edt, (count,)) if count else edt)
        offsets.append(offset)
        offset += edt.itemsize * max(count, 1)
        struct_align = max(struct_align, align)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": _align_up(offset, struct_align)})


def _c_alignment(struct: type) -> int:
    """Alignment of `struct` in C: that of its most aligned member."""
    align = 1
    for _, annotation in _fields(struct):
        element, _ = _parse(annotation)
        align = max(align, element.alignment if isinstance(element, np.dtype)
                    else _c_alignment(element))
    return align


@dataclass(frozen=True)
class Leaf:
    """One primitive member (or fixed array of primitives) located in both layouts."""
    path: str
    """Member path, e.g. 'motor_state[3].q'."""
    dtype: np.dtype
    """Primitive element type (little-endian)."""
    count: int
    """Array length, or 0 for a scalar."""
    c_offset: int
    """Byte offset in the C layout."""
    wire_offset: int
    """Byte offset in the XCDR1 payload (after the 4-byte encapsulation header)."""

    @property
    def nbytes(self) -> int:
        return self.dtype.itemsize * max(self.count, 1)


def leaves(struct: type) -> List[Leaf]:
    """Every primitive leaf of `struct`, in wire order, with its C and XCDR1 offsets."""
    out: List[Leaf] = []
    _walk(struct, c_dtype(struct), "", 0, 0, out)
    return out


def _walk(struct: type, cdt: np.dtype, prefix: str, c_base: int, wire: int,
          out: List[Leaf]) -> int:
    """Append `struct`'s leaves (C base offset `c_base`, wire cursor `wire`); return the cursor."""
    for name, annotation in _fields(struct):
        element, count = _parse(annotation)
        c_off = c_base + struct_fields(cdt)[name][1]
        path = prefix + name
        if isinstance(element, np.dtype):
            wire = _align_up(wire, element.itemsize)
            out.append(Leaf(path, element, count, c_off, wire))
            wire += element.itemsize * max(count, 1)
            continue
        sub = struct_fields(cdt)[name][0]
        sub = sub.base if count else sub
        for i in range(max(count, 1)):
            item = f"{path}[{i}]." if count else path + "."
            wire = _walk(element, sub, item, c_off + i * sub.itemsize, wire, out)
    return wire


def wire_dtype(struct: type) -> np.dtype:
    """Flat numpy dtype of `struct`'s XCDR1 payload: one field per leaf, named by its path."""
    ls = leaves(struct)
    end = ls[-1].wire_offset + ls[-1].nbytes
    return np.dtype({
        "names": [leaf.path for leaf in ls],
        "formats": [(leaf.dtype, (leaf.count,)) if leaf.count else leaf.dtype for leaf in ls],
        "offsets": [leaf.wire_offset for leaf in ls],
        "itemsize": end,
    })


class Run(NamedTuple):
    """Bytes c[c_start : c_start + nbytes] of the C layout are wire[wire_start : ... + nbytes]."""
    c_start: int
    wire_start: int
    nbytes: int


@dataclasses.dataclass(frozen=True)
class CopyPlan:
    """How to move a message between its C layout and its XCDR1 payload with a few slice copies.

    Consecutive leaves whose C-to-wire shift is equal merge into one run, across padding: a gap
    inside a run is padding in both layouts (checked: runs never overlap on either side), and
    `field_mask` zeroes the C padding bytes after a copy.
    """
    runs: Tuple[Run, ...]
    c_size: int
    """Bytes of the C layout."""
    wire_size: int
    """Bytes of the XCDR1 payload (without the encapsulation header)."""
    field_mask: np.ndarray
    """uint8 (c_size,): 0xFF on bytes that belong to a member, 0 on padding."""

    @classmethod
    def of(cls, struct: type) -> "CopyPlan":
        ls = sorted(leaves(struct), key=lambda leaf: leaf.c_offset)
        runs: List[List[int]] = []
        for leaf in ls:
            last = runs[-1] if runs else None
            if last and leaf.c_offset - leaf.wire_offset == last[0] - last[1]:
                last[2] = leaf.c_offset + leaf.nbytes - last[0]
            else:
                runs.append([leaf.c_offset, leaf.wire_offset, leaf.nbytes])
        size = c_dtype(struct).itemsize
        wire_size = wire_dtype(struct).itemsize
        for side in (0, 1):
            spans = sorted((r[side], r[side] + r[2]) for r in runs)
            if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
                raise ValueError(f"{struct.__name__}: C and wire layouts do not map by runs")
        mask = np.zeros(size, np.uint8)
        for leaf in ls:
            mask[leaf.c_offset:leaf.c_offset + leaf.nbytes] = 0xFF
        mask.flags.writeable = False
        return cls(tuple(Run(*r) for r in runs), size, wire_size, mask)
