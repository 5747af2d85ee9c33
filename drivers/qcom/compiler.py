"""NIR text (compute.nir) -> an ir3 shader variant for one Adreno chip, through mesa 25.2.7's NIR builders and ir3 compiler
as the tinymesa wheel ships them (libtinymesa.so; layouts and prototypes: autogen.mesa, from its DWARF).

The sequence is turnip's for its internal compute shaders (mesa src/freedreno/vulkan/tu_clear_blit.cc): ir3_compiler_create
for the chip, nir_builder_init_simple_shader(MESA_SHADER_COMPUTE), the program built with the exported constructors (the
header-inline helpers of nir_builder.h written here: immediates, intrinsics with their index map, swizzled channels),
nir_validate_shader, nir_lower_reg_intrinsics_to_ssa (variables are NIR regs), ir3_finalize_nir, ir3_shader_from_nir,
ir3_shader_get_variant. Buffer addresses are 64-bit values in UBO 0 (the kernel arguments: 8 bytes a buffer), which ir3
pushes to the const file (its UBO range analysis); element i of a buffer is load_global/store_global at base + i * size.
The global id is load_workgroup_id.x * local size + load_local_invocation_id.x.

The binary (`Variant.pack`): a JSON header with what the dispatch needs from the variant (instrlen, constlen, registers,
branch stack, shared and private memory, the local-id and workgroup-id registers, the UBO ranges pushed to consts and
the immediates with their const offset), then the instructions.
"""
from __future__ import annotations
import ctypes, functools, json, pathlib, struct, threading
from dataclasses import asdict, dataclass
from ctypes import POINTER, byref, cast, pointer
from autogen import mesa
from drivers.hcq.compiler import CompileError, Compiler

MAGIC = b"hcq-ir3\0"
FORMAT = 4                      # of what Variant packs (and how it is read from the variant): part of the cache key
CHIPS = {630: 0x06030001, 650: 0x06050002, 660: 0x06060001, 730: 0x07030001, 740: 0x43050a01}   # gpu_id -> a chip id
_lock = threading.Lock()        # mesa's compiler objects are driven by one thread at a time


class NIRLib:
  """libtinymesa.so with autogen.mesa's prototypes, its intrinsic/op tables and one ir3 compiler per chip."""
  def __init__(self):
    import tinymesa
    from autogen.clayout import load
    self.lib = load(pathlib.Path(tinymesa.libtinymesa), mesa.LIBRARY_SHA256, mesa.PROTOTYPES)
    self.intrinsics = mesa.VARIABLES["nir_intrinsic_infos"].in_dll(self.lib, "nir_intrinsic_infos")
    ops = mesa.VARIABLES["nir_op_infos"].in_dll(self.lib, "nir_op_infos")
    self.ops = {ops[i].name.decode(): i for i in range(len(ops))}
    self.lib.glsl_type_singleton_init_or_ref()
    self.compilers: dict[int, tuple] = {}

  def compiler(self, gpu_id: int):
    if gpu_id not in self.compilers:
      dev = mesa.fd_dev_id(gpu_id=gpu_id, chip_id=CHIPS[gpu_id])
      info = self.lib.fd_dev_info_raw(byref(dev))
      if not info: raise CompileError(f"mesa 25.2.7 knows no Adreno {gpu_id} (fd_dev_info_raw)")
      opts = mesa.ir3_compiler_options(disable_cache=True)   # no mesa shader cache on disk: hcq's Compiler caches
      cc = self.lib.ir3_compiler_create(None, byref(dev), info, byref(opts))
      if not cc: raise CompileError(f"ir3_compiler_create failed for Adreno {gpu_id}")
      self.compilers[gpu_id] = (cc, dev, opts)      # the compiler keeps pointers to the id and options
    return self.compilers[gpu_id][0]


@functools.cache
def nirlib() -> NIRLib: return NIRLib()


@dataclass
class Variant:
  """What a dispatch needs from an ir3 shader variant (mesa ir3_shader.h struct ir3_shader_variant)."""
  gpu_id: int
  instrlen: int            # in units of 16 instructions (ir3_shader_variant.instrlen)
  constlen: int            # vec4s of the const file the shader reads
  max_reg: int             # highest full register (vec4 index), -1 for none
  max_half_reg: int
  mergedregs: bool
  branchstack: int          # what SP_CS_CTRL_REG0.BRANCHSTACK takes (ir3_shader.h ir3_shader_branchstack_hw)
  pvtmem_size: int
  shared_size: int
  double_threadsize: bool
  local_id_reg: int        # regid of the local invocation id (x; y, z follow)
  workgroup_id_reg: int    # regid of the workgroup id
  local_size: list[int]
  ubo_ranges: list[list[int]]   # [UBO, first byte, end byte, const byte offset] pushed to consts
  imm_offset: int          # vec4 where the immediates start
  imms: list[int]
  code: bytes

  def pack(self) -> bytes:
    head = json.dumps({k: v for k, v in asdict(self).items() if k != "code"}).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + self.code

  @staticmethod
  def unpack(lib: bytes) -> Variant:
    if lib[:len(MAGIC)] != MAGIC: raise ValueError("not an ir3 variant packed by drivers.qcom.compiler (bad magic)")
    n = struct.unpack_from("<I", lib, len(MAGIC))[0]
    at = len(MAGIC) + 4
    return Variant(**json.loads(lib[at:at + n]), code=bytes(lib[at + n:]))


class Builder:
  """nir_builder.h's inline helpers over one nir_builder."""
  def __init__(self, nl: NIRLib, cc, name: str):
    self.nl, self.lib = nl, nl.lib
    self.b = self.lib.nir_builder_init_simple_shader(mesa.MESA_SHADER_COMPUTE, self.lib.ir3_get_compiler_options(cc), name.encode())
    self.b.exact = True           # every float op exact: NIR may not reassociate or fold them (numpy's results, not fast math)
    self.bp = pointer(self.b)
    self.shader = self.b.shader

  def insert(self, instr) -> None: self.lib.nir_builder_instr_insert(self.bp, cast(instr, POINTER(mesa.nir_instr)))

  def imm(self, bits: int, value: int):
    """nir_imm_intN_t: a one-component load_const."""
    lc = self.lib.nir_load_const_instr_create(self.shader, 1, bits)
    val = mesa.nir_const_value.from_address(ctypes.addressof(lc.contents) + mesa.nir_load_const_instr.value.offset)
    if bits == 1: val.b = bool(value)
    else: setattr(val, f"u{bits}", value)
    self.insert(lc)
    return pointer(lc.contents.def_)

  def intrinsic(self, op: int, srcs=(), ncomp: int = 1, bits: int = 32, **indices: int):
    """nir_intrinsic_instr_create + sources + destination + const indices (by nir_intrinsic_infos[op].index_map)."""
    info = self.nl.intrinsics[op]
    it = self.lib.nir_intrinsic_instr_create(self.shader, op)
    if len(srcs) != info.num_srcs: raise CompileError(f"intrinsic {info.name.decode()} takes {info.num_srcs} sources, not {len(srcs)}")
    src = (mesa.nir_src * info.num_srcs).from_address(ctypes.addressof(it.contents) + mesa.nir_intrinsic_instr.src.offset)
    for i, s in enumerate(srcs): src[i].ssa = s
    if (info.has_dest and info.dest_components == 0) or any(info.src_components[i] == 0 for i in range(info.num_srcs)):
      it.contents.num_components = ncomp
    if info.has_dest: self.lib.nir_def_init(cast(it, POINTER(mesa.nir_instr)), pointer(it.contents.def_), ncomp, bits)
    for name, v in indices.items():
      slot = info.index_map[getattr(mesa, f"NIR_INTRINSIC_{name.upper()}")]
      if not slot: raise CompileError(f"intrinsic {info.name.decode()} has no index {name}")
      it.contents.const_index[slot - 1] = v
    self.insert(it)
    return pointer(it.contents.def_) if info.has_dest else None

  def channel(self, d, c: int):
    """nir_channel: a mov of component `c`."""
    a = self.lib.nir_alu_instr_create(self.shader, mesa.nir_op_mov)
    src = mesa.nir_alu_src.from_address(ctypes.addressof(a.contents) + mesa.nir_alu_instr.src.offset)
    src.src.ssa, src.swizzle[0] = d, c
    self.lib.nir_def_init(cast(a, POINTER(mesa.nir_instr)), pointer(a.contents.def_), 1, d.contents.bit_size)
    self.insert(a)
    return pointer(a.contents.def_)

  def alu(self, op: str, *srcs):
    if (code := self.nl.ops.get(op)) is None: raise CompileError(f"{op!r} is no NIR ALU op (nir_op_infos)")
    if not 1 <= len(srcs) <= 4: raise CompileError(f"NIR op {op} with {len(srcs)} sources")
    return getattr(self.lib, f"nir_build_alu{len(srcs)}")(self.bp, code, *srcs)


def build(b: Builder, src: str) -> tuple[int, int]:
  """Build compute.nir's text into `b` -> (number of buffers, local size)."""
  lines = [ln.split() for ln in src.splitlines() if ln.strip()]
  if not lines or lines[0] != ["nir", "1"]: raise CompileError("not compute.nir text (it starts with 'nir 1')")
  head = dict((ln[0], int(ln[1])) for ln in lines[1:3])
  nbufs, local = head.get("bufs"), head.get("local")
  if nbufs is None or local is None: raise CompileError("compute.nir text: 'bufs N' and 'local X' must follow 'nir 1'")
  vals: dict[str, object] = {}
  regs: dict[str, tuple] = {}
  stack: list[tuple[str, object]] = []
  ptrs: dict[int, object] = {}

  for i in range(nbufs):   # the buffers' addresses first, where they dominate every use (nir_validate checks it)
    v = b.intrinsic(mesa.nir_intrinsic_load_ubo, (b.imm(32, 0), b.imm(32, 8 * i)), 2, 32, align_mul=8, range_base=0, range=8 * nbufs)
    ptrs[i] = b.alu("pack_64_2x32", v)

  def ptr(i: int):
    if not 0 <= i < nbufs: raise CompileError(f"buffer {i} of a kernel with {nbufs}")
    return ptrs[i]

  def address(bits: int, buf: int, i):
    off = b.alu("u2u64", b.alu("imul", i, b.imm(32, bits // 8)))
    return b.alu("iadd", ptr(buf), off)

  lib = b.lib
  for n, ln in enumerate(lines[3:], 4):
    try:
      if ln[0].startswith("%"):
        if len(ln) < 3 or ln[1] != "=": raise CompileError("expected '%n = ...'")
        dst, op, args = ln[0], ln[2], ln[3:]
        get = lambda a: vals[a] if a in vals else (_ for _ in ()).throw(CompileError(f"{a} is used before it is defined"))
        if op == "gid":
          wg = b.intrinsic(mesa.nir_intrinsic_load_workgroup_id, (), 3)
          lid = b.intrinsic(mesa.nir_intrinsic_load_local_invocation_id, (), 3)
          vals[dst] = b.alu("iadd", b.alu("imul", b.channel(wg, 0), b.imm(32, local)), b.channel(lid, 0))
        elif op == "imm": vals[dst] = b.imm(int(args[0]), int(args[1]))
        elif op == "load":
          bits, buf = int(args[0]), int(args[1])
          vals[dst] = b.intrinsic(mesa.nir_intrinsic_load_global, (address(bits, buf, get(args[2])),), 1, bits, align_mul=bits // 8)
        elif op == "read":
          decl, bits = regs[args[0]]
          vals[dst] = b.intrinsic(mesa.nir_intrinsic_load_reg, (decl,), 1, bits)
        else: vals[dst] = b.alu(op, *map(get, args))
      elif ln[0] == "store":
        bits, buf = int(ln[1]), int(ln[2])
        b.intrinsic(mesa.nir_intrinsic_store_global, (vals[ln[4]], address(bits, buf, vals[ln[3]])), 1, bits, align_mul=bits // 8, write_mask=1)
      elif ln[0] == "reg":
        bits = int(ln[2])
        regs[ln[1]] = (b.intrinsic(mesa.nir_intrinsic_decl_reg, (), 1, 32, num_components=1, num_array_elems=0, bit_size=bits), bits)
      elif ln[0] == "write": b.intrinsic(mesa.nir_intrinsic_store_reg, (vals[ln[2]], regs[ln[1]][0]), 1, write_mask=1)
      elif ln[0] == "if": stack.append(("if", lib.nir_push_if(b.bp, vals[ln[1]])))
      elif ln[0] == "else": lib.nir_push_else(b.bp, stack[-1][1])
      elif ln[0] == "endif": lib.nir_pop_if(b.bp, stack.pop()[1])
      elif ln[0] == "loop": stack.append(("loop", lib.nir_push_loop(b.bp)))
      elif ln[0] == "endloop": lib.nir_pop_loop(b.bp, stack.pop()[1])
      elif ln[0] == "break": b.insert(cast(lib.nir_jump_instr_create(b.shader, mesa.nir_jump_break), POINTER(mesa.nir_instr)))
      else: raise CompileError(f"unknown statement {ln[0]!r}")
    except (KeyError, IndexError, ValueError) as e: raise CompileError(f"compute.nir line {n} {' '.join(ln)!r}: {e!r}") from None
    except CompileError as e: raise CompileError(f"compute.nir line {n} {' '.join(ln)!r}: {e}") from None
  if stack: raise CompileError(f"compute.nir text ends inside an open {stack[-1][0]}")
  return nbufs, local


def compile_nir(src: str, gpu_id: int, name: str = "kernel") -> Variant:
  """Build `src` and compile it with ir3 for Adreno `gpu_id` (one of CHIPS)."""
  if gpu_id not in CHIPS: raise CompileError(f"no ir3 target for Adreno {gpu_id}: hcq compiles for {', '.join(map(str, CHIPS))}")
  nl = nirlib()
  lib = nl.lib
  with _lock:
    cc = nl.compiler(gpu_id)
    b = Builder(nl, cc, name)
    _, local = build(b, src)
    info = b.shader.contents.info
    info.workgroup_size[0], info.workgroup_size[1], info.workgroup_size[2] = local, 1, 1
    info.num_ubos = 1
    lib.nir_validate_shader(b.shader, b"as built by drivers.qcom.compiler")
    lib.nir_lower_reg_intrinsics_to_ssa(b.shader)
    lib.ir3_finalize_nir(cc, byref(mesa.ir3_shader_nir_options()), b.shader)
    shader = lib.ir3_shader_from_nir(cc, b.shader, byref(mesa.ir3_shader_options()), None)
    created = ctypes.c_bool()
    vp = lib.ir3_shader_get_variant(shader, byref(mesa.ir3_shader_key()), False, False, byref(created))
    try:
      if not vp: raise CompileError(f"ir3 could not compile kernel {name} for Adreno {gpu_id}")
      v = vp.contents
      if v.need_driver_params: raise CompileError(f"kernel {name} needs ir3 driver params, which hcq does not provide")
      cs = v.const_state.contents
      # ir3_shader_branchstack_hw: a6xx+ count two levels a unit, plus one, at most half the compiler's branch stack
      stack = min(v.branchstack // 2 + 1, cc.contents.branchstack_size // 2) if v.branchstack else 0
      # range.offset: the const byte the range starts at, within the IR3_CONST_ALLOC_UBO_RANGES allocation (which a
      # preamble's allocation may precede: ir3_nir_analyze_ubo_ranges.c)
      ranges = [[r.ubo.block, r.start, r.end, r.offset] for r in cs.ubo_state.range[:cs.ubo_state.num_enabled]]
      return Variant(gpu_id, v.instrlen, v.constlen, v.info.max_reg, v.info.max_half_reg, v.mergedregs, stack,
                     v.pvtmem_size, v.shared_size, v.info.double_threadsize, v.cs.local_invocation_id, v.cs.work_group_id,
                     list(v.local_size), ranges, cs.allocs.max_const_offset_vec4, list(v.imm_state.values[:v.imm_state.count]),
                     ctypes.string_at(v.bin, v.info.size))
    finally: lib.ir3_shader_destroy(shader)


class IR3Compiler(Compiler):
  """compute.nir text -> a packed ir3 variant (Variant.pack) for one Adreno (target: its gpu_id, e.g. '630')."""
  language = "nir"

  def version(self) -> str: return f"{mesa.LIBRARY_SHA256} {FORMAT}"

  def _compile(self, src: str) -> bytes: return compile_nir(src, int(self.target)).pack()
