"""compute.distributed all_reduce bus bandwidth on 2 and 3 ranks (mpirun on this host, emulated GPUs MOCKPCI+AMD and
emulated NICs), next to the raw UDP throughput between two processes measured in the same run (bench/rdma_udp.py):
the NIC models' physical limit here.

Usage: python bench/allreduce.py [--nic NIC] [SIZE ...]   (a registered RDMA NIC vendor, by default the first; bytes of float32
per rank, default 4 KiB, 256 KiB, 4 MiB)
  udp/throughput_mbps        see bench/rdma_udp.py (4 MiB messages)
  allreduce/busbw_mbps       nccl-tests' bus bandwidth: algbw x 2(n-1)/n, algbw = SIZE / the time of one all_reduce
                             (the mean over the timed iterations, after one untimed; `algbw` is printed beside it)
Run as `python bench/allreduce.py rank SIZE ...` it is one rank (started by mpirun), printing its times.
"""
import json, os, sys, time
from pathlib import Path
from figures import emit, skipped
from rdma_common import nic_option
from rdma_udp import udp_throughput

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SIZES = (4 << 10, 256 << 10, 4 << 20)
BYTES_PER_SIZE = 64 << 20          # timed iterations move about this much per size (at least 3, at most 200)


def rank(sizes: list[int]) -> None:
  import numpy as np
  from compute import Tensor
  from compute import distributed as dist
  dist.init()
  for size in sizes:
    t = Tensor(np.ones(size // 4, np.float32), device=dist.device())
    dist.all_reduce(t)                                    # kernels built, buffers grown: not timed
    iters = max(3, min(200, BYTES_PER_SIZE // size))
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters): dist.all_reduce(t)
    seconds = (time.perf_counter() - t0) / iters
    if dist.rank() == 0: print(json.dumps({"size": size, "seconds": seconds, "iters": iters}), flush=True)
  dist.destroy_process_group()


def main(nic: str, sizes: list[int]) -> None:
  from compute.distributed.launch import local_mpirun, run
  mbps, loss = udp_throughput(4 << 20)
  emit("udp/throughput_mbps", mbps, "MB/s", size=4 << 20, loss=round(loss, 4))
  for n in (2, 3):
    r = run(local_mpirun(n, [sys.executable, __file__, "rank", *map(str, sizes)]), timeout=600, cwd=ROOT,
            env={**os.environ, "HCQ_NIC": nic})
    got = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode or len(got) != len(sizes):
      skipped("allreduce/busbw_mbps", f"mpirun -np {n} failed: {(r.stderr or r.stdout).strip()[-400:]}", ranks=n, nic=nic)
      continue
    for g in got:
      algbw = g["size"] / g["seconds"] / 1e6
      emit("allreduce/busbw_mbps", algbw * 2 * (n - 1) / n, "MB/s", ranks=n, nic=nic, size=g["size"], algbw=round(algbw, 3),
           iters=g["iters"])


if __name__ == "__main__":
  args = sys.argv[1:]
  if args[:1] == ["rank"]: rank([int(a) for a in args[1:]])
  else:
    nic, args = nic_option(args)
    main(nic, [int(a) for a in args] or list(SIZES))
