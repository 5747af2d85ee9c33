"""What am_smi shows about AM-driven GPUs, read through the driver: the SMU metrics table, DPM clocks, VRAM in
use from the page tables. Attaching takes no ownership: the device stays with the process that opened it.

The activity figures are live only while a process owns the device (the AM driver's queues are that process's) and
the SMU updates its table (MetricsCounter advances between two readings); otherwise they read 0 and `stale` says why."""
from __future__ import annotations
import dataclasses
from dataclasses import dataclass, field

from drivers.system import list_pci, open_model, list_models, SysfsPCIDevice, PCIDevice, PCIInfo
from drivers.system.pci import MOCK_BUS
from drivers.system.registry import Usage
from drivers.system.lock import holder, lock_path
from drivers.amd.am.core import AMCore, NotBootedError
from drivers.amd import AM_DEVICE_IDS, PCI_VENDOR, LOCK_PREFIX, VENDOR


@dataclass
class GPUStatus:
  bus: str
  name: str
  pid: int | None                                   # the process that owns the device (-1: one not visible here), if any
  error: str | None = None                          # why nothing else could be read
  stale: str | None = None                          # why the activity is not a live reading (it then reads 0)
  gfx_activity: int = 0                             # %
  mem_activity: int = 0                             # %
  metrics_counter: int | None = None                # the SMU's MetricsCounter of this reading
  temps: dict[str, int] = field(default_factory=dict)     # degrees C
  voltages: dict[str, int] = field(default_factory=dict)  # mV
  clocks: dict[str, int] = field(default_factory=dict)    # MHz: gfx, mem, fclk
  fan_rpm: int = 0
  fan_pwm: int = 0                                  # %
  power_w: int = 0
  power_limit_w: int = 0
  throttle: list[str] = field(default_factory=list)
  vram_used: int = 0
  vram_total: int = 0


@dataclass(frozen=True)
class MonitoredGPU:
  bus: str
  name: str
  emulated_index: int | None      # the model's index for emulated devices
  model: str | None = None        # the AMD PCI model (hcq.models) emulating it

  def open(self) -> PCIDevice:
    """The PCI function without taking its lock (read-only monitoring: an emulated device without state is not made)."""
    if self.model is not None and self.emulated_index is not None: return open_model(self.model, self.emulated_index, None)
    return SysfsPCIDevice(self.bus, None)


def _am_free(p: PCIInfo) -> bool:
  """A GPU the AM driver boots, free of amdgpu (bound to vfio-pci, or to nothing)."""
  return p.device_id in AM_DEVICE_IDS and p.driver in (None, "vfio-pci")


def devices(bus: str | None = None) -> list[MonitoredGPU]:
  """GPUs the AM driver can drive: supported AMD functions on the PCI bus and the AMD models' emulated devices with state
  (never another vendor's, whose emulated devices share the mock-<n> bus names)."""
  out = [MonitoredGPU(p.bus, p.name or "AMD GPU", None) for p in list_pci(PCI_VENDOR) if _am_free(p)]
  out += [MonitoredGPU(m.bus, m.name, int(m.bus.split("-")[1]), kind) for kind in VENDOR.pci_models for m in list_models(kind)]
  return [d for d in out if bus is None or d.bus.startswith(bus) or d.bus.startswith(f"0000:{bus}")]


def status(ref: MonitoredGPU, last: GPUStatus | None = None) -> GPUStatus:
  """One reading of the device; `last`, the previous reading of it, tells whether the SMU updated its metrics since."""
  st = GPUStatus(ref.bus, ref.name, holder(lock_path(LOCK_PREFIX, ref.bus)))
  if st.pid is None: st.stale = "idle: no process holds the device"
  try:
    pci = ref.open()
  except Exception as e:
    st.error = f"cannot open: {e}"
    return st
  try:
    core = AMCore(pci, monitor=True)
    reading = core.smu.reading()                 # the SMU block of the GPU's version reads its own metrics table
    counter = reading["metrics_counter"]
    if last is not None and last.metrics_counter == counter and st.stale is None:
      st.stale = f"stale: SMU metrics not updated since the last reading (counter {counter})"
    if st.stale is not None: reading.update(gfx_activity=0, mem_activity=0)
    st = dataclasses.replace(st, **reading, vram_used=core.mm.mapped_vram(), vram_total=core.vram_size)
  except NotBootedError as e: st.error = str(e)
  except Exception as e: st.error = f"{type(e).__name__}: {e}"
  finally: pci.close()
  return st


def usage(bus: str, pci: PCIInfo | None) -> Usage:
  """What hcq_smi list shows of an AMD device: the device string that reaches it and, for one the AM driver runs (an
  emulated GPU, a supported one free of amdgpu), its VRAM in use and GFX activity as status() reads them (the activity
  only while a process owns the device; nothing of a device that cannot be read, or was never booted)."""
  if bus.startswith("usb-"): return Usage("USB+AMD")
  if pci is None: return Usage()                   # known only by its lock
  if m := MOCK_BUS.fullmatch(bus): ref, iface = MonitoredGPU(bus, pci.name, int(m[1]), VENDOR.pci_models[0]), f"MOCKPCI+AMD:{m[1]}"
  elif pci.driver == "amdgpu": return Usage("KFD+AMD")
  elif _am_free(pci): ref, iface = MonitoredGPU(bus, pci.name, None), "PCI+AMD"
  else: return Usage()
  if (st := status(ref)).error: return Usage(iface)
  return Usage(iface, st.vram_used, st.vram_total, None if st.stale else st.gfx_activity)
