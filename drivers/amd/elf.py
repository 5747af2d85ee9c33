"""HSA code objects (AMDGPU ELF, code object v4-v6): load the image, find kernels, read their descriptors.

Facts: LLVM AMDGPUUsage ("Code Object V5 Metadata", "Kernel Descriptor", "Relocation Records");
the ELF is parsed with pyelftools, the metadata note (NT_AMDGPU_METADATA = 32) with msgpack.
"""
from __future__ import annotations
import io, struct
from dataclasses import dataclass, field

import msgpack
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
HSA_ABI_VERSIONS = {2: 4, 3: 5, 4: 6}          # EI_ABIVERSION -> code object version
NT_AMDGPU_METADATA = 32
EF_AMDGPU_MACH = 0xFF
MACHS = {0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103", 0x43: "gfx1150", 0x4A: "gfx1151",
         0x48: "gfx1200", 0x4E: "gfx1201", 0x4C: "gfx942", 0x4F: "gfx950"}   # EF_AMDGPU_MACH_AMDGCN_* (llvm-readelf-22)
R_AMDGPU_RELATIVE64 = 13                       # B + A
KD_SIZE = 64
# kernel_code_properties bits (AMDGPUUsage, "Kernel Descriptor for GFX6-GFX12")
KCP_PRIVATE_SEGMENT_BUFFER, KCP_DISPATCH_PTR, KCP_QUEUE_PTR, KCP_KERNARG_SEGMENT_PTR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
KCP_DISPATCH_ID, KCP_FLAT_SCRATCH_INIT, KCP_PRIVATE_SEGMENT_SIZE, KCP_WAVEFRONT_SIZE32 = 1 << 4, 1 << 5, 1 << 6, 1 << 10


class CodeObjectError(ValueError):
  """A malformed or unsupported code object; the message says what is wrong and how it should look."""


@dataclass(frozen=True)
class KernelDescriptor:
  """The 64-byte llvm_amdhsa_kernel_descriptor_t."""
  group_segment_fixed_size: int      # LDS bytes
  private_segment_fixed_size: int    # scratch bytes per work-item
  kernarg_size: int
  kernel_code_entry_byte_offset: int  # from the descriptor's own address to the code
  compute_pgm_rsrc3: int
  compute_pgm_rsrc1: int
  compute_pgm_rsrc2: int
  kernel_code_properties: int

  @staticmethod
  def parse(raw: bytes) -> KernelDescriptor:
    if len(raw) != KD_SIZE: raise CodeObjectError(f"kernel descriptor is {len(raw)} bytes, expected {KD_SIZE}")
    lds, priv, kasz, _, entry = struct.unpack_from("<IIIIq", raw, 0)
    rsrc3, rsrc1, rsrc2, props = struct.unpack_from("<IIIH", raw, 44)
    return KernelDescriptor(lds, priv, kasz, entry, rsrc3, rsrc1, rsrc2, props)

  @property
  def wave32(self) -> bool: return bool(self.kernel_code_properties & KCP_WAVEFRONT_SIZE32)


@dataclass(frozen=True)
class KernArg:
  offset: int
  size: int
  kind: str     # metadata .value_kind: global_buffer, by_value, hidden_block_count_x, ...


@dataclass
class Kernel:
  name: str
  descriptor_offset: int      # of the kernel descriptor, from the image start
  descriptor: KernelDescriptor
  kernarg_segment_size: int
  kernarg_segment_align: int
  args: list[KernArg] = field(default_factory=list)

  @property
  def code_offset(self) -> int: return self.descriptor_offset + self.descriptor.kernel_code_entry_byte_offset

  def hidden(self, kind: str) -> KernArg | None:
    return next((a for a in self.args if a.kind == kind), None)


@dataclass
class CodeObject:
  arch: str
  version: int
  image: bytes                # the loadable image; its offset 0 goes at the load address
  relocations: list[tuple[int, int]]   # (image offset, addend): write load_address + addend as u64 there
  kernels: dict[str, Kernel]

  def relocated(self, load_address: int) -> bytes:
    img = bytearray(self.image)
    for off, addend in self.relocations: struct.pack_into("<Q", img, off, (load_address + addend) & (2**64 - 1))
    return bytes(img)


def load_code_object(blob: bytes) -> CodeObject:
  """Parse an HSA code object (what clang-22 -target amdgcn-amd-amdhsa + ld.lld-22 -shared produce)."""
  if blob[:4] != b"\x7fELF": raise CodeObjectError("not an ELF file (no \\x7fELF magic): expected an HSA code object from ld.lld")
  try:
    elf = ELFFile(io.BytesIO(blob))
    if elf["e_machine"] != "EM_AMDGPU" and elf.header["e_machine"] != EM_AMDGPU:
      raise CodeObjectError(f"ELF machine is {elf['e_machine']}, expected EM_AMDGPU (224)")
    osabi, abiv = elf["e_ident"]["EI_OSABI"], elf["e_ident"]["EI_ABIVERSION"]
    if osabi not in (ELFOSABI_AMDGPU_HSA, "ELFOSABI_ARM_AEABI") or abiv not in HSA_ABI_VERSIONS:
      raise CodeObjectError(f"ELF OS/ABI {osabi} version {abiv}: expected AMDGPU_HSA (64) code object v4-v6 (ABI version 2-4)")
    arch = MACHS.get(elf["e_flags"] & EF_AMDGPU_MACH)
    if arch is None: raise CodeObjectError(f"unknown AMDGPU processor in e_flags {elf['e_flags']:#x}")
    loads = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
    if not loads: raise CodeObjectError("code object has no PT_LOAD segments")
    image = bytearray(max(s["p_vaddr"] + s["p_memsz"] for s in loads))
    for s in loads: image[s["p_vaddr"]:s["p_vaddr"] + s["p_filesz"]] = s.data()
    relocs = _relocations(elf)
    meta = _metadata(elf)
    syms = {s.name: s for s in elf.get_section_by_name(".dynsym").iter_symbols()} if elf.get_section_by_name(".dynsym") else {}
  except ELFError as e:
    raise CodeObjectError(f"malformed ELF: {e}") from None
  kernels = {}
  for k in meta.get("amdhsa.kernels", []):
    sym = syms.get(k[".symbol"])
    if sym is None: raise CodeObjectError(f"kernel {k['.name']}: descriptor symbol {k['.symbol']} is missing from .dynsym")
    off = sym["st_value"]
    kd = KernelDescriptor.parse(bytes(image[off:off + KD_SIZE]))
    args = [KernArg(a[".offset"], a[".size"], a[".value_kind"]) for a in k.get(".args", [])]
    kernels[k[".name"]] = Kernel(k[".name"], off, kd, k[".kernarg_segment_size"], k.get(".kernarg_segment_align", 8), args)
  if not kernels: raise CodeObjectError("code object has no kernels (no amdhsa.kernels in the NT_AMDGPU_METADATA note)")
  return CodeObject(arch, HSA_ABI_VERSIONS[abiv], bytes(image), relocs, kernels)


def _metadata(elf: ELFFile) -> dict:
  for sec in elf.iter_sections():
    if sec["sh_type"] != "SHT_NOTE": continue
    for note in sec.iter_notes():
      if note["n_name"] == "AMDGPU" and note["n_type"] in (NT_AMDGPU_METADATA, "NT_AMDGPU_METADATA"):
        desc = note["n_desc"]
        return msgpack.unpackb(desc if isinstance(desc, bytes) else desc.encode("latin-1"), strict_map_key=False)
  raise CodeObjectError("code object has no NT_AMDGPU_METADATA note: it must be code object v4 or newer")


def _relocations(elf: ELFFile) -> list[tuple[int, int]]:
  out = []
  for sec in elf.iter_sections():
    if not isinstance(sec, RelocationSection) or not sec["sh_flags"] & 2: continue   # SHF_ALLOC: the dynamic relocations
    for r in sec.iter_relocations():
      if r["r_info_type"] != R_AMDGPU_RELATIVE64:
        raise CodeObjectError(f"unsupported relocation type {r['r_info_type']} at {r['r_offset']:#x}: only "
                              "R_AMDGPU_RELATIVE64 is resolved (link with ld.lld -shared)")
      out.append((r["r_offset"], r["r_addend"] if r.is_RELA() else 0))
  return sorted(out)
