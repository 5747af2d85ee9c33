"""compute.distributed all_reduce bus bandwidth on 2 and 3 ranks (mpirun on this host, emulated NICs), with CPU ranks
(DEV=CPU) and emulated-GPU ranks (MOCKPCI+AMD), next to raw UDP throughput between the same rank processes, measured
in the same job just before (the NIC models' physical limit here: their wire is one UDP datagram per frame).

Usage: python bench/allreduce.py [--nic NIC] [--dev DEV[,DEV...]] [SIZE ...]
  --nic      a registered RDMA NIC vendor, by default the first
  --dev      the ranks' devices, one job per device and rank count (default CPU,MOCKPCI+AMD; MOCKPCI+AMD ranks run the
             sizes up to GPU_MAX only: its reductions run on the emulated GPU's ISA emulator)
  SIZE       bytes of float32 per rank (default 4 KiB, 16 KiB, ... 64 MiB: powers of 4)
  udp/throughput_mbps        rank 0 sends 4 MiB messages cut into the model's datagrams (bench/rdma_udp.py's framing) to
                             rank 1, which counts the payload that arrives per second (best of ROUNDS)
  allreduce/busbw_mbps       nccl-tests' bus bandwidth: algbw x 2(n-1)/n, algbw = SIZE / the time of one all_reduce (the
                             mean over a batch of iterations, after one untimed; the best of ROUNDS batches, the least
                             disturbed by other load); `vs_udp`: busbw / the same job's UDP throughput
Run as `python bench/allreduce.py rank SIZE ...` it is one rank (started by mpirun), printing its figures.
"""
import json, os, shutil, socket, sys, tempfile, time
from pathlib import Path
from figures import emit, skipped
from rdma_common import nic_option
from rdma_udp import BUF, HEADERS, _datagrams

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SIZES = tuple(4 << (10 + 2 * i) for i in range(8))        # 4 KiB, 16 KiB, ... 64 MiB
GPU_MAX = 4 << 20
BYTES_PER_BATCH = 32 << 20         # a timed batch moves about this much (at least 2 iterations, at most 100)
ROUNDS = 3
UDP_BYTES = 64 << 20               # the UDP figure sends this much per round
STALL_S = 10.0


def udp_between_ranks(comm, size: int = 4 << 20) -> float:
  """MB/s of payload rank 0 gets across to rank 1 in `size`-byte messages of model-sized datagrams (rank 0 returns it,
  the others 0)."""
  me = comm.Get_rank()
  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
  for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF): s.setsockopt(socket.SOL_SOCKET, opt, BUF)
  s.bind(("127.0.0.1", 0))
  port = comm.bcast(s.getsockname()[1] if me == 1 else None, root=1)
  best = 0.0
  try:
    for _ in range(ROUNDS):
      comm.Barrier()          # rank 0 sent its last end marker before this: rank 1 drops those left over, then both go
      if me == 1:
        s.setblocking(False)
        try:
          while True: s.recv(65536)
        except BlockingIOError: pass
      comm.Barrier()
      if me == 1:
        buf, got, count, first, last = bytearray(65536), 0, 0, None, None
        s.settimeout(STALL_S)
        while (k := s.recv_into(buf)) != 1:            # the end marker is 1 byte; every datagram has the headers
          last = time.perf_counter()
          first, got, count = first or last, got + k - HEADERS, count + 1
        comm.send(got / (last - first) / 1e6 if count > 1 else 0.0, dest=0)
      elif me == 0:
        msg = _datagrams(size)
        for _ in range(max(2, UDP_BYTES // size)):
          for d in msg: s.sendto(d, ("127.0.0.1", port))
        req = comm.irecv(source=1)
        while not (done := req.test())[0]:
          s.sendto(b"E", ("127.0.0.1", port))           # repeated: a marker can be lost to a full buffer like any datagram
          time.sleep(0.01)
        best = max(best, done[1])
  finally: s.close()
  return best


def rank(sizes: list[int]) -> None:
  import numpy as np
  from compute import Tensor
  from compute import distributed as dist
  from mpi4py import MPI
  dist.init()
  udp = udp_between_ranks(MPI.COMM_WORLD)
  n = dist.world_size()
  if dist.rank() == 0: print(json.dumps({"udp": udp}), flush=True)
  for size in sizes:
    t = Tensor(np.ones(size // 4, np.float32), device=dist.device())
    dist.all_reduce(t)                                    # kernels built, buffers grown: not timed
    iters, best = max(2, min(100, BYTES_PER_BATCH // size)), float("inf")
    for _ in range(ROUNDS):
      dist.barrier()
      t0 = time.perf_counter()
      for _ in range(iters): dist.all_reduce(t)
      best = min(best, (time.perf_counter() - t0) / iters)
    if dist.rank() == 0: print(json.dumps({"size": size, "seconds": best, "iters": iters, "ranks": n}), flush=True)
  dist.destroy_process_group()


def main(nic: str, devs: list[str], sizes: list[int]) -> None:
  from compute.distributed.launch import local_mpirun, run
  for dev in devs:
    job = [s for s in sizes if dev == "CPU" or s <= GPU_MAX]
    for n in (2, 3):
      tmp = tempfile.mkdtemp(prefix="hcq-bench-", dir="/tmp")   # the wire's GID table and the devices' locks: this job's own
      try: r = run(local_mpirun(n, [sys.executable, __file__, "rank", *map(str, job)]), timeout=1800, cwd=ROOT,
                   env={**os.environ, "HCQ_NIC": nic, "DEV": dev, "TMPDIR": tmp})
      finally: shutil.rmtree(tmp, ignore_errors=True)
      got = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
      if r.returncode or len(got) != len(job) + 1:
        skipped("allreduce/busbw_mbps", f"mpirun -np {n} failed: {(r.stderr or r.stdout).strip()[-400:]}", ranks=n, nic=nic, dev=dev)
        continue
      udp = got[0]["udp"]
      emit("udp/throughput_mbps", udp, "MB/s", ranks=n, dev=dev, size=4 << 20)
      for g in got[1:]:
        algbw = g["size"] / g["seconds"] / 1e6
        busbw = algbw * 2 * (n - 1) / n
        emit("allreduce/busbw_mbps", busbw, "MB/s", ranks=n, nic=nic, dev=dev, size=g["size"], algbw=round(algbw, 3),
             iters=g["iters"], vs_udp=round(busbw / udp, 3) if udp else None)


if __name__ == "__main__":
  args = sys.argv[1:]
  if args[:1] == ["rank"]: rank([int(a) for a in args[1:]])
  else:
    nic, args = nic_option(args)
    devs = ["CPU", "MOCKPCI+AMD"]
    if args[:1] == ["--dev"]: devs, args = args[1].split(","), args[2:]
    main(nic, devs, [int(a) for a in args] or list(SIZES))
