"""One driver instance in its own process, for the persistence tests: `python -m tests.emu.amdgpu.navi31_session
<firmware dir> exit|hang`. Boots the emulated Navi31 (device 0 under $TMPDIR), marks it as AM does (SCRATCH_REG7 =
version, SCRATCH_REG6 = 1), leaves a marker in VRAM and runs a compute queue; then either finishes as a driver's fini
does (dequeue, SCRATCH_REG6 = 0) and exits, or says "ready" and waits to be killed."""
import sys, time

from autogen.amd import gc_11_0_0 as gc
from drivers.system import open_model
from tests.emu.amdgpu.navi31_driver import Driver, firmware_pieces, release_mem, VA_BASE

AM_VERSION, MARKER_PADDR, MARKER = 0xA0000008, 0x1F00_0000, b"left by the previous process"


def main(fwdir: str, mode: str) -> None:
  dev = open_model("navi31")
  drv = Driver(dev)
  drv.boot(firmware_pieces(fwdir))
  drv.vram.write_bytes(MARKER_PADDR, MARKER)
  q = drv.compute_queue()
  sig = dev.alloc_dma(4096)
  drv.map_dma(VA_BASE + (3 << 30), sig)
  drv.flush_tlb("GC")
  q.submit(release_mem(VA_BASE + (3 << 30), 1))
  q.wait_idle()
  drv.w(gc.regSCRATCH_REG7, AM_VERSION)
  drv.w(gc.regSCRATCH_REG6, 1)
  if mode == "hang":
    print("ready", flush=True)
    time.sleep(60)
    return
  drv.w_fields(gc.regGRBM_GFX_CNTL, MEID=1)
  drv.w_fields(gc.regCP_HQD_DEQUEUE_REQUEST, DEQUEUE_REQ=2)
  drv.wait(lambda: drv.r(gc.regCP_HQD_ACTIVE) == 0, "HQD dequeue timeout")
  drv.w(gc.regGRBM_GFX_CNTL, 0)
  drv.w(gc.regSCRATCH_REG6, 0)
  dev.close()
  print("done", flush=True)


if __name__ == "__main__":
  main(*sys.argv[1:])
