"""Spot facts of the linux-libc-dev bindings, checked against the kernel's ioctl encoding and documented values."""
import ctypes
from autogen import amdgpu_drm, kfd, pci, vfio


def _iowr(typ: str, nr: int, size: int) -> int:  # asm-generic/ioctl.h: dir<<30 | size<<16 | type<<8 | nr, dir 3 = RW
  return 3 << 30 | size << 16 | ord(typ) << 8 | nr


def test_kfd_create_queue_args_is_96_bytes_in_kfd_1_17():
  # 6.12's KFD ABI 1.17 appended sdma_engine_id + pad to the 88-byte 1.11 (linux 6.1) layout
  assert (kfd.KFD_IOCTL_MAJOR_VERSION, kfd.KFD_IOCTL_MINOR_VERSION) == (1, 17)
  assert ctypes.sizeof(kfd.kfd_ioctl_create_queue_args) == 96
  assert kfd.kfd_ioctl_create_queue_args.sdma_engine_id.offset == 88
  assert kfd.kfd_ioctl_create_queue_args.gpu_id.offset == 36


def test_kfd_ioctl_numbers_follow_iowr_encoding():
  assert kfd.AMDKFD_IOC_CREATE_QUEUE == _iowr("K", 0x02, 96) == 0xC0604B02
  assert kfd.AMDKFD_IOC_GET_VERSION == 2 << 30 | 8 << 16 | ord("K") << 8 | 0x01  # _IOR
  assert kfd.AMDKFD_IOC_RUNTIME_ENABLE & 0xFF == 0x25
  assert kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU == _iowr("K", 0x16, ctypes.sizeof(kfd.kfd_ioctl_alloc_memory_of_gpu_args))


def test_kfd_enum_and_function_macro():
  assert kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL == 2 and kfd.KFD_IOC_QUEUE_TYPE_SDMA == 1
  assert kfd.KFD_SMI_EVENT_MASK_FROM_INDEX(kfd.KFD_SMI_EVENT_VMFAULT) == 1


def test_vfio_ioctl_and_anonymous_union():
  assert vfio.VFIO_TYPE == ord(";") and vfio.VFIO_BASE == 100
  assert vfio.VFIO_GET_API_VERSION == ord(";") << 8 | 100  # _IO(VFIO_TYPE, VFIO_BASE + 0)
  assert ctypes.sizeof(vfio.vfio_region_info) == 32
  s = vfio.vfio_pci_dependent_device(devid=7)  # anonymous union member reachable by name
  assert s.group_id == 7


def test_pci_config_space_registers():
  assert (pci.PCI_COMMAND, pci.PCI_COMMAND_MASTER, pci.PCI_BASE_ADDRESS_0, pci.PCI_CAPABILITY_LIST) == (0x04, 0x4, 0x10, 0x34)
  assert pci.PCI_EXT_CAP_ID_REBAR == 0x15
  assert pci.PCI_EXT_CAP_NEXT(0x1501_0015) == 0x150 and pci.PCI_EXT_CAP_ID(0x1501_0015) == 0x15


def test_amdgpu_drm_ioctl_numbers():
  assert amdgpu_drm.DRM_AMDGPU_INFO == 0x05  # the ioctl nr is DRM_COMMAND_BASE (0x40, drm.h) + 5
  assert amdgpu_drm.DRM_IOCTL_AMDGPU_INFO == 1 << 30 | ctypes.sizeof(amdgpu_drm.drm_amdgpu_info) << 16 | ord("d") << 8 | 0x45
  assert ctypes.sizeof(amdgpu_drm.drm_amdgpu_info) == 32
