"""IH (OSSSYS 6.0): the interrupt handler ring the device writes 32-byte entries into (osssys_6_0_0 registers).

Ring 0: IH_RB_BASE/_HI = MC address >> 8, IH_RB_CNTL (RB_ENABLE, RB_SIZE = log2(ring dwords),
WPTR_OVERFLOW_ENABLE, WPTR_WRITEBACK_ENABLE, WPTR_OVERFLOW_CLEAR), IH_RB_WPTR (OFFSET = byte offset of the
next entry, RB_OVERFLOW bit 0), IH_RB_RPTR (byte offset the driver has consumed up to), IH_RB_WPTR_ADDR_LO/HI
(where WPTR is written back when enabled). Entries are written through the MM hub: its system aperture (VRAM at
the MC address) or its VMID 0 page tables; an entry the hub cannot place is lost (the fault is latched).
When the ring is full, the entry is dropped and RB_OVERFLOW is set (if WPTR_OVERFLOW_ENABLE).
Ring 1, the storm/flood controls and the doorbell read pointers are configuration only.

Entry (8 dwords, the SOC15 IV format): dw0 = client_id | src_id << 8 | ring_id << 16 | vmid << 24,
dw1/dw2[15:0] = 48-bit timestamp (the 100 MHz GPU clock), dw3 = pasid | node_id << 16, dw4-7 = src_data[0..3].
Sources the model raises (client/src ids: soc15_ih_clientid.h, irqsrcs_gfx_11_0_0.h):
  GPU page fault (GC hub: client GFX; MM hub: client VMC), src UTCL2_FAULT: src_data[0] = VA[43:12],
    src_data[1] = VA[47:44] | 0x20 for a write, ring_id = the fault's PERMISSION_FAULTS << 3 (valid 0x08, read 0x10,
    write 0x20, execute 0x40: the bits KFD's interrupt handler reads as prot_valid/read/write)
  shader error: client GRBM_CP, src SQ_INTERRUPT_ID, src_data[0] = TYPE ILLEGAL_INST << 21 (SQ error
    context word), src_data[1] = ENCODING ERROR << 6
  PM4 packet error: client GRBM_CP, src CP_BAD_OPCODE_ERROR (when CP_ME1_PIPE0_INT_CNTL.OPCODE_ERROR_INT_ENABLE)
  RELEASE_MEM with an interrupt: client GRBM_CP, src CP_EOP_INTERRUPT, src_data[0] = context id
    (when CP_ME1_PIPE0_INT_CNTL.TIME_STAMP_INT_ENABLE)
  SDMA TRAP: client GFX, src SDMA_TRAP, src_data[0] = int context (when SDMA0_CNTL.TRAP_ENABLE)
"""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING

from autogen.amd import soc15_ih_clientid as ih_client, irqsrcs_gfx_11_0_0 as irq_src
from emu.amdgpu.mmu import Fault, GPUPageFault
from emu.amdgpu.registers import Block, storage
if TYPE_CHECKING: from emu.amdgpu.function import GPUFunction

ENTRY = 32
SQ_ENCODING_ERROR, SQ_ERROR_ILLEGAL_INST = 2, 1   # SQ_INTERRUPT_WORD_ENCODING / SQ_INTERRUPT_ERROR_TYPE (kfd_int_process_v11.c)


class IHModel(Block):
  name = ip = "OSSSYS"

  def __init__(self, dev: GPUFunction):
    super().__init__(dev)
    self.oss = dev.chip.reg("OSSSYS")
    self.STORAGE = storage(self.oss, "IH_RB_BASE", "IH_RB_BASE_HI", "IH_RB_RPTR", "IH_RB_WPTR_ADDR_LO", "IH_RB_WPTR_ADDR_HI",
                           "IH_DOORBELL_RPTR", "IH_RB_BASE_RING1", "IH_RB_BASE_HI_RING1", "IH_RB_CNTL_RING1", "IH_RB_WPTR_RING1",
                           "IH_RB_RPTR_RING1", "IH_DOORBELL_RPTR_RING1", "IH_STORM_CLIENT_LIST_CNTL", "IH_INT_FLOOD_CNTL",
                           "IH_MSI_STORM_CTRL")
    self.dropped = 0      # entries lost to a disabled or full ring (hardware keeps no count; tests do)

  def handlers(self):
    return {self.addr(self.oss.regIH_RB_CNTL): (None, self._cntl), self.addr(self.oss.regIH_RB_WPTR): (None, self._wptr)}

  def _cntl(self, addr: int, value: int) -> None:
    if value & self.oss.regIH_RB_CNTL.mask("WPTR_OVERFLOW_CLEAR"): self.set(self.oss.regIH_RB_WPTR, self.get(self.oss.regIH_RB_WPTR) & ~1)
    self.regs[addr] = value & ~self.oss.regIH_RB_CNTL.mask("WPTR_OVERFLOW_CLEAR")

  def _wptr(self, addr: int, value: int) -> None:
    self.regs[addr] = value   # the driver resets the ring (WPTR = RPTR = 0) while it is disabled

  # --- posting entries
  def post(self, client: int, src: int, data: tuple[int, ...] = (), vmid: int = 0, ring_id: int = 0) -> bool:
    """Write one entry; False if the ring is disabled or full (the entry is lost, as on hardware)."""
    with self.dev.lock:
      cntl = self.oss.regIH_RB_CNTL.decode(self.get(self.oss.regIH_RB_CNTL))
      if not cntl["RB_ENABLE"]:
        self.dropped += 1
        return False
      size = 4 << cntl["RB_SIZE"]
      wptr_reg = self.get(self.oss.regIH_RB_WPTR)
      wptr, rptr = (wptr_reg & 0x3FFFC) % size, (self.get(self.oss.regIH_RB_RPTR) & 0x3FFFC) % size
      if (wptr + ENTRY) % size == rptr:
        if cntl["WPTR_OVERFLOW_ENABLE"]: self.set(self.oss.regIH_RB_WPTR, wptr_reg | 1)
        self.dropped += 1
        return False
      ts = self.dev.gpu.clock()
      words = [client | src << 8 | ring_id << 16 | vmid << 24, ts & 0xFFFFFFFF, (ts >> 32) & 0xFFFF, 0, *data, *[0] * (4 - len(data))]
      base = (self.get(self.oss.regIH_RB_BASE_HI) << 32 | self.get(self.oss.regIH_RB_BASE)) << 8
      mmu = self.dev.gmc_mm.mmu
      try:
        mmu.write(base + wptr, struct.pack("<8I", *words), "IH")
        wptr = (wptr + ENTRY) % size
        self.set(self.oss.regIH_RB_WPTR, (wptr_reg & 1) | wptr)
        if cntl["WPTR_WRITEBACK_ENABLE"]:
          at = self.get(self.oss.regIH_RB_WPTR_ADDR_HI) << 32 | (self.get(self.oss.regIH_RB_WPTR_ADDR_LO) & ~3)
          mmu.write(at, struct.pack("<I", self.get(self.oss.regIH_RB_WPTR)), "IH")
      except GPUPageFault as e:   # the MM hub cannot reach the ring: the entry is lost
        self.dev.log(f"IH: entry lost: {e}")
        self.dropped += 1
        return False
      return True

  def vm_fault(self, hub: str, f: Fault, permission: int = 0) -> None:
    client = ih_client.SOC21_IH_CLIENTID_GFX if hub == "GC" else ih_client.SOC21_IH_CLIENTID_VMC
    self.post(client, irq_src.GFX_11_0_0__SRCID__UTCL2_FAULT, ((f.va >> 12) & 0xFFFFFFFF, (f.va >> 44) & 0xF | (0x20 if f.write else 0)),
              ring_id=permission << 3)

  def shader_error(self) -> None:
    self.post(ih_client.SOC21_IH_CLIENTID_GRBM_CP, irq_src.GFX_11_0_0__SRCID__SQ_INTERRUPT_ID,
              (SQ_ERROR_ILLEGAL_INST << 21, SQ_ENCODING_ERROR << 6))
