"""The copy engine classes (HOPPER_DMA_COPY_A clc8b5.h, AMPERE_DMA_COPY_A/B clc6b5.h/clc7b5.h; their method offsets
and LAUNCH_DMA fields agree, checked at import): pitch-linear copies through the channel's GPU VA space and the
semaphore release after them (reference nv_driver.md section 4).

LAUNCH_DMA: DATA_TRANSFER_TYPE NONE (semaphore only), PIPELINED or NON_PIPELINED copies LINE_LENGTH_IN bytes from
OFFSET_IN to OFFSET_OUT (MULTI_LINE_ENABLE: LINE_COUNT lines, PITCH_IN/PITCH_OUT apart); SEMAPHORE_TYPE
RELEASE_ONE_WORD writes SET_SEMAPHORE_PAYLOAD (32-bit) at SET_SEMAPHORE_A/B, RELEASE_FOUR_WORD the payload, a zero
word and the PTIMER ns at +8 (16 bytes); INTERRUPT_TYPE BLOCKING or NON_BLOCKING counts an interrupt on the channel.
FLUSH_ENABLE and FLUSH_TYPE need nothing in a model with no caches. Refused (the error names the field): block-linear
layouts, physical addresses, REMAP_ENABLE, semaphore reductions, CONDITIONAL_INTR semaphores; any other method.
"""
from __future__ import annotations
import time

from autogen.nv import copy as nv_copy
from emu.nvgpu.gpfifo import ClassModel, GPFIFOEngine, bits
from emu.ring import RingError

FIELDS = ("NOP", "SET_SEMAPHORE_A", "SET_SEMAPHORE_B", "SET_SEMAPHORE_PAYLOAD", "LAUNCH_DMA", "OFFSET_IN_UPPER",
          "OFFSET_IN_LOWER", "OFFSET_OUT_UPPER", "OFFSET_OUT_LOWER", "PITCH_IN", "PITCH_OUT", "LINE_LENGTH_IN", "LINE_COUNT")
CLASSES = {nv_copy.HOPPER_DMA_COPY_A: "NVC8B5", nv_copy.AMPERE_DMA_COPY_B: "NVC7B5", nv_copy.AMPERE_DMA_COPY_A: "NVC6B5"}
for _p in CLASSES.values():   # one decoder serves all three: the headers agree on what it uses
  assert all(getattr(nv_copy, f"{_p}_{f}") == getattr(nv_copy, f"NVC8B5_{f}") for f in FIELDS + ("LAUNCH_DMA_DATA_TRANSFER_TYPE",
             "LAUNCH_DMA_SEMAPHORE_TYPE", "LAUNCH_DMA_INTERRUPT_TYPE", "LAUNCH_DMA_SRC_MEMORY_LAYOUT", "LAUNCH_DMA_DST_MEMORY_LAYOUT",
             "LAUNCH_DMA_MULTI_LINE_ENABLE", "LAUNCH_DMA_REMAP_ENABLE", "LAUNCH_DMA_SRC_TYPE", "LAUNCH_DMA_DST_TYPE",
             "LAUNCH_DMA_SEMAPHORE_REDUCTION_ENABLE"))
METHODS = {getattr(nv_copy, f"NVC8B5_{f}"): f for f in FIELDS}
L = {f: getattr(nv_copy, f"NVC8B5_LAUNCH_DMA_{f}") for f in ("DATA_TRANSFER_TYPE", "SEMAPHORE_TYPE", "INTERRUPT_TYPE", "SRC_MEMORY_LAYOUT",
     "DST_MEMORY_LAYOUT", "MULTI_LINE_ENABLE", "REMAP_ENABLE", "SRC_TYPE", "DST_TYPE", "SEMAPHORE_REDUCTION_ENABLE")}


class DMACopy(ClassModel):
  def __init__(self, engine: GPFIFOEngine, cls: int):
    self.engine, self.cls = engine, cls
    self.regs = dict.fromkeys(FIELDS, 0)

  def method(self, addr: int, value: int) -> None:
    name = METHODS.get(addr)
    if name is None: raise RingError(f"{self.engine.qname}: method {addr:#x} of copy class {self.cls:#x} is not modelled")
    self.regs[name] = value
    if name == "LAUNCH_DMA": self._launch(value)

  def _refuse(self, what: str) -> RingError:
    return RingError(f"{self.engine.qname}: LAUNCH_DMA of copy class {self.cls:#x} with {what}, which is not modelled")

  def _launch(self, v: int) -> None:
    f = {k: bits(v, r) for k, r in L.items()}
    r, mem = self.regs, self.engine.mem
    if f["REMAP_ENABLE"]: raise self._refuse("REMAP_ENABLE")
    if f["SEMAPHORE_REDUCTION_ENABLE"]: raise self._refuse("SEMAPHORE_REDUCTION_ENABLE")
    if f["DATA_TRANSFER_TYPE"] == nv_copy.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NONE: pass
    elif f["DATA_TRANSFER_TYPE"] in (nv_copy.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_PIPELINED,
                                     nv_copy.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED):
      for side in ("SRC", "DST"):
        if f[f"{side}_MEMORY_LAYOUT"] != nv_copy.NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH: raise self._refuse(f"{side}_MEMORY_LAYOUT BLOCKLINEAR")
        if f[f"{side}_TYPE"] != nv_copy.NVC8B5_LAUNCH_DMA_SRC_TYPE_VIRTUAL: raise self._refuse(f"{side}_TYPE PHYSICAL")
      src = bits(r["OFFSET_IN_UPPER"], nv_copy.NVC8B5_OFFSET_IN_UPPER_UPPER) << 32 | r["OFFSET_IN_LOWER"]
      dst = bits(r["OFFSET_OUT_UPPER"], nv_copy.NVC8B5_OFFSET_OUT_UPPER_UPPER) << 32 | r["OFFSET_OUT_LOWER"]
      lines = r["LINE_COUNT"] if f["MULTI_LINE_ENABLE"] else 1
      for k in range(lines):
        mem.write(dst + k * r["PITCH_OUT"], mem.read(src + k * r["PITCH_IN"], r["LINE_LENGTH_IN"]))
    else: raise self._refuse(f"DATA_TRANSFER_TYPE {f['DATA_TRANSFER_TYPE']}")
    sem = bits(r["SET_SEMAPHORE_A"], nv_copy.NVC8B5_SET_SEMAPHORE_A_UPPER) << 32 | r["SET_SEMAPHORE_B"]
    if f["SEMAPHORE_TYPE"] == nv_copy.NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE:
      if sem % 4: raise RingError(f"{self.engine.qname}: copy semaphore at {sem:#x} is not 4-byte aligned", sem)
      mem.write(sem, r["SET_SEMAPHORE_PAYLOAD"].to_bytes(4, "little"))
    elif f["SEMAPHORE_TYPE"] == nv_copy.NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE:
      if sem % 16: raise RingError(f"{self.engine.qname}: four-word copy semaphore at {sem:#x} is not 16-byte aligned", sem)
      mem.write(sem, r["SET_SEMAPHORE_PAYLOAD"].to_bytes(4, "little") + bytes(4) + time.monotonic_ns().to_bytes(8, "little"))
    elif f["SEMAPHORE_TYPE"] != nv_copy.NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_NONE: raise self._refuse("SEMAPHORE_TYPE CONDITIONAL_INTR")
    if f["INTERRUPT_TYPE"] != nv_copy.NVC8B5_LAUNCH_DMA_INTERRUPT_TYPE_NONE: self.engine.interrupt()


ENGINE_CLASSES = {cls: (lambda e, cls=cls: DMACopy(e, cls)) for cls in CLASSES}
