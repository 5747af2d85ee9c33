"""WRITE_DATA on the MEC of a booted Navi31, fed by hand: the data dwords land at the address (one write; with
WR_ONE_ADDR each dword at the same address in turn), and fields a compute queue cannot use, or the model does not model,
stop the queue with an error naming the packet. Facts: nvd.h PACKET3_WRITE_DATA / WRITE_DATA_* (mesa sid.h names the
DST_SEL values: 0 register, 1 memory sync, 2 TC/L2, 3 GDS, 5 memory async; ENGINE_SEL 0 ME, 1 PFP, 2 CE)."""
import pytest

from autogen.amd import nvd
from tests.emu.amdgpu.regs import Queue, pm4, queue_error


def write_data(va: int, *data: int, dst_sel: int = 5, engine: int = 0, extra: int = 0) -> list[int]:
  return pm4(nvd.PACKET3_WRITE_DATA, nvd.WRITE_DATA_DST_SEL(dst_sel) | nvd.WR_CONFIRM | nvd.WRITE_DATA_ENGINE_SEL(engine) | extra,
             va & 0xFFFFFFFF, va >> 32, *data)


@pytest.fixture
def mem(booted):
  m = booted.iface.alloc(4096, host=True)
  m.view[:64] = b"\xee" * 64
  return m


def test_write_data_puts_its_dwords_at_the_address_for_each_memory_dst_sel(booted, mem):
  q = Queue(booted, "compute")
  q.submit(write_data(mem.va, 0x11111111, 0x22222222, 0x33333333) + write_data(mem.va + 16, 0x44444444, dst_sel=1) +
           write_data(mem.va + 20, 0x55555555, dst_sel=2) + write_data(mem.va + 32, 1, 2, 3, extra=nvd.WR_ONE_ADDR))
  q.wait_idle()
  words = [int.from_bytes(mem.view[i:i + 4], "little") for i in range(0, 40, 4)]
  assert words == [0x11111111, 0x22222222, 0x33333333, 0xEEEEEEEE, 0x44444444, 0x55555555, 0xEEEEEEEE, 0xEEEEEEEE, 3, 0xEEEEEEEE]


@pytest.mark.parametrize("kw, match", [
  (dict(dst_sel=0), "WRITE_DATA DST_SEL 0 is not modelled"), (dict(dst_sel=3), "WRITE_DATA DST_SEL 3 is not modelled"),
  (dict(engine=1), "WRITE_DATA ENGINE_SEL 1: a compute queue has only the ME"),
  (dict(extra=1 << 4), "sets reserved bits 0x10"), (dict(offset=2), "is not dword aligned"),
])
def test_write_data_fields_a_compute_queue_cannot_use_stop_it(booted, mem, kw, match):
  off = kw.pop("offset", 0)
  assert "WRITE_DATA" in queue_error(booted, write_data(mem.va + off, 7, **kw), match)
  assert bytes(mem.view[:8]) == b"\xee" * 8


def test_write_data_without_data_stops_the_queue(booted):
  assert "at least one data dword" in queue_error(booted, pm4(nvd.PACKET3_WRITE_DATA, 5 << 8, 0, 0), "at least one data dword")
