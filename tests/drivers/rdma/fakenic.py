"""A provider without hardware for the verbs layer's own tests: it records what the verbs layer asks of it, and the test
says which completions the 'hardware' reports."""
from drivers.rdma import Context, WCStatus
from drivers.rdma.provider import Completion
from drivers.system.dma import DMAMemory, dma_bytes, host_pages


class FakeCQ:
  def __init__(self, depth: int):
    self.depth, self.records = depth, []

  def poll(self, max_entries: int) -> list[Completion]:
    out, self.records = self.records[:max_entries], self.records[max_entries:]
    return out

  def destroy(self) -> None: pass


class FakeQP:
  def __init__(self, nic: "FakeNIC", qp_num: int, send_cq: FakeCQ, recv_cq: FakeCQ):
    self.nic, self.qp_num, self.send_cq, self.recv_cq = nic, qp_num, send_cq, recv_cq
    self.modifies, self.sent, self.received = [], [], []

  def modify(self, cur, new, attr, mask) -> None: self.modifies.append((cur, new, mask))
  def post_send(self, wrs) -> None: self.sent.append(wrs)
  def post_recv(self, wrs) -> None: self.received.append(wrs)
  def destroy(self) -> None: pass

  def complete(self, seq: int, status=0, recv: bool = False, vendor_err: int = 0, **kw) -> None:
    """The hardware reports request #seq of the send (or receive) queue."""
    (self.recv_cq if recv else self.send_cq).records.append(
      Completion(self.qp_num, recv, seq, WCStatus(status), vendor_err, "FAKE_STATUS" if vendor_err else "", **kw))


class FakeMR:
  def __init__(self, key: int): self.lkey = self.rkey = key
  def deregister(self) -> None: pass


class FakeNIC:
  name, mac, max_mtu, max_rd_atomic, max_sge, max_qp_wr, max_cqe = "fake mock-0", bytes.fromhex("02aabbccddee"), 4096, 16, 6, 1024, 4096
  mr_page_sizes = 1 << 12 | 1 << 16 | 1 << 21                 # 4 KiB, 64 KiB, 2 MiB

  def __init__(self):
    self.qps, self.mrs, self.gids, self.mapped = [], [], [], []

  def alloc(self, size: int) -> DMAMemory:
    pages = -(-size // 4096)
    return DMAMemory(memoryview(bytearray(pages * 4096)), [0x10000 + 0x2000 * i for i in range(pages)])

  def map_dma(self, memory) -> DMAMemory:
    view = dma_bytes(memory)
    _, size, first = host_pages(view)
    self.mapped.append(view)
    return DMAMemory(view, [0x80000 + 0x2000 * i for i in range(size // 4096)], 4096, lambda: self.mapped.remove(view), first)

  def free(self, mem: DMAMemory) -> None: mem.free()

  def add_gid(self, gid: bytes) -> int:
    self.gids.append(gid)
    return len(self.gids) - 1

  def alloc_pd(self) -> int: return 1

  def reg_mr(self, pd, pages, page_size, iova, length, access):
    self.mrs.append((pages, page_size, iova, length, access))
    return FakeMR(0x100 + len(self.mrs))

  def create_cq(self, depth: int) -> FakeCQ: return FakeCQ(depth)

  def create_qp(self, pd, send_cq, recv_cq, cap) -> FakeQP:
    self.qps.append(qp := FakeQP(self, 0x40 + len(self.qps), send_cq, recv_cq))
    return qp

  def set_loopback(self, on: bool) -> None: self.loopback = on
  def close(self) -> None: pass


def fake_context(ip_gid: bytes = bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1])) -> Context:
  ctx = Context(FakeNIC())
  ctx.add_gid(ip_gid)
  return ctx
