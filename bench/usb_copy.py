"""Host copies to and from a GPU behind the ASM24xx USB bridge: host->VRAM (copyin through the SRAM windows) and
VRAM->host (copyout), in MB/s and in bytes per USB transaction (control and bulk transfers both count), against the
bridge's link rate: 10 Gb/s (USB 3.2 Gen 2) and 40 Gb/s (USB4). Through the bridge model (MOCKUSB+AMD) always, and
through a real bridge (USB+AMD) when one is attached.

Usage: python bench/usb_copy.py [DEV ...]   (default: MOCKUSB+AMD, plus USB+AMD with a bridge); one JSON line per figure."""
import sys
from figures import best, emit, skipped
import numpy as np
from drivers.hcq import open_device
from drivers.system.usb import list_usb

SIZES = (4 << 10, 256 << 10, 16 << 20)
LINKS = {"usb3_gen2": 10e9 / 8, "usb4": 40e9 / 8}     # bytes per second on the wire


class Counted:
  """Counts the transfers made through a pyusb device (or the model's stand-in)."""
  def __init__(self, usb):
    self.n = 0
    for name in ("ctrl_transfer", "write", "read"):
      real = getattr(usb, name)
      setattr(usb, name, lambda *a, _real=real, **kw: (self._tick(), _real(*a, **kw))[1])
  def _tick(self) -> None: self.n += 1


def main() -> None:
  names = sys.argv[1:] or ["MOCKUSB+AMD"] + (["USB+AMD"] if list_usb() else [])
  if not list_usb() and not sys.argv[1:]: skipped("usb/copy", "no USB bridge attached (lsusb: add1:0001 or 3801:0001)", device="USB+AMD")
  for name in names:
    try: dev = open_device(name)
    except Exception as e:
      skipped("usb/copy", str(e), device=name)
      continue
    counted = Counted(dev.iface.pci.usb)
    for size in SIZES:
      host = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
      out = np.empty_like(host)
      buf = dev.alloc(size)
      for fig, fn in (("h2d", lambda: buf.copyin(host.data)), ("d2h", lambda: buf.copyout(out.data))):
        before = counted.n
        fn()
        per = size / (counted.n - before)
        t = best(fn, 3)
        emit(f"usb/copy_{fig}_mbps", size / t / 1e6, "MB/s", device=name, size=size, bytes_per_transaction=round(per),
             **{f"vs_{link}": round(size / t / rate, 4) for link, rate in LINKS.items()})
      assert np.array_equal(out, host)
      buf.free()
    dev.close()


if __name__ == "__main__":
  main()
