"""Typed register access to a device region (a PCI BAR, a doorbell page, a DMA buffer).

Two kinds of region, as in QEMU's memory API: RAM-like regions are plain memory (an mmap'd BAR on
real hardware, a host buffer in a model) and are accessed directly; I/O regions decode each access in
a callback (`read(offset, size) -> int`, `write(offset, size, value)`), which is how device models
implement registers. Drivers only ever see `MMIO`, so they cannot tell the two apart.
"""
from __future__ import annotations
from typing import Any, Protocol

import numpy as np

_FMT: dict[int, Any] = {1: "B", 2: "H", 4: "I", 8: "Q"}


class IORegion(Protocol):
  """A model's register region: every access goes through its callbacks. Optionally `write_many(offset, size,
  values)`: the stores of `values` at offset, offset + size, ... in order, in one call (as `write` of each would do)."""
  size: int
  def read(self, offset: int, size: int) -> int: ...
  def write(self, offset: int, size: int, value: int) -> None: ...


class MMIO:
  """Register/memory access over one region. Offsets are bytes from the start of the region."""
  size: int
  name: str

  def read(self, offset: int, size: int) -> int: raise NotImplementedError
  def write(self, offset: int, size: int, value: int) -> None: raise NotImplementedError
  def read_bytes(self, offset: int, n: int) -> bytes: raise NotImplementedError
  def write_bytes(self, offset: int, data: bytes | memoryview) -> None: raise NotImplementedError

  def read8(self, off: int) -> int: return self.read(off, 1)
  def read16(self, off: int) -> int: return self.read(off, 2)
  def read32(self, off: int) -> int: return self.read(off, 4)
  def read64(self, off: int) -> int: return self.read(off, 8)
  def write8(self, off: int, v: int) -> None: self.write(off, 1, v)
  def write16(self, off: int, v: int) -> None: self.write(off, 2, v)
  def write32(self, off: int, v: int) -> None: self.write(off, 4, v)
  def write64(self, off: int, v: int) -> None: self.write(off, 8, v)

  def write64s(self, off: int, values: list[int]) -> None:
    """64-bit stores of `values` at off, off + 8, ... in order (a write-combining copy, such as a BlueFlame WQE)."""
    for i, v in enumerate(values): self.write(off + 8 * i, 8, v)

  def as_array(self) -> np.ndarray | MMIOArray:
    """The region as a flat uint8 array (slices read and assigned like numpy's): the memory itself for RAM-like
    regions, else an MMIOArray whose every slice is an access."""
    return MMIOArray(self)

  def _check(self, offset: int, size: int) -> None:
    if offset < 0 or offset + size > self.size:
      raise IndexError(f"MMIO access [{offset:#x}, +{size}) is outside the region of {self.size:#x} bytes")
    if size in _FMT and offset % size:
      raise ValueError(f"unaligned {size * 8}-bit MMIO access at {offset:#x}: registers need natural alignment")


class MemMMIO(MMIO):
  """MMIO over memory: an mmap'd BAR, a DMA buffer, or a model's RAM region."""
  def __init__(self, view: memoryview, name: str = "mem"):
    self.view, self.size, self.name = view.cast("B"), view.nbytes, name
    self._typed = {sz: (self.view.cast(f) if self.size % sz == 0 else None) for sz, f in _FMT.items()}

  def read(self, offset: int, size: int) -> int:
    self._check(offset, size)
    if (tv := self._typed[size]) is not None: return tv[offset // size]
    return int.from_bytes(self.view[offset:offset + size], "little")

  def write(self, offset: int, size: int, value: int) -> None:
    self._check(offset, size)
    if not 0 <= value < (1 << (8 * size)): raise ValueError(f"value {value:#x} does not fit a {size * 8}-bit register")
    if (tv := self._typed[size]) is not None: tv[offset // size] = value
    else: self.view[offset:offset + size] = value.to_bytes(size, "little")

  def as_array(self) -> np.ndarray: return np.frombuffer(self.view, np.uint8)

  def read_bytes(self, offset: int, n: int) -> bytes:
    self._check(offset, n)
    return bytes(self.view[offset:offset + n])

  def write_bytes(self, offset: int, data: bytes | memoryview) -> None:
    data = memoryview(data).cast("B")
    self._check(offset, data.nbytes)
    self.view[offset:offset + data.nbytes] = data


class CallbackMMIO(MMIO):
  """MMIO over a model's I/O region: every access is decoded by the model."""
  def __init__(self, region: IORegion, name: str = "io"):
    self.region, self.size, self.name = region, region.size, name

  def read(self, offset: int, size: int) -> int:
    self._check(offset, size)
    return self.region.read(offset, size)

  def write(self, offset: int, size: int, value: int) -> None:
    self._check(offset, size)
    if not 0 <= value < (1 << (8 * size)): raise ValueError(f"value {value:#x} does not fit a {size * 8}-bit register")
    self.region.write(offset, size, value)

  def write64s(self, off: int, values: list[int]) -> None:
    if (many := getattr(self.region, "write_many", None)) is None: return super().write64s(off, values)
    self._check(off, 8 * len(values))
    if off % 8: raise ValueError(f"unaligned 64-bit MMIO access at {off:#x}: registers need natural alignment")
    if values and not (0 <= min(values) and max(values) < 1 << 64):
      raise ValueError(f"a value of {[hex(v) for v in values]} does not fit a 64-bit register")
    many(off, 8, values)

  def read_bytes(self, offset: int, n: int) -> bytes:
    self._check(offset, n)
    return b"".join(self.region.read(offset + i, 4).to_bytes(4, "little") for i in range(0, n - n % 4, 4)) + \
      bytes(self.region.read(offset + i, 1) for i in range(n - n % 4, n))

  def write_bytes(self, offset: int, data: bytes | memoryview) -> None:
    data = bytes(data)
    self._check(offset, len(data))
    for i in range(0, len(data) - len(data) % 4, 4): self.region.write(offset + i, 4, int.from_bytes(data[i:i + 4], "little"))
    for i in range(len(data) - len(data) % 4, len(data)): self.region.write(offset + i, 1, data[i])


class MMIOArray:
  """A region with no host mapping (a BAR behind a USB bridge) as a flat array of one dtype, for code written against a
  mapped BAR as a numpy array: reading an element or a slice copies it out (read_bytes), assigning one writes it
  (write_bytes). Slices are contiguous (no step)."""
  def __init__(self, mmio: MMIO, dtype=np.uint8):
    self.mmio, self.dtype = mmio, np.dtype(dtype)
    self.shape = (mmio.size // self.dtype.itemsize,)

  def __len__(self) -> int: return self.shape[0]
  def view(self, dtype) -> MMIOArray: return MMIOArray(self.mmio, dtype)

  def _range(self, key) -> tuple[int, int]:
    if isinstance(key, slice):
      start, stop, step = key.indices(len(self))
      if step != 1: raise ValueError(f"MMIO slice {key}: only contiguous slices")
      return start, max(stop - start, 0)
    i = int(key) + (len(self) if key < 0 else 0)
    if not 0 <= i < len(self): raise IndexError(f"index {key} is outside the region of {len(self)} elements")
    return i, 1

  def __getitem__(self, key):
    start, n = self._range(key)
    arr = np.frombuffer(self.mmio.read_bytes(start * self.dtype.itemsize, n * self.dtype.itemsize), self.dtype)
    return arr if isinstance(key, slice) else arr[0]

  def __setitem__(self, key, value) -> None:
    start, n = self._range(key)
    if isinstance(value, (bytes, bytearray, memoryview)): value = np.frombuffer(value, np.uint8).view(self.dtype)
    arr = np.ascontiguousarray(np.broadcast_to(np.asarray(value, self.dtype), (n,)))
    self.mmio.write_bytes(start * self.dtype.itemsize, arr.tobytes())
