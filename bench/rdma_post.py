"""Host CPU of one hop's driver work: posting an 8-byte RDMA WRITE with immediate and polling the completion it gives,
between two emulated NICs in one process, next to a Python UDP sendto and recv of a datagram of the same size measured
in the same run (what the same work costs over a plain socket).

Usage: python bench/rdma_post.py [--nic bnxt|mlx5] [SIZE ...]   (message sizes in bytes; default 8)
  udp/sendto_cpu_us   thread CPU time of one socket.sendto of SIZE bytes on loopback, median
  rdma/post_cpu_us    thread CPU time of one post as bench/rdma_common.py's Side.send makes it (the SendWR, verbs
                      post_send and everything under it, one in SIGNAL_EVERY signaled), median; `model_us`: the part
                      spent in the NIC model's doorbell callback (it runs inside the doorbell store: WQE fetch and decode,
                      packetisation, the wire's sendmsg), `driver_us` the rest (verbs + driver); vs_udp: driver_us / sendto
  udp/recv_cpu_us     one socket.recv_into of a datagram already waiting, median
  rdma/poll_cpu_us    the CQ.poll(1) call that returns the WRITE's receive completion at the peer (the completion the
                      latency bench's waiting side polls), median; model_us / driver_us as above (bnxt's CQ doorbell is a
                      model callback, mlx5's consumer index goes to memory); vs_udp: driver_us / recv
The model's share is timed by wrapping its doorbell region's callbacks; the wrapper's own cost, measured on an empty
callback in the same run, is taken out of both shares.
"""
import socket, statistics, sys, time
from figures import emit
from rdma_common import RECVS, SIGNAL_EVERY, Side, nic_option

ITERS = 2000
# the model's region behind each vendor's doorbell (drivers/system/mmio.py CallbackMMIO.region)
DOORBELL_REGION = {"bnxt": lambda provider: provider.db.bar2.region, "mlx5": lambda provider: provider.uar_bar.bar.region}


class ModelTimer:
  """Thread CPU time spent inside a model region's callbacks (write, write_many), outermost calls only."""
  def __init__(self, region):
    self.spent, self.calls, self.depth = 0.0, 0, 0
    for name in ("write", "write_many"):
      if (real := getattr(region, name, None)) is not None: setattr(region, name, self.timed(real))

  def timed(self, real):
    def call(*args):
      if self.depth: return real(*args)
      self.depth += 1
      t0 = time.thread_time()
      try: return real(*args)
      finally:
        self.spent += time.thread_time() - t0
        self.calls += 1
        self.depth -= 1
    return call

  def cost(self) -> tuple[float, float]:
    """(the wrapper's cost per call in all, the part of it inside the timed window), seconds, on an empty callback."""
    outer, inner = [], []
    noop = self.timed(lambda *args: None)
    for _ in range(2000):
      s = self.spent
      t0 = time.thread_time()
      noop()
      outer.append(time.thread_time() - t0)
      inner.append(self.spent - s)
    t0 = time.thread_time()
    for _ in range(2000): pass
    loop = (time.thread_time() - t0) / 2000
    return statistics.median(outer) - loop, statistics.median(inner)


def udp(size: int) -> tuple[float, float]:
  """(sendto, recv_into) thread CPU seconds per call, medians, for `size`-byte datagrams on loopback."""
  rx, tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
  rx.bind(("127.0.0.1", 0))
  dst, data, buf, sends, recvs = rx.getsockname(), bytes(size), bytearray(size + 64), [], []
  for _ in range(ITERS):
    t0 = time.thread_time()
    tx.sendto(data, dst)
    t1 = time.thread_time()
    rx.recv_into(buf)
    recvs.append(time.thread_time() - t1)
    sends.append(t1 - t0)
  rx.close()
  tx.close()
  return statistics.median(sends), statistics.median(recvs)


def rdma(nic: str, size: int) -> dict[str, float]:
  """Medians, seconds: post (total, model) and poll (total, model) per WRITE with immediate."""
  a, b = Side(nic, "mock-0", "10.0.0.1", size), Side(nic, "mock-1", "10.0.0.2", size)
  try:
    a.connect(b.hello())
    b.connect(a.hello())
    timer = ModelTimer(DOORBELL_REGION[nic](a.ctx.provider))
    peer = ModelTimer(DOORBELL_REGION[nic](b.ctx.provider))
    post, post_model, post_calls, poll, poll_model, poll_calls = [], [], [], [], [], []
    mark = 1
    for _ in range(ITERS):
      s, c = timer.spent, timer.calls
      t0 = time.thread_time()
      a.send(mark)
      post.append(time.thread_time() - t0)
      post_model.append(timer.spent - s)
      post_calls.append(timer.calls - c)
      while True:                                # the peer's poll that returns the receive completion
        s, c = peer.spent, peer.calls
        t0 = time.thread_time()
        got = b.cq.poll(1)
        t = time.thread_time() - t0
        if got: break
        time.sleep(0)                            # (the NICs' threads take the interpreter meanwhile)
      poll.append(t)
      poll_model.append(peer.spent - s)
      poll_calls.append(peer.calls - c)
      if got[0].imm_data != mark: raise RuntimeError(f"WRITE {mark} completed with immediate {got[0].imm_data}")
      b.used += 1
      if b.used == RECVS // 2:                   # one doorbell for half the receive queue, as Side.wait_for
        b.qp.post_recv([b.recv] * b.used)
        b.used = 0
      if a.sent % SIGNAL_EVERY == 0: a.cq.wait(1)   # the sender's own completion (one in SIGNAL_EVERY asks for one)
      mark = mark % 255 + 1
    whole, inside = timer.cost()
    med = statistics.median
    return {"post": med(post), "post_model": med(m - n * inside for m, n in zip(post_model, post_calls)),
            "post_wrap": med(post_calls) * whole, "poll": med(poll),
            "poll_model": med(m - n * inside for m, n in zip(poll_model, poll_calls)), "poll_wrap": med(poll_calls) * whole}
  finally:
    a.ctx.close()
    b.ctx.close()


def driver_cpu(nic: str, size: int) -> tuple[float, float, dict[str, float]]:
  """(the driver's part of a post, of the poll that returns the peer's completion, rdma()'s figures), seconds."""
  r = rdma(nic, size)
  return r["post"] - r["post_model"] - r["post_wrap"], r["poll"] - r["poll_model"] - r["poll_wrap"], r


def main() -> None:
  nic, args = nic_option(sys.argv[1:])
  if nic not in DOORBELL_REGION: sys.exit(f"--nic {nic}: this benchmark knows the doorbell of {' and '.join(DOORBELL_REGION)} only")
  for size in [int(a) for a in args] or [8]:
    sendto, recv = udp(size)
    post, poll, r = driver_cpu(nic, size)
    us = lambda s: round(s * 1e6, 2)
    emit("udp/sendto_cpu_us", sendto * 1e6, "us", size=size)
    emit("rdma/post_cpu_us", (r["post"] - r["post_wrap"]) * 1e6, "us", size=size, nic=nic, driver_us=us(post),
         model_us=us(r["post_model"]), vs_udp=round(post / sendto, 2))
    emit("udp/recv_cpu_us", recv * 1e6, "us", size=size)
    emit("rdma/poll_cpu_us", (r["poll"] - r["poll_wrap"]) * 1e6, "us", size=size, nic=nic, driver_us=us(poll),
         model_us=us(r["poll_model"]), vs_udp=round(poll / recv, 2))


if __name__ == "__main__":
  main()
