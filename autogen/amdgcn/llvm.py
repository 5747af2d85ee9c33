"""LLVM 22's AMDGPU disassembler as an oracle: the source of the generated ISA tables and the reference
the disassembler tests compare against. Never imported by emu/ at run time.

`Disassembler` calls libLLVM's C API in-process (LLVMDisasmInstruction returns the byte count, or 0 for an
invalid encoding). `disasm_batch` runs it in a child process because LLVM can crash on odd encodings
(seen with llvm-mc-22 on random words); a crashed batch is bisected so one bad encoding costs only itself.
"""
from __future__ import annotations
import ctypes, ctypes.util, glob, importlib, os, struct, subprocess, sys
from types import ModuleType
from autogen.amdgcn import ISAS

LLVM_MAJOR = 22
TRIPLE = b"amdgcn-amd-amdhsa"
ISA_OF = {cpu: isa for isa in ISAS for cpu in importlib.import_module(f"autogen.amdgcn.{isa}").CPUS}   # LLVM processor -> its tables
TARGETS = tuple(ISA_OF)
PAD = b"\0" * 16   # trailing bytes so an instruction that needs a literal/DPP dword never reads past the buffer


def libllvm_path() -> str:
  """libLLVM 22 from Debian's libllvm22 (a dependency of the llvm-22 package scripts/setup.sh installs)."""
  cands = glob.glob(f"/usr/lib/*/libLLVM.so.{LLVM_MAJOR}*") + glob.glob(f"/usr/lib/llvm-{LLVM_MAJOR}/lib/libLLVM*.so*")
  if not cands and (p := ctypes.util.find_library(f"LLVM-{LLVM_MAJOR}")): cands = [p]
  if not cands: raise FileNotFoundError(f"libLLVM {LLVM_MAJOR} not found; install it with `scripts/setup.sh` (Debian package llvm-{LLVM_MAJOR})")
  return sorted(cands)[0]


def available() -> bool:
  try: libllvm_path()
  except FileNotFoundError: return False
  return True


class Disassembler:
  """In-process disassembler for one target (one LLVM disassembler context)."""
  def __init__(self, cpu: str = "gfx1100"):
    lib = ctypes.CDLL(libllvm_path())
    for f in ("LLVMInitializeAMDGPUTargetInfo", "LLVMInitializeAMDGPUTargetMC", "LLVMInitializeAMDGPUDisassembler"): getattr(lib, f)()
    lib.LLVMCreateDisasmCPUFeatures.restype = ctypes.c_void_p
    lib.LLVMCreateDisasmCPUFeatures.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.LLVMDisasmInstruction.restype = ctypes.c_size_t
    lib.LLVMDisasmInstruction.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
    self._lib, self._buf = lib, ctypes.create_string_buffer(1024)
    self.cpu = cpu
    self._ctx = lib.LLVMCreateDisasmCPUFeatures(TRIPLE, cpu.encode(), b"", None, 0, None, None)
    if not self._ctx: raise RuntimeError(f"LLVMCreateDisasmCPUFeatures failed for {cpu}")

  def version(self) -> str:
    v = [ctypes.c_uint() for _ in range(3)]
    self._lib.LLVMGetVersion(*map(ctypes.byref, v))
    return ".".join(str(x.value) for x in v)

  def __call__(self, code: bytes) -> tuple[int, str | None]:
    """(size, text) of the instruction at the start of `code` (padded here), or (0, None) if LLVM rejects it. The text
    is the instruction only, as llvm-mc and llvm-objdump print it: the C API appends its warnings (e.g. `; Warning:
    SGPR_64: scalar reg isn't aligned 9`, several run together), which are cut off."""
    code = bytes(code) + PAD
    n = self._lib.LLVMDisasmInstruction(self._ctx, code, len(code), 0, self._buf, len(self._buf))
    return (n, self._buf.value.decode().split(" ; Warning:")[0].strip()) if n else (0, None)

  def words(self, *ws: int) -> tuple[int, str | None]:
    return self(struct.pack(f"<{len(ws)}I", *ws))


def _worker(cpu: str) -> None:
  """Child process: reads records (u32 count, then count*16 bytes), writes 'size\\ttext' lines."""
  dis, inp, out = Disassembler(cpu), sys.stdin.buffer, sys.stdout
  n = struct.unpack("<I", inp.read(4))[0]
  for i in range(n):
    size, text = dis(inp.read(16))
    out.write(f"{size}\t{text or ''}\n")
  out.flush()


def _run(chunks: list[bytes], cpu: str) -> list[tuple[int, str | None]] | None:
  data = struct.pack("<I", len(chunks)) + b"".join(c.ljust(16, b"\0")[:16] for c in chunks)
  p = subprocess.run([sys.executable, "-c", f"from autogen.amdgcn.llvm import _worker; _worker({cpu!r})"], input=data,
                     capture_output=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
  if p.returncode != 0: return None
  res = []
  for line in p.stdout.decode().splitlines():
    size, text = line.split("\t", 1)
    res.append((int(size), text or None))
  if len(res) != len(chunks): return None
  return res


def disasm_batch(chunks: list[bytes], cpu: str = "gfx1100") -> list[tuple[int, str | None]]:
  """LLVM's (size, text) for each chunk (up to 16 bytes: the instruction plus any trailing dwords), in a child
  process. An encoding that crashes LLVM is isolated by bisection and reported as (-1, None)."""
  if not chunks: return []
  res = _run(chunks, cpu)
  if res is not None: return res
  if len(chunks) == 1: return [(-1, None)]
  mid = len(chunks) // 2
  return disasm_batch(chunks[:mid], cpu) + disasm_batch(chunks[mid:], cpu)


_SRC_PICKS = (0, 1, 105, 106, 107, 124, 125, 126, 127, 128, 129, 192, 193, 208, 230, 235, 240, 242, 248, 251, 253, 254, 255)


def isa_tables(cpu: str) -> ModuleType:
  """The autogen.amdgcn package whose tables cover LLVM processor `cpu` (its encodings, probes and tables modules)."""
  if cpu not in ISA_OF: raise ValueError(f"no ISA tables cover {cpu!r}: one of {', '.join(ISA_OF)}")
  isa = importlib.import_module(f"autogen.amdgcn.{ISA_OF[cpu]}")
  importlib.import_module(f"{isa.__name__}.tables")
  return isa


def sample_words(rng, per_op: int, target: str = "gfx1100") -> list[bytes]:
  """Test instructions (16 bytes each: the words plus trailing literal/DPP dwords): `per_op` variants of every
  opcode in `target`'s tables, the non-opcode fields random but biased toward values LLVM accepts and that exercise
  the printer (VGPRs, inline constants, literals, zeroed unused fields)."""
  isa = isa_tables(target)
  encodings, t = isa.encodings, isa.tables
  overlay = t.TARGET_OPS.get(t.TARGETS[target] or "", {})
  tables = {fam: [op for op, e in {**ops, **overlay.get(fam, {})}.items() if e is not None] for fam, ops in t.OPS.items()}
  out = []
  for fam, ops in list(tables.items()) + ([("MIMG", t.MIMG)] if "MIMG" in encodings.FIELDS else []):
    if fam == "VOPDY": continue
    fmt, fixed = isa.probes.PSEUDO.get(fam, (fam, {}))   # SCRATCH / GLOBAL: FLAT with seg set; VOPDX: VOPD
    seg = fixed.get("seg")
    fields = encodings.FIELDS[fmt]
    for opc in ops:
      for _ in range(per_op):
        ws = [encodings.PREFIX[fmt], 0, rng.getrandbits(32), rng.getrandbits(32)]
        for name, f in fields.items():
          if name in ("op", "opx", "seg"): continue
          r = rng.random()
          v = 0 if r < 0.25 else rng.getrandbits(f[2])
          if f[2] == 9 and r > 0.5: v = rng.choice(_SRC_PICKS) if r < 0.75 else 256 + rng.getrandbits(8)
          encodings.put(ws, f, v)
        if fam == "VOPDX": encodings.put(ws, fields["opx"], opc); encodings.put(ws, fields["opy"], rng.choice(tables["VOPDY"]))
        elif "op" in fields: encodings.put(ws, fields["op"], opc)
        if seg is not None: encodings.put(ws, fields["seg"], seg)
        if rng.random() < 0.3: ws[2] = rng.choice((0, 1, 64, 0x3F800000, 0x3C00, 0x3118, 0x3E22F983, 0xFFFFFFF0, 0x3FF00000, 0xBC00))
        out.append(struct.pack("<4I", *ws))
  return out
