"""An ir3 executor skeleton: straight-line cat0/cat1/cat2 code on the full-precision register file of a set of lanes.

Decoding: the category is bits 63:61 and each category's opcode field and mnemonics come from autogen.ir3.tables (swept
from mesa's ir3 disassembler). Fields, from mesa's ISA description (src/freedreno/isa/ir3-cat2.xml, ir3-common.xml):
cat2 DST 39:32, REPEAT 41:40, SAT 42, SRC1_R 43, SS 44, UL 45, DST_CONV 46, EI 47, COND 50:48, SRC2_R 51, FULL 52,
JP 59, SY 60; SRC1 15:0 and SRC2 31:16 are #multisrc: a GPR (15:14 ABSNEG, 13:8 zero, 7:0 register = GPR << 2 | SWIZ)
or an immediate (13:11 = 0b100, 10:0 a signed integer). Register r<n>.<xyzw> is index n * 4 + component.
cat1 mov (ir3-cat1.xml): DST 39:32, REPEAT 41:40, SRC_R 43, UL 45, DST_TYPE 48:46, DST_REL 49, SRC_TYPE 52:50, the
source form 54:53 (00 a GPR in 7:0, 01 const, 10 a 32-bit immediate in 31:0), ROUND 56:55; types f16 f32 u16 u32 s16 s32
u8 s8 (#type).
Semantics (what each instruction computes is the mnemonic's: .f float32, .u/.s 32-bit integers, .b bits):
  cat0  nop, end;
  cat1  mov of one 32-bit type to itself (f32, u32, s32: the bits are copied) from a GPR or an immediate;
  cat2  add.f mul.f (IEEE binary32, round to nearest even, as numpy; the GPU's denormal handling is not verified
        here), add.u/.s sub.u/.s (wrapping), min/max .u/.s, and.b or.b xor.b not.b, shl.b shr.b ashr.b (shift amounts
        0..31; others refused: the hardware's treatment of larger ones is not in the facts), mull.u (low 32 bits).
Refused, each with an error naming the instruction or field: every other instruction in the tables (cat3-cat7, the
rest of cat0/cat1/cat2: they decode but have no semantics here; conversions, 8/16-bit moves), encodings the tables do not have, REPEAT, SAT, (r), UL,
DST_CONV and half precision (FULL clear), ABSNEG on integer ops, immediates on float ops, const/relative/float-table
sources, a0/p0 and registers past r47, and code that runs off its end without `end`. SS, SY, JP and EI only order or
schedule execution, which a serial executor need not do.
"""
from __future__ import annotations
from typing import Sequence
import numpy as np
from autogen.ir3.tables import OPC_FIELDS, OPS

GPRS = 48                                   # r0..r47
REGS = GPRS * 4
TYPES = ("f16", "f32", "u16", "u32", "s16", "s32", "u8", "s8")   # ir3-common.xml #type


class IR3Error(Exception):
  """An instruction or field the executor does not model, named."""


def bits(v: int, hi: int, lo: int) -> int: return v >> lo & ((1 << (hi - lo + 1)) - 1)


def _name(word: int) -> str:
  cat = word >> 61
  entry = OPS[cat].get(bits(word, *OPC_FIELDS[cat]))
  return f"{entry[0] if entry else 'no instruction'} (cat{cat}, {word:#018x})"


def _f(x: np.ndarray) -> np.ndarray: return x.view(np.float32)


_F32 = {"add.f": np.add, "mul.f": np.multiply}
_U32 = {"add.u": np.add, "add.s": np.add, "sub.u": np.subtract, "sub.s": np.subtract, "and.b": np.bitwise_and,
        "or.b": np.bitwise_or, "xor.b": np.bitwise_xor, "min.u": np.minimum, "max.u": np.maximum,
        "mull.u": lambda a, b: (a.astype(np.uint64) * b.astype(np.uint64)).astype(np.uint32)}
_S32 = {"min.s": np.minimum, "max.s": np.maximum}
_SHIFT = {"shl.b": np.left_shift, "shr.b": np.right_shift}


class Lanes:
  """The full register file of `n` lanes (uint32 words): regs[lane, r * 4 + component]."""
  def __init__(self, n: int):
    self.regs = np.zeros((n, REGS), np.uint32)

  def run(self, code: Sequence[int]) -> int:
    """Execute 64-bit instructions from the first until `end` -> instructions executed."""
    for count, word in enumerate(code, 1):
      cat = word >> 61
      entry = OPS[cat].get(bits(word, *OPC_FIELDS[cat]))
      if entry is None: raise IR3Error(f"{word:#018x}: cat{cat} opcode {bits(word, *OPC_FIELDS[cat]):#x} is no ir3 instruction")
      if cat == 0:
        if entry[0] not in ("nop", "end"): raise IR3Error(f"ir3 instruction {_name(word)} is not modelled by the executor")
        if word & ~(7 << 61 | 0xF << 55 | 1 << 60 | 1 << 44):
          raise IR3Error(f"{_name(word)}: fields other than SY/SS set ({word:#x}) are not modelled")
        if entry[0] == "end": return count
      elif cat == 1: self._mov(word, entry)
      elif cat == 2: self._cat2(word, entry)
      else: raise IR3Error(f"ir3 instruction {_name(word)} is not modelled by the executor")
    raise IR3Error(f"the code ran past its last instruction ({len(code)}) without an `end`")

  def _mov(self, w: int, entry: tuple[str, int, bool]) -> None:
    """cat1 mov between 32-bit registers of one type (a copy of the bits), from a register or a 32-bit immediate."""
    src_t, dst_t, form = bits(w, 52, 50), bits(w, 48, 46), bits(w, 54, 53)
    name = f"{entry[0].split('.')[0]}.{TYPES[src_t]}{TYPES[dst_t]} (cat1, {w:#018x})"
    if entry[0].split(".")[0] != "mov": raise IR3Error(f"ir3 instruction {name} is not modelled by the executor")
    if src_t != dst_t or TYPES[src_t] not in ("f32", "u32", "s32"):
      raise IR3Error(f"{name}: only same-type 32-bit moves are modelled (conversions and 8/16-bit types are not)")
    for field, (hi, lo) in {"REPEAT": (41, 40), "SRC_R": (43, 43), "UL": (45, 45), "DST_REL": (49, 49), "ROUND": (56, 55)}.items():
      if bits(w, hi, lo): raise IR3Error(f"{name}: {field} is set, which the executor does not model")
    if (dst := bits(w, 39, 32)) >= REGS: raise IR3Error(f"{name}: destination register {dst:#x} (a0/p0 or past r47) is not modelled")
    if form == 0b10: self.regs[:, dst] = bits(w, 31, 0)
    elif form == 0b00 and not bits(w, 31, 8) and bits(w, 7, 0) < REGS: self.regs[:, dst] = self.regs[:, bits(w, 7, 0)]
    else: raise IR3Error(f"{name}: a const, relative or a0/p0 source is not modelled")

  def _cat2(self, w: int, entry: tuple[str, int, bool]) -> None:
    name, operands, _ = entry                # COND (50:48) only matters to the cmp* instructions, not modelled
    if name not in _F32 and name not in _U32 and name not in _S32 and name not in _SHIFT and name not in ("not.b", "ashr.b"):
      raise IR3Error(f"ir3 instruction {_name(w)} is not modelled by the executor")
    for field, (hi, lo) in {"REPEAT": (41, 40), "SAT": (42, 42), "SRC1_R": (43, 43), "UL": (45, 45), "DST_CONV": (46, 46),
                            "SRC2_R": (51, 51)}.items():
      if bits(w, hi, lo): raise IR3Error(f"{_name(w)}: {field} is set, which the executor does not model")
    if not bits(w, 52, 52): raise IR3Error(f"{_name(w)}: half precision (FULL clear) is not modelled")
    dst = bits(w, 39, 32)
    if dst >= REGS: raise IR3Error(f"{_name(w)}: destination register {dst:#x} (a0/p0 or past r47) is not modelled")
    is_float = name.endswith(".f")
    a = self._src(w, bits(w, 15, 0), is_float)
    if operands == 2: out = ~a
    else:
      b = self._src(w, bits(w, 31, 16), is_float)
      if name in _F32: out = _F32[name](_f(a), _f(b)).view(np.uint32)
      elif name in _U32: out = _U32[name](a, b)
      elif name in _S32: out = _S32[name](a.view(np.int32), b.view(np.int32)).view(np.uint32)
      else:
        if (b > 31).any(): raise IR3Error(f"{_name(w)}: a shift by {int(b.max())} (past 31) is not modelled")
        out = (a.view(np.int32) >> b.astype(np.int32)).view(np.uint32) if name == "ashr.b" else _SHIFT[name](a, b)
    self.regs[:, dst] = out

  def _src(self, w: int, s: int, is_float: bool) -> np.ndarray:
    absneg = bits(s, 15, 14)
    if bits(s, 13, 8) == 0:
      if bits(s, 7, 0) >= REGS: raise IR3Error(f"{_name(w)}: source register {bits(s, 7, 0):#x} (a0/p0 or past r47) is not modelled")
      v = self.regs[:, bits(s, 7, 0)].copy()
    elif bits(s, 13, 11) == 0b100:
      if is_float: raise IR3Error(f"{_name(w)}: an immediate source of a float instruction is not modelled")
      imm = bits(s, 10, 0) - (bits(s, 10, 10) << 11)                 # signed 11-bit
      v = np.full(len(self.regs), imm & 0xFFFFFFFF, np.uint32)
    else: raise IR3Error(f"{_name(w)}: source {s:#06x} is a const, relative or float-table operand, which is not modelled")
    if absneg:
      if not is_float: raise IR3Error(f"{_name(w)}: ABSNEG on an integer source is not modelled")
      v = v & np.uint32(0x7FFFFFFF) if absneg & 2 else v
      v = v ^ np.uint32(0x80000000) if absneg & 1 else v
    return v
