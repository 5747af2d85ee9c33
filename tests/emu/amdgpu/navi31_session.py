"""One driver instance in its own process, for the persistence tests: `python -m tests.emu.amdgpu.navi31_session
<firmware dir> exit|hang`. The AM driver boots the emulated Navi31 (device 0 under $TMPDIR) and marks it (SCRATCH_REG7,
printed; SCRATCH_REG6 = 1 while it runs); the session leaves a marker in VRAM and runs a compute queue, then either
closes the driver (its fini dequeues and clears SCRATCH_REG6) and exits, or says "ready" and waits to be killed."""
import os, sys, time

from autogen.amd import gc_11_0_0 as gc
from drivers.amd.pci import PCIIface
from drivers.system import open_model
from tests.emu.amdgpu.regs import Regs, signal_works

MARKER_PADDR, MARKER = 0x1F00_0000, b"left by the previous process"   # VRAM the driver keeps for itself (its top 64 MiB)


def main(fwdir: str, mode: str) -> None:
  os.environ["HCQ_FIRMWARE_DIR"] = fwdir
  iface = PCIIface(open_model("navi31"))
  regs = Regs(iface.pci, iface)
  regs.vram.write_bytes(MARKER_PADDR, MARKER)
  assert signal_works(regs)
  booted_by = regs.r(gc.regSCRATCH_REG7)
  if mode == "hang":
    print(f"ready {booted_by:#x}", flush=True)
    time.sleep(60)
    return
  iface.close()
  print(f"done {booted_by:#x}", flush=True)


if __name__ == "__main__":
  main(*sys.argv[1:])
