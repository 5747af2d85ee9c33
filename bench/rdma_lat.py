"""RDMA WRITE latency between two processes over the emulated NICs' wire, next to the raw UDP ping-pong between two
processes on this machine (bench/rdma_udp.py). Target: at most 3 times the UDP figure.

Usage: python bench/rdma_lat.py [--nic bnxt|mlx5] [SIZE ...]   (message sizes in bytes; default 8 B to 4 MiB)
  udp/pingpong_us      see bench/rdma_udp.py
  rdma/write_lat_us    one way, as `ib_write_lat --write_with_imm` reports it: half the round trip of a WRITE with
                       immediate answered by one (bench/rdma_common.py)
  rdma/write_lat_cpu_us  the CPU time one side's process (driver and NIC model) spends per round trip: the work in
                       the latency, the rest being waits for the other process and for a CPU on a loaded machine
  udp/relay_pingpong_us  bench/rdma_udp.py: one datagram handed from a receive thread to the waiting thread through an
                       eventfd at both ends, no work at all: the hand-off every hop over the model's wire has
  rdma/driver_floor_us the Python driver's own CPU in one hop, from bench/rdma_post.py: the sender's post (SendWR, verbs
                       post_send, the driver's WQE and doorbell; `post_us`) plus the receiver's poll that returns the
                       completion (`poll_us`), the NIC model's share taken out of both. Both are serial on every hop, so
                       write_lat_us >= relay_pingpong_us + driver_floor_us whatever the NIC model costs

Measured on the idle 2-core machine (2026-12-02), 8 bytes, bnxt / mlx5, microseconds:
  udp/pingpong_us 4.5-5.2; write_lat_us 150-180 / 150-220 (CPU per round trip 240-320 / 240-370)
  relay_pingpong_us 9.2 / 10.0 (1.8-2.2x UDP); driver_floor_us 25.3 (post 14.1 + poll 11.2) / 20.7 (12.2 + 8.5): 4.6-4.9x
  UDP on their own. So the floor under write_lat_us is ~30 us, ~7x UDP, before any NIC model time; in a tight loop
  with warm caches (bench/rdma_post.py's figures without the model in between) the driver's post is 5.1 / 4.0 and its
  poll ~3, which with the hand-off is still ~17 us, ~3.9x. The 3x target is below what a Python verbs layer and driver
  can reach here: it would need them out of Python.
Where a hop's time goes now (thread time, two processes as measured here, C datapath on):
  the sender's Side.send 51 / 52: verbs + driver ~14 / ~12; the NIC model ~35: the SQ doorbell's decode (bnxt) or
    BlueFlame copy check (mlx5), the transmit flow's checks, the C call that builds and sends the frame (emu/nic/txflow.py)
    ~19 / ~18, most of it the sendto waking the peer's receive thread on an idle CPU (a sendto whose receiver's CPU is
    busy costs ~3 here, ~20 when that CPU sleeps), and the WR's bookkeeping (rc.SendWR, PSNs, ACK timer) ~5-11
  the receiver's wire thread, two batches (the WRITE, and the ACK at the sender) ~60 each with their system calls
    (select, recvmmsg, the ACK's sendto); ~18 of it Python: flow checks, giving C the receive CQ's state and wr_ids,
    syncing the transport and the CQ/NQ/EQ producers. C writes the memory, the ACK, the receive CQE and an armed CQ's
    NQ/EQ entry (the Python path instead: ~35 a frame)
  the waiting side's wait_for ~67 / ~68: the spin (SPIN_S), arming the CQ, the sleep on the MSI-X eventfd, the NQ, the
    poll and its CQ doorbell (bnxt ~5 of model time)
"""
from figures import emit
from rdma_bw import arguments
from rdma_common import write_lat
from rdma_post import driver_cpu
from rdma_udp import udp_pingpong, udp_relay_pingpong

FLOOR_MAX = 4096                   # sizes the floor is measured for (one packet: what the latency target is about)


def main() -> None:
  nic, sizes = arguments()
  for size in sizes:
    p50, p99 = udp_pingpong(size)
    emit("udp/pingpong_us", p50, "us", size=size, p99=round(p99, 1))
    lat50, lat99, cpu = write_lat(size, iters=max(20, min(200, (64 << 20) // size)), nic=nic)
    emit("rdma/write_lat_us", lat50, "us", size=size, nic=nic, p99=round(lat99, 1), vs_udp=round(lat50 / p50, 3) if p50 else None)
    emit("rdma/write_lat_cpu_us", cpu, "us", size=size, nic=nic)
    if size <= FLOOR_MAX:
      relay, _ = udp_relay_pingpong(size)
      emit("udp/relay_pingpong_us", relay, "us", size=size, vs_udp=round(relay / p50, 3) if p50 else None)
      post, poll, _ = driver_cpu(nic, size)
      floor = (post + poll) * 1e6
      emit("rdma/driver_floor_us", floor, "us", size=size, nic=nic, post_us=round(post * 1e6, 1), poll_us=round(poll * 1e6, 1),
           vs_udp=round(floor / p50, 3) if p50 else None)


if __name__ == "__main__":
  main()
