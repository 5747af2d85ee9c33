"""amdgpu asic_reg headers (`<ip>_offset.h` + `<ip>_sh_mask.h`) -> one table of autogen.regfields.Reg per IP.

offset.h: `regNAME <dword offset>` and `regNAME_BASE_IDX <segment>`; sh_mask.h: `NAME__FIELD__SHIFT` and
`NAME__FIELD_MASK`. Each register becomes `regNAME = Reg(offset, base_idx, "FIELD:shift:width ...")` (likewise
ixNAME, cfgNAME); field sets of registers absent from offset.h become `NAME = Reg(None, None, ...)`.
"""
from __future__ import annotations
import pathlib, re
from dataclasses import dataclass
from autogen.gen import cparse, headers
from autogen.gen.writer import Module


class BadRegisterHeader(RuntimeError):
  """A register header does not have the shape this generator reads (named in the message)."""


def _values(hdr: cparse.Header, file: pathlib.Path) -> dict[str, int]:
  macros = [m for m in hdr.macros if m.file == str(file) and m.body]
  out = {m.name: v for m in macros if (v := cparse.literal_value(m.body)) is not None}
  rest = [m.name for m in macros if m.name not in out]
  out.update(cparse.evaluate_macros(hdr, rest))
  if missing := [n for n in rest if n not in out]: raise BadRegisterHeader(f"{file}: non-integer macros {missing[:5]}")
  return out


# reg: MMIO register (dword offset from segment BASE_IDX; a few have no BASE_IDX); ix: index of an indirect
# register (reached through an index/data pair); cfg: PCI configuration space offset (NBIO)
_REG_NAME = re.compile(r"^(reg|ix|cfg)(\w+)$")


def registers(offset_h: pathlib.Path, mask_h: pathlib.Path):
  """({header name: (NAME, offset, base_idx or None)}, {NAME: {field: (shift, width)}}, [incomplete REG.FIELD])."""
  hdr = cparse.parse([offset_h, mask_h], [])
  offs, masks = _values(hdr, offset_h), _values(hdr, mask_h)
  regs = {}
  for name, v in offs.items():
    if name.endswith("_BASE_IDX"): continue
    if not (m := _REG_NAME.match(name)): raise BadRegisterHeader(f"{offset_h}: {name} has none of the prefixes reg/ix/cfg")
    regs[name] = (m.group(2), v, offs.get(f"{name}_BASE_IDX"))
  fields: dict[str, dict[str, tuple[int, int]]] = {}
  incomplete = []  # header slips (a lone __SHIFT or _MASK, a mask that disagrees with its shift): listed, not guessed
  for name, shift in masks.items():
    if not name.endswith("__SHIFT"): continue
    reg, _, field = name[:-7].partition("__")
    if not reg or not field: raise BadRegisterHeader(f"{mask_h}: {name} is not REG__FIELD__SHIFT")
    if (mask := masks.get(f"{name[:-7]}_MASK")) is None:
      incomplete.append(f"{reg}.{field} (no _MASK)"); continue
    width = (mask >> shift).bit_length()
    if mask == 0 or mask != ((1 << width) - 1) << shift:
      incomplete.append(f"{reg}.{field} (shift {shift}, mask {mask:#x})"); continue
    fields.setdefault(reg, {})[field] = (shift, width)
  for name in masks:
    if name.endswith("_MASK") and f"{name[:-5]}__SHIFT" not in masks:
      incomplete.append(f"{name[:-5].replace('__', '.', 1)} (no __SHIFT)")
    elif not name.endswith(("__SHIFT", "_MASK")): raise BadRegisterHeader(f"{mask_h}: unexpected macro {name}")
  return regs, fields, incomplete


@dataclass(frozen=True)
class AsicRegModule:
  out: str   # e.g. "amd/gc_11_0_0.py"
  stem: str  # e.g. "gc/gc_11_0_0" under drivers/gpu/drm/amd/include/asic_reg

  def __call__(self, outdir: pathlib.Path) -> list[pathlib.Path]:
    _, src = headers.packages()
    rels = [f"{headers.ASIC_REG}/{self.stem}_{k}.h" for k in ("offset", "sh_mask")]
    regs, fields, incomplete = registers(*(src.path(r) for r in rels))
    ip = pathlib.Path(self.stem).name
    mod = Module(f"autogen/{self.out}", src, rels,
                 f"{ip} registers: regNAME = Reg(dword offset, BASE_IDX, 'FIELD:shift:width ...').")
    mod.imports("autogen.regfields", ["Reg", "name_registers"])
    first: dict[str, str] = {}  # spec -> the first register with it: later ones share it by reference (smaller file)

    def fields_of(hname: str, reg: str) -> str:
      spec = " ".join(f"{f}:{s}:{w}" for f, (s, w) in fields.get(reg, {}).items())
      if (ref := first.setdefault(spec, hname)) != hname and len(ref) < len(spec) + 2: return ref
      return repr(spec)
    mod.section("registers (offset.h order); a Reg given another Reg shares its fields")
    for hname, (r, off, base) in regs.items(): mod.define(hname, f"Reg({off:#06x}, {base}, {fields_of(hname, r)})")
    named = {r for r, _, _ in regs.values()}
    if orphans := [r for r in fields if r not in named]:
      mod.section("field sets with no register in offset.h (sh_mask.h order)")
      for r in orphans: mod.define(r, f"Reg(None, None, {fields_of(r, r)})")
    if incomplete:
      mod.section("fields left out: the header's __SHIFT/_MASK pair is incomplete or inconsistent\n# " + "\n# ".join(incomplete))
    mod.section("names for error messages")
    mod.parts.append("name_registers(globals())")
    path = outdir / self.out
    mod.write(path)
    return [path]
