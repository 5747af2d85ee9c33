"""NVProgram: a kernel of a cubin loaded on an NV device, and its launch arguments (constant buffer 0 + the QMD).

The upload: the cubin file as it is (relocated for its address), then the PTX it was compiled from, NUL-terminated, then
the constant buffers other than cb0 (64-byte aligned), in one CPU-visible vidmem allocation with 4 KiB of padding after (SASS prefetch may read past
the end,
reference section 7). The QMD's program address is the kernel's .text section there. Real GPUs run that SASS; the GPU
model (emu.nvgpu.compute) cannot, and runs the PTX after the cubin.

A launch's argument memory holds constant buffer 0 (256-byte aligned: the driver words, then the parameters at the
offset PARAM_CBANK gives, each where its KPARAM_INFO says) and the QMD after it (256-byte aligned: SEND_PCAS_A takes its
address >> 8). Buffers come first in the parameter list, then the values (each packed to its parameter's size).
"""
from __future__ import annotations
import struct, weakref
from typing import TYPE_CHECKING, Sequence

from drivers.hcq import KernArgs, Program
from drivers.hcq.queue import dims3
from drivers.nv import cubin as cubin_mod, image, qmd
from drivers.nv.cubin import CubinError
from drivers.nv.gpu import PAGE
if TYPE_CHECKING: from drivers.nv.device import NVDevice

ALIGN = 256
CB_ALIGN = 64                            # a QMD's constant buffer address: 64-byte aligned (ADDR_*_SHIFTED6 on Hopper)
INT_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


class NVKernArgs(KernArgs):
  def __init__(self, view: memoryview, va: int, prg: NVProgram, n_bufs: int, n_vals: int, release, gs, ls):
    super().__init__(view, va, n_bufs, n_vals, release)
    self.prg, self.dims = prg, None
    self.set_dims(gs, ls)

  @property
  def qmd_va(self) -> int: return self.va + self.prg.qmd_offset

  def set_dims(self, gs: tuple[int, int, int], ls: tuple[int, int, int]) -> None:
    """Write the QMD and cb0's blockDim/gridDim for `gs` CTAs of `ls` threads (once per distinct size)."""
    if self.dims == (gs, ls): return
    p = self.prg
    dev = p.device
    self.view[:0x30] = qmd.cb0_words(ls, gs, dev.shared_window, dev.local_window)
    q = qmd.with_cb0(dev.gpu.compute_class, p.qmd(gs, ls), self.va)
    self.view[p.qmd_offset:p.qmd_offset + len(q)] = q
    self.dims = (gs, ls)

  def update(self, bufs, vals) -> None:
    k = self.prg.kernel
    if len(bufs) + len(vals) != len(k.params):
      raise ValueError(f"kernel {k.name} takes {len(k.params)} parameters, got {len(bufs)} buffers and {len(vals)} values")
    for prm, v in zip(k.params, [b.va for b in bufs] + list(vals)):
      if prm.size not in INT_FMT: raise ValueError(f"kernel {k.name}: parameter {prm.ordinal} of {prm.size} bytes is not a buffer or a value")
      struct.pack_into(INT_FMT[prm.size], self.view, k.param_offset + prm.offset, v & ((1 << 8 * prm.size) - 1))


class NVProgram(Program):
  def __init__(self, device: NVDevice, name: str, lib: bytes):
    super().__init__(device, name, lib)
    cub_bytes, ptx = image.unpack(lib)
    cub = cubin_mod.load(cub_bytes)
    if f"sm_{cub.sm}" != device.arch:
      raise CubinError(f"the cubin is for sm_{cub.sm}, {device.name} is {device.arch}: compile for --gpu-architecture={device.arch}")
    if name not in cub.kernels: raise ValueError(f"the cubin has no kernel named {name!r} (it has: {', '.join(sorted(cub.kernels))})")
    self.kernel = k = cub.kernels[name]
    text = ptx.encode()
    if b"\0" in text: raise ValueError("the kernel image's PTX holds a NUL byte")
    # constant buffers other than cb0 (e.g. cb4: the addresses of the module's globals, that CUDA's sinf reads its table
    # through) are copied after the PTX, each 64-byte aligned as the QMD's constant buffer addresses must be: their
    # sections in the file are aligned to 8 only
    head = len(cub.data) + len(text) + 1
    at, self.constants = head, {}
    for slot, (_, n) in k.constants.items():
      at = -(-at // CB_ALIGN) * CB_ALIGN
      self.constants[slot], at = (at, n), at + n
    self.code = device.gpu.alloc(at + PAGE, cpu_access=True)
    weakref.finalize(self, device.free_code, self.code)
    data = cub.relocated(self.code.va)
    self.code.view.view[:head] = data + text + b"\0"
    for slot, (o, n) in k.constants.items():
      self.code.view.view[self.constants[slot][0]:self.constants[slot][0] + n] = data[o:o + n]
    device.ensure_local(k.local_bytes)
    arch = device.arch
    self.grid = qmd.Grid(self.code.va + k.text_offset, k.text_size, k.registers, k.shared_bytes, -(-k.local_bytes // 16) * 16,
                         int(arch[3:5], 16), qmd.MAX_SHARED_KB.get(arch, 100))
    self.cb0_bytes = max(k.cb0_bytes, k.param_offset + k.param_bytes)
    self.qmd_offset = -(-self.cb0_bytes // ALIGN) * ALIGN
    self._qmds: dict[tuple, bytes] = {}

  def qmd(self, gs: tuple[int, int, int], ls: tuple[int, int, int]) -> bytes:
    """The QMD for a grid size, constant buffer 0 at address 0 (made once per size)."""
    if (q := self._qmds.get((gs, ls))) is None:
      consts = {s: (self.code.va + o, n) for s, (o, n) in self.constants.items()}
      q = self._qmds[(gs, ls)] = qmd.build(self.device.gpu.compute_class, self.grid, gs, ls, (0, self.cb0_bytes), consts)
    return q

  def args_size(self, n_bufs: int, n_vals: int) -> int: return self.qmd_offset + qmd.LAYOUTS[self.device.gpu.compute_class].nbytes

  def fill_kernargs(self, bufs: Sequence, vals: Sequence[int] = (), global_size=(1, 1, 1), local_size=(1, 1, 1)) -> NVKernArgs:
    self.check_buffers(bufs)
    gs, ls = dims3(global_size, "global_size"), dims3(local_size, "local_size")
    view, va, release = self.device.kernargs.alloc(self.args_size(0, 0) + ALIGN)
    skip = -va % ALIGN
    size = self.args_size(0, 0)
    view[skip:skip + size] = bytes(size)
    args = NVKernArgs(view[skip:skip + size], va + skip, self, len(bufs), len(vals), release, gs, ls)
    args.update(bufs, vals)
    return args
