"""The mutation table: every PTE/PDE bit and hub/shader-memory register field the AM driver encodes matters. Each row
changes one of them in the driver's own encoder output (the register value it writes, mm.py's PDE / PTE encoders) and
the AM driver's ordinary work on the emulated Navi31 must then fail: boot, SDMA copies, a kernel whose flat accesses
go through the LDS and scratch apertures, and a faulting kernel reported through the IH. The unmutated row passes.
Not in the table, because the hardware does not act on them either: AGP_BOT/TOP/BASE (the aperture the driver disables
lies outside the system aperture), the fault default/dummy addresses, VM_L2_CNTL3-5 (cache shape only), MTYPE UC vs NC
(caching policy: the model has no GPU L2), and the MM hub's context 0 (enable, root, window): the MM hub's clients the
driver uses (IH, SMU) reach memory by MC address through the system aperture, never through its page tables. The other
fault-interrupt enables are tested by fault type in test_navi31_mmu.py."""
import pytest

from autogen import kfd
from autogen.amd import gc_11_0_0 as gc, amdgpu_vm as vm
from drivers.amd.device import AMDDevice
from drivers.amd.kfd import KFDIface
from drivers.system.kernel import kernel_interface
from drivers.amd.am.core import AMCore
from drivers.amd.am.pte_gfx11 import PTEgfx11
from drivers.amd.am.gfxhub_v3_0 import GFXHUBv3_0
from drivers.amd.am.mmhub_v3_0 import MMHUBv3_0
from drivers.hcq import open_device, DeviceFault
from tests.drivers.amd.kernels import SRC
from tests.emu.amdgpu.test_navi31_mmu import apertures_work

UNMAPPED = 0x2234_5678_0000
# how the driver's work fails on a broken device: a fault, a timeout, the model refusing an access or a register value,
# a wrong result (a TypeError or AttributeError would be a bug of the test, not a failure of the driver)
BROKEN = (DeviceFault, TimeoutError, RuntimeError, AssertionError)


def field(reg, name: str, value: int):
  return lambda v: (v & ~reg.mask(name)) | value << reg.fields[name][0]


def hub(name: str, hub_index: int): return vars((GFXHUBv3_0.R, MMHUBv3_0.R)[hub_index])[name]


# (row id, register, new value from the driver's value)
REGISTERS = [
  *[(f"{h}-{n}", hub(r, i), field(hub(r, i), f, v)) for i, h in enumerate(("GC", "MM")) for n, r, f, v in (
    ("L1_TLB-off", "MX_L1_TLB_CNTL", "ENABLE_L1_TLB", 0),
    ("L1_TLB-SYSTEM_ACCESS_MODE", "MX_L1_TLB_CNTL", "SYSTEM_ACCESS_MODE", 1),
    ("L1_TLB-no-ADVANCED_DRIVER_MODEL", "MX_L1_TLB_CNTL", "ENABLE_ADVANCED_DRIVER_MODEL", 0),
    ("L1_TLB-MTYPE", "MX_L1_TLB_CNTL", "MTYPE", 5),
    ("L2-off", "L2_CNTL", "ENABLE_L2_CACHE", 0),
    ("CONTEXT0-off", "CONTEXT0_CNTL", "ENABLE_CONTEXT", 0),
    ("CONTEXT0-depth", "CONTEXT0_CNTL", "PAGE_TABLE_DEPTH", 2)) if h == "GC" or n != "CONTEXT0-off"],
  *[(f"{h}-{n}", hub(r, i), f) for i, h in enumerate(("GC", "MM")) for n, r, f in (
    ("aperture-low", "SYSTEM_APERTURE_LOW_ADDR", lambda v: v + 1),
    ("aperture-high", "SYSTEM_APERTURE_HIGH_ADDR", lambda v: 0),
    ("root-invalid", "CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", lambda v: v & ~1),
    ("root-moved", "CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", lambda v: v + 0x1000),
    ("window-start", "CONTEXT0_PAGE_TABLE_START_ADDR_HI32", lambda v: v + 1),
    ("window-end", "CONTEXT0_PAGE_TABLE_END_ADDR_HI32", lambda v: 1)) if h == "GC" or not n.startswith(("root", "window"))],
  ("GC-VALID-fault-interrupt", gc.regGCVM_CONTEXT0_CNTL, field(gc.regGCVM_CONTEXT0_CNTL, "VALID_PROTECTION_FAULT_ENABLE_INTERRUPT", 0)),
  ("SH_MEM_BASES-shared", gc.regSH_MEM_BASES, field(gc.regSH_MEM_BASES, "SHARED_BASE", 3)),
  ("SH_MEM_BASES-private", gc.regSH_MEM_BASES, field(gc.regSH_MEM_BASES, "PRIVATE_BASE", 3)),
  ("SH_MEM_BASES-swapped", gc.regSH_MEM_BASES, lambda v: (v & 0xFFFF) << 16 | v >> 16),
  ("SH_MEM_CONFIG-alignment", gc.regSH_MEM_CONFIG, field(gc.regSH_MEM_CONFIG, "ALIGNMENT_MODE", 0)),
  ("SH_MEM_CONFIG-32-bit", gc.regSH_MEM_CONFIG, field(gc.regSH_MEM_CONFIG, "ADDRESS_MODE", 1)),
]

# (row id, change of a leaf's flags given (flags, system))
PTES = [
  ("VALID", lambda f, s: f & ~vm.AMDGPU_PTE_VALID),
  ("READABLE", lambda f, s: f & ~vm.AMDGPU_PTE_READABLE),
  ("WRITEABLE", lambda f, s: f & ~vm.AMDGPU_PTE_WRITEABLE),
  ("EXECUTABLE", lambda f, s: f & ~vm.AMDGPU_PTE_EXECUTABLE),
  ("SYSTEM", lambda f, s: f & ~vm.AMDGPU_PTE_SYSTEM),
  ("SNOOPED", lambda f, s: f & ~vm.AMDGPU_PTE_SNOOPED),
  ("MTYPE", lambda f, s: f | 5 << 48),
  ("FRAG", lambda f, s: f | 9 << 7),
]

# (row id, change of a directory entry)
PDES = [
  ("VALID", lambda e: e & ~vm.AMDGPU_PTE_VALID),
  ("SYSTEM", lambda e: e | vm.AMDGPU_PTE_SYSTEM | vm.AMDGPU_PTE_SNOOPED),
  ("PDE_PTE", lambda e: e | vm.AMDGPU_PDE_PTE),
  ("TF", lambda e: e | 1 << 56),
  ("BFS", lambda e: e | 9 << 59),
]


def driver_work() -> None:
  """What the AM driver does every day; raises (or fails an assert) when something went wrong. While the work that must
  succeed runs, an error the emulated GPU logs (an engine that stopped: the hardware would hang) is handed to the device
  as a fault at once, so a broken row fails in milliseconds rather than at the end of a signal timeout."""
  d = open_device("MOCKPCI+AMD")
  model = d.iface.pci.model
  model.log = lambda line, log=model.log: (log(line), d.report_fault(f"the emulated GPU logged: {line}"))
  try:
    assert apertures_work(d), "flat accesses at the apertures read back wrong values"
    del model.log
    out = d.alloc(4)
    bad = type("Unmapped", (), {"va": UNMAPPED, "device": d})()
    prg = d.program("read_ptr", d.compiler.compile(SRC))
    args = prg.fill_kernargs([out, out])
    args.update([out, bad], [])
    d.compute_queue().exec(prg, args, (1,), (1,)).signal(d.timeline, v := d.next_timeline()).submit()
    with pytest.raises(DeviceFault, match=rf"GPU page fault at {UNMAPPED:#x}.*: not present\)"): d.timeline.wait(v, timeout_ms=5000)
  except BaseException as e:
    d.report_fault(f"the work failed: {e}")   # the device is broken: close() tears it down without waiting for it
    raise
  finally: d.close()


def test_the_unmutated_driver_works():
  driver_work()


@pytest.mark.parametrize("reg, change", [pytest.param(r, c, id=i) for i, r, c in REGISTERS])
def test_a_wrong_register_field_fails(monkeypatch, reg, change):
  real = AMCore.wreg
  def wreg(self, ip, r, value=None, **fields):
    if r is reg: value, fields = change(r.encode(**fields) if value is None else value) & 0xFFFFFFFF, {}
    real(self, ip, r, value, **fields)
  monkeypatch.setattr(AMCore, "wreg", wreg)
  with pytest.raises(BROKEN): driver_work()


@pytest.mark.parametrize("change", [pytest.param(c, id=i) for i, c in PTES])
def test_a_wrong_pte_bit_fails(monkeypatch, change):
  real = PTEgfx11.pte_flags
  monkeypatch.setattr(PTEgfx11, "pte_flags", classmethod(lambda cls, system, uncached: change(real(system, uncached), system)))
  with pytest.raises(BROKEN): driver_work()


@pytest.mark.parametrize("change", [pytest.param(c, id=i) for i, c in PDES])
def test_a_wrong_pde_bit_fails(monkeypatch, change):
  real = PTEgfx11.pde
  monkeypatch.setattr(PTEgfx11, "pde", classmethod(lambda cls, table: change(real(table))))
  with pytest.raises(BROKEN): driver_work()


@pytest.mark.parametrize("flag, fault", [("WRITABLE", "write"), ("EXECUTABLE", "execute")])
def test_a_kfd_allocation_without_a_permission_the_driver_relies_on_fails(monkeypatch, flag, fault):
  """The KFD driver's allocation flags become PTE bits in the KFD model (as amdgpu.ko maps them): without WRITABLE the
  kernel's stores fault, without EXECUTABLE its instruction fetch does; the fault the model reports has that type."""
  real = KFDIface._ioctl
  def ioctl(self, request, arg):
    if request == kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: arg.flags &= ~getattr(kfd, f"KFD_IOC_ALLOC_MEM_FLAGS_{flag}")
    return real(self, request, arg)
  k = kernel_interface("kfd")
  d = AMDDevice("MOCKKFD+AMD", KFDIface(k))
  errors = []
  (node,) = k.model.nodes.values()                                   # the GPU the process acquired a VM on
  node.gpu.on_error.append(errors.append)
  try:
    assert apertures_work(d) and not errors
    monkeypatch.setattr(KFDIface, "_ioctl", ioctl)
    with pytest.raises(DeviceFault, match="MMU fault"): apertures_work(d)
    assert errors[0].fault == fault
  finally: d.close()
