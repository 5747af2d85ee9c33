"""GPU-initiated RDMA (issue 16): an emulated Navi31's compute queue posts an RDMA WRITE itself (Queue.rdma_write). Its
PM4 writes the WQE into the NIC's send queue (host memory the GPU maps), rings the SQ doorbell with one 64-bit store into
the NIC's BAR2 (a peer write to a register BAR: emu/topology.py), and waits with WAIT_REG_MEM for the CQE's toggle bit.
Two GPUs (MOCKPCI+AMD, :1) and two NIC models on the UDP wire: VRAM to VRAM, no host copy."""
import numpy as np
import pytest

from drivers.hcq import open_device
from drivers.rdma import Access, RecvWR, SendWR, VerbsError, WCError, WCStatus, WROpcode, open_context, rdma_vendors
from tests.drivers.amd.kernels import SRC as AMD_SRC
from tests.emu.nic.bnxt_cmds import wait

RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ
NICS = list(rdma_vendors())


@pytest.fixture(scope="module")
def gpus():
  a, b = open_device("MOCKPCI+AMD"), open_device("MOCKPCI+AMD:1")
  yield a, b
  b.close()
  a.close()


class Link:
  """NIC 0 (10.0.0.1) and NIC 1 (10.0.0.2) of one vendor, an RC QP on each connected to the other, a CQ each."""
  def __init__(self, vendor: str):
    self.na, self.nb = open_context(vendor, "mock-0", ip="10.0.0.1"), open_context(vendor, "mock-1", ip="10.0.0.2")
    self.pa, self.pb = self.na.alloc_pd(), self.nb.alloc_pd()
    self.ca, self.cb = self.na.create_cq(64), self.nb.create_cq(64)
    self.qa, self.qb = self.pa.create_qp(self.ca), self.pb.create_qp(self.cb)
    self.qa.connect(self.qb.endpoint(200), 100)
    self.qb.connect(self.qa.endpoint(100), 200)
    self.mrs = []

  def reg(self, pd, mem, access=RW, length=None):
    self.mrs.append(mr := pd.reg_mr(mem, access, length))
    return mr

  def close(self):
    for mr in self.mrs:
      if not mr.pd.ctx.closed: mr.dereg()
    for q in (self.qa, self.qb):
      if not q.ctx.closed: q.destroy()
    self.na.close()
    self.nb.close()


@pytest.fixture(params=NICS)
def link(request):
  link = Link(request.param)
  yield link
  link.close()


def rand(n, seed): return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


def vram(dev, buf, n):
  """`n` bytes of `buf` as they lie in the emulated GPU's VRAM itself."""
  off = buf.opaque.handle[1]
  return bytes(dev.iface.pci.model.gpu.vram.view[off:off + n])


def test_a_kernels_output_goes_to_the_peer_gpu_once_the_kernel_ends_posted_by_the_gpu_itself(gpus, link, staged):
  """One compute queue: wait for a host-held gate, run vadd into a registered VRAM buffer, RDMA WRITE it into the other
  GPU's VRAM through the two NICs, signal. Until the gate opens nothing is sent (no completion, the peer's VRAM as it
  was); after, the peer holds exactly the kernel's output (numpy's a + b), and no byte went through host memory."""
  a, b = gpus
  n = 50000
  x, y = rand(n, 1), rand(n, 2)
  prg = a.program("vadd", a.compiler.compile(AMD_SRC))
  ba, bb = a.alloc(4 * n).copyin(x.data), a.alloc(4 * n).copyin(y.data)
  out, dest = a.alloc(4 * n), b.alloc(4 * n)
  out.copyin(bytes(4 * n)); dest.copyin(b"\xee" * 4 * n)
  link.reg(link.pa, out)
  remote = link.reg(link.pb, dest)
  args = prg.fill_kernargs([out, ba, bb], [n], (-(-n // 64),), (64,))
  staged.clear()
  gate, done = a.new_signal(0), a.new_signal(0)
  q = a.compute_queue().wait(gate, 1).exec(prg, args, (-(-n // 64),), (64,)).rdma_write(link.qa, out, remote).signal(done, 1)
  q.submit()
  assert link.ca.poll() == [] and vram(b, dest, 4 * n) == b"\xee" * 4 * n and done.value == 0   # held at the gate
  gate.value = 1
  done.wait(1)
  (wc,) = link.ca.poll()                                # there already: the queue waited for it before its signal
  assert (wc.status, wc.opcode.name, wc.byte_len) == (WCStatus.SUCCESS, "RDMA_WRITE", 4 * n)
  np.testing.assert_array_equal(np.frombuffer(vram(b, dest, 4 * n), np.float32), x + y)
  assert staged == []                                   # VRAM to VRAM: no staging copy on either GPU
  np.testing.assert_array_equal(np.frombuffer(dest.copyout(), np.float32), x + y)
  for buf in (ba, bb): buf.free()


def test_gpu_posted_writes_follow_each_other_and_the_host_posts_again_once_they_completed(gpus, link):
  """Three WRITEs posted by one queue take consecutive SQ slots and CQ entries; host posts are refused while they are
  outstanding (the GPU rings the doorbell for its slot only when its queue gets there) and work after they completed."""
  a, b = gpus
  src, dest = a.alloc(3 * 4096), b.alloc(3 * 4096)
  src.copyin(bytes(range(256)) * 48)
  local, remote = link.reg(link.pa, src), link.reg(link.pb, dest)
  q = a.compute_queue()
  for i in range(3): q.rdma_write(link.qa, src, remote, 4096, local_offset=4096 * i, remote_offset=4096 * (2 - i), wr_id=10 + i)
  with pytest.raises(VerbsError, match=r"3 request\(s\) a device's queue posts .* are outstanding"):
    link.qa.post_send(SendWR(9, WROpcode.RDMA_WRITE, [local.sge(0, 8)], remote_addr=remote.addr, rkey=remote.rkey))
  a.timeline.wait(a.ordered_submit(q))
  assert [(wc.wr_id, wc.status) for wc in link.ca.poll()] == [(10 + i, WCStatus.SUCCESS) for i in range(3)]
  got, want = dest.copyout(), src.copyout()
  assert [bytes(got[4096 * (2 - i):][:4096]) == bytes(want[4096 * i:][:4096]) for i in range(3)] == [True] * 3
  link.qa.post_send(SendWR(9, WROpcode.RDMA_WRITE, [local.sge(0, 8)], remote_addr=remote.addr, rkey=remote.rkey))
  assert link.ca.wait(1)[0].wr_id == 9


def test_bad_requests_are_refused_before_anything_is_taken(gpus, link):
  """Wrong PD, out of bounds, an unregistered buffer, a CQ shared with outstanding receives: clear errors, and the QP
  is as it was (a host post afterwards works)."""
  a, b = gpus
  src, dest = a.alloc(4096), b.alloc(4096)
  other_pd = link.na.alloc_pd()
  local, remote = link.reg(link.pa, src), link.reg(link.pb, dest)
  q = a.compute_queue()
  with pytest.raises(VerbsError, match="registered on another protection domain than the QP's"):
    q.rdma_write(link.qa, link.reg(other_pd, a.alloc(64)), remote)
  with pytest.raises(ValueError, match=r"4097 bytes at offset 0 is outside the local 4096-byte MR"): q.rdma_write(link.qa, src, remote, 4097)
  with pytest.raises(ValueError, match=r"100 bytes at offset 4000 is outside the remote 4096-byte MR"):
    q.rdma_write(link.qa, src, remote, 100, remote_offset=4000)
  with pytest.raises(ValueError, match="is not registered: register it on the QP's PD"): q.rdma_write(link.qa, a.alloc(64), remote)
  link.qa.post_recv(RecvWR(5, [local.sge(0, 64)]))
  with pytest.raises(VerbsError, match=r"the CQ has 1 completion\(s\) outstanding for other queues"): q.rdma_write(link.qa, src, remote)
  assert (len(link.qa.sq), link.ca.expected, link.qa.device_posted) == (0, 1, set())
  link.qa.post_send(SendWR(7, WROpcode.RDMA_WRITE, [local.sge(0, 8)], remote_addr=remote.addr, rkey=remote.rkey))
  assert link.ca.wait(1)[0].wr_id == 7


def test_a_queue_that_posts_is_not_sealed_for_replay_and_still_submits(gpus, link):
  """A replay would post the same WQE into the same send-queue slot again: seal refuses, and the queue, submitted
  instead, posts its request."""
  a, b = gpus
  src, dest = a.alloc(4096).copyin(b"\x3c" * 4096), b.alloc(4096)
  link.reg(link.pa, src)
  remote = link.reg(link.pb, dest)
  q = a.compute_queue().rdma_write(link.qa, src, remote)
  with pytest.raises(ValueError, match="with rdma_write commands cannot be sealed for replay"): q.seal()
  a.timeline.wait(a.ordered_submit(q))
  assert link.ca.poll()[0].status == WCStatus.SUCCESS and bytes(dest.copyout()) == b"\x3c" * 4096
  held = [buf for maps in link.qa.device_maps.values() for buf in maps.values()]
  # the SQ, the CQ (host memory; on mlx5 the doorbell records' page too) and the doorbell page, kept for the next request
  assert len(held) == {"bnxt": 3, "mlx5": 4}[link.na.provider.name.split()[0]] and not any(b.freed for b in held)
  link.na.close()                                           # closing the NIC unmaps them from the GPU first
  assert all(b.freed for b in held) and link.qa.device_maps == {}


def test_a_write_the_peer_refuses_completes_in_error_and_the_gpu_queue_goes_on(gpus, link):
  """A remote key the peer does not know: the NIC's completion says REMOTE_ACCESS; the GPU's wait sees the completion
  arrive (error or not) and the queue's signal follows, and the host's poll raises the error."""
  a, b = gpus
  src, dest = a.alloc(4096), b.alloc(4096)
  dest.copyin(bytes(4096))
  link.reg(link.pa, src)
  remote = link.reg(link.pb, dest, Access.LOCAL_WRITE | Access.REMOTE_READ)   # no REMOTE_WRITE
  done = a.new_signal(0)
  a.compute_queue().rdma_write(link.qa, src, remote).signal(done, 1).submit()
  done.wait(1)
  with pytest.raises(WCError, match="REM_ACCESS_ERR"): link.ca.poll()   # (there already)
  assert bytes(dest.copyout()) == bytes(4096)


@pytest.mark.parametrize("name", ["MOCKKFD+AMD", "CPU"])
def test_devices_that_cannot_post_rdma_say_so_and_the_host_posts_instead(link, name):
  """KFD cannot map the NIC's doorbell page (no bus addresses through the kernel driver), the CPU device's queue posts
  nothing itself: both say to post from the host, and leave the QP as it was."""
  dev = open_device(name)
  local, remote = link.reg(link.pa, link.na.alloc(4096)), link.reg(link.pb, link.nb.alloc(4096))
  with pytest.raises(NotImplementedError, match="cannot post RDMA requests itself.*post from the host \\(qp.post_send\\)"):
    dev.compute_queue().rdma_write(link.qa, local, remote)
  assert (len(link.qa.sq), link.ca.expected, link.qa.device_posted, link.qa.device_maps) == (0, 0, set(), {})
  link.qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, [local.sge()], remote_addr=remote.addr, rkey=remote.rkey))
  assert link.ca.wait(1)[0].status == WCStatus.SUCCESS


def test_the_nics_doorbell_takes_a_gpu_store_only_as_it_takes_a_cpu_store(link):
  """A PM4 WRITE_DATA of one dword to the doorbell page the GPU mapped for posting: the NICs' doorbells take aligned
  64-bit stores, so the NIC model refuses the 32-bit store as it refuses the CPU's; the GPU's queue stops with a fault
  of that write (the host's wait raises at once), the NIC's words in the GPU model's log."""
  from autogen.amd import nvd
  dev = open_device("MOCKPCI+AMD:2")                       # (its queue ends up stopped: a GPU of its own)
  src = dev.alloc(4096)
  local, remote = link.pa.reg_mr(src, RW), link.reg(link.pb, link.nb.alloc(4096))
  try:
    dev.timeline.wait(dev.ordered_submit(dev.compute_queue().rdma_write(link.qa, local, remote)))
    assert link.ca.poll()[0].status == WCStatus.SUCCESS
    (db,) = [buf for key, buf in link.qa.device_maps[dev].items() if key[0] == "bus"]
    at = link.na.provider.db.offset % 4096 if link.na.provider.name.startswith("bnxt") else 0x800
    q = dev.compute_queue()
    q.pkt3(nvd.PACKET3_WRITE_DATA, 5 << 8 | nvd.WR_CONFIRM, db.va + at, (db.va + at) >> 32, 0x1234)
    with pytest.raises(RuntimeError, match=f"^MOCKPCI\\+AMD:2: GPU page fault at {(db.va + at) & ~0xFFF:#x} \\(write"):
      dev.timeline.wait(dev.ordered_submit(q))
    refusal = ("BAR2 write of 4 bytes", "doorbells take aligned 64-bit writes") if link.na.provider.name.startswith("bnxt") \
      else ("0x800/0x900 send: 64-bit",)
    # the engine logs why it stopped once the fault it raised (which the host's wait saw first) has left it
    log = dev.iface.pci.model.log_lines
    wait(lambda: any("refused the write" in line and all(r in line for r in refusal) for line in log),
         f"the NIC's refusal in the GPU model's log (last lines: {log[-2:]})", 60)
  finally:
    local.dereg()
    dev.close()
