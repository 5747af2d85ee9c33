"""GPU-initiated RDMA WRITE against the host-posted one, VRAM to VRAM between two emulated GPUs (MOCKPCI+AMD, :1), each
behind its own emulated NIC, in one process. Both start when the host opens a gate the GPU's compute queue waits on
(where a kernel would end):
  gpu-posted   the queue itself writes the WQE, rings the NIC's doorbell and waits for the CQE, then signals
               (Queue.rdma_write); the time until that signal
  host-posted  the queue signals, the host sees the signal, posts the WRITE (qp.post_send) and waits for its completion

Usage: python bench/rdma_gpu_post.py [--nic bnxt|mlx5] [SIZE ...]   (bytes; default 64 B and 1 MiB); one JSON line per
figure: rdma/gpu_post_us (best of ROUNDS) with host_posted_us beside it."""
import sys, time
from figures import emit, skipped
from rdma_common import nic_option
from drivers.hcq import open_device
from drivers.rdma import Access, SendWR, WROpcode, open_context

ROUNDS = 9
RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ


def main() -> None:
  nic, args = nic_option(sys.argv[1:])
  sizes = [int(a) for a in args] or [64, 1 << 20]
  try: g0, g1 = open_device("MOCKPCI+AMD"), open_device("MOCKPCI+AMD:1")
  except Exception as e:
    skipped("rdma/gpu_post", str(e))
    return
  n0, n1 = open_context(nic, "mock-0", ip="10.0.0.1"), open_context(nic, "mock-1", ip="10.0.0.2")
  (p0, c0), (p1, c1) = ((n.alloc_pd(), n.create_cq(64)) for n in (n0, n1))
  q0, q1 = p0.create_qp(c0), p1.create_qp(c1)
  q0.connect(q1.endpoint(psn=0), psn=0)
  q1.connect(q0.endpoint(psn=0), psn=0)
  for size in sizes:
    src, dst = g0.alloc(size).copyin(bytes(range(256)) * (size // 256) + bytes(size % 256)), g1.alloc(size)
    local, remote = p0.reg_mr(src, RW), p1.reg_mr(dst, RW)
    def gpu_posted() -> float:
      gate, done = g0.new_signal(0), g0.new_signal(0)
      g0.compute_queue().wait(gate, 1).rdma_write(q0, local, remote).signal(done, 1).submit()
      t0 = time.perf_counter()
      gate.value = 1
      done.wait(1)
      t = time.perf_counter() - t0
      assert c0.poll()[0].byte_len == size
      return t
    def host_posted() -> float:
      gate, done = g0.new_signal(0), g0.new_signal(0)
      g0.compute_queue().wait(gate, 1).signal(done, 1).submit()
      t0 = time.perf_counter()
      gate.value = 1
      done.wait(1)
      q0.post_send(SendWR(1, WROpcode.RDMA_WRITE, [local.sge()], remote_addr=remote.addr, rkey=remote.rkey))
      c0.wait(1)
      return time.perf_counter() - t0
    t_gpu, t_host = min(gpu_posted() for _ in range(ROUNDS)), min(host_posted() for _ in range(ROUNDS))
    assert bytes(dst.copyout()) == bytes(src.copyout())
    emit("rdma/gpu_post_us", t_gpu * 1e6, "us", nic=nic, bytes=size, host_posted_us=round(t_host * 1e6, 1))
    local.dereg(); remote.dereg()
    src.free(); dst.free()
  q0.destroy(); q1.destroy()
  n1.close(); n0.close()


if __name__ == "__main__":
  main()
