"""The AM driver on the emulated Navi31 behind the ASM24xx bridge model (MOCKUSB+AMD): boot, the USB placement rules,
the SRAM-window copy protocol and its errors, and picking USB for `AMD`; on a machine with a bridge, USB+AMD too."""
import numpy as np
import pytest

import drivers.amd as amd
from drivers.amd import usb as amd_usb
from drivers.amd.device import AMDDevice
from drivers.amd.usb import USBIface
from drivers.hcq import open_device
from drivers.system import DeviceBusyError, open_model
from drivers.system import usb as system_usb
from drivers.system.usb import open_emulated
from drivers.asm24xx import BRIDGE
from tests.drivers.amd.kernels import SRC
from tests.drivers.amd.test_am import vadd_ok
from tests.hcq.contract import check_device


def boot(index: int = 0) -> AMDDevice:
  return AMDDevice("MOCKUSB+AMD", USBIface(open_emulated("navi31", index, "am", BRIDGE)))


@pytest.fixture
def dev():
  d = boot()
  yield d
  d.close()


def test_boot_through_the_bridge_runs_a_kernel(dev):
  usb = dev.iface.pci.usb
  assert dev.arch == "gfx1100" and not dev.iface.core.partial_boot and usb.control_transfers > 1000
  assert [br.secondary() for br in usb.bridge.bridges] == [1, 2, 3, 4] and dev.iface.pci.function.bus_master
  assert vadd_ok(dev)


def test_a_second_driver_instance_runs_its_own_commands_not_the_first_ones():
  # VRAM keeps the first instance's rings and their control pages (read and write pointers); the engines poll the write
  # pointer as soon as their queue is enabled, so the second instance zeroes both in VRAM before it enables them
  for partial in (False, True):
    d = boot()
    try: assert d.iface.core.partial_boot == partial and vadd_ok(d)
    finally: d.close()


@pytest.mark.parametrize("queue", ["copy_queue", "compute_queue"])
def test_a_queue_signal_is_seen_by_a_wait_with_an_explicit_timeout(dev, queue):
  # signals live in VRAM and the host polls its copy of them, read back at every look of a wait, timed or not
  s = dev.new_signal(0)
  getattr(dev, queue)().signal(s, 7).submit()
  s.wait(7, timeout_ms=20_000)
  assert s.value == 7


def test_usb_placement_rules(dev):
  # amd_driver.md 1.2.1: every allocation in VRAM; compute ring 0x2000 B, SDMA ring 1 MB, kernargs 8 KB, signals 0x100 B
  assert not dev.iface.pci._dma                                          # no host memory was ever asked for
  assert all(m.handle[0] == "vram" for m in dev._mems) and all(q.handle[1].handle[0] == "vram" for q in dev._queues)
  assert (dev.compute_ring.size, dev.sdma_ring.size) == (0x2000, 1 << 20)
  assert vadd_ok(dev)
  assert {view.nbytes for view, _, _ in dev.kernargs._chunks} == {8 << 10}
  view, va = dev._signal_chunk()
  assert view.nbytes == 0x100 and va % 0x1000 == 0


def test_copyin_fills_windows_in_turn_and_copyout_reads_them(dev):
  usb, n = dev.iface.pci.usb, 700_000                                    # three windows' worth (256 KB less the sentinel)
  data = np.random.default_rng(3).integers(0, 256, n, dtype=np.uint8)
  buf = dev.alloc(n)
  writes = []
  real = usb.bridge.bulk_out
  usb.bridge.bulk_out = lambda d: (writes.append((usb.bridge.sram, d[-4:])) if usb.bridge.sram else None, real(d))[1]
  buf.copyin(data.data)
  seq = int.from_bytes(writes[0][1], "little") & 0xFFFFFF
  assert seq == 1                                                        # the protocol starts afresh at open
  assert [(w[0][0], w[0][1], int.from_bytes(w[1], "little")) for w in writes] == \
    [(0, 256 << 10, 0x51000000 | seq), (256 << 10, 256 << 10, 0x51000000 | seq + 1), (0, 256 << 10, 0x51000000 | seq + 2)]
  assert dev.iface.drain_fence() == seq + 2                              # the SDMA engine drained all three
  assert np.array_equal(np.frombuffer(buf.copyout(), np.uint8), data)
  assert dev.iface.drain_fence() == seq + 5                              # three windows read back
  # each read back, the host raised the release counter at sys_buf+0x804 the engine's third copy waited on
  assert int.from_bytes(dev.iface.pci.xdata_read(0xA804, 4), "little") == seq + 5
  buf.free()


def test_a_drain_that_stops_is_a_timeout_naming_the_fence(monkeypatch):
  d = boot(1)
  try:
    monkeypatch.setattr(amd_usb, "DRAIN_STALL_S", 0.2)
    monkeypatch.setattr(d.iface.pci, "sram_write", lambda slot, data: None)   # the windows never get their data
    buf = d.alloc(3 << 18)
    with pytest.raises(TimeoutError, match=r"copyin: the SDMA engine did not drain the SRAM window \(the drain fence at "
                                           r"sys_buf\+0x800 stayed 0x\w+, waiting for 0x\w+\) for 0.2 s"):
      buf.copyin(bytes(3 << 18))
  finally: d.close(wait=False)


def test_a_copy_behind_long_work_waits_for_it_before_the_drain_can_stall(dev, monkeypatch):
  # the drain fence stands still while the SDMA engine waits for the work ahead of the copy: that is the timeline's wait
  # (no progress for patience.STALL_MS); DRAIN_STALL_S counts once the engine is at the copy
  monkeypatch.setattr(amd_usb, "DRAIN_STALL_S", 0.1)
  n = 1 << 16
  x = dev.alloc(4 * n)
  x.copyin(np.zeros(n, np.int32).data)
  add1 = dev.program("add1", dev.compiler.compile(SRC))
  for _ in range(4): add1(x, global_size=(n // 64,), local_size=(64,))   # about a second of emulation ahead of the copy
  assert np.array_equal(np.frombuffer(x.copyout(), np.int32), np.full(n, 4, np.int32))


def test_no_host_memory_for_the_gpu(dev):
  with pytest.raises(NotImplementedError, match="cannot reach host memory through the USB bridge"): dev.import_host(bytearray(4096))


def test_mockusb_is_the_same_emulated_device_as_mockpci():
  d = boot(2)
  try:
    with pytest.raises(DeviceBusyError): open_model("navi31", 2, "am")
  finally: d.close()


def test_mockusb_device_string():
  d = open_device("MOCKUSB+AMD:3")
  assert isinstance(d.iface, USBIface) and d.name == "MOCKUSB+AMD:3" and vadd_ok(d)
  d.close()


def test_amd_picks_usb_when_a_bridge_is_found_and_no_pci_gpu(monkeypatch):
  monkeypatch.setattr(amd, "KFD", "/nonexistent/kfd")
  monkeypatch.setattr(system_usb, "list_usb", lambda: ["a bridge"])
  monkeypatch.setattr(amd, "_pci_gpus", lambda: 0)
  assert amd._auto() == "USB"
  monkeypatch.setattr(amd, "_pci_gpus", lambda: 1)
  assert amd._auto() == "PCI"
  monkeypatch.setattr(system_usb, "list_usb", lambda: [])
  monkeypatch.setattr(amd, "_pci_gpus", lambda: 0)
  assert amd._auto() == "PCI"                                            # nothing anywhere: PCI's error names what is missing


def test_usb_with_no_bridge_says_what_to_check(monkeypatch):
  monkeypatch.setattr(system_usb, "list_usb", lambda: [])
  with pytest.raises(RuntimeError, match="USB bridge 0 does not exist: 0 found .*add1:0001, 3801:0001"):
    open_device("USB+AMD")


@pytest.mark.hardware("usb")
def test_real_bridge_boots_runs_a_kernel_and_keeps_the_contract():
  d = open_device("USB+AMD")
  try: assert vadd_ok(d)
  finally: d.close()
  check_device("USB+AMD")


def test_transfer_to_and_from_a_pci_gpu_goes_through_the_host():
  # behind the bridge there is no peer-to-peer DMA (import_peer, bus_pages) and no host memory for the GPU
  # (import_host), so Buffer.transfer copies out and in, both ways
  from tests.drivers.amd.test_am import boot as boot_pci
  u, p = boot(4), boot_pci(5)
  try:
    data = np.random.default_rng(5).integers(0, 256, 300_000, dtype=np.uint8)
    a, b, c = u.alloc(data.nbytes), p.alloc(data.nbytes), u.alloc(data.nbytes)
    a.copyin(data.data)
    a.transfer(b)
    b.transfer(c)
    assert np.array_equal(np.frombuffer(c.copyout(), np.uint8), data)
    with pytest.raises(NotImplementedError, match="not on this host's PCI bus"): a.bus_pages()
    with pytest.raises(NotImplementedError, match="reaches only the bridge's SRAM"): u.import_peer(b)
  finally:
    u.close()
    p.close()
