"""MRs over memory the context did not allocate, on emulated NIC mock-0 of every registered RDMA NIC vendor through its
loopback: existing host memory (a numpy array that starts mid-page, mapped for the NIC by PCIDevice.map_dma) and hcq
Buffers in host memory (a GPU's host-visible buffer, a CPU-device buffer). The responder enforces their bounds and access
flags like any MR's. MRs over GPU memory (peer to peer): tests/drivers/rdma/test_gpu_mr.py."""
import mmap, re
from types import SimpleNamespace
import numpy as np
import pytest

from drivers.hcq import open_device
from drivers.rdma import Access, WCError, WCStatus, WROpcode, open_context, rdma_vendors
from tests.drivers.amd.kernels import SRC as AMD_SRC
from tests.drivers.rdma.contract import IP, Pair, RW


def opened(vendor: str):
  ctx = open_context(vendor, "mock-0", ip=IP)
  ctx.set_loopback(True)
  return ctx


@pytest.fixture(params=list(rdma_vendors()))
def nic(request):
  ctx = opened(request.param)
  yield ctx
  ctx.close()


@pytest.fixture
def first_nic():
  """The first registered NIC: where the memory's side is a device's, not the NIC's, one NIC shows it."""
  ctx = opened(next(iter(rdma_vendors())))
  yield ctx
  ctx.close()


def nic_mappings(ctx) -> int: return len(ctx.provider.pci.model.dma._runs)


def test_write_and_read_into_an_mr_over_a_numpy_array(nic):
  """The array starts 52 bytes into a page and spans three: a WRITE lands in it exactly, a READ brings it back, and
  after dereg the NIC maps none of its pages."""
  p = Pair(nic)
  backing = np.frombuffer(mmap.mmap(-1, 3 * 4096), np.uint8)   # page-aligned, zeroed
  arr = backing[52:52 + 9000]
  src, back = p.mr(arr.nbytes), p.mr(arr.nbytes)
  held = nic_mappings(nic)
  mr = p.pd.reg_mr(arr, RW)
  assert mr.addr % 4096 == 52 and mr.length == arr.nbytes
  data = np.random.default_rng(1).integers(0, 256, arr.nbytes, dtype=np.uint8)
  src.view[:] = data.tobytes()
  (wc,) = p.write(src, mr)
  assert (wc.status, wc.byte_len) == (WCStatus.SUCCESS, arr.nbytes)
  np.testing.assert_array_equal(arr, data)
  assert not backing[:52].any() and not backing[52 + 9000:].any()   # nothing outside the array, on the same pages
  arr[::7] ^= 0xFF                                        # the host changes it; a READ brings the new bytes
  p.write(back, mr, opcode=WROpcode.RDMA_READ)
  assert bytes(back.view) == arr.tobytes()
  mr.dereg()
  assert nic_mappings(nic) == held                       # unmapped again


def test_the_responder_enforces_a_host_memory_mrs_bounds_and_access(nic):
  p = Pair(nic)
  arr = np.zeros(1000, np.uint8)
  src = p.mr(1000, fill=True)
  dst = p.pd.reg_mr(arr, RW, length=600)                  # the MR is the first 600 bytes only
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, dst, length=601)
  assert not arr.any()
  p = Pair(nic)
  src = p.mr(1000, fill=True)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, p.pd.reg_mr(arr, Access.LOCAL_WRITE | Access.REMOTE_READ))
  assert not arr.any()                                    # no REMOTE_WRITE: nothing written
  p = Pair(nic)
  local = p.mr(1000)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"):
    p.write(local, p.pd.reg_mr(arr, Access.LOCAL_WRITE | Access.REMOTE_WRITE), opcode=WROpcode.RDMA_READ)
  assert bytes(local.view) == bytes(1000)                # no REMOTE_READ: nothing read


@pytest.mark.parametrize("device", ["CPU", "MOCKKFD+AMD", "MOCKPCI+AMD"])
def test_an_mr_over_an_hcq_host_buffer_is_the_buffers_memory(first_nic, device):
  """A GPU kernel's output in a host-visible buffer leaves by RDMA WRITE; an RDMA WRITE into the buffer is what the
  device then reads. The buffer cannot be freed, nor its device closed, while registered."""
  nic, (dev, n) = first_nic, (open_device(device), 256)
  p = Pair(nic)
  buf = dev.alloc(4 * n, host=True)
  a = np.arange(n, dtype=np.float32)
  if device == "CPU": buf.copyin((a * 2).data)
  else:
    x = dev.alloc(4 * n)
    x.copyin(a.data)
    dev.program("vadd", dev.compiler.compile(AMD_SRC))(buf, x, x, global_size=(n // 64,), local_size=(64,), vals=(n,), wait=True)
  mr = p.pd.reg_mr(buf, RW)
  out = p.mr(4 * n)
  p.write(mr, out)                                        # the buffer as the local source
  np.testing.assert_array_equal(np.frombuffer(out.view, np.float32), a * 2)
  src = p.mr(4 * n)
  src.view[:] = (a + 7).tobytes()
  p.write(src, mr)                                        # and as the remote target
  np.testing.assert_array_equal(np.frombuffer(buf.copyout(), np.float32), a + 7)
  with pytest.raises(RuntimeError, match="registered as <MR 1024 B.*deregister that first"): buf.free()
  with pytest.raises(RuntimeError, match=f"cannot close {re.escape(dev.name)}: .* is registered as <MR"): dev.close()
  mr.dereg()
  buf.free()


def test_closing_the_context_deregisters_its_mrs_and_lets_their_buffers_go(nic):
  buf = open_device("CPU").alloc(4096, host=True)
  nic.alloc_pd().reg_mr(buf, RW)
  with pytest.raises(RuntimeError, match="registered as <MR"): buf.free()
  nic.close()
  assert nic.mrs == set()
  buf.free()


def test_a_1_gib_mr_of_4_kib_pages_registers_and_takes_writes_at_both_ends(nic):
  """262144 pages, 4 KiB each (a level-2 page table of 512 PDEs on bnxt, a 4096-block mailbox chain of MTT entries on
  mlx5), over a lazily zeroed mapping: only the pages the WRITEs and READs touch become memory."""
  p, size = Pair(nic), 1 << 30
  backing = mmap.mmap(-1, size)
  mem = nic.provider.map_dma(backing)
  iova = 1 << 44
  hw = nic.provider.reg_mr(p.pd.handle, mem.bus_addrs, 4096, iova, size, RW)
  try:
    dst = SimpleNamespace(addr=iova, rkey=hw.rkey)
    src, back = p.mr(8192, fill=True), p.mr(8192)
    for at in (0, size - 8192, size // 2 + 4000):
      p.write(src, dst, offset=at)
      assert backing[at:at + 8192] == bytes(src.view)
      p.write(back, dst, offset=at, opcode=WROpcode.RDMA_READ)
      assert bytes(back.view) == bytes(src.view)
    with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.write(src, dst, offset=size - 4096)   # past its end
  finally:
    hw.deregister()
    nic.provider.free(mem)


def test_a_1_gib_mr_over_one_bus_run_takes_1_gib_pages(nic, monkeypatch):
  """Existing memory the model maps at one bus run (as an IOMMU does): the MR names it in 1 GiB pages (every registered
  NIC takes them), one or two (where the run does not start on a 1 GiB boundary) instead of 262144 pages of 4 KiB."""
  p, size, asked = Pair(nic), 1 << 30, []
  assert nic.provider.mr_page_sizes & size
  real = nic.provider.reg_mr
  def reg_mr(pd, pages, page_size, iova, length, access):
    if length == size: asked.append((pages, page_size))
    return real(pd, pages, page_size, iova, length, access)
  monkeypatch.setattr(nic.provider, "reg_mr", reg_mr)
  backing = mmap.mmap(-1, size)
  mr = p.pd.reg_mr(backing, RW)
  ((pages, page_size),) = asked
  start = mr.mapped.bus_addrs[0]
  assert page_size == size and pages == [start - start % size + size * i for i in range(1 + bool(start % size))]
  src, back = p.mr(8192, fill=True), p.mr(8192)
  for at in (0, size - 8192, size // 2 - 100):
    p.write(src, mr, offset=at)
    assert backing[at:at + 8192] == bytes(src.view)
    p.write(back, mr, offset=at, opcode=WROpcode.RDMA_READ)
    assert bytes(back.view) == bytes(src.view)
  mr.dereg()
