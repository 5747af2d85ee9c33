"""An emulated AMD GPU of chips.py (Navi31 RX 7900 XTX, Navi48 RX 9070 XT, Navi44 RX 9060 XT) as the PCI function the AM
userspace driver boots from cold: one class for all, the chip choosing the register modules, the IP discovery table
and the blocks of its versions (navi31.py, navi48.py, navi44.py register each as a model).

PCI: vendor 0x1002, the chip's device id and revision, class 0x030000 (VGA). BARs:
  0  VRAM (64-bit prefetchable memory; the whole VRAM, the large-BAR layout). The last 64 KiB hold the IP
     discovery binary (emu/amdgpu/discovery.py).
  2  doorbells (256 MiB): a 32/64-bit store to a byte offset wakes the queue bound there (MEC HQD:
     PQ_DOORBELL_CONTROL.DOORBELL_OFFSET * 4, e.g. 0x18 for doorbell index 3; SDMA0: DOORBELL_OFFSET * 4, e.g.
     0x800). A store no queue is bound to, or with RCC_DOORBELL_APER_EN = 0, raises.
  5  registers (1 MiB, 32-bit accesses only): dword index = register address; registers above it through
     BIF_BX_PF0_RSMU_INDEX/DATA. They are the GPU model's register file (registers.py), into which this function
     decodes its blocks: nbio.py (NBIO), gmc.py (GC and MM hubs), ih.py, psp.py, smu.py, gfx.py, sdma.py (and the
     core's own hdp.py). An address no block declares raises ModelError naming the register.
Device DMA (MMU walks of SYSTEM pages, engines writing host memory) needs PCI_COMMAND bus mastering.

Persistent state (`path` given: $TMPDIR/hcq-emu/<chip>-<index>/ from `state_dir`; `path=None` keeps it in memory):
  vram   sparse file: VRAM, byte for byte (its size is the VRAM size).
  regs   sparse file of u32 (little-endian): the register at dword address A at byte 4*A, for A < 2^27; then
         the banked copies at 4*(2^27 + i): HQD registers of MEC pipe p queue q at i = (8p + q) * 64 +
         (A - CP_MQD_BASE_ADDR), SH_MEM_CONFIG / SH_MEM_BASES of VMID v at i = 2048 + 2v / +1,
         CP_MEC_RS64_PRGRM_CNTR_START / _HI of pipe p at i = 2080 + 2p / +1.
  state  one DeviceState (ctypes layout below): magic, layout version, VRAM size, PSPState (psp.py), SMUState (smu.py),
         the engines' busy nanoseconds (gfx, sdma) behind the SMU activity counters.
All three are MAP_SHARED mappings, so every register store or state change is in the files as it happens and
a driver killed with -9 leaves the device exactly as it was (PSP and SMU alive, HQDs active, SCRATCH_REG6
as written). Opening a directory with no (or an older) state powers the device on: registers at their reset
values, PSP in its bootloader, SMU without firmware, discovery table written. Otherwise the device is
attached as found; queues the files say are active have no engine in this process (engines are threads and
die with their process): they are stale, and a doorbell to them raises until a dequeue, a ring disable, a
GRBM soft reset or a mode-1 reset (SMU Mode1Reset / debug mailbox message 2) clears them. One process at a
time: drivers/system holds the device lock while a model is open.
"""
from __future__ import annotations
import ctypes, os
from ctypes import Structure, c_uint32, c_uint64

from autogen.amd import soc15_ih_clientid as ih_client, irqsrcs_gfx_11_0_0 as irq_src
from emu import state
from emu.pci import PCIFunction, DMASpace, DMAFault, PCI_COMMAND, PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER, ModelError, Region, Access
from emu.amdgpu import discovery
from emu.amdgpu.chips import Chip, VENDOR_ID, CLASS_VGA
from emu.amdgpu.gpu import GPUModel, DeviceError
from emu.amdgpu.mmu import MMU
from emu.amdgpu.vram import map_file
from emu.amdgpu.nbio import NBIOModel
from emu.amdgpu.gmc import HubModel
from emu.amdgpu.ih import IHModel
from emu.amdgpu.psp import PSPModel, PSPState
from emu.amdgpu.smu import SMUModel, SMUState
from emu.amdgpu.smu_v14 import SMU14Model
from emu.amdgpu.gfx import GFXModel
from emu.amdgpu.sdma import SDMAModel

SMU_MODELS = {(13, 0, 0): SMUModel, (14, 0, 2): SMU14Model, (14, 0, 3): SMU14Model}   # by MP1 version
MMIO_BAR_SIZE, DOORBELL_BAR_SIZE = 1 << 20, 256 << 20
STATE_MAGIC, STATE_VERSION = 0x5333314E, 4      # "N31S"


class DeviceState(Structure):
  _fields_ = [("magic", c_uint32), ("version", c_uint32), ("vram_size", c_uint64), ("psp", PSPState), ("smu", SMUState),
              ("busy_ns", c_uint64 * 2)]


class SharedBusy:
  """The engines' busy time (gfx, sdma) kept in the state file: the SMU's activity counters then show the load of
  the process running the engines to any process that asks (am_smi attaches from another process)."""
  KINDS = ("gfx", "sdma")

  def __init__(self, counters): self.counters = counters
  def __getitem__(self, kind: str) -> int: return self.counters[self.KINDS.index(kind)]
  def __setitem__(self, kind: str, ns: int) -> None: self.counters[self.KINDS.index(kind)] = ns


def saved_vram_size(path: str) -> int | None:
  """VRAM size of the device state in `path`, or None if there is none."""
  st = state.load(path, DeviceState, STATE_MAGIC, STATE_VERSION)
  return None if st is None else st.vram_size


class BusMasterDMA(DMASpace):
  """The device's view of host memory: every access needs PCI bus mastering enabled."""
  def __init__(self, fn: PCIFunction):
    super().__init__()
    self.fn = fn

  def _locate(self, addr: int, n: int):
    if not self.fn.bus_master:
      raise DMAFault(f"DMA to bus address {addr:#x} with bus mastering disabled (set PCI_COMMAND bit 2)")
    return super()._locate(addr, n)


class MMIORegion(Region):
  """BAR5: 32-bit register accesses by byte offset."""
  name, size, valid = "BAR5", MMIO_BAR_SIZE, (Access("registers", 4, 4),)

  def __init__(self, dev: GPUFunction): self.dev = dev
  def _read(self, offset: int, size: int) -> int: return self.dev.regs.read(offset >> 2)
  def _write(self, offset: int, size: int, value: int) -> None: self.dev.regs.write(offset >> 2, value)


class Doorbells(Region):
  """BAR2: doorbell slots, 32- or 64-bit; the last value stored reads back."""
  name, size, valid = "BAR2", DOORBELL_BAR_SIZE, (Access("doorbells", 4, 8),)

  def __init__(self, dev: GPUFunction):
    self.dev, self.values = dev, {}

  def _read(self, offset: int, size: int) -> int:
    return (self.values.get(offset & ~7, 0) >> 8 * (offset & 7)) & ((1 << 8 * size) - 1)

  def _write(self, offset: int, size: int, value: int) -> None:
    slot = offset & ~7
    self.values[slot] = value if size == 8 else (self.values.get(slot, 0) & ~(0xFFFFFFFF << 8 * (offset & 4))) | value << 8 * (offset & 4)
    self.dev.ring_doorbell(slot, self.values[slot])


class GPUFunction(PCIFunction):
  def __init__(self, chip: Chip, bus: str = "mock-0", vram_size: int = 512 << 20, path: str | None = None):
    self.chip = chip
    if vram_size & (vram_size - 1) or vram_size < 64 << 20: raise ValueError(f"VRAM size {vram_size:#x}: must be a power of two of at least 64 MiB")
    if path is not None:
      os.makedirs(path, exist_ok=True)
      if (saved := saved_vram_size(path)) not in (None, vram_size):
        raise ValueError(f"the emulated device in {path} has {saved >> 20} MiB of VRAM, not {vram_size >> 20} MiB: "
                         f"open it with vram_size={saved}, or delete the directory to power on a new one")
    super().__init__(bus, VENDOR_ID, self.chip.device_id, CLASS_VGA, self.chip.revision)
    self.path, self.ip_bases = path, self.chip.ip_bases
    self.log_lines: list[str] = []
    file = lambda name: None if path is None else os.path.join(path, name)
    self._state_map = map_file(file("state"), ctypes.sizeof(DeviceState))
    self.state = DeviceState.from_buffer(self._state_map)
    self.dma = BusMasterDMA(self)
    self.gpu = GPUModel(vram_size, file("vram"), file("regs"), self.dma, SharedBusy(self.state.busy_ns), chip=self.chip)
    self.regs, self.lock = self.gpu.regs, self.gpu.regs.lock    # the core's register file: BAR5 decodes into it
    self.gpu.on_error.append(self._device_error)
    self.gpu.on_interrupt.append(self._interrupt)
    self.doorbell_queues: dict[int, object] = {}
    self.stale_doorbells: dict[int, tuple[tuple, str]] = {}
    self.nbio = NBIOModel(self)
    self.gmc_gc, self.gmc_mm = HubModel(self, "GC", self.gpu.mmu), HubModel(self, "MM", MMU(self.gpu.vram, self.dma, self.gpu.pte_format))
    self.ih, self.psp = IHModel(self), PSPModel(self, self.state.psp)
    self.smu = SMU_MODELS[self.chip.versions["MP1"]](self, self.state.smu)
    self.gfx, self.sdma = GFXModel(self), SDMAModel(self)
    for b in (self.nbio, self.gmc_gc, self.gmc_mm, self.ih, self.psp, self.smu, self.gfx, self.sdma): self.regs.map(b)
    self.blocks = (self.nbio, self.gpu.hdp, self.gmc_gc, self.gmc_mm, self.ih, self.psp, self.smu, self.gfx, self.sdma)
    self.bars[0], self.bars[2], self.bars[5] = self.gpu.vram.view, Doorbells(self), MMIORegion(self)
    self.config[PCI_COMMAND] |= PCI_COMMAND_MEMORY   # the platform enumerated it: memory decoding on
    self.resets = 0
    if (self.state.magic, self.state.version) != (STATE_MAGIC, STATE_VERSION): self.power_on()
    else: self._attach()

  # --- life cycle
  def power_on(self) -> None:
    """Cold state: registers at reset values, PSP bootloader waiting, SMU without firmware, discovery in VRAM."""
    with self.lock:
      self.regs.clear()
      ctypes.memset(ctypes.addressof(self.state), 0, ctypes.sizeof(self.state))
      for b in self.blocks: b.power_on()
      size = self.gpu.vram.size
      table = discovery.build(self.chip)
      self.gpu.vram.write(size - discovery.DISCOVERY_SIZE, table + bytes(discovery.DISCOVERY_SIZE - len(table)))
      self.state.magic, self.state.version, self.state.vram_size = STATE_MAGIC, STATE_VERSION, size

  def _attach(self) -> None:
    for hub in (self.gmc_gc, self.gmc_mm): hub.sync()
    self.gfx.attach()
    self.sdma.attach()

  def mode1_reset(self) -> None:
    """SMU mode-1 reset: every engine stops and the whole device returns to its power-on state (VRAM contents
    survive); PCI bus mastering is cleared, as with any reset of the function."""
    with self.lock:
      self.gfx.stop_all()
      self.sdma.stop_all()
      self.doorbell_queues.clear()
      self.stale_doorbells.clear()
      self.power_on()
      self.config[PCI_COMMAND] &= ~PCI_COMMAND_MASTER & 0xFF
      self.resets += 1
      self.log("mode-1 reset")

  def reset(self) -> None:
    super().reset()
    self.mode1_reset()

  def close(self) -> None:
    """Stop this process's engines (the device state stays in its files)."""
    self.gpu.shutdown()
    del self.state
    try: self._state_map.close()
    except BufferError: pass
    try: self.regs.close()
    except BufferError: pass

  def log(self, line: str) -> None:
    self.log_lines.append(line)

  # --- doorbells
  def bind_doorbell(self, offset: int, queue) -> None:
    if offset in self.doorbell_queues: raise ModelError(f"doorbell {offset:#x} is already bound to {self.doorbell_queues[offset].qname}")
    self.stale_doorbells.pop(offset, None)
    self.doorbell_queues[offset] = queue

  def unbind_doorbell(self, offset: int, queue) -> None:
    if self.doorbell_queues.get(offset) is queue: del self.doorbell_queues[offset]

  def mark_stale(self, offset: int, key: tuple, label: str) -> None:
    self.stale_doorbells[offset] = (key, label)

  def unbind_stale(self, key: tuple) -> None:
    for off, (k, _) in list(self.stale_doorbells.items()):
      if k == key: del self.stale_doorbells[off]

  def ring_doorbell(self, offset: int, value: int) -> None:
    if not self.nbio.doorbells_enabled():
      raise ModelError(f"doorbell store at {offset:#x} while RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN is 0: the doorbell aperture is disabled")
    if (q := self.doorbell_queues.get(offset)) is not None: return q.ring_doorbell(value)
    if (stale := self.stale_doorbells.get(offset)) is not None:
      raise ModelError(f"doorbell {offset:#x} rings {stale[1]}, whose state a previous driver instance left active with no engine "
                       "running it: dequeue/disable it or reset the device (mode-1 reset) first")
    raise ModelError(f"doorbell store at {offset:#x}: no queue is bound to that doorbell")

  # --- device errors and interrupts (engine threads)
  def _device_error(self, err: DeviceError) -> None:
    with self.lock:
      self.log(str(err))
      if err.kind == "shader" and err.va is None: self.ih.shader_error()
      elif err.kind == "packet":
        pipe = next((pq[0] for pq, q in self.gfx.queues.items() if q.qname == err.engine), None)
        if pipe is not None and self._pipe_int(pipe, "OPCODE_ERROR_INT_ENABLE"):
          self.ih.post(ih_client.SOC21_IH_CLIENTID_GRBM_CP, irq_src.GFX_11_0_0__SRCID__CP_BAD_OPCODE_ERROR)

  def _pipe_int(self, pipe: int, field: str) -> bool:
    reg = getattr(self.gpu.gc, f"regCP_ME1_PIPE{pipe}_INT_CNTL")
    return bool(reg.decode(self.gfx.get(reg))[field])

  def _interrupt(self, source: str, ctx: int, engine: str) -> None:
    with self.lock:
      if source == "CP_EOP":
        pipe = next((pq[0] for pq, q in self.gfx.queues.items() if q.qname == engine), 0)
        if self._pipe_int(pipe, "TIME_STAMP_INT_ENABLE"): self.ih.post(ih_client.SOC21_IH_CLIENTID_GRBM_CP,
                                                                       irq_src.GFX_11_0_0__SRCID__CP_EOP_INTERRUPT, (ctx,))
      elif source == "SDMA_TRAP" and self.sdma.get(self.gpu.gc.regSDMA0_CNTL) & 1:
        self.ih.post(ih_client.SOC21_IH_CLIENTID_GFX, irq_src.GFX_11_0_0__SRCID__SDMA_TRAP, (ctx,))
