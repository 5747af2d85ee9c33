"""RDMA WRITE latency between two processes over the emulated NICs' wire, next to the raw UDP ping-pong between two
processes on this machine (bench/rdma_udp.py). Target: at most 3 times the UDP figure.

Usage: python bench/rdma_lat.py [--nic bnxt|mlx5] [SIZE ...]   (message sizes in bytes; default 8 B to 4 MiB)
  udp/pingpong_us      see bench/rdma_udp.py
  rdma/write_lat_us    one way, as `ib_write_lat --write_with_imm` reports it: half the round trip of a WRITE with
                       immediate answered by one (bench/rdma_common.py)
  rdma/write_lat_cpu_us  the CPU time one side's process (driver and NIC model) spends per round trip: the work in
                       the latency, the rest being waits for the other process and for a CPU on a loaded machine

Where one hop (an 8-byte WRITE with immediate from one side to the other) spends its CPU, thread time per call, median,
both sides in one process on the shared 2-core machine (load 13-19), C datapath on; bnxt / mlx5, microseconds:
  post (Side.send: verbs post_send and everything under it)                       42 / 41 (Python path: 63 / 63)
    verbs checks 4 / 4; driver WQE, MSN entry or doorbell record, doorbell ~22 / ~11; NIC model ~18 / ~22 (Python
    path ~41 / ~44: WQE fetch, decode and checks, rc packetisation, ICRC, port and wire, sendmsg): the doorbell's decode
    (bnxt) or BlueFlame copy check (mlx5) ~4 / ~8; the transmit flow's checks ~1; in C (emu/nic/txflow.py: WQE fetch and
    checks, MSN entry, frame, ICRC, sendto) ~6; the WR's bookkeeping (rc.SendWR, PSNs, ACK timer, wire) ~5
  receive, two batches (the WRITE at the responder, its ACK at the requester)    ~18 / ~20 each
    C checks, writes, sends the ACK or hands over the ACK's PSN ~3; flow checks ~3, and giving C the receive CQ's
    state and the receive WRs' wr_ids ~3; syncing the transport and the model's CQ/NQ/EQ producers ~1-4; the receive
    CQE and an armed CQ's NQ/EQ entry are written by C (<1), the MSI-X eventfd by the model after the sync ~1
    (the model writing them instead: 6 / 10; the Python path: ~35 a frame). The responder's batch with its CQ armed,
    thread time, both ends in one process, load 2-3: 25 / 29 when the model wrote them, 18 / 20 now.
  the waiting side: CQ.wait and its polls (sleeping on the notification when the spin runs out)   ~16 / ~11
bench/rdma_post.py measures the host side alone (the SendWR, verbs and driver of a post; the poll that returns the
receive completion), against a UDP sendto / recv in the same run: after the driver's post and poll paths were cut down
(one struct per WQE and CQE, no numpy or ctypes per entry, enum members looked up once) post ~15 / ~13 (was ~27 / ~23),
poll ~9 / ~7 (was ~13 / ~10), about 12x a sendto and 15x a recv of a waiting datagram.
So a hop costs ~95 us of CPU in Python drivers and models against the 4 us of a UDP ping-pong one way: the post path
alone is ~10x it. The 3x target needs the driver's post and poll and the rest of the model's doorbell path out of Python.
"""
from common import emit
from rdma_bw import arguments
from rdma_common import write_lat
from rdma_udp import udp_pingpong


def main() -> None:
  nic, sizes = arguments()
  for size in sizes:
    p50, p99 = udp_pingpong(size)
    emit("udp/pingpong_us", p50, "us", size=size, p99=round(p99, 1))
    lat50, lat99, cpu = write_lat(size, iters=max(20, min(200, (64 << 20) // size)), nic=nic)
    emit("rdma/write_lat_us", lat50, "us", size=size, nic=nic, p99=round(lat99, 1), vs_udp=round(lat50 / p50, 3) if p50 else None)
    emit("rdma/write_lat_cpu_us", cpu, "us", size=size, nic=nic)


if __name__ == "__main__":
  main()
