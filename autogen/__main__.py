"""`python -m autogen [name ...] [--out DIR]`: regenerate binding modules from real headers.

GENERATORS maps a name to a callable `gen(outdir: pathlib.Path) -> list[pathlib.Path]` that writes its
module(s) under `outdir` (the autogen/ package directory by default). Add a generator with one line.
"""
from __future__ import annotations
import argparse, pathlib, sys, time
from autogen.gen.asic_reg import AsicRegModule
from autogen.gen.cmodule import CModule
from autogen.gen.dwarf import DwarfModule
from autogen.gen.headers import ASIC_REG_IPS, HeadersMissing
from autogen.gen.mlx5_ifc import BitLayoutModule
from autogen.gen.nvmodule import NVModule, SDK, UNIX, UVM



def adreno(outdir: pathlib.Path) -> list[pathlib.Path]:
  """autogen/adreno.py from mesa's Adreno register database (autogen/gen/adreno.py; needs a mesa git dir, not headers)."""
  from autogen.gen.adreno import write
  return write(outdir)


def ir3_tables(outdir: pathlib.Path) -> list[pathlib.Path]:
  """autogen/ir3/tables.py from tinymesa's ir3 disassembler (autogen/ir3/gen.py; needs the tinymesa wheel)."""
  from autogen.ir3.gen import generate
  path = outdir / "ir3" / "tables.py"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(generate())
  return [path]


def amdgcn_tables(outdir: pathlib.Path) -> list[pathlib.Path]:
  """autogen/amdgcn/<isa>/tables.py for every ISA generation from LLVM 22's disassembler (autogen/amdgcn/gen.py; needs libLLVM 22,
  not headers)."""
  from autogen.amdgcn import ISAS
  from autogen.amdgcn.gen import generate
  paths = []
  for isa in ISAS:
    (path := outdir / "amdgcn" / isa / "tables.py").parent.mkdir(parents=True, exist_ok=True)
    path.write_text(generate(isa))
    paths.append(path)
  return paths


# what compute drives in mesa 25.2.7 (tinymesa): NIR built through exported constructors, compiled by ir3 (turnip's sequence,
# src/freedreno/vulkan/tu_clear_blit.cc), disassembled and assembled for tests
MESA = DwarfModule(
  "mesa.py", "tinymesa", "tinymesa/libtinymesa.so",
  functions=("glsl_type_singleton_init_or_ref", "glsl_type_singleton_decref", "glsl_vec_type", "glsl_uvec_type", "glsl_array_type",
             "nir_shader_create", "nir_builder_init_simple_shader", "nir_builder_instr_insert", "nir_def_init",
             "nir_alu_instr_create", "nir_intrinsic_instr_create", "nir_load_const_instr_create", "nir_undef_instr_create", "nir_jump_instr_create",
             "nir_build_alu1", "nir_build_alu2", "nir_build_alu3", "nir_build_alu4", "nir_push_if", "nir_push_else",
             "nir_pop_if", "nir_push_loop", "nir_pop_loop", "nir_if_phi", "nir_local_variable_create", "nir_validate_shader",
             "nir_print_shader", "nir_serialize", "fd_dev_info_raw", "fd_dev_name", "ir3_compiler_create", "ir3_compiler_destroy",
             "ir3_get_compiler_options", "ir3_finalize_nir", "ir3_nir_post_finalize", "ir3_shader_from_nir", "ir3_shader_destroy",
             "ir3_shader_get_variant", "ir3_shader_create_variant", "ir3_compile_shader_nir", "ir3_shader_assemble",
             "ir3_trim_constlen", "ir3_parse", "ir3_legalize", "ir3_delayslots", "ir3_required_sync_flags", "disasm_a3xx",
             "ir3_isa_disasm", "rzalloc_size", "ralloc_free", "nir_lower_reg_intrinsics_to_ssa"),
  records=("nir_shader_compiler_options", "nir_shader", "shader_info", "nir_builder", "nir_def", "nir_src", "nir_alu_src",
           "nir_alu_instr", "nir_intrinsic_instr", "nir_load_const_instr", "nir_intrinsic_info", "nir_op_info", "ir3_compiler",
           "ir3_compiler_options", "ir3_shader_options", "ir3_shader_key", "ir3_shader", "ir3_shader_variant", "ir3_const_state",
           "ir3_info", "fd_dev_id", "fd_dev_info", "glsl_type"),
  enums=("nir_op", "nir_intrinsic_op", "nir_intrinsic_index_flag:NIR_INTRINSIC_BASE", "gl_shader_stage", "mesa_scope", "gl_access_qualifier",
         "nir_variable_mode", "nir_alu_type", "nir_instr_type", "nir_memory_semantics", "glsl_base_type", "nir_jump_type",
         "ir3_const_alloc_type", "ir3_wavesize_option"),
  variables=("nir_op_infos", "nir_intrinsic_infos", "nir_intrinsic_index_names", "glsl_type_builtin_void", "glsl_type_builtin_bool",
             "glsl_type_builtin_int", "glsl_type_builtin_uint", "glsl_type_builtin_float", "glsl_type_builtin_int64_t",
             "glsl_type_builtin_uint64_t"),
  doc="mesa 25.2.7 NIR and ir3 (tinymesa's libtinymesa.so): records, enums and exported functions and data, from its DWARF.")

_AMD, _AMDGPU, _PMFW = "drivers/gpu/drm/amd/include", "drivers/gpu/drm/amd/amdgpu", "drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if"

GENERATORS = {
  "kfd": CModule("kfd.py", "libc", ("linux/kfd_ioctl.h",), doc="AMD KFD ioctl ABI (/dev/kfd)."),
  "vfio": CModule("vfio.py", "libc", ("linux/vfio.h",), doc="VFIO ioctl ABI (/dev/vfio)."),
  "pci": CModule("pci.py", "libc", ("linux/pci_regs.h",), doc="PCI configuration space registers."),
  "amdgpu_drm": CModule("amdgpu_drm.py", "libc", ("drm/amdgpu_drm.h",), doc="amdgpu DRM ioctl ABI (/dev/dri/renderD*)."),
  **{f"amd.{ip}": AsicRegModule(f"amd/{ip}.py", stem) for ip, stem in ASIC_REG_IPS.items()},
  "amd.soc21_enum": CModule("amd/soc21_enum.py", "source", (f"{_AMD}/soc21_enum.h",), kernel=True,
                            doc="gfx11 (SOC21) register field value enums."),
  # ip_v4's sub_revision/variant bit order is chosen by LITTLEENDIAN_CPU (x86) or BIGENDIAN_CPU; without one it drops them
  "amd.discovery": CModule("amd/discovery.py", "source", (f"{_AMD}/discovery.h",), kernel=True, defines=("LITTLEENDIAN_CPU",),
                           doc="IP discovery binary table (signatures, IP/GC/HARVEST tables)."),
  "amd.soc15_hw_ip": CModule("amd/soc15_hw_ip.py", "source", (f"{_AMD}/soc15_hw_ip.h",), kernel=True,
                            doc="Hardware IP ids (HWID) used in the IP discovery table."),
  "amd.soc15_ih_clientid": CModule("amd/soc15_ih_clientid.py", "source", (f"{_AMD}/soc15_ih_clientid.h",), kernel=True,
                                   doc="Interrupt handler (IH) client ids."),
  "amd.irqsrcs_gfx_11_0_0": CModule("amd/irqsrcs_gfx_11_0_0.py", "source", (f"{_AMD}/ivsrcid/gfx/irqsrcs_gfx_11_0_0.h",),
                                    kernel=True, doc="GFX 11 interrupt source ids."),
  "amd.v11_structs": CModule("amd/v11_structs.py", "source", (f"{_AMD}/v11_structs.h",), kernel=True,
                             doc="gfx11 MQDs: v11_gfx_mqd, v11_compute_mqd, v11_sdma_mqd."),
  "amd.amdgpu_ucode": CModule("amd/amdgpu_ucode.py", "source", (f"{_AMDGPU}/amdgpu_ucode.h",), kernel=True, kernel_state=True,
                              doc="amdgpu firmware file headers (common, gfx, rlc, sdma, psp, smc, ...)."),
  "amd.psp_gfx_if": CModule("amd/psp_gfx_if.py", "source", (f"{_AMDGPU}/psp_gfx_if.h",), kernel=True,
                            doc="PSP GFX interface: ring/command buffers and command ids."),
  "amd.amdgpu_psp": CModule("amd/amdgpu_psp.py", "source", (f"{_AMDGPU}/amdgpu_psp.h",), kernel=True, constants_only=True,
                            doc="PSP driver constants: bootloader commands (psp_bootloader_cmd), ring types (kernel-internal header)."),
  "amd.amdgpu_vm": CModule("amd/amdgpu_vm.py", "source", (f"{_AMDGPU}/amdgpu_vm.h",), kernel=True, constants_only=True,
                           doc="GPU VM page-table entry bits (AMDGPU_PTE_*/AMDGPU_PDE_*) (kernel-internal header)."),
  "amd.nvd": CModule("amd/nvd.py", "source", (f"{_AMDGPU}/nvd.h",), kernel=True, doc="PM4 type-3 packets for gfx10/gfx11."),
  "amd.sdma_v6_0_0_pkt_open": CModule("amd/sdma_v6_0_0_pkt_open.py", "source", (f"{_AMDGPU}/sdma_v6_0_0_pkt_open.h",),
                                      kernel=True, doc="SDMA 6.0 packet opcodes and field helpers."),
  "amd.smu_v13_0_0_ppsmc": CModule("amd/smu_v13_0_0_ppsmc.py", "source", (f"{_PMFW}/smu_v13_0_0_ppsmc.h",), kernel=True,
                                   doc="SMU 13.0.0 PPSMC message ids and responses."),
  "amd.smu13_driver_if_v13_0_0": CModule("amd/smu13_driver_if_v13_0_0.py", "source",
                                         (f"{_PMFW}/smu13_driver_if_v13_0_0.h",), kernel=True,
                                         doc="SMU 13.0.0 driver interface: PPTable, metrics, tables."),
  "amd.soc24_enum": CModule("amd/soc24_enum.py", "source", (f"{_AMD}/soc24_enum.h",), kernel=True,
                            doc="gfx12 (SOC24) register field value enums."),
  "amd.v12_structs": CModule("amd/v12_structs.py", "source", (f"{_AMD}/v12_structs.h",), kernel=True,
                             doc="gfx12 MQDs: v12_gfx_mqd, v12_compute_mqd, v12_sdma_mqd."),
  "amd.smu_v14_0_2_ppsmc": CModule("amd/smu_v14_0_2_ppsmc.py", "source", (f"{_PMFW}/smu_v14_0_2_ppsmc.h",), kernel=True,
                                   doc="SMU 14.0.2 PPSMC message ids and responses."),
  "amd.smu14_driver_if_v14_0": CModule("amd/smu14_driver_if_v14_0.py", "source", (f"{_PMFW}/smu14_driver_if_v14_0.h",), kernel=True,
                                       doc="SMU 14.0.2/14.0.3 driver interface: PPTable, metrics, table ids."),
  "bnxt": CModule("bnxt.py", "source", ("drivers/net/ethernet/broadcom/bnxt/bnxt_hsi.h", "drivers/infiniband/hw/bnxt_re/roce_hsi.h"),
                  include=("drivers/net/ethernet/broadcom/bnxt",), kernel=True,
                  doc="Broadcom NetXtreme-C/E: HWRM firmware interface (bnxt_hsi.h) and RoCE CMDQ/CREQ/SQ/CQ (roce_hsi.h)."),
  "bnxt_re": CModule("bnxt_re.py", "source", ("drivers/net/ethernet/broadcom/bnxt/bnxt_hwrm.h",
                     "drivers/infiniband/hw/bnxt_re/qplib_rcfw.h", "drivers/infiniband/hw/bnxt_re/qplib_res.h"),
                     kernel=True, constants_only=True,
                     doc="bnxt/bnxt_re driver constants: HWRM channel, RCFW command queue, doorbells (kernel-internal headers)."),
  "mlx5_core": CModule("mlx5_core.py", "source", tuple(f"include/linux/mlx5/{h}.h" for h in ("device", "doorbell", "driver", "qp", "cq")),
                       kernel=True, constants_only=True,
                       doc="mlx5 core driver constants: command interface, init segment, WQE/CQE opcodes (kernel-internal headers)."),
  "mlx5": BitLayoutModule("mlx5.py", ("include/linux/mlx5/mlx5_ifc.h", "include/linux/mlx5/mlx5_ifc_fpga.h"),
                          doc="NVIDIA/Mellanox mlx5 command interface: big-endian bit layouts (autogen.bitlayout), enums."),
  "amdgcn": amdgcn_tables,
  "adreno": adreno,
  "ir3": ir3_tables,
  "mesa": MESA,
  # NVIDIA: the RM/UVM ioctl ABI of driver branch 580 and the Ampere/Hopper class methods and QMD layouts
  "nv.rm": NVModule("nv/rm.py", "kernel", (f"{SDK}/nvstatus.h", f"{SDK}/nvos.h", f"{UNIX}/nv_escape.h", f"{UNIX}/nv-ioctl-numbers.h",
                    f"{UNIX}/nv-ioctl.h", f"{UNIX}/nv-unix-nvos-params-wrappers.h"),
                    doc="NVIDIA RM ioctl ABI (/dev/nvidiactl, /dev/nvidia<N>): escapes, NVOS parameter blocks, status codes."),
  "nv.classes": NVModule("nv/classes.py", "kernel", tuple(f"{SDK}/class/{c}.h" for c in (
                         "cl0000", "cl0080", "cl2080", "cl2080_notification", "cl003e", "cl0040", "cl0070", "cl0071", "cl90f1", "cla06c", "cl9067",
                         "clc361", "clc461", "clc561", "clc661", "clc56f", "clc86f", "clb0b5sw")) + (f"{SDK}/alloc/alloc_channel.h",),
                         doc="NVIDIA RM classes: ids, allocation parameters, host (GPFIFO) methods and usermode doorbell registers "
                             "(compute and copy classes: autogen.nv.compute, autogen.nv.copy)."),
  "nv.ctrl": NVModule("nv/ctrl.py", "kernel", tuple(f"{SDK}/ctrl/{c}.h" for c in (
                      "ctrl0000/ctrl0000system", "ctrl0000/ctrl0000gpu", "ctrl0080/ctrl0080gpu", "ctrl2080/ctrl2080gpu",
                      "ctrl2080/ctrl2080gr", "ctrl2080/ctrl2080perf", "ctrl2080/ctrl2080fb", "ctrla06f/ctrla06fgpfifo", "ctrla06c",
                      "ctrlc36f")),
                      doc="NVIDIA RM control commands (NV_ESC_RM_CONTROL) and their parameter blocks."),
  "nv.uvm": NVModule("nv/uvm.py", "kernel", ("kernel-open/common/inc/nv_uvm_user_types.h", f"{UVM}/uvm_types.h", f"{UVM}/uvm_ioctl.h",
                     f"{UVM}/uvm_linux_ioctl.h"),
                     doc="NVIDIA UVM ioctl ABI (/dev/nvidia-uvm)."),
  "nv.compute": NVModule("nv/compute.py", "doc", ("classes/compute/clc6c0.h", "classes/compute/clc7c0.h", "classes/compute/clcbc0.h"),
                         doc="AMPERE_COMPUTE_A/B (c6c0 GA100, c7c0 GA10x) and HOPPER_COMPUTE_A (cbc0) methods: offsets and field ranges."),
  "nv.copy": NVModule("nv/copy.py", "doc", ("classes/dma-copy/clc6b5.h", "classes/dma-copy/clc7b5.h", "classes/dma-copy/clc8b5.h"),
                      doc="AMPERE_DMA_COPY_A/B (c6b5 GA100, c7b5 GA10x) and HOPPER_DMA_COPY_A (c8b5) methods: offsets and field ranges."),
  "nv.qmd": NVModule("nv/qmd.py", "doc", ("classes/compute/clc6c0qmd.h", "classes/compute/clc7c0qmd.h", "classes/compute/clcbc0qmd.h"),
                     doc="Queue meta data (QMD) field ranges, in bits: V03 (Ampere, c6c0/c7c0) and V03/V04 (Hopper, cbc0)."),
}


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m autogen", description=__doc__.split("\n")[0])
  ap.add_argument("names", nargs="*", help=f"generators to run (default: all): {', '.join(GENERATORS)}")
  ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).parent, help="output directory")
  args = ap.parse_args(argv)
  unknown = [n for n in args.names if n not in GENERATORS]
  if unknown: ap.error(f"unknown generator(s) {', '.join(unknown)}; known: {', '.join(GENERATORS)}")
  for name in args.names or list(GENERATORS):
    t = time.perf_counter()
    try: paths = GENERATORS[name](args.out)
    except HeadersMissing as e:
      print(f"autogen: {name}: {e}", file=sys.stderr)
      if args.names or not (isinstance(GENERATORS[name], NVModule) or name == "adreno"): return 1
      continue   # NVIDIA's trees and mesa's git dir come from outside any package: a full run goes on without them
    sizes = ", ".join(f"{p.relative_to(args.out)} ({p.stat().st_size // 1024} KiB)" for p in paths)
    print(f"autogen: {name}: {sizes} in {time.perf_counter() - t:.1f} s")
  return 0


if __name__ == "__main__":
  sys.exit(main())
