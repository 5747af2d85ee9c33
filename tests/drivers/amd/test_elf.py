"""HSA code objects from clang-22 / ld.lld-22: image, kernel descriptors, kernarg metadata."""
import struct, subprocess
import pytest
from drivers.hcq.compiler import llvm_tool
from drivers.amd.elf import load_code_object, CodeObjectError

SRC = r"""
__kernel void vadd(__global float *out, __global const float *a, __global const float *b, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = a[i] + b[i];
}
__kernel void lds(__global int *out) {
  __local int tmp[64];
  tmp[__builtin_amdgcn_workitem_id_x()] = 1;
  __builtin_amdgcn_s_barrier();
  out[0] = tmp[63 - __builtin_amdgcn_workitem_id_x()];
}
__global int target;
__global int *table[2] = {&target, &target};   /* pointers in data: ld.lld emits R_AMDGPU_RELATIVE64 */
__kernel void usetable(__global int *p) { *table[p[0] & 1] = 1; }
"""


@pytest.fixture(scope="module")
def hsaco(tmp_path_factory):
  d = tmp_path_factory.mktemp("co")
  subprocess.run([llvm_tool("clang"), "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib",
                  "-O2", "-c", "-", "-o", str(d / "k.o")], input=SRC.encode(), check=True)
  subprocess.run([llvm_tool("ld.lld"), "-shared", str(d / "k.o"), "-o", str(d / "k.hsaco")], check=True)
  return (d / "k.hsaco").read_bytes()


def test_kernels_descriptors_and_entry_points(hsaco):
  co = load_code_object(hsaco)
  assert co.arch == "gfx1100" and co.version in (5, 6) and set(co.kernels) == {"vadd", "lds", "usetable"}
  k = co.kernels["vadd"]
  assert k.descriptor.wave32 and k.descriptor.kernarg_size == k.kernarg_segment_size == 288
  # rsrc2 USER_SGPR_COUNT (bits 1-5) and TGID_X_EN (bit 7) as clang-22 sets them for this kernel
  assert (k.descriptor.compute_pgm_rsrc2 >> 1) & 0x1F > 0 and k.descriptor.compute_pgm_rsrc2 & (1 << 7)
  assert co.image[k.code_offset:k.code_offset + 4] != b"\0\0\0\0" and k.code_offset % 256 == 0
  assert [(a.offset, a.kind) for a in k.args[:5]] == [(0, "global_buffer"), (8, "global_buffer"), (16, "global_buffer"),
                                                      (24, "by_value"), (32, "hidden_block_count_x")]
  assert k.hidden("hidden_group_size_x").offset == 44 and k.hidden("hidden_group_size_x").size == 2
  assert co.kernels["lds"].descriptor.group_segment_fixed_size == 256


def test_llvm_objdump_agrees_on_the_kernel_symbols(hsaco, tmp_path):
  (tmp_path / "k.hsaco").write_bytes(hsaco)
  out = subprocess.run([llvm_tool("llvm-readelf"), "--dyn-symbols", str(tmp_path / "k.hsaco")], capture_output=True, text=True).stdout
  syms = {f[7]: int(f[1], 16) for f in (l.split() for l in out.splitlines()) if len(f) == 8 and f[0] != "Num:"}
  co = load_code_object(hsaco)
  for name, k in co.kernels.items(): assert (syms[f"{name}.kd"], syms[name]) == (k.descriptor_offset, k.code_offset)


def test_relative_relocations_are_applied_at_the_load_address(hsaco):
  co = load_code_object(hsaco)
  img = co.relocated(0x7000_0000_0000)
  assert len(co.relocations) == 2 and co.relocations[0][1] == co.relocations[1][1]   # both point at `target`
  for off, addend in co.relocations: assert struct.unpack_from("<Q", img, off)[0] == 0x7000_0000_0000 + addend


@pytest.mark.parametrize("blob,msg", [(b"hello", "not an ELF"), (b"\x7fELF" + bytes(60), "malformed ELF|machine")])
def test_malformed_code_objects_are_clear_errors(blob, msg):
  with pytest.raises(CodeObjectError, match=msg): load_code_object(blob)


def test_host_elf_is_rejected_naming_the_machine():
  with open("/bin/true", "rb") as f: blob = f.read()
  with pytest.raises(CodeObjectError, match="expected EM_AMDGPU"): load_code_object(blob)
