"""CP packet encodings (drivers/qcom/cp.py) against the facts: the header checks of mesa's cffdec.h (written out here
as the reference), opcode, event and register numbers from adreno_pm4.xml / a6xx.xml (mesa 33ede796), and each
packet's dword layout as the XML's domains give it; plus the regeneration of autogen/adreno.py from that XML."""
import pytest
import autogen
from autogen import adreno
from autogen.gen.adreno import generate
from autogen.gen.headers import HeadersMissing
from drivers.qcom import cp


def reference_parity(v: int) -> int:
  """cffdec.h pm4_calc_odd_parity_bit: 0x9669 indexed by the xor of v's nibbles."""
  x = 0
  for s in range(0, 32, 4): x ^= v >> s
  return (0x9669 >> (x & 0xF)) & 1


def is_type4(h: int) -> bool:
  return h & 0xF0000000 == 0x40000000 and h >> 27 & 1 == reference_parity(h >> 8 & 0x7FFFF) and h >> 7 & 1 == reference_parity(h & 0x7F)


def is_type7(h: int) -> bool:
  return (h & 0xF0000000 == 0x70000000 and h & 0x0F000000 == 0 and h >> 23 & 1 == reference_parity(h >> 16 & 0x7F)
          and h >> 15 & 1 == reference_parity(h & 0x3FFF))


def test_opcode_event_and_register_numbers_are_the_xml_facts():
  assert (adreno.CP_NOP, adreno.CP_WAIT_MEM_WRITES, adreno.CP_WAIT_FOR_IDLE, adreno.CP_EXEC_CS, adreno.CP_LOAD_STATE6_FRAG, adreno.CP_WAIT_REG_MEM,
          adreno.CP_MEM_WRITE, adreno.CP_REG_TO_MEM, adreno.CP_EVENT_WRITE, adreno.CP_MEMCPY) == (0x10, 0x12, 0x26, 0x33, 0x34, 0x3c, 0x3d, 0x3e,
                                                                                                  0x46, 0x75)
  assert (adreno.CACHE_FLUSH_TS, adreno.CACHE_FLUSH, adreno.CACHE_INVALIDATE, adreno.WRITE_GE) == (4, 6, 49, 5)
  assert (adreno.CP_TYPE4_PKT, adreno.CP_TYPE7_PKT) == (0x40000000, 0x70000000)
  assert (adreno.REG_A6XX_CP_ALWAYS_ON_COUNTER_LO, adreno.REG_A6XX_CP_ALWAYS_ON_COUNTER_HI, adreno.REG_A6XX_HLSQ_CS_NDRANGE_0) == (0x980, 0x981,
                                                                                                                                   0xb990)
  assert adreno.REG_A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEX == (11, 2) and adreno.CP_LOAD_STATE6_0_NUM_UNIT == (31, 22)


@pytest.mark.parametrize("v", range(0, 0x80))
def test_odd_parity_matches_cffdec(v):
  assert cp.odd_parity(v) == reference_parity(v) and cp.odd_parity(v << 9 | v) == reference_parity(v << 9 | v)


def test_type7_headers_pass_cffdec_and_a_flipped_bit_fails():
  assert cp.wait_for_idle() == [0x70268000]        # count 0 (even: parity 1 at 15), opcode 0x26 (three ones: parity 0)
  for op in (adreno.CP_NOP, adreno.CP_WAIT_REG_MEM, adreno.CP_EVENT_WRITE, adreno.CP_MEMCPY, 0x7F):
    for n in (0, 1, 3, 6, 100, 0x3FFF):
      h = cp.pkt7(op, *range(n))[0]
      assert is_type7(h) and h >> 16 & 0x7F == op and h & 0x3FFF == n
      assert not is_type7(h ^ 1 << 15) and not is_type7(h ^ 1 << 23) and not is_type7(h ^ 1 << 16)
  with pytest.raises(ValueError, match="16383"): cp.pkt7(adreno.CP_NOP, *([0] * 0x4000))
  with pytest.raises(ValueError, match="7 bits"): cp.pkt7(0x80)


def test_type4_register_writes_pass_cffdec():
  p = cp.pkt4(adreno.REG_A6XX_HLSQ_CS_NDRANGE_0, 1, 2, 3)
  assert p[1:] == [1, 2, 3] and is_type4(p[0]) and p[0] >> 8 & 0x7FFFF == 0xb990 and p[0] & 0x7F == 3
  assert not is_type4(p[0] ^ 1 << 27) and not is_type4(p[0] ^ 1 << 7) and not is_type4(p[0] ^ 1 << 8)
  assert cp.pkt4(0x980, 0)[0] == 0x40098001 and cp.pkt4(0x981, 0, 0)[0] == 0x48098102   # 0x980: 3 ones, 0x981: 4
  with pytest.raises(ValueError, match="1 to 127"): cp.pkt4(0x980)
  with pytest.raises(ValueError, match="19 bits"): cp.pkt4(0x80000, 0)


def test_packet_payloads_follow_the_xml_domains():
  va = 0x12_3456_7890
  assert cp.wait_reg_mem(va, 7)[1:] == [5 | 1 << 4, 0x34567890, 0x12, 7, 0xFFFFFFFF, 32]   # WRITE_GE | POLL_MEMORY
  assert cp.always_on_to_mem(va)[1:] == [0x980 | 2 << 18 | 1 << 30, 0x34567890, 0x12]      # REG, CNT 2, 64B
  assert cp.mem_write(va, 1, 2)[1:] == [0x34567890, 0x12, 1, 2]
  assert cp.memcpy(va, va + 0x100, 9)[1:] == [9, 0x34567990, 0x12, 0x34567890, 0x12]          # DWORDS, SRC, DST
  assert cp.event_write(6, adreno.CACHE_FLUSH_TS, va, 5)[1:] == [4, 0x34567890, 0x12, 5]
  assert cp.event_write(6, adreno.CACHE_INVALIDATE) == cp.pkt7(0x46, 49) == cp.event_write(7, adreno.CACHE_INVALIDATE)
  assert cp.exec_cs(3, 2, 1)[1:] == [0, 3, 2, 1]
  ls = cp.load_state6(adreno.ST6_CONSTANTS, adreno.SB6_CS_SHADER, 64, va, dst_off=4)
  assert ls[0] >> 16 & 0x7F == 0x34 and ls[1:] == [4 | 1 << 14 | 2 << 16 | 0xd << 18 | 64 << 22, 0x34567890, 0x12]


def test_unaligned_addresses_and_a7xx_write_back_are_refused():
  for bad in (lambda: cp.mem_write(2, 0), lambda: cp.wait_reg_mem(6, 1), lambda: cp.memcpy(4, 2, 1), lambda: cp.always_on_to_mem(1)):
    with pytest.raises(ValueError, match="aligned"): bad()
  with pytest.raises(ValueError, match="CP_EVENT_WRITE7"): cp.event_write(7, adreno.CACHE_FLUSH_TS, 0x1000, 1)
  with pytest.raises(ValueError, match="a5xx"): cp.event_write(5, adreno.CACHE_FLUSH_TS)


def test_autogen_adreno_regenerates_byte_identical():
  try: fresh = generate()
  except HeadersMissing as e: pytest.skip(f"mesa's register XML is not available ({e})")
  from pathlib import Path
  assert (Path(autogen.__file__).parent / "adreno.py").read_text() == fresh
