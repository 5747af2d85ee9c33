"""The device work of a collective's landed chunks, queued without waiting: a chunk to reduce is combined with this
rank's operand by a compute kernel that writes the result straight into the work buffer; a chunk to keep is copied
there by the copy queue. Both go through the device's ordered submission (drivers/hcq Device.ordered_submit), whose
timeline value the engine (ring.py) watches: the slot's credit goes back once the device reached it.

Kernels are elementwise over a power of two of elements P (few sizes, so few programs are built): a chunk of L >= P
elements is covered by the window [0, P) and the window [L - P, L) (the two overlap where L is no power of two; both
write the same values there), so no element past the chunk is written. A chunk under MIN_KERNEL elements is combined
by a MIN_KERNEL kernel into a scratch area (it reads past the chunk: the slot and the work buffer have room), then its
L elements are copied into place."""
from __future__ import annotations
from typing import Callable

from drivers.hcq import Buffer as HCQBuffer, Device as HCQDevice, Program
from compute.dtypes import DType
from compute.lazy import LazyBuffer
from compute.runtime import Buffer, get_program
from compute.schedule import Kernel, create_schedule
from compute.tensor import Tensor

MIN_KERNEL = 256           # elements: the smallest reduction kernel


class Folder:
  """Queues the folding of landed chunks on one device. `kernels` holds, per (combine, dtype, elements), the program,
  its launch sizes and which argument is the operand ("a") and which the landed chunk ("b") after the output."""
  def __init__(self, device_name: str, device: HCQDevice, scratch: HCQBuffer):
    self.device_name, self.device, self.scratch = device_name, device, scratch
    self.kernels: dict[tuple, tuple[Program, tuple, tuple, list[str]]] = {}
    self.keep: list = []       # kernel arguments of launches in flight (their memory is reused once they are gone)

  def _kernel(self, combine: Callable[[Tensor, Tensor], Tensor], dtype: DType, n: int, like: HCQBuffer):
    key = (combine, dtype, n)
    if (hit := self.kernels.get(key)) is not None: return hit
    ab = [Tensor._from_lazy(LazyBuffer.from_buffer(Buffer.over(self.device_name, like.view(0, n * dtype.itemsize)), (n,), dtype))
          for _ in range(2)]
    items = create_schedule([combine(*ab).lazydata.base])
    if len(items) != 1 or not isinstance(k := items[0], Kernel) or any(k.offsets[1:]):
      raise RuntimeError(f"the reduction of {n} {dtype.name} is not one elementwise kernel: {items}")
    roles = ["a" if lb is ab[0].lazydata.base else "b" if lb is ab[1].lazydata.base else "?" for lb in k.bufs[1:]]
    if "?" in roles: raise RuntimeError(f"the reduction kernel of {n} {dtype.name} reads a buffer it was not given")
    prg, spec = get_program(k)
    hit = self.kernels[key] = (prg, spec.global_size, spec.local_size, roles)
    return hit

  def _launch(self, q, kernel, out: HCQBuffer, a: HCQBuffer, b: HCQBuffer) -> None:
    prg, gs, ls, roles = kernel
    args = prg.fill_kernargs([out] + [a if r == "a" else b for r in roles], (), gs, ls)
    self.keep.append(args)
    q.exec(prg, args, gs, ls)

  def reduce(self, combine: Callable[[Tensor, Tensor], Tensor], dtype: DType, work: HCQBuffer, offset: int, operand: int,
             slot: HCQBuffer, length: int) -> int:
    """Queue work[offset:+length] = combine(work[operand:+length], slot[:length]); -> the timeline value of its end."""
    size, n = dtype.itemsize, length // dtype.itemsize
    dev = self.device
    if n >= MIN_KERNEL:
      p = 1 << (n.bit_length() - 1)
      kernel = self._kernel(combine, dtype, p, slot)
      def windows(q) -> None:
        for start in dict.fromkeys((0, n - p)):
          o = start * size
          self._launch(q, kernel, work.view(offset + o, p * size), work.view(operand + o, p * size), slot.view(o, p * size))
      return dev.ordered_submit(dev.compute_queue(), windows)
    kernel, whole = self._kernel(combine, dtype, MIN_KERNEL, slot), MIN_KERNEL * size
    dev.ordered_submit(dev.compute_queue(), lambda q: self._launch(q, kernel, self.scratch.view(0, whole),
                                                                     work.view(operand, whole), slot.view(0, whole)))
    return self.copy(work.view(offset, length), self.scratch.view(0, length))

  def copy(self, dest: HCQBuffer, src: HCQBuffer) -> int:
    """Queue a copy of `src` into `dest` (the same size); -> the timeline value of its end."""
    return self.device.ordered_submit(self.device.copy_queue(), lambda q: q.copy(dest, src, src.size))

  def landed(self) -> None:
    """Everything queued so far is done: let the kernel arguments go."""
    self.keep.clear()
