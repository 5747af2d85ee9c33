"""GMC: the two memory hubs of a Navi31, GC (GCVM/GCMC, used by the CP, shaders and SDMA) and MM (MMVM/MMMC,
used by the IH and the SMU), each feeding its own MMU (emu/amdgpu/mmu.py). The PSP addresses VRAM directly.

Per hub (register names gc_11_0_0 / mmhub_3_0_0; behaviour amd_driver.md 2.5-2.7):
- MC_VM_FB_LOCATION_BASE/TOP: where VRAM sits in the MC address space, in 16 MiB units, TOP inclusive. Set
  at power-on as the VBIOS leaves them: BASE 0x8000 (VRAM at MC 0x80_0000_0000), TOP = BASE + VRAM/16M - 1.
- MC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR (256 KiB units): MC addresses in the aperture bypass the page tables;
  inside the framebuffer they are VRAM, anywhere else in the aperture the access faults.
- VM_CONTEXT0_PAGE_TABLE_START/END_ADDR (4 KiB pages), _BASE_ADDR (PDE: bit 0 valid, VRAM address) and
  CONTEXT0_CNTL (ENABLE_CONTEXT, PAGE_TABLE_DEPTH must be 3 = four levels, BLOCK_SIZE 0) program the MMU.
- VM_INVALIDATE_ENGn_REQ: drops the hub's TLB and sets the requested PER_VMID bits in ENGn_ACK.
  ENGn_SEM: a read returns 1 and takes the semaphore when it is free, 0 while held; writing 0 releases it.
- Nothing translates (every access raises, naming what is missing) until the driver has enabled the L1 TLB
  (MC_VM_MX_L1_TLB_CNTL: ENABLE_L1_TLB, SYSTEM_ACCESS_MODE 3 = physical inside the system aperture and translated
  outside it, the only mode modelled, ENABLE_ADVANCED_DRIVER_MODEL, a defined MTYPE), the L2 (VM_L2_CNTL.ENABLE_L2_CACHE)
  and programmed the system aperture (LOW <= HIGH, holding the framebuffer's first page). MC_VM_AGP_BOT/TOP/BASE (16 MiB
  units): inside the system aperture, MC addresses in [BOT, TOP] are host bus addresses from BASE (BOT > TOP: off).
  The other L2 fields (fragment processing, cache sizes, VM_L2_CNTL3-5) only shape caching and are not checked.
- VM_L2_CNTL2 with INVALIDATE_ALL_L1_TLBS/INVALIDATE_L2_CACHE drops the TLB.
- VM_L2_PROTECTION_FAULT_STATUS/ADDR_LO32/HI32 latch the first fault (read-only; MORE_FAULTS for the
  next ones) until VM_L2_PROTECTION_FAULT_CNTL.CLEAR_PROTECTION_FAULT_STATUS_ADDR is written. The status carries the
  fault's type: PERMISSION_FAULTS bit 0 VALID (nothing valid mapped; with MAPPING_ERROR and the access's read/write bit),
  bit 1 READ, bit 2 WRITE, bit 3 EXECUTE (a mapped page without that permission); WALKER_ERROR for a directory entry
  the walker rejects; MAPPING_ERROR alone for an address outside the context's window or the aperture. CID is the UTCL2
  client (CPC, TCP for shader data, SQC for instruction fetch, SDMA0), RW the access.
- VM_CONTEXT0_CNTL's *_PROTECTION_FAULT_ENABLE_INTERRUPT bit of the fault's type (RANGE, VALID, READ, WRITE, EXECUTE,
  PDE0) decides whether the fault raises a UTCL2 interrupt; the *_ENABLE_DEFAULT bits (redirect to the dummy page) are
  not modelled: a faulting access stops its engine.
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from emu.amdgpu.mmu import MMU, Fault, ADDR_MASK, MTYPES, FAULT_NOT_PRESENT, FAULT_READ, FAULT_WRITE, FAULT_EXECUTE, FAULT_RANGE, FAULT_PDE
from emu.amdgpu.registers import Block
from emu.pci import ModelError
if TYPE_CHECKING: from emu.amdgpu.function import GPUFunction

FB_BASE_UNITS = 0x8000           # VBIOS placement of VRAM in the MC space: 0x80_0000_0000 (16 MiB units)
APERTURE_SHIFT, PAGE_SHIFT, FB_SHIFT = 18, 12, 24
# UTCL2 client ids of the GC hub (gfxhub_v3_0 client table): CPC = compute CP, TCP = shader memory, SQC (inst) =
# shader instruction fetch, SDMA0
CID_CPC, CID_TCP, CID_SQC_INST, CID_SDMA0 = 5, 8, 9, 13
SYSTEM_ACCESS_MODE_NOT_IN_SYS = 3     # MC_VM_MX_L1_TLB_CNTL: physical inside the system aperture, translated outside
# VM_L2_PROTECTION_FAULT_STATUS.PERMISSION_FAULTS bits, in the order of CONTEXTn_CNTL's fault enables
PERM_VALID, PERM_READ, PERM_WRITE, PERM_EXECUTE = 1, 2, 4, 8
# the CONTEXT0_CNTL interrupt enable of each fault type
FAULT_INTERRUPT = {FAULT_RANGE: "RANGE", FAULT_NOT_PRESENT: "VALID", FAULT_READ: "READ", FAULT_WRITE: "WRITE",
                   FAULT_EXECUTE: "EXECUTE", FAULT_PDE: "PDE0"}
STORAGE_NAMES = ("MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB",
                 "MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32",
                 "VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", "VM_L2_PROTECTION_FAULT_CNTL2", "VM_L2_CNTL3", "VM_L2_CNTL4", "VM_L2_CNTL5",
                 "MC_VM_FB_OFFSET",
                 "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", "VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32",
                 "VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32", "VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32",
                 "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", "VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32",
                 "VM_L2_BANK_SELECT_RESERVED_CID", "VM_L2_BANK_SELECT_RESERVED_CID2", "_ATC_L2_MISC_CG")
CONTEXT_NAMES = ("VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", "VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32",
                 "VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", "VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32",
                 "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32", "VM_CONTEXT0_CNTL")
ENGINES = 18


class HubModel(Block):
  """One memory hub (`prefix` GC or MM) and the MMU it programs."""
  def __init__(self, dev: GPUFunction, prefix: str, mmu: MMU):
    self.prefix, self.ip = prefix, ("GC" if prefix == "GC" else "MMHUB")
    self.module = dev.chip.reg(self.ip)
    # the fault status: one register on GC 11 / MMHUB 3.0, split into _LO32 (the fields) and _HI32 on GC 12 / MMHUB 4.1
    self.status_name = "VM_L2_PROTECTION_FAULT_STATUS" + ("_LO32" if dev.chip.versions["GC"][0] >= 12 else "")
    super().__init__(dev)
    self.name, self.mmu = f"{prefix} hub", mmu
    self.mmu.on_fault = self._on_fault
    self.STORAGE = tuple(r for n in STORAGE_NAMES if (r := self.reg(n, optional=True)) is not None) + \
      tuple(self.reg(f"VM_INVALIDATE_ENG{i}_ADDR_RANGE_{w}") for i in range(ENGINES) for w in ("LO32", "HI32"))
    if self.ip == "MMHUB" and dev.chip.versions["MMHUB"] >= (4, 1, 0):   # the DAGB tap-chain clock gating (mmhub_v4_1_0.c)
      self.STORAGE += (self.module.regDAGB0_CNTL_MISC2, self.module.regDAGB1_CNTL_MISC2)
    self.sem_taken = [False] * ENGINES

  def reg(self, name: str, optional: bool = False):
    """`MC_VM_x` -> GCMC_VM_x / MMMC_VM_x, `VM_x` -> GCVM_x / MMVM_x."""
    r = getattr(self.module, f"reg{self.prefix}{name}", None)
    if r is None and not optional: raise AttributeError(f"{self.prefix} hub has no register {self.prefix}{name}")
    return r

  def r(self, name: str) -> int: return self.get(self.reg(name))

  def handlers(self):
    h = {self.addr(self.reg(n)): (None, self._context) for n in CONTEXT_NAMES}
    h.update({self.addr(self.reg(n)): (None, self._aperture) for n in
              ("MC_VM_FB_LOCATION_BASE", "MC_VM_FB_LOCATION_TOP", "MC_VM_SYSTEM_APERTURE_LOW_ADDR", "MC_VM_SYSTEM_APERTURE_HIGH_ADDR",
               "MC_VM_AGP_BASE", "MC_VM_AGP_BOT", "MC_VM_AGP_TOP", "MC_VM_MX_L1_TLB_CNTL", "VM_L2_CNTL")})
    for i in range(ENGINES):
      h[self.addr(self.reg(f"VM_INVALIDATE_ENG{i}_REQ"))] = (None, lambda a, v, i=i: self._invalidate(i, v))
      h[self.addr(self.reg(f"VM_INVALIDATE_ENG{i}_ACK"))] = (None, self._read_only)
      h[self.addr(self.reg(f"VM_INVALIDATE_ENG{i}_SEM"))] = (lambda a, i=i: self._sem_read(i), lambda a, v, i=i: self._sem_write(i, v))
    h[self.addr(self.reg("VM_L2_CNTL2"))] = (None, self._l2_cntl2)
    h[self.addr(self.reg("VM_L2_PROTECTION_FAULT_CNTL"))] = (None, self._fault_cntl)
    for n in (self.status_name, "VM_L2_PROTECTION_FAULT_ADDR_LO32", "VM_L2_PROTECTION_FAULT_ADDR_HI32"):
      h[self.addr(self.reg(n))] = (None, self._read_only)
    return h

  def power_on(self) -> None:
    vram_units = self.dev.gpu.vram.size >> FB_SHIFT
    self.set(self.reg("MC_VM_FB_LOCATION_BASE"), FB_BASE_UNITS)
    self.set(self.reg("MC_VM_FB_LOCATION_TOP"), FB_BASE_UNITS + vram_units - 1)
    self.set(self.reg("MC_VM_SYSTEM_APERTURE_LOW_ADDR"), 0x3FFFFFFF)   # LOW > HIGH: aperture disabled
    self.sem_taken = [False] * ENGINES
    self.sync()

  def sync(self) -> None:
    """Program the MMU from the registers (after power-on, or when a new process opens the device)."""
    self._aperture(0, 0)
    self._context(0, 0)

  # --- address map
  @property
  def fb(self) -> tuple[int, int]:
    """(first, last) MC address of VRAM."""
    base = (self.r("MC_VM_FB_LOCATION_BASE") & 0xFFFFFF) << FB_SHIFT
    return base, ((self.r("MC_VM_FB_LOCATION_TOP") & 0xFFFFFF) << FB_SHIFT) | ((1 << FB_SHIFT) - 1)

  def vram_offset(self, mc: int, n: int, who: str) -> int:
    """VRAM offset of the MC range [mc, mc+n) the PSP accesses: it must be VRAM (the PSP reaches memory by MC
    address without the hub's translation; it runs before any driver programs the hub)."""
    base, top = self.fb
    if not (base <= mc and mc + n - 1 <= top and mc + n - base <= self.dev.gpu.vram.size):
      raise ValueError(f"{who}: MC range [{mc:#x}, +{n:#x}) is not VRAM (the framebuffer is MC [{base:#x}, {top:#x}])")
    return mc - base

  def read_vram(self, mc: int, n: int, who: str) -> bytes:
    return self.dev.gpu.vram.read(self.vram_offset(mc, n, who), n)

  def write_vram(self, mc: int, data: bytes, who: str) -> None:
    self.dev.gpu.vram.write(self.vram_offset(mc, len(data), who), data)

  def _aperture(self, addr: int, value: int) -> None:
    """The MC address map (system aperture, framebuffer, AGP) and whether the hub translates at all."""
    if addr: self.regs[addr] = value
    low = self.r("MC_VM_SYSTEM_APERTURE_LOW_ADDR") << APERTURE_SHIFT
    high = (self.r("MC_VM_SYSTEM_APERTURE_HIGH_ADDR") << APERTURE_SHIFT) | ((1 << APERTURE_SHIFT) - 1)
    bot, top = self.r("MC_VM_AGP_BOT") << FB_SHIFT, (self.r("MC_VM_AGP_TOP") << FB_SHIFT) | ((1 << FB_SHIFT) - 1)
    agp = (bot, top, self.r("MC_VM_AGP_BASE") << FB_SHIFT) if bot <= top else None
    self.mmu.set_aperture(low, high, *self.fb, agp) if low <= high else self.mmu.set_aperture(None)
    self.mmu.set_enabled(self._not_translating(low, high))

  def _not_translating(self, low: int, high: int) -> str | None:
    """Why the hub's setup does not let it translate yet (amd_driver.md 2.7 steps 2 and 5-6), or None."""
    p = self.prefix
    tlb = self.reg("MC_VM_MX_L1_TLB_CNTL").decode(self.r("MC_VM_MX_L1_TLB_CNTL"))
    if not tlb["ENABLE_L1_TLB"]: return f"{p}MC_VM_MX_L1_TLB_CNTL.ENABLE_L1_TLB is 0: the driver has not enabled the L1 TLB"
    if tlb["SYSTEM_ACCESS_MODE"] != SYSTEM_ACCESS_MODE_NOT_IN_SYS:
      return (f"{p}MC_VM_MX_L1_TLB_CNTL.SYSTEM_ACCESS_MODE is {tlb['SYSTEM_ACCESS_MODE']}: only 3 (physical inside the "
              "system aperture, translated outside it) is modelled")
    if not tlb["ENABLE_ADVANCED_DRIVER_MODEL"]: return f"{p}MC_VM_MX_L1_TLB_CNTL.ENABLE_ADVANCED_DRIVER_MODEL is 0: the VM contexts are not in use"
    if tlb["MTYPE"] not in MTYPES: return f"{p}MC_VM_MX_L1_TLB_CNTL.MTYPE {tlb['MTYPE']} is reserved (NC 0, WC 1, CC 2, UC 3)"
    if not self.reg("VM_L2_CNTL").decode(self.r("VM_L2_CNTL"))["ENABLE_L2_CACHE"]:
      return f"{p}VM_L2_CNTL.ENABLE_L2_CACHE is 0: the driver has not enabled the L2 (the page walker)"
    if not low <= self.fb[0] <= high:
      return (f"the system aperture [{low:#x}, {high:#x}] ({p}MC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR) does not hold the "
              f"framebuffer at {self.fb[0]:#x}: the driver has not programmed it")
    return None

  def _context(self, addr: int, value: int) -> None:
    if addr: self.regs[addr] = value
    cntl = self.reg("VM_CONTEXT0_CNTL").decode(self.r("VM_CONTEXT0_CNTL"))
    start = (self.r("VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32") << 32 | self.r("VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32")) << PAGE_SHIFT
    end = (self.r("VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32") << 32 | self.r("VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32")) << PAGE_SHIFT | 0xFFF
    pde = self.r("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32") << 32 | self.r("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32")
    if not cntl["ENABLE_CONTEXT"]: return self.mmu.set_context(None)
    if (cntl["PAGE_TABLE_DEPTH"], cntl["PAGE_TABLE_BLOCK_SIZE"]) != (3, 0):
      raise ModelError(f"{self.prefix}VM_CONTEXT0_CNTL: PAGE_TABLE_DEPTH {cntl['PAGE_TABLE_DEPTH']} / BLOCK_SIZE "
                       f"{cntl['PAGE_TABLE_BLOCK_SIZE']} is not modelled (only 4-level tables of 4 KiB pages: depth 3, block size 0)")
    if not pde & 1: return self.mmu.set_context(None)
    if (pde & ADDR_MASK) >= self.dev.gpu.vram.size:
      raise ModelError(f"{self.prefix}VM_CONTEXT0_PAGE_TABLE_BASE_ADDR {pde:#x}: the root table is beyond the end of VRAM")
    self.mmu.set_context(pde & ADDR_MASK, start, end)

  # --- TLB
  def _invalidate(self, eng: int, value: int) -> None:
    req = self.reg(f"VM_INVALIDATE_ENG{eng}_REQ").decode(value)
    self.regs[self.addr(self.reg(f"VM_INVALIDATE_ENG{eng}_REQ"))] = value
    self.mmu.invalidate()
    self.set(self.reg(f"VM_INVALIDATE_ENG{eng}_ACK"), req["PER_VMID_INVALIDATE_REQ"])
    if req["CLEAR_PROTECTION_FAULT_STATUS_ADDR"]: self._clear_fault()

  def _sem_read(self, eng: int) -> int:
    if self.sem_taken[eng]: return 0
    self.sem_taken[eng] = True
    return 1

  def _sem_write(self, eng: int, value: int) -> None:
    if value & 1: raise ModelError(f"{self.prefix}VM_INVALIDATE_ENG{eng}_SEM: write 0 to release; it is acquired by reading it")
    self.sem_taken[eng] = False

  def _l2_cntl2(self, addr: int, value: int) -> None:
    self.regs[addr] = value
    if value & 0x3: self.mmu.invalidate()   # INVALIDATE_ALL_L1_TLBS | INVALIDATE_L2_CACHE

  def _read_only(self, addr: int, value: int) -> None:
    raise ModelError(f"{self.regs.name_of(addr)} is read-only" +
                     (" (clear a fault with VM_L2_PROTECTION_FAULT_CNTL.CLEAR_PROTECTION_FAULT_STATUS_ADDR)"
                      if "FAULT" in self.regs.name_of(addr) else ""))

  # --- faults
  def _fault_cntl(self, addr: int, value: int) -> None:
    self.regs[addr] = value & ~1
    if value & 1: self._clear_fault()

  def _clear_fault(self) -> None:
    for n in (self.status_name, "VM_L2_PROTECTION_FAULT_ADDR_LO32", "VM_L2_PROTECTION_FAULT_ADDR_HI32"):
      self.set(self.reg(n), 0)

  def client_id(self, client: str) -> int:
    if client == "shader": return CID_TCP
    if client == "SQC": return CID_SQC_INST
    return CID_SDMA0 if client.startswith("SDMA") else CID_CPC

  @staticmethod
  def fault_status_fields(f: Fault) -> dict[str, int]:
    """PERMISSION_FAULTS / MAPPING_ERROR / WALKER_ERROR of a fault of type `f.kind`."""
    access = PERM_EXECUTE if f.execute else PERM_WRITE if f.write else PERM_READ
    if f.kind == FAULT_NOT_PRESENT: return {"PERMISSION_FAULTS": PERM_VALID | access, "MAPPING_ERROR": 1}
    if f.permission: return {"PERMISSION_FAULTS": access}
    if f.kind == FAULT_PDE: return {"WALKER_ERROR": 1, "MAPPING_ERROR": 1}
    return {"MAPPING_ERROR": 1}

  def _on_fault(self, f: Fault) -> None:
    with self.dev.lock:
      status, fields = self.reg(self.status_name), self.fault_status_fields(f)
      if self.get(status): self.set(status, self.get(status) | 1)   # MORE_FAULTS
      else:
        self.set(status, status.encode(**fields, CID=self.client_id(f.client), RW=int(f.write)))
        self.set(self.reg("VM_L2_PROTECTION_FAULT_ADDR_LO32"), (f.va >> 12) & 0xFFFFFFFF)
        self.set(self.reg("VM_L2_PROTECTION_FAULT_ADDR_HI32"), (f.va >> 44) & 0xF)
      cntl = self.reg("VM_CONTEXT0_CNTL").decode(self.r("VM_CONTEXT0_CNTL"))
      if f.client != "IH" and cntl[f"{FAULT_INTERRUPT[f.kind]}_PROTECTION_FAULT_ENABLE_INTERRUPT"]:
        self.dev.ih.vm_fault(self.prefix, f, fields.get("PERMISSION_FAULTS", 0))
