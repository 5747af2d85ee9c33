"""Buffer.transfer between two emulated Navi31s on the AM driver goes peer to peer (issue 16): the source GPU maps the
destination's VRAM pages at their bus addresses (its BAR0, emu/topology.py) as system pages, and its SDMA writes
them over PCIe. No host memory in between: no staging copy, no shared host memory (PeerLink)."""
import gc
import numpy as np
import pytest

from drivers.hcq import open_device
from drivers.hcq.staging import Staging
from emu.pci import PCI_COMMAND, PCI_COMMAND_MEMORY


@pytest.fixture
def pair():
  a, b = open_device("MOCKPCI+AMD"), open_device("MOCKPCI+AMD:1")
  yield a, b
  b.close()
  a.close()


def test_transfer_between_two_pci_gpus_is_sdma_writing_the_peers_vram_through_its_bar(pair, monkeypatch):
  a, b = pair
  n = (3 << 20) + 12
  data = np.random.default_rng(7).integers(0, 256, n, dtype=np.uint8).tobytes()
  src, dest = a.alloc(n), b.alloc(n + 4096).view(4096, n)       # (a view: not at the start of its pages)
  src.copyin(data)
  held = [(d.allocated_bytes, len(d.iface.pci.model.dma._runs)) for d in pair]
  links = dict(b._links)            # (links an earlier test's transfers left with other devices stay as they are)
  staged = []
  real = Staging._copy
  monkeypatch.setattr(Staging, "_copy", lambda self, *args: (staged.append(args), real(self, *args))[1])
  src.transfer(dest)
  monkeypatch.undo()
  assert staged == [] and a not in b._links and b._links == links  # no staging, no shared host memory
  assert [(d.allocated_bytes, len(d.iface.pci.model.dma._runs)) for d in pair] == held   # the peer mapping is gone again
  off = dest.base.opaque.handle[1] + 4096
  assert bytes(b.iface.pci.model.gpu.vram.view[off:off + n]) == data   # in the destination's VRAM itself
  assert bytes(dest.copyout()) == data


def test_a_peer_whose_bar_stopped_decoding_is_a_fault_of_the_gpu_whose_sdma_wrote_it(pair):
  """No BAR claims the pages: the source GPU's MMU cannot reach them and reports a page fault (its model logs the bus
  error, naming the address); the transfer fails on the source device, and the destination's VRAM is untouched."""
  a, b = pair
  src, dest = a.alloc(8192), b.alloc(8192)
  src.copyin(b"\x11" * 8192)
  dest.copyin(bytes(8192))
  fn = b.iface.pci.model
  cmd = fn.config_read(PCI_COMMAND, 2)
  fn.config_write(PCI_COMMAND, 2, cmd & ~PCI_COMMAND_MEMORY)
  try:
    with pytest.raises(RuntimeError, match=r"^MOCKPCI\+AMD: GPU page fault at .*write"): src.transfer(dest)
  finally: fn.config_write(PCI_COMMAND, 2, cmd)
  bus = f"{a.iface.pci.bus}: bus error: DMA to bus address {dest.bus_pages()[0][0]:#x}"
  assert any(bus in line for line in a.iface.pci.model.log_lines), a.iface.pci.model.log_lines[-3:]
  off = dest.opaque.handle[1]
  assert bytes(fn.gpu.vram.view[off:off + 8192]) == bytes(8192)


def test_a_kept_peer_mapping_follows_the_bus_after_the_peers_bar_stops_decoding(pair):
  """The source's TLB caches the peer's pages after a copy; switching the peer's memory decoding off changes what their
  bus addresses reach (the DMA generation), so the next copy walks again and faults instead of writing through a stale
  translation; the peer's VRAM keeps the first copy's bytes."""
  a, b = pair
  src, dest = a.alloc(8192), b.alloc(8192)
  peer = a.import_peer(dest)
  try:
    src.copyin(b"\x22" * 8192)
    src.transfer(peer)
    fn = b.iface.pci.model
    cmd = fn.config_read(PCI_COMMAND, 2)
    fn.config_write(PCI_COMMAND, 2, cmd & ~PCI_COMMAND_MEMORY)
    try:
      src.copyin(b"\x33" * 8192)
      with pytest.raises(RuntimeError, match=r"^MOCKPCI\+AMD: GPU page fault at .*write"): src.transfer(peer)
    finally: fn.config_write(PCI_COMMAND, 2, cmd)
    off = dest.opaque.handle[1]
    assert bytes(fn.gpu.vram.view[off:off + 8192]) == b"\x22" * 8192
  finally: peer.free()


def test_a_peer_mapping_that_outlives_the_peer_faults_and_never_reaches_its_freed_memory():
  """The peer closes (unplugged: its BAR decodes nowhere) and its model is collected while the source still maps its
  pages and holds them in its TLB: the next copy is a page fault naming the source, not a write into the memory the
  closed peer's VRAM was (a crashed interpreter)."""
  a, b = open_device("MOCKPCI+AMD"), open_device("MOCKPCI+AMD:1")
  try:
    src, dest = a.alloc(1 << 16), b.alloc(1 << 16)
    src.copyin(b"\x44" * (1 << 16))
    peer = a.import_peer(dest)
    src.transfer(peer)                                    # (the TLB now holds the peer's pages)
    b.close()
    del b, dest
    gc.collect()
    with pytest.raises(RuntimeError, match=r"^MOCKPCI\+AMD: GPU page fault at .*write"): src.transfer(peer)
    peer.free()
  finally: a.close()
