"""Test helpers for the RDNA3 executor: assemble gfx1100 snippets with llvm-mc-22, compile OpenCL C kernels with
clang-22 / ld.lld-22, and run one wave of a snippet with per-lane register inputs and outputs.

Register convention of `run_wave`: the harness uses s98-s105 and v254-v255; test bodies use everything else; s[0:1]
holds the address of the input array (each input VGPR as one row of lanes, in register order).
Inputs: `v={reg: value or per-lane list}`, `s={reg: value}` (64-bit values fill a pair), `exec_mask`. Outputs:
`.v[reg]` (numpy u32 per lane), `.s[reg]`, `.scc`, `.vcc`, `.exec` as the body left them.
"""
from __future__ import annotations
import hashlib, os, struct, subprocess, tempfile
import numpy as np
from elftools.elf.elffile import ELFFile
from drivers.hcq.compiler import llvm_tool
from emu.amdgcn import Memory, run, dispatch

# OpenCL kernels shared by the tests and bench/emu_throughput.py
VADD = """__attribute__((reqd_work_group_size(64, 1, 1)))
kernel void vadd(global const float *a, global const float *b, global float *c, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x(); if (i < n) c[i] = a[i] + b[i]; }"""
MATMUL = """__attribute__((reqd_work_group_size(16, 16, 1)))
kernel void matmul(global const float *a, global const float *b, global float *c, int n) {
  int x = __builtin_amdgcn_workgroup_id_x() * 16 + __builtin_amdgcn_workitem_id_x();
  int y = __builtin_amdgcn_workgroup_id_y() * 16 + __builtin_amdgcn_workitem_id_y();
  float acc = 0.0f;
  for (int k = 0; k < n; k++) acc = fma(a[y * n + k], b[k * n + x], acc);
  c[y * n + x] = acc;
}"""
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hcq", "rdna3-tests")


def _cached(kind: str, src: str, build) -> bytes:
  path = os.path.join(CACHE, kind, hashlib.sha256(src.encode()).hexdigest()[:32])
  try:
    with open(path, "rb") as f: return f.read()
  except FileNotFoundError: pass
  data = build()
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
  with os.fdopen(fd, "wb") as f: f.write(data)
  os.replace(tmp, path)
  return data


def assemble(src: str, wave64: bool = False, cpu: str = "gfx1100") -> bytes:
  """Machine code for assembly text (llvm-mc-22 for `cpu`; cached on disk)."""
  attr = "+wavefrontsize64" if wave64 else "+wavefrontsize32"
  def build() -> bytes:
    with tempfile.TemporaryDirectory() as d:
      obj, out = os.path.join(d, "a.o"), os.path.join(d, "a.bin")
      p = subprocess.run([llvm_tool("llvm-mc"), "-triple=amdgcn-amd-amdhsa", f"-mcpu={cpu}", f"-mattr={attr}", "-filetype=obj", "-o", obj],
                         input=src.encode(), capture_output=True)
      if p.returncode: raise ValueError(f"llvm-mc rejected the test snippet:\n{p.stderr.decode()}")
      subprocess.run([llvm_tool("llvm-objcopy"), "-O", "binary", "--only-section=.text", obj, out], check=True)
      with open(out, "rb") as f: return f.read()
  return _cached("asm", attr + src if cpu == "gfx1100" else f"{cpu} {attr}{src}", build)


def compile_cl(src: str, extra: tuple[str, ...] = (), cpu: str = "gfx1100") -> bytes:
  """An HSA code object (ELF) for OpenCL C source (clang-22 -> ld.lld-22 for `cpu`; cached on disk)."""
  def build() -> bytes:
    with tempfile.TemporaryDirectory() as d:
      cl, obj, out = (os.path.join(d, n) for n in ("k.cl", "k.o", "k.hsaco"))
      with open(cl, "w") as f: f.write(src)
      subprocess.run([llvm_tool("clang"), "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={cpu}",
                      "-nogpulib", "-O2", *extra, "-c", cl, "-o", obj], check=True, capture_output=True)
      subprocess.run([llvm_tool("ld.lld"), "-shared", obj, "-o", out], check=True, capture_output=True)
      with open(out, "rb") as f: return f.read()
  return _cached("cl", src + "\0" + " ".join(extra) + ("" if cpu == "gfx1100" else f"\0{cpu}"), build)


class CodeObject:
  """An HSA code object loaded into emulator memory (PT_LOAD segments at a fresh base)."""
  def __init__(self, mem: Memory, elf: bytes, target: str = "gfx1100"):
    import io
    self.mem, self.target, e = mem, target, ELFFile(io.BytesIO(elf))
    segs = [s for s in e.iter_segments() if s["p_type"] == "PT_LOAD"]
    size = max(s["p_vaddr"] + s["p_memsz"] for s in segs)
    self.base = mem.alloc((size + 0xFFF) & ~0xFFF)
    for s in segs: mem.write(self.base + s["p_vaddr"], s.data())
    self.symbols = {sym.name: sym["st_value"] for sec in e.iter_sections() if sec.header.sh_type == "SHT_SYMTAB"
                    for sym in sec.iter_symbols()}

  def kernel(self, name: str, grid, block, args: bytes, **kw):
    """Dispatch kernel `name` with the kernarg bytes `args`; grid counts workgroups."""
    ka = self.mem.alloc(max(len(args), 16) + 256)
    self.mem.write(ka, args)
    try: return dispatch(self.mem, self.base + self.symbols[f"{name}.kd"], grid, block, kernarg_ptr=ka, **{"target": self.target, **kw})
    finally: self.mem.free(ka)


def buffer(mem: Memory, arr: np.ndarray) -> int:
  addr = mem.alloc(max(arr.nbytes, 4))
  mem.write(addr, arr.tobytes())
  return addr


def read(mem: Memory, addr: int, dtype, n: int) -> np.ndarray:
  return np.frombuffer(mem.read(addr, np.dtype(dtype).itemsize * n), dtype).copy()


class WaveResult:
  def __init__(self, v: dict, s: dict, scc: int, vcc: int, exec_: int, stats):
    self.v, self.s, self.scc, self.vcc, self.exec, self.stats = v, s, scc, vcc, exec_, stats

  def f32(self, reg: int) -> np.ndarray: return self.v[reg].view(np.float32)
  def u64(self, reg: int) -> np.ndarray: return self.v[reg].astype(np.uint64) | self.v[reg + 1].astype(np.uint64) << np.uint64(32)


def run_wave(body: str, v: dict | None = None, s: dict | None = None, vout=(), sout=(), wave64: bool = False,
             exec_mask: int | None = None, lds: int = 0, scratch: int = 0, lanes: int | None = None,
             target: str = "gfx1100") -> WaveResult:
  """Run `body` (assembly for `target`) in one wave with the given register inputs; read back the requested registers."""
  W = 64 if wave64 else 32
  v, s = v or {}, s or {}
  vin = sorted(v)
  lines = ["s_mov_b64 s[100:101], s[0:1]", "s_mov_b64 s[102:103], s[2:3]", "v_lshlrev_b32 v255, 2, v0"]
  inp = np.zeros((len(vin), W), np.uint32)
  for i, r in enumerate(vin):
    vals = v[r] if isinstance(v[r], (list, tuple, np.ndarray)) else [v[r]] * W
    inp[i, :len(vals)] = np.array([int(x) & 0xFFFFFFFF for x in vals], np.uint32)
    lines += [f"global_load_b32 v{r}, v255, s[100:101]", f"s_add_u32 s100, s100, {4 * W}", "s_addc_u32 s101, s101, 0"]
  lines.append("s_waitcnt vmcnt(0)")
  for r, val in s.items():
    if val >> 32: lines += [f"s_mov_b32 s{r}, {val & 0xFFFFFFFF:#x}", f"s_mov_b32 s{r + 1}, {val >> 32:#x}"]
    else: lines.append(f"s_mov_b32 s{r}, {val & 0xFFFFFFFF:#x}" if isinstance(r, int) else f"s_mov_b32 {r}, {val:#x}")
  if exec_mask is not None:
    lines += [f"s_mov_b32 exec_lo, {exec_mask & 0xFFFFFFFF:#x}"] + ([f"s_mov_b32 exec_hi, {exec_mask >> 32:#x}"] if wave64 else [])
  lines.append(body)
  # epilogue: SCC first (nothing below changes it), then EXEC, then all lanes on for the stores
  lines += ["s_cselect_b32 s104, 1, 0", "s_mov_b64 s[98:99], exec", "s_mov_b64 exec, -1" if wave64 else "s_mov_b32 exec_lo, -1"]
  store = lambda o: [f"global_store_b32 v255, {o}, s[102:103]", f"s_add_u32 s102, s102, {4 * W}", "s_addc_u32 s103, s103, 0"]
  nout = len(vout) + len(sout) + 5
  for r in vout: lines += store(f"v{r}")
  for r in [f"s{r}" for r in sout] + ["s104", "vcc_lo", "vcc_hi", "s98", "s99"]: lines += [f"v_mov_b32 v254, {r}", *store("v254")]
  lines.append("s_endpgm")
  code = assemble("\n".join(lines) + "\n", wave64, target)
  mem = Memory()
  pc = mem.alloc(len(code))
  mem.write(pc, code)
  ib = buffer(mem, inp) if len(vin) else mem.alloc(16)
  ob = mem.alloc(4 * W * nout)
  stats = run(mem, pc=pc, block=(lanes or W, 1, 1), user_sgprs=[ib & 0xFFFFFFFF, ib >> 32, ob & 0xFFFFFFFF, ob >> 32],
              lds_bytes=lds, scratch_bytes_per_lane=scratch, wave64=wave64, target=target)
  out = read(mem, ob, np.uint32, W * nout).reshape(nout, W)
  vres = {r: out[i] for i, r in enumerate(vout)}
  sv = [int(x) for x in out[len(vout):, 0]]
  sres = dict(zip(sout, sv))
  scc, vlo, vhi, elo, ehi = sv[len(sout):]
  return WaveResult(vres, sres, scc, vlo | vhi << 32 if wave64 else vlo, elo | ehi << 32 if wave64 else elo, stats)


def raw(line: str, *or_words: int) -> str:
  """`line` assembled, with extra bits ORed into its dwords (encodings llvm-mc refuses, e.g. neg on an integer
  operand), as .long directives for a run_wave body."""
  words = list(struct.unpack(f"<{len(assemble(line)) // 4}I", assemble(line)))
  for i, w in enumerate(or_words): words[i] |= w
  return "\n".join(f".long {w:#010x}" for w in words)


def f32(x: float) -> int: return struct.unpack("<I", struct.pack("<f", x))[0]
def f64(x: float) -> int: return struct.unpack("<Q", struct.pack("<d", x))[0]
def f16(x: float) -> int: return struct.unpack("<H", struct.pack("<e", x))[0]
def bits32(a: np.ndarray) -> list[int]: return [int(x) for x in a]
