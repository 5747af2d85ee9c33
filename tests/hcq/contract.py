"""Queue-API checks every device's tests share."""
import numpy as np


def check_copies(dev, size: int, queue_align: int = 1) -> None:
  """Random bytes through copyin, a device-to-device transfer and copyout, then an offset copy on the copy queue
  (offsets and size multiples of `queue_align`, for copy engines that move whole words)."""
  data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
  src, dst = dev.alloc(size), dev.alloc(size)
  src.copyin(data.data)
  src.transfer(dst)
  assert np.array_equal(np.frombuffer(dst.copyout(), np.uint8), data)
  a = queue_align
  if (n := (size - 2 * a) // a * a) > 0:
    dst2 = dev.alloc(size)
    dev.copy_queue().copy(dst2, src, n, dest_offset=a, src_offset=2 * a).signal(dev.timeline, v := dev.next_timeline()).submit()
    dev.timeline.wait(v)
    assert np.array_equal(np.frombuffer(dst2.copyout(), np.uint8)[a:a + n], data[2 * a:2 * a + n])
    dst2.free()
  for b in (src, dst): b.free()
