"""Adreno command processor (CP) packets: type-4 register writes and type-7 opcodes, for a6xx and a7xx.

Header formats (mesa src/freedreno/decode/cffdec.h at the commit autogen.adreno names; reference hcq_compute.md §3.2):
  type 4: 31:28 = 4, register (dwords) 26:8, odd parity of the register 27, count 6:0, odd parity of the count 7;
  type 7: 31:28 = 7, 27:24 zero, opcode 22:16, odd parity of the opcode 23, count 13:0, odd parity of the count 15.
The parity bit makes the field plus that bit hold an odd number of ones. Opcodes, event types, compare functions and
packet fields: autogen.adreno (mesa's adreno_pm4.xml). Registers: autogen.adreno's A6XX domain.

a7xx: reference §3 names CP_EVENT_WRITE7 as the packet a7xx uses instead of CP_EVENT_WRITE; the XML facts here (2021)
predate a7xx. Unverified, and therefore kept minimal: that CP_EVENT_WRITE7 has CP_EVENT_WRITE's opcode (0x46) and its
EVENT field (7:0) with the same event numbers, and that CP_ALWAYS_ON_COUNTER sits at a6xx's offset. The a7xx encoder
sends only the one-dword event form (no write-back address: the fields that would select one are not in the facts);
signals write their value with CP_MEM_WRITE on both generations.
"""
from __future__ import annotations
from autogen import adreno

GENERATIONS = (6, 7)                       # a6xx, a7xx
ALWAYS_ON_COUNTER = adreno.REG_A6XX_CP_ALWAYS_ON_COUNTER_LO   # 64-bit, LO then HI; 19.2 MHz (reference §1.2)
ALWAYS_ON_HZ = 19_200_000
WAIT_DELAY_CYCLES = 32                     # CP_WAIT_REG_MEM's busy-loop between polls (reference §3.2)


def odd_parity(v: int) -> int:
  """The bit that gives `v` and itself an odd number of ones."""
  return (v.bit_count() + 1) & 1


def field(f: tuple[int, int], v: int) -> int:
  """`v` in the (hi, lo) bits of a packet dword (autogen.adreno's field ranges)."""
  hi, lo = f
  if not 0 <= v < 1 << (hi - lo + 1): raise ValueError(f"{v:#x} does not fit bits {hi}:{lo}")
  return v << lo


def pkt4(reg: int, *values: int) -> list[int]:
  """Write `values` to the registers from `reg` on (one packet, up to 127 registers)."""
  n = len(values)
  if not 1 <= n <= 0x7F: raise ValueError(f"a type-4 packet writes 1 to 127 registers, not {n}")
  if not 0 <= reg <= 0x7FFFF: raise ValueError(f"register {reg:#x} does not fit a type-4 header (19 bits)")
  return [adreno.CP_TYPE4_PKT | n | odd_parity(n) << 7 | reg << 8 | odd_parity(reg) << 27, *values]


def pkt7(opcode: int, *payload: int) -> list[int]:
  n = len(payload)
  if n > 0x3FFF: raise ValueError(f"a type-7 packet carries at most 16383 dwords, not {n}")
  if not 0 <= opcode <= 0x7F: raise ValueError(f"opcode {opcode:#x} does not fit a type-7 header (7 bits)")
  if any(not 0 <= w < 1 << 32 for w in payload): raise ValueError(f"type-7 payload {payload!r} holds a value that is not a dword")
  return [adreno.CP_TYPE7_PKT | n | odd_parity(n) << 15 | opcode << 16 | odd_parity(opcode) << 23, *payload]


def lo_hi(addr: int) -> tuple[int, int]:
  if not 0 <= addr < 1 << 64: raise ValueError(f"{addr:#x} is not a 64-bit GPU address")
  return addr & 0xFFFFFFFF, addr >> 32


def wait_for_idle() -> list[int]: return pkt7(adreno.CP_WAIT_FOR_IDLE)
def wait_mem_writes() -> list[int]: return pkt7(adreno.CP_WAIT_MEM_WRITES)


def event_write(gen: int, event: int, addr: int | None = None, value: int = 0) -> list[int]:
  """a6xx CP_EVENT_WRITE: `event`, and for the *_TS events the dword `value` written to `addr` once the event is
  done. a7xx CP_EVENT_WRITE7: the event alone (see the module docstring)."""
  if gen == 6:
    ev = field(adreno.CP_EVENT_WRITE_0_EVENT, event)
    return pkt7(adreno.CP_EVENT_WRITE, ev) if addr is None else pkt7(adreno.CP_EVENT_WRITE, ev, *lo_hi(addr), value)
  if gen == 7:
    if addr is not None: raise ValueError("CP_EVENT_WRITE7's write-back form is not in hcq's facts: write with CP_MEM_WRITE")
    return pkt7(adreno.CP_EVENT_WRITE, field(adreno.CP_EVENT_WRITE_0_EVENT, event))
  raise ValueError(f"no CP event packet for a{gen}xx")


def mem_write(addr: int, *dwords: int) -> list[int]:
  if addr % 4: raise ValueError(f"CP_MEM_WRITE to {addr:#x}: the address must be dword-aligned")
  return pkt7(adreno.CP_MEM_WRITE, *lo_hi(addr), *dwords)


def reg_to_mem(reg: int, dest: int, count: int = 1, b64: bool = False) -> list[int]:
  """Copy `count` registers from `reg` to `dest` (64B: a 64-bit register read as one value, as the always-on counter)."""
  if dest % 4: raise ValueError(f"CP_REG_TO_MEM to {dest:#x}: the address must be dword-aligned")
  return pkt7(adreno.CP_REG_TO_MEM, field(adreno.CP_REG_TO_MEM_0_REG, reg) | field(adreno.CP_REG_TO_MEM_0_CNT, count) |
              field(adreno.CP_REG_TO_MEM_0_64B, int(b64)), *lo_hi(dest))


def always_on_to_mem(dest: int) -> list[int]: return reg_to_mem(ALWAYS_ON_COUNTER, dest, 2, True)


def wait_reg_mem(addr: int, ref: int, mask: int = 0xFFFFFFFF, function: int = adreno.WRITE_GE) -> list[int]:
  """Stall the CP until (the dword at `addr` & mask) <function> ref, polling memory every WAIT_DELAY_CYCLES."""
  if addr % 4: raise ValueError(f"CP_WAIT_REG_MEM on {addr:#x}: the address must be dword-aligned")
  return pkt7(adreno.CP_WAIT_REG_MEM, field(adreno.CP_WAIT_REG_MEM_0_FUNCTION, function) | field(adreno.CP_WAIT_REG_MEM_0_POLL_MEMORY, 1),
              *lo_hi(addr), ref, mask, WAIT_DELAY_CYCLES)


def memcpy(dest: int, src: int, dwords: int) -> list[int]:
  """CP_MEMCPY: `dwords` dwords from src to dest (both dword-aligned)."""
  if dest % 4 or src % 4: raise ValueError(f"CP_MEMCPY of {src:#x} to {dest:#x}: both addresses must be dword-aligned")
  return pkt7(adreno.CP_MEMCPY, field(adreno.CP_MEMCPY_0_DWORDS, dwords), *lo_hi(src), *lo_hi(dest))


def load_state6(state_type: int, state_block: int, num_unit: int, src_addr: int, dst_off: int = 0,
                opcode: int = adreno.CP_LOAD_STATE6_FRAG) -> list[int]:
  """CP_LOAD_STATE6_FRAG (compute state: reference §3.2 step 7) of `num_unit` units from memory (SS6_INDIRECT)."""
  if src_addr % 4: raise ValueError(f"CP_LOAD_STATE6 from {src_addr:#x}: the address must be dword-aligned")
  return pkt7(opcode, field(adreno.CP_LOAD_STATE6_0_DST_OFF, dst_off) | field(adreno.CP_LOAD_STATE6_0_STATE_TYPE, state_type) |
              field(adreno.CP_LOAD_STATE6_0_STATE_SRC, adreno.SS6_INDIRECT) | field(adreno.CP_LOAD_STATE6_0_STATE_BLOCK, state_block) |
              field(adreno.CP_LOAD_STATE6_0_NUM_UNIT, num_unit), *lo_hi(src_addr))


def exec_cs(x: int, y: int, z: int) -> list[int]:
  """CP_EXEC_CS: dispatch x*y*z workgroups of the compute state loaded before."""
  return pkt7(adreno.CP_EXEC_CS, 0, field(adreno.CP_EXEC_CS_1_NGROUPS_X, x), field(adreno.CP_EXEC_CS_2_NGROUPS_Y, y),
              field(adreno.CP_EXEC_CS_3_NGROUPS_Z, z))
