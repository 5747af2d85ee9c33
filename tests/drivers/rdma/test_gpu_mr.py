"""MRs over GPU memory (issue 16, peer to peer): on the emulated NICs (bnxt, mlx5) through PHY loopback and the emulated
Navi31 (MOCKPCI+AMD) in one PCI topology (emu/topology.py). The NIC's DMA goes to the bus address of each VRAM page
through the GPU's BAR0: no host memory in between (no staging copy, no host pages mapped for the NIC)."""
import numpy as np
import pytest

from drivers.hcq import open_device
from drivers.rdma import Access, SendWR, WCError, WCStatus, WROpcode, open_context, rdma_vendors
from emu.nic import fastpath
from emu.pci import PCI_COMMAND, PCI_COMMAND_MEMORY
from emu.topology import bar_addresses

RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ


@pytest.fixture(params=list(rdma_vendors()))
def nic(request):
  ctx = open_context(request.param, "mock-0", ip="10.0.0.1")
  ctx.set_loopback(True)
  yield ctx
  ctx.close()


@pytest.fixture
def gpu():
  dev = open_device("MOCKPCI+AMD")
  yield dev
  dev.close()


class Pair:
  """Two QPs of one NIC connected through its PHY loopback, one CQ."""
  def __init__(self, ctx):
    self.ctx, self.pd, self.cq = ctx, ctx.alloc_pd(), ctx.create_cq(64)
    self.a, self.b = self.pd.create_qp(self.cq), self.pd.create_qp(self.cq)
    self.a.connect(self.b.endpoint(200), 100)
    self.b.connect(self.a.endpoint(100), 200)

  def host_mr(self, size: int, data: bytes | None = None):
    mr = self.pd.reg_mr(self.ctx.alloc(size), RW, size)
    if data is not None: mr.view[:] = data
    return mr

  def post(self, local, remote, opcode=WROpcode.RDMA_WRITE, length=None):
    length = local.length if length is None else length
    self.a.post_send(SendWR(1, opcode, [local.sge(0, length)], remote_addr=remote.addr, rkey=remote.rkey))
    return self.cq.wait(1, timeout_s=30)


def model(dev): return dev.iface.pci.model


def test_a_vram_buffers_pages_are_its_vram_addresses_behind_bar0(gpu):
  """BAR0 maps all of VRAM (large BAR): a page's bus address is BAR0's (as its BAR register reads) + its VRAM address."""
  buf = gpu.alloc(3 * 4096)
  pages, page, first = buf.view(4096 + 8, 100).bus_pages()
  bar0 = bar_addresses(model(gpu))[0]
  assert (page, first, len(pages)) == (4096, 8, 1) and pages[0] == gpu.iface.pci.bar_address(0) + buf.opaque.handle[1] + 4096
  assert bar0 == gpu.iface.pci.bar_address(0) and bar0 % model(gpu).bar_size(0) == 0
  with pytest.raises(ValueError, match="is host memory"): gpu.alloc(4096, host=True).bus_pages()
  buf.free()


@pytest.mark.parametrize("size", [100, 3 * 4096 + 5, 1 << 20])
def test_rdma_write_into_a_vram_mr_lands_in_vram_with_no_host_copy(gpu, nic, staged, size):
  p = Pair(nic)
  held = set(nic.provider.pci.model.dma._runs)
  buf = gpu.alloc(size)
  mr = p.pd.reg_mr(buf, RW)
  pages = -(-size // 4096)
  new = sum(v.nbytes for a, v in nic.provider.pci.model.dma._runs.items() if a not in held)
  assert mr.mapped is None and new <= -(-8 * pages // 4096) * 4096 + 4096   # no host pages: its page table at most
  with pytest.raises(ValueError, match="GPU memory.*copyout"): mr.view
  data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
  src = p.host_mr(size, data)
  rx = nic.provider.pci.model.port.wire.rx
  taken = rx.taken if rx is not None else 0
  (wc,) = p.post(src, mr)
  assert (wc.status, wc.byte_len, staged) == (WCStatus.SUCCESS, size, [])
  if size == 1 << 20 and fastpath.lib() is not None: assert rx.taken > taken   # C wrote most of it, into VRAM
  assert bytes(buf.copyout()) == data
  off = buf.opaque.handle[1]
  assert bytes(model(gpu).gpu.vram.view[off:off + size]) == data              # in VRAM itself
  mr.dereg()
  buf.free()


def test_rdma_read_from_a_vram_mr_brings_the_gpus_bytes(gpu, nic, staged):
  p = Pair(nic)
  n = 10000
  buf = gpu.alloc(n)
  data = np.arange(n, dtype=np.uint8) * 7
  buf.copyin(data.tobytes())
  staged.clear()
  mr = p.pd.reg_mr(buf, RW)
  local = p.host_mr(n)
  (wc,) = p.post(local, mr, WROpcode.RDMA_READ)
  assert (wc.status, staged) == (WCStatus.SUCCESS, []) and bytes(local.view) == data.tobytes()
  mr.dereg()
  buf.free()


def test_a_vram_mr_is_the_local_source_of_a_write(gpu, nic):
  p = Pair(nic)
  buf = gpu.alloc(5000)
  buf.copyin(b"\x5a" * 5000)
  out = p.host_mr(5000)
  p.post(p.pd.reg_mr(buf, RW), out)
  assert bytes(out.view) == b"\x5a" * 5000


def test_dma_to_a_bar_that_stopped_decoding_is_a_bus_error_reported_by_the_nic(gpu, nic):
  """GPU memory decoding off (PCI_COMMAND bit 1): no BAR claims the address, the NIC's DMA is an Unsupported Request.
  The responder NAKs (the requester's completion says REM_OP_ERR) and the NIC names itself and the address; with
  decoding back on, a new QP writes into VRAM again (nothing stale stays mapped)."""
  buf = gpu.alloc(1 << 20)
  mr = (p := Pair(nic)).pd.reg_mr(buf, RW)
  data = bytes(range(256)) * 4096
  p.post(p.host_mr(1 << 20, data), mr)                 # (a first write maps the region for the C datapath)
  cmd = model(gpu).config_read(PCI_COMMAND, 2)
  model(gpu).config_write(PCI_COMMAND, 2, cmd & ~PCI_COMMAND_MEMORY)
  try:
    with pytest.raises(WCError, match="REM_OP_ERR"): p.post(p.host_mr(1 << 20, bytes(1 << 20)), mr)
  finally: model(gpu).config_write(PCI_COMMAND, 2, cmd)
  nicm, bus = nic.provider.pci.model, nic.provider.pci.bus
  assert any(f"{bus}: bus error: DMA to bus address {a:#x}" in line for line in nicm.log_lines
             for a in buf.bus_pages()[0]), nicm.log_lines[-3:]
  assert bytes(buf.copyout()) == data                  # nothing landed while it was off
  q = Pair(nic)
  mr2 = q.pd.reg_mr(buf, RW)
  q.post(q.host_mr(1 << 20, bytes(1 << 20)), mr2)
  assert bytes(buf.copyout()) == bytes(1 << 20)


def test_a_vram_mrs_bounds_and_access_flags_are_enforced(gpu, nic):
  buf = gpu.alloc(4096)
  buf.copyin(bytes(4096))
  p = Pair(nic)
  src = p.host_mr(4096, b"\xff" * 4096)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.post(src, p.pd.reg_mr(buf, RW, length=600), length=601)
  p = Pair(nic)                                        # (a QP in ERR stays there: a new pair, its own PD and MRs)
  src = p.host_mr(4096, b"\xff" * 4096)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): p.post(src, p.pd.reg_mr(buf, Access.LOCAL_WRITE | Access.REMOTE_READ))
  assert bytes(buf.copyout()) == bytes(4096)          # neither wrote anything


def test_a_gpu_interface_without_bus_addresses_is_refused_clearly(nic):
  dev = open_device("MOCKKFD+AMD")
  vram = dev.alloc(4096)
  with pytest.raises(ValueError, match=r"GPU memory \(VRAM\).*peer-to-peer DMA.*cannot give peers the bus address.*PCI\+AMD"):
    nic.alloc_pd().reg_mr(vram, RW)
  vram.free()
  dev.close()
