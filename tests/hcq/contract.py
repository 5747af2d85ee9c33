"""Queue-API checks every device's tests share."""
import numpy as np


def check_copies(dev, size: int) -> None:
  """Random bytes through copyin, a device-to-device transfer and copyout, then an offset copy on the copy queue."""
  data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
  src, dst = dev.alloc(size), dev.alloc(size)
  src.copyin(data.data)
  src.transfer(dst)
  assert np.array_equal(np.frombuffer(dst.copyout(), np.uint8), data)
  if size > 2:
    dst2 = dev.alloc(size)
    dev.copy_queue().copy(dst2, src, size - 2, dest_offset=1, src_offset=2).signal(dev.timeline, v := dev.next_timeline()).submit()
    dev.timeline.wait(v)
    assert np.array_equal(np.frombuffer(dst2.copyout(), np.uint8)[1:size - 1], data[2:])
    dst2.free()
  for b in (src, dst): b.free()
