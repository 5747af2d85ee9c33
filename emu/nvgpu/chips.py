"""The GPUs the NVIDIA model can be: what RM reports of them (class list, GR info, PCI identity).

Class lists: the engine classes of each chip in open-gpu-kernel-modules 580.142 src/nvidia/generated/g_gpu_class_list.c
(reference nv_driver.md section 0), plus the chip-independent classes every GPU lists. GR info: SM version and the full
die's GPC/TPC/SM counts ("litter" values; a product may have fewer enabled).
"""
from __future__ import annotations
from dataclasses import dataclass

from autogen.nv import classes as cl, compute, copy, ctrl, rm

# classes of every GPU (RM's no-engine list): what the object tree under a device is made of
COMMON_CLASSES = (rm.NV01_ROOT_CLIENT, cl.NV01_DEVICE_0, cl.NV20_SUBDEVICE_0, cl.NV01_MEMORY_SYSTEM, cl.NV1_MEMORY_USER,
                  cl.NV01_MEMORY_VIRTUAL, cl.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, cl.FERMI_VASPACE_A, cl.KEPLER_CHANNEL_GROUP_A,
                  cl.FERMI_CONTEXT_SHARE_A, cl.TURING_USERMODE_A)


@dataclass(frozen=True)
class Chip:
  name: str
  device_id: int                         # PCI device id (vendor 0x10de)
  marketing: str
  engine_classes: tuple[int, ...]        # GPFIFO, compute, copy, usermode classes
  sm_version: int                        # GR_INFO SM_VERSION: 0x900 = sm_90
  gpcs: int
  tpc_per_gpc: int
  sm_per_tpc: int
  max_warps_per_sm: int
  max_shared_kb: int                     # shared memory per SM (CUDA's sharedMemPerMultiprocessor): 228 GH100, 164 GA100, 100 GA102

  @property
  def sass_version(self) -> int:
    """The QMD's SASS_VERSION: major and minor SM version in one byte (0x90 for sm_90)."""
    return (self.sm_version >> 8) << 4 | (self.sm_version & 0xF)

  @property
  def classes(self) -> tuple[int, ...]: return COMMON_CLASSES + self.engine_classes

  def gr_info(self) -> dict[int, int]:
    return {ctrl.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: self.sm_version, ctrl.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: self.gpcs,
            ctrl.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: self.tpc_per_gpc,
            ctrl.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: self.sm_per_tpc,
            ctrl.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: self.max_warps_per_sm}


CHIPS = {c.name: c for c in (
  Chip("GH100", 0x2335, "GH100 [H200 SXM 141GB]",
       (cl.HOPPER_CHANNEL_GPFIFO_A, cl.AMPERE_CHANNEL_GPFIFO_A, compute.HOPPER_COMPUTE_A, copy.HOPPER_DMA_COPY_A, cl.HOPPER_USERMODE_A),
       0x900, 8, 9, 2, 64, 228),
  Chip("GA100", 0x20B0, "GA100 [A100 SXM4 40GB]",
       (cl.AMPERE_CHANNEL_GPFIFO_A, compute.AMPERE_COMPUTE_A, copy.AMPERE_DMA_COPY_A, cl.AMPERE_USERMODE_A), 0x800, 8, 8, 2, 64, 164),
  Chip("GA102", 0x2204, "GA102 [GeForce RTX 3090]",
       (cl.AMPERE_CHANNEL_GPFIFO_A, compute.AMPERE_COMPUTE_B, copy.AMPERE_DMA_COPY_B, cl.AMPERE_USERMODE_A), 0x806, 7, 6, 2, 48, 100),
)}
