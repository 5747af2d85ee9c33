"""Instruction decoder: machine code -> `Inst` (family, opcode, raw fields, literal, DPP, VOPD halves), per target.

A target's field layouts and family bits are its generation's autogen/amdgcn/<isa>/encodings.py (AMD's ISA guides, the
"Microcode Formats" chapter); opcode numbers, mnemonics and operand kinds its tables.py, generated from LLVM 22's
disassembler (targets.py says which). Source operands stay raw (9-bit VOP / 8-bit SALU encodings); the constants below
name them: the operand codes RDNA (gfx10-gfx12) shares, RDNA3 ISA guide section 3.6, which the code generators
implement; a target whose encodings give other codes is refused until they take them from the target.
"""
from __future__ import annotations
import struct
from dataclasses import dataclass
from functools import cache
from typing import Callable, NamedTuple
from autogen.amdgcn.gfx11 import encodings as rdna
from autogen.amdgcn.gfx11.encodings import (SGPR_MAX, VCC_LO, VCC_HI, TTMP0, NULL, M0, EXEC_LO, EXEC_HI, INT_CONST_LO, INT_CONST_HI,
                                     DPP8, DPP8FI, SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT, POPS_EXITING_WAVE_ID,
                                     FLOAT_CONST_LO, FLOAT_CONST_HI, DPP16, VCCZ, EXECZ, SCC, LDS_DIRECT, LITERAL, VGPR0)
from emu.amdgcn import targets

__all__ = ["DecodeError", "Inst", "Operand", "decode", "decode_all", "inline_constant", "FLOAT_CONSTS", "sext",
           "SGPR_MAX", "VCC_LO", "VCC_HI", "TTMP0", "NULL", "M0", "EXEC_LO", "EXEC_HI", "INT_CONST_LO", "INT_CONST_HI",
           "DPP8", "DPP8FI", "SHARED_BASE", "SHARED_LIMIT", "PRIVATE_BASE", "PRIVATE_LIMIT", "POPS_EXITING_WAVE_ID",
           "FLOAT_CONST_LO", "FLOAT_CONST_HI", "DPP16", "VCCZ", "EXECZ", "SCC", "LDS_DIRECT", "LITERAL", "VGPR0"]

# Float inline constants (guide 3.6.2): code -> (f16 bits, f32 bits, f64 bits). 248 is 1/(2*pi).
FLOAT_CONSTS = {240: (0x3800, 0x3F000000, 0x3FE0000000000000), 241: (0xB800, 0xBF000000, 0xBFE0000000000000),
                242: (0x3C00, 0x3F800000, 0x3FF0000000000000), 243: (0xBC00, 0xBF800000, 0xBFF0000000000000),
                244: (0x4000, 0x40000000, 0x4000000000000000), 245: (0xC000, 0xC0000000, 0xC000000000000000),
                246: (0x4400, 0x40800000, 0x4010000000000000), 247: (0xC400, 0xC0800000, 0xC010000000000000),
                248: (0x3118, 0x3E22F983, 0x3FC45F306DC9C882)}


class DecodeError(ValueError):
  """Bytes that are not a valid instruction of the target (or are cut short)."""


class Operand(NamedTuple):
  """One operand as LLVM prints it. kind: 'vgpr' / 'sgpr' (register-only field), 'src' (register or constant, raw
  9-bit VOP or 8-bit SALU encoding), 'imm' (immediate field), 'kimm' (the literal dword as an operand, e.g. fmamk),
  'text' (implicit operand LLVM prints, e.g. vcc_lo). bits: 16 (a true16 half register), 32, 64, ... type: for 'src'
  how constants are typed: b32, f16, i16, f64, b64, pk_f16, pk_bf16, bf16, none (no constants allowed), vraw; for
  'imm' how the value prints (u16, hex, dec, or a symbolic form); for 'text' the text. note: 'sonly=<class>' /
  'vonly=<class>' when only SGPRs / only VGPRs are legal (LLVM's register class name), 'note=<class>' likewise."""
  field: str
  kind: str
  bits: int
  type: str
  note: str


def parse_spec(spec: str) -> Operand:
  """'src0:src32/f16/vonly=VGPR_32' -> Operand('src0', 'src', 32, 'f16', 'vonly=VGPR_32'); see tables.py."""
  field, _, rest = spec.partition(":")
  if rest.startswith("="): return Operand(field, "text", 0, rest[1:], "")
  head, *attrs = rest.split("/")
  notes = [a for a in attrs if "=" in a]
  typ = next((a for a in attrs if "=" not in a), "")
  for kind, short in (("src", "src"), ("kimm", "kimm"), ("imm", "imm"), ("vgpr", "v"), ("sgpr", "s")):
    if head.startswith(short):
      bits = head[len(short):]
      return Operand(field, kind, int(bits) if bits else 16 if kind == "imm" else 0, typ, ",".join(notes))
  raise ValueError(f"bad operand spec {spec!r}")


class _Op(NamedTuple):
  name: str            # LLVM mnemonic as printed for the plain encoding (e.g. v_add_f32_e32)
  mods: str            # per-bit modifier behaviour LLVM showed (tables.py), for the disassembler
  op: str              # base mnemonic (no _e32/_e64)
  enc: str
  operands: tuple
  srcs: tuple          # fields that read a literal when they hold 255
  kimm: bool           # the literal dword is an operand of its own (fmamk/fmaak, s_setreg_imm32_b32)
  checks: tuple        # (field, codes it may hold): reserved source encodings and non-registers are rejected


_RESERVED_SRC = frozenset(range(209, 230)) | {232, DPP8, DPP8FI, 249, DPP16}   # guide 3.6: reserved / DPP markers


def _valid_codes(op: "Operand") -> frozenset | None:
  """Codes a source or scalar-register operand field may hold (None: any)."""
  if op.kind == "src" and op.type != "vraw":
    bits = max(op.bits, 32)
    return frozenset(c for c in range(512) if c >= VGPR0 or (c < 128 and scalar_reg(c, bits)) or
                     (128 <= c < 256 and c not in _RESERVED_SRC and not (c == 231 and bits > 32)))
  if op.kind == "sgpr" and op.field not in ("sbase", "srsrc", "ssamp"):
    return frozenset(c for c in range(256) if c >= 128 or scalar_reg(c, op.bits))
  return None


def _base(name: str) -> str:
  for suf in ("_e32", "_e64"):
    if name.endswith(suf): return name[:-len(suf)]
  return name


@dataclass(frozen=True, slots=True)
class Table:
  """What decoding one target needs, built once per target from its generation's encodings and its opcode rows."""
  ops: dict[str, dict[int, _Op]]   # family -> opcode -> entry
  family: Callable[[int], str | None]   # first dword -> encoding family (encodings.family)
  words: dict[str, int]            # dwords of each family's encoding (default 2)
  fields: dict[str, tuple]         # family -> ((field, dword, low bit, mask), ...) without the opcode
  opf: dict[str, tuple]            # family -> its opcode field as (dword, low bit, mask)
  seg: tuple | None                # FLAT's seg field, which picks FLAT / SCRATCH / GLOBAL
  mimg: dict[int, tuple]           # image opcodes (tables.MIMG)
  mimg_vdata: Callable[[int, int, int, bool], int]   # encodings.mimg_vdata
  symbols: dict[str, dict[int, str]]   # names LLVM prints for symbolic immediates (tables.SYMBOLS)
  reserved: dict[str, tuple]       # family -> ((dword, low bit, mask), ...) that must be zero (encodings.RESERVED)


_CODES = [n for n in __all__ if n.isupper() and n != "FLOAT_CONSTS"]   # the operand codes named here (RDNA's: gfx10-gfx12)


@cache
def table(target: str) -> Table:
  """The decoding table of `target` (targets.py): its opcode rows, with the operand specs parsed."""
  t = targets.get(target)
  enc, vop3sd = t.encodings, t.tables.VOP3SD
  if differ := [k for k in _CODES if getattr(enc, k, None) != getattr(rdna, k)]:   # e.g. gfx9's M0 is 124, RDNA's NULL
    raise ValueError(f"{target}: its operand codes {', '.join(differ)} differ from the RDNA ones the core implements")
  out: dict[str, dict[int, _Op]] = {}
  for fam, rows in t.ops.items():
    out[fam] = {}
    for opc, entry in rows.items():
      name, specs, *mods = entry
      operands = tuple(parse_spec(s) for s in specs)
      kind = "VOP3SD" if fam == "VOP3" and opc in vop3sd else fam
      # fields that read the literal dword when they hold 255; vraw: LLVM reads none; an 8-bit SGPR destination field
      # (VOP3 compare sdst, v_readlane vdst) holding 255 is decoded as a (meaningless) literal operand too
      srcs = tuple(o.field for o in operands if (o.kind == "src" and o.type != "vraw") or
                   (o.kind == "sgpr" and o.field == "vdst"))
      checks = tuple((o.field, v) for o in operands if (v := _valid_codes(o)) is not None)
      out[fam][opc] = _Op(name, "".join(mods), _base(name), kind, operands, srcs, any(o.kind == "kimm" for o in operands), checks)
  fields = {fam: tuple((n, w, lo, (1 << bits) - 1) for n, (w, lo, bits) in fs.items() if n != "op") for fam, fs in enc.FIELDS.items()}
  opf = {fam: (w, lo, (1 << bits) - 1) for fam, f in enc.FIELDS.items() if "op" in f for w, lo, bits in [f["op"]]}
  return Table(out, enc.family, enc.WORDS, fields, opf, enc.FIELDS.get("FLAT", {}).get("seg"), t.tables.MIMG, enc.mimg_vdata,
               t.tables.SYMBOLS, {fam: tuple((w, lo, (1 << n) - 1) for w, lo, n in fs) for fam, fs in getattr(enc, "RESERVED", {}).items()})


_FLAT_SEG = ("FLAT", "SCRATCH", "GLOBAL")
_DPP_FAMS = ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P")


@dataclass(frozen=True, slots=True)
class Inst:
  """One decoded instruction. `fields` are the raw bit fields (guide names, lowercase); `operands` describe how LLVM
  prints/types the operands (see Operand). `literal` is the trailing 32-bit constant, `dpp` the DPP dword's fields
  (DPP16: ctrl, row_mask, bank_mask, bound_ctrl, fi, src0, src0_neg, src0_abs, src1_neg, src1_abs; DPP8: sel, fi,
  src0), `vopd` the two halves of a VOPD as ((op, fields), (op, fields)) with fields {vdst, src0, vsrc1}."""
  enc: str
  op: str
  opcode: int
  size: int
  fields: dict
  literal: int | None
  dpp: dict | None
  vopd: tuple | None
  operands: tuple
  target: str            # the target it was decoded for (targets.py)
  name: str              # LLVM's mnemonic for the plain encoding (e.g. 'v_add_f32_e64'); disasm adds _dpp etc.
  mods: str = ""         # how LLVM prints the modifier bits (tables.py's third entry), for the disassembler


_SPECIAL32 = {VCC_LO: "vcc_lo", VCC_HI: "vcc_hi", NULL: "null", M0: "m0", EXEC_LO: "exec_lo", EXEC_HI: "exec_hi"}
_SPECIAL64 = {VCC_LO: "vcc", NULL: "null", EXEC_LO: "exec"}


def scalar_reg(code: int, bits: int) -> str | None:
  """LLVM's name of scalar register `code` (0..127) read as `bits` wide; None if that is no register (e.g. vcc_hi as
  a 64-bit pair, or a tuple running past s105 / ttmp15). Tuples of 64 bits align to 2 registers, wider ones to 4:
  hardware ignores the low bits, and LLVM prints the aligned tuple."""
  n = max(bits, 32) // 32
  if n == 1:
    if code <= SGPR_MAX: return f"s{code}"
    if TTMP0 <= code <= TTMP0 + 15: return f"ttmp{code - TTMP0}"
    return _SPECIAL32.get(code)
  if code == NULL: return "null"
  if code in _SPECIAL64: return _SPECIAL64[code] if n == 2 else None
  if code <= SGPR_MAX: base, lim, pre = code, SGPR_MAX, "s"
  elif TTMP0 <= code <= TTMP0 + 15: base, lim, pre = code - TTMP0, 15, "ttmp"
  else: return None
  first = base - base % (2 if n == 2 else 4)
  if first + n - 1 > lim: return None
  return f"{pre}[{first}:{first + n - 1}]"


def sext(v: int, bits: int) -> int:
  """Sign-extend a `bits`-wide field (SMEM offset is 21-bit, FLAT offset 13-bit, SOPP simm16 16-bit...)."""
  return v - (1 << bits) if v >> (bits - 1) & 1 else v


def inline_constant(code: int, bits: int = 32, fp: bool = True) -> int | None:
  """Bit pattern of an inline constant source (128..208 integers, 240..248 floats) for an operand of `bits` width;
  None if `code` is not an inline constant. Integers are sign-extended to the width; float constants use the
  operand's float format when `fp`, else (integer operands) the f32 pattern zero-extended."""
  mask = (1 << bits) - 1
  if INT_CONST_LO <= code <= INT_CONST_HI: return (code - 128 if code <= 192 else 192 - code) & mask
  if code in FLOAT_CONSTS:
    f16, f32, f64 = FLOAT_CONSTS[code]
    if not fp: return f32 & mask
    return {16: f16, 32: f32, 64: f64}.get(bits, f32)
  return None


def _err(code: bytes, offset: int, n: int, why: str) -> DecodeError:
  words = " ".join(f"{w:#010x}" for w in struct.unpack_from(f"<{n}I", code, offset)) if len(code) >= offset + 4 * n else \
    code[offset:offset + 4 * n].hex()
  return DecodeError(f"offset {offset:#x}: {why} (words {words})")


def decode(code: bytes | memoryview, offset: int = 0, target: str = targets.DEFAULT) -> Inst:
  """Decode the instruction at byte `offset` of `code` for `target` (targets.TARGETS: gfx1100, RDNA3.5's gfx1150 /
  gfx1151, which add the scalar float instructions, or RDNA4's gfx1200 / gfx1201); an opcode the target does not have is
  a DecodeError."""
  tab = table(target)
  ops = tab.ops
  code = bytes(code) if isinstance(code, memoryview) else code
  if offset % 4 or offset < 0: raise DecodeError(f"offset {offset:#x}: instructions are dword-aligned")
  if len(code) < offset + 4: raise DecodeError(f"offset {offset:#x}: no instruction here ({len(code)} bytes of code)")
  w0 = struct.unpack_from("<I", code, offset)[0]
  fmt = tab.family(w0)
  if fmt is None: raise _err(code, offset, 1, f"no {target} encoding starts with these bits")
  nwords = tab.words.get(fmt, 2)
  if len(code) < offset + 4 * nwords: raise _err(code, offset, 1, f"{fmt} instruction cut short")
  ws = struct.unpack_from(f"<{nwords}I", code, offset)
  if fmt == "VOPD": return _decode_vopd(code, offset, ws, tab, target)
  if fmt == "MIMG": return _decode_mimg(code, offset, ws, tab, target)
  fam = fmt
  if fmt == "FLAT":
    w, lo, n = tab.seg
    seg = (ws[w] >> lo) & ((1 << n) - 1)
    if seg == 3: raise _err(code, offset, nwords, "FLAT seg=3 is reserved")
    fam = _FLAT_SEG[seg]
  if any((ws[w] >> lo) & m for w, lo, m in tab.reserved.get(fmt, ())): raise _err(code, offset, nwords, f"{fmt}: a reserved bit is set")
  opc = (ws[of[0]] >> of[1]) & of[2] if (of := tab.opf.get(fmt)) else 0
  info = ops[fam].get(opc)
  if info is None: raise _err(code, offset, nwords, f"{fam} opcode {opc:#x} is not a {target} instruction")
  layout = tab.fields["VOP3SD" if info.enc == "VOP3SD" else fmt]
  fields = {n: (ws[w] >> lo) & m for n, w, lo, m in layout}
  size, literal, dpp = 4 * nwords, None, None
  is_dpp = info.enc in _DPP_FAMS and fields.get("src0") in (DPP16, DPP8, DPP8FI) and "src0" in info.srcs
  for name, ok in info.checks:
    if fields[name] not in ok and not (is_dpp and name == "src0"):
      raise _err(code, offset, nwords, f"{info.name}: {name} = {fields[name]} is a reserved operand encoding")
  if is_dpp:
    if len(code) < offset + size + 4: raise _err(code, offset, nwords, "DPP dword missing")
    dpp = _dpp(struct.unpack_from("<I", code, offset + size)[0], fields["src0"])
    size += 4
  elif info.kimm or any(fields[f] == LITERAL for f in info.srcs):
    if len(code) < offset + size + 4: raise _err(code, offset, nwords, "literal dword missing")
    literal = struct.unpack_from("<I", code, offset + size)[0]
    size += 4
  return Inst(info.enc, info.op, opc, size, fields, literal, dpp, None, info.operands, target, info.name, info.mods)


def _dpp(w: int, kind: int) -> dict:
  if kind == DPP16:
    return {"src0": w & 0xFF, "ctrl": (w >> 8) & 0x1FF, "fi": (w >> 18) & 1, "bound_ctrl": (w >> 19) & 1,
            "src0_neg": (w >> 20) & 1, "src0_abs": (w >> 21) & 1, "src1_neg": (w >> 22) & 1, "src1_abs": (w >> 23) & 1,
            "bank_mask": (w >> 24) & 0xF, "row_mask": (w >> 28) & 0xF}
  return {"src0": w & 0xFF, "sel": tuple((w >> (8 + 3 * i)) & 7 for i in range(8)), "fi": int(kind == DPP8FI)}


def _decode_vopd(code: bytes, offset: int, ws: tuple, tab: Table, target: str) -> Inst:
  f = {n: (ws[w] >> lo) & m for n, w, lo, m in tab.fields["VOPD"]}
  x, y = tab.ops["VOPDX"].get(f["opx"]), tab.ops["VOPDY"].get(f["opy"])
  if x is None or y is None: raise _err(code, offset, 2, f"VOPD opx {f['opx']:#x} / opy {f['opy']:#x} is not a {target} dual op")
  vdsty = (f["vdsty"] << 1) | ((f["vdstx"] & 1) ^ 1)   # guide 16.x: VDSTY holds bits 7:1, bit 0 is !VDSTX[0]
  xf = {"vdst": f["vdstx"], "src0": f["src0x"], "vsrc1": f["vsrc1x"]}
  yf = {"vdst": vdsty, "src0": f["src0y"], "vsrc1": f["vsrc1y"]}
  size, literal = 8, None
  if x.kimm or y.kimm or LITERAL in (f["src0x"], f["src0y"]):
    if len(code) < offset + 12: raise _err(code, offset, 2, "literal dword missing")
    literal, size = struct.unpack_from("<I", code, offset + 8)[0], 12
  return Inst("VOPD", "vopd", (f["opx"] << 5) | f["opy"], size, f, literal, None, ((x.op, xf), (y.op, yf)),
              x.operands + y.operands, target, f"{x.name} :: {y.name}")



def _decode_mimg(code: bytes, offset: int, ws: tuple, tab: Table, target: str) -> Inst:
  """Image instructions (graphics; decoded for listings). NSA forms carry their extra address VGPRs in a third
  dword (vaddr1..vaddr4)."""
  f = {n: (ws[w] >> lo) & m for n, w, lo, m in tab.fields["MIMG"]}
  w, lo, m = tab.opf["MIMG"]
  opc = (ws[w] >> lo) & m
  if opc not in tab.mimg: raise _err(code, offset, 2, f"MIMG opcode {opc:#x} is not a {target} instruction")
  size = 8
  if f["nsa"]:
    if len(code) < offset + 12: raise _err(code, offset, 2, "NSA address dword missing")
    w2 = struct.unpack_from("<I", code, offset + 8)[0]
    f.update({f"vaddr{i}": (w2 >> 8 * (i - 1)) & 0xFF for i in range(1, 5)})
    size = 12
  name = tab.mimg[opc][0]
  return Inst("MIMG", name, opc, size, f, None, None, None, _MIMG_OPERANDS, target, name)


_MIMG_OPERANDS = tuple(parse_spec(s) for s in ("vdata:v32", "vaddr:v32", "srsrc:s256", "ssamp:s128"))
table(targets.DEFAULT)   # the default target's table is built at import, not inside the first decode


def decode_all(code: bytes | memoryview, offset: int = 0, end: int | None = None, target: str = targets.DEFAULT) -> list[Inst]:
  """Decode instructions back to back from `offset` up to `end` (default: the end of `code`)."""
  code = bytes(code)
  end = len(code) if end is None else end
  out = []
  while offset < end:
    inst = decode(code, offset, target)
    out.append(inst)
    offset += inst.size
  return out
