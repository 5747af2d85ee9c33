"""RDMA WRITE bandwidth between two processes over the emulated NICs' wire, next to the raw UDP throughput between two
processes on this machine (bench/rdma_udp.py): the model's physical limit here. Target: with 4 MiB messages, at least
50% of the UDP figure.

Usage: python bench/rdma_bw.py [--nic NIC] [SIZE ...]   (a registered RDMA NIC vendor, by default the first; message sizes in
bytes, default 8 B to 4 MiB)
  udp/throughput_mbps   see bench/rdma_udp.py
  rdma/write_bw_mbps    RDMA WRITE of SIZE-byte messages, one process to another (the emulated NICs of --nic)
"""
import sys
from figures import emit
from rdma_common import nic_option, write_bw
from rdma_udp import udp_throughput

SIZES = tuple(8 << (2 * i) for i in range(10)) + (4 << 20,)     # 8 B, 32 B, ... 2 MiB, 4 MiB


def arguments() -> tuple[str, list[int]]:
  """(nic, sizes) from the command line: `--nic NIC` (rdma_common.nic_option), then message sizes (default SIZES)."""
  nic, args = nic_option(sys.argv[1:])
  return nic, [int(a) for a in args] or list(SIZES)


def main() -> None:
  nic, sizes = arguments()
  for size in sizes:
    mbps, loss = udp_throughput(size)
    emit("udp/throughput_mbps", mbps, "MB/s", size=size, loss=round(loss, 4))
    rdma = write_bw(size, nic)
    emit("rdma/write_bw_mbps", rdma, "MB/s", size=size, nic=nic, vs_udp=round(rdma / mbps, 3) if mbps else None)


if __name__ == "__main__":
  main()
