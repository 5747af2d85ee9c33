"""An MR's translation in the largest pages its memory allows (ib_umem_find_best_pgsz): bus-contiguous runs aligned to a
page size the NIC takes become one page each, the fewest pages in the smallest such size; the MR's address keeps byte 0's
offset into its first page. On a provider without hardware (4 KiB, 64 KiB and 2 MiB pages): what it is asked to map."""
import numpy as np
import pytest

from drivers.rdma import Access
from drivers.system.dma import DMAMemory
from tests.drivers.rdma.fakenic import fake_context

K4, K64, M2 = 4096, 65536, 2 << 20


def register(bus: list[int], length: int | None = None):
  """reg_mr of host memory whose 4 KiB pages sit at `bus`: (pages, page size, MR address, length) the provider got."""
  ctx = fake_context()
  mem = DMAMemory(memoryview(bytearray(K4 * len(bus))), bus)
  mr = ctx.alloc_pd().reg_mr(mem, Access.LOCAL_WRITE, length)
  pages, size, iova, n, _ = ctx.provider.mrs[-1]
  assert (iova, n) == (mr.addr, mr.length)
  return pages, size, iova


def run(start: int, n: int) -> list[int]: return [start + K4 * i for i in range(n)]


@pytest.mark.parametrize("bus,pages,size", [
  (run(0x4000_0000, 1024), [0x4000_0000, 0x4020_0000], M2),                 # 4 MiB on a 2 MiB boundary: two 2 MiB pages
  (run(0x4000_1000, 600), [0x4000_0000, 0x4020_0000], M2),                  # off the boundary: the first page reaches before it
  (run(0x4000_0000, 16) + run(0x9000_0000, 24), [0x4000_0000, 0x9000_0000, 0x9001_0000], K64),   # two runs on 64 KiB boundaries
  (run(0x4000_0000, 5) + run(0x9000_0000, 35), run(0x4000_0000, 5) + run(0x9000_0000, 35), K4),  # a run ends mid-64 KiB
  ([0x4000_0000 + 2 * K4 * i for i in range(3)], [0x4000_0000 + 2 * K4 * i for i in range(3)], K4),   # no two pages adjacent
  (run(0x4000_0000, 3), [0x4000_0000], K64),                                # 12 KiB: one 64 KiB page, not a 2 MiB one
])
def test_an_mr_takes_the_fewest_pages_the_memory_allows(bus, pages, size):
  got, got_size, iova = register(bus)
  assert (got, got_size) == (pages, size)
  assert iova % size == bus[0] % size                       # byte 0 lies as far into its page in both address spaces


def test_only_the_pages_that_hold_the_mr_count():
  """The MR is the first 21 of 48 pages: the run that breaks at page 30, mid-64 KiB, is not in it (all 48 pages of the
  memory are 4 KiB pages)."""
  bus = run(0x4000_0000, 30) + run(0x9000_0000, 18)
  got, size, iova = register(bus, length=20 * K4 + 1)
  assert (got, size, iova % size) == ([0x4000_0000], M2, 0)
  assert register(bus)[:2] == (bus, K4)


def test_a_1_gib_contiguous_mr_is_512_pages_of_2_mib():
  got, size, _ = register(list(np.arange(1 << 18, dtype=np.int64) * K4 + (1 << 32)))
  assert size == M2 and got == [(1 << 32) + M2 * i for i in range(512)]
