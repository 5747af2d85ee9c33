"""The range allocator shared by the models and the drivers (common/alloc.py): first fit with alignment,
frees that coalesce with both neighbours, fixed-address takes, and errors that name the space and the sizes."""
import pytest

from common.alloc import RangeAllocator


def test_first_fit_rounds_each_start_up_to_its_alignment():
  ra = RangeAllocator(0x1000, 0x10000, "VRAM")
  assert ra.alloc(0x10) == 0x1000
  assert ra.alloc(0x100, 0x1000) == 0x2000                   # 0x1010 rounded up to the next 4 KiB boundary
  assert ra.alloc(0x8) == 0x1010                             # the gap left below the aligned block is used first
  assert ra.alloc(0x10, 0x3000) == 0x3000                    # any positive alignment, not only powers of two
  assert ra.used == {0x1000: 0x10, 0x2000: 0x100, 0x1010: 0x8, 0x3000: 0x10}
  assert ra.free_bytes == 0x10000 - 0x128


def test_frees_coalesce_so_the_whole_range_is_one_allocation_again():
  ra = RangeAllocator(0, 0x4000, "GPU VA")
  a, b, c, d = (ra.alloc(0x1000) for _ in range(4))
  assert (a, b, c, d) == (0, 0x1000, 0x2000, 0x3000)
  for addr in (b, d, a, c):                                  # freed between neighbours, above, below, in the middle
    ra.free(addr)
  assert ra.free_bytes == 0x4000 and ra.used == {}
  assert ra.alloc(0x4000, 0x4000) == 0                       # only possible if the four frees merged into one range


def test_exhaustion_names_the_space_the_request_and_what_is_free():
  ra = RangeAllocator(0, 0x3000, "VRAM")
  ra.alloc(0x1000)
  ra.alloc(0x1000)
  ra.free(0)
  with pytest.raises(MemoryError, match=r"^out of VRAM: no free range of 0x2000 bytes \(aligned to 0x1000\); "
                                        r"0x2000 of 0x3000 bytes are free$"):
    ra.alloc(0x2000, 0x1000)                                 # 0x2000 bytes are free, but not in one piece
  assert ra.used == {0x1000: 0x1000}                         # a refused allocation changes nothing


def test_bad_frees_and_bad_requests_are_refused():
  ra = RangeAllocator(0, 0x2000, "kernel-argument memory")
  a = ra.alloc(0x100)
  with pytest.raises(ValueError, match=r"^free of 0x10: not an allocation of kernel-argument memory$"): ra.free(0x10)
  ra.free(a)
  with pytest.raises(ValueError, match=r"^free of 0x0: not an allocation of kernel-argument memory$"): ra.free(a)   # twice
  with pytest.raises(ValueError, match=r"^cannot allocate 0 bytes of kernel-argument memory$"): ra.alloc(0)
  with pytest.raises(ValueError, match=r"^cannot align kernel-argument memory to 0 bytes$"): ra.alloc(0x10, 0)
  assert ra.free_bytes == 0x2000


def test_take_reserves_exactly_the_fixed_range_or_refuses():
  ra = RangeAllocator(0x10000, 0x10000, "GPU VA")
  ra.take(0x14000, 0x2000)
  assert ra.alloc(0x5000) == 0x16000                         # [0x10000, 0x14000) is too small, first fit goes above
  with pytest.raises(MemoryError, match=r"^GPU VA \[0x15000, \+0x1000\) is not free$"): ra.take(0x15000, 0x1000)
  with pytest.raises(MemoryError, match=r"^GPU VA \[0x1f000, \+0x2000\) is not free$"): ra.take(0x1F000, 0x2000)  # past the end
  ra.free(0x14000)
  ra.take(0x10000, 0x6000)                                   # the freed range merged with the one below it
  assert ra.used == {0x16000: 0x5000, 0x10000: 0x6000}
