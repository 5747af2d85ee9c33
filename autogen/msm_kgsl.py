"""The KGSL ioctl ABI (/dev/kgsl-3d0). NOT GENERATED: written by hand (the one such module in autogen/, where both
drivers/qcom and its model emu/kgsl read it): no registry package ships msm_kgsl.h (it is a downstream
Android/Qualcomm kernel header). Source of the facts: msm_kgsl.h as mesa carries it for turnip's KGSL backend,
src/freedreno/vulkan/msm_kgsl.h at mesa commit 33ede796 (Igalia/mesa mirror, 2021; KGSL_VERSION 3.14), and the
ioctls and flags the hcq_compute reference section 3.1 lists. Layouts are LP64 (aarch64 phones, x86-64 hosts for the
model): `unsigned long`, `size_t` and pointers are 64-bit; every size is asserted below.
Only what hcq uses is here: context create/destroy, properties, GPU objects, user-memory import, GPU_COMMAND and
timestamp reads and waits.
"""
from __future__ import annotations
import ctypes

c_uint, c_int, c_u64, c_ulong, c_size_t, c_void_p = (ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64,
                                                   ctypes.c_uint64, ctypes.c_uint64)
KGSL_IOC_TYPE = 0x09
IOC_WRITE, IOC_READ = 1, 2                       # asm-generic/ioctl.h: _IOC_WRITE, _IOC_READ


def _ioc(direction: int, nr: int, struct: type) -> int:
  return direction << 30 | ctypes.sizeof(struct) << 16 | KGSL_IOC_TYPE << 8 | nr


# --- context flags (KGSL_CONTEXT_*)
KGSL_CONTEXT_SAVE_GMEM = 0x00000001
KGSL_CONTEXT_NO_GMEM_ALLOC = 0x00000002
KGSL_CONTEXT_SUBMIT_IB_LIST = 0x00000004
KGSL_CONTEXT_CTX_SWITCH = 0x00000008
KGSL_CONTEXT_PREAMBLE = 0x00000010
KGSL_CONTEXT_TRASH_STATE = 0x00000020
KGSL_CONTEXT_PER_CONTEXT_TS = 0x00000040
KGSL_CONTEXT_USER_GENERATED_TS = 0x00000080
KGSL_CONTEXT_END_OF_FRAME = 0x00000100
KGSL_CONTEXT_NO_FAULT_TOLERANCE = 0x00000200
KGSL_CONTEXT_SYNC = 0x00000400
KGSL_CONTEXT_PWR_CONSTRAINT = 0x00000800
KGSL_CONTEXT_PRIORITY_MASK, KGSL_CONTEXT_PRIORITY_SHIFT = 0x0000F000, 12
KGSL_CONTEXT_IFH_NOP = 0x00010000
KGSL_CONTEXT_SECURE = 0x00020000
KGSL_CONTEXT_NO_SNAPSHOT = 0x00040000
KGSL_CONTEXT_SPARSE = 0x00080000
KGSL_CONTEXT_TYPE_MASK, KGSL_CONTEXT_TYPE_SHIFT = 0x01F00000, 20
KGSL_CONTEXT_TYPE_ANY, KGSL_CONTEXT_TYPE_GL, KGSL_CONTEXT_TYPE_CL, KGSL_CONTEXT_TYPE_C2D, KGSL_CONTEXT_TYPE_RS, \
  KGSL_CONTEXT_TYPE_VK = 0, 1, 2, 3, 4, 5
KGSL_CONTEXT_TYPE_UNKNOWN = 0x1E
KGSL_CONTEXT_PREEMPT_STYLE_MASK, KGSL_CONTEXT_PREEMPT_STYLE_SHIFT = 0x0E000000, 25
KGSL_CONTEXT_PREEMPT_STYLE_DEFAULT, KGSL_CONTEXT_PREEMPT_STYLE_RINGBUFFER, KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN = 0, 1, 2
KGSL_CONTEXT_INVALIDATE_ON_FAULT = 0x10000000
KGSL_CONTEXT_INVALID = 0xffffffff

# --- command list / object list flags
KGSL_CMDLIST_IB, KGSL_CMDLIST_CTXTSWITCH_PREAMBLE, KGSL_CMDLIST_IB_PREAMBLE = 0x1, 0x2, 0x4
KGSL_OBJLIST_MEMOBJ, KGSL_OBJLIST_PROFILE = 0x8, 0x10

# --- memory flags (KGSL_MEMFLAGS_*, cache mode, alignment, memory type)
KGSL_MEMFLAGS_SECURE = 0x00000008
KGSL_MEMFLAGS_GPUREADONLY = 0x01000000
KGSL_MEMFLAGS_GPUWRITEONLY = 0x02000000
KGSL_MEMFLAGS_FORCE_32BIT = 0x100000000
KGSL_CACHEMODE_MASK, KGSL_CACHEMODE_SHIFT = 0x0C000000, 26
KGSL_CACHEMODE_WRITECOMBINE, KGSL_CACHEMODE_UNCACHED, KGSL_CACHEMODE_WRITETHROUGH, KGSL_CACHEMODE_WRITEBACK = 0, 1, 2, 3
KGSL_MEMFLAGS_USE_CPU_MAP = 0x10000000
KGSL_MEMFLAGS_SPARSE_PHYS = 0x20000000
KGSL_MEMFLAGS_SPARSE_VIRT = 0x40000000
KGSL_MEMFLAGS_IOCOHERENT = 0x80000000
KGSL_MEMTYPE_MASK, KGSL_MEMTYPE_SHIFT = 0x0000FF00, 8
KGSL_MEMALIGN_MASK, KGSL_MEMALIGN_SHIFT = 0x00FF0000, 16
KGSL_MEMFLAGS_USERMEM_MASK, KGSL_MEMFLAGS_USERMEM_SHIFT = 0x000000e0, 5
KGSL_USER_MEM_TYPE_PMEM, KGSL_USER_MEM_TYPE_ASHMEM, KGSL_USER_MEM_TYPE_ADDR, KGSL_USER_MEM_TYPE_ION = 0, 1, 2, 3
KGSL_USER_MEM_TYPE_DMABUF = 3

# --- properties, timestamps, constraints
KGSL_PROP_DEVICE_INFO = 0x1
KGSL_PROP_GPU_RESET_STAT = 0x9
KGSL_PROP_PWR_CONSTRAINT = 0x12
KGSL_TIMESTAMP_CONSUMED, KGSL_TIMESTAMP_RETIRED, KGSL_TIMESTAMP_QUEUED = 1, 2, 3
KGSL_CONSTRAINT_NONE, KGSL_CONSTRAINT_PWRLEVEL = 0, 1
KGSL_CONSTRAINT_PWR_MIN, KGSL_CONSTRAINT_PWR_MAX = 0, 1
KGSL_CTX_STAT_NO_ERROR, KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT, KGSL_CTX_STAT_INNOCENT_CONTEXT_RESET_EXT, \
  KGSL_CTX_STAT_UNKNOWN_CONTEXT_RESET_EXT = 0, 1, 2, 3


def KGSL_CONTEXT_PRIORITY(p: int) -> int: return p << KGSL_CONTEXT_PRIORITY_SHIFT & KGSL_CONTEXT_PRIORITY_MASK
def KGSL_CONTEXT_PREEMPT_STYLE(s: int) -> int: return s << KGSL_CONTEXT_PREEMPT_STYLE_SHIFT & KGSL_CONTEXT_PREEMPT_STYLE_MASK
def KGSL_MEMALIGN(log2: int) -> int: return log2 << KGSL_MEMALIGN_SHIFT & KGSL_MEMALIGN_MASK
def KGSL_CACHEMODE(m: int) -> int: return m << KGSL_CACHEMODE_SHIFT & KGSL_CACHEMODE_MASK


class _S(ctypes.Structure):
  def __repr__(self) -> str:
    return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n, *_ in self._fields_)})"


class kgsl_devinfo(_S):
  _fields_ = [("device_id", c_uint), ("chip_id", c_uint), ("mmu_enabled", c_uint), ("gmem_gpubaseaddr", c_ulong),
              ("gpu_id", c_uint), ("gmem_sizebytes", c_size_t)]   # chip_id: core 31:24, major 23:16, minor 15:8, patch 7:0


class kgsl_device_getproperty(_S):
  _fields_ = [("type", c_uint), ("value", c_void_p), ("sizebytes", c_size_t)]


class kgsl_device_constraint(_S):
  _fields_ = [("type", c_uint), ("context_id", c_uint), ("data", c_void_p), ("size", c_size_t)]


class kgsl_device_constraint_pwrlevel(_S):
  _fields_ = [("level", c_uint)]


class kgsl_device_waittimestamp_ctxtid(_S):
  _fields_ = [("context_id", c_uint), ("timestamp", c_uint), ("timeout", c_uint)]   # timeout in ms


class kgsl_cmdstream_readtimestamp_ctxtid(_S):
  _fields_ = [("context_id", c_uint), ("type", c_uint), ("timestamp", c_uint)]


class kgsl_drawctxt_create(_S):
  _fields_ = [("flags", c_uint), ("drawctxt_id", c_uint)]


class kgsl_drawctxt_destroy(_S):
  _fields_ = [("drawctxt_id", c_uint)]


class kgsl_map_user_mem(_S):
  _fields_ = [("fd", c_int), ("gpuaddr", c_ulong), ("len", c_size_t), ("offset", c_size_t), ("hostptr", c_ulong),
              ("memtype", c_uint), ("flags", c_uint)]


class kgsl_sharedmem_free(_S):
  _fields_ = [("gpuaddr", c_ulong)]


class kgsl_gpuobj_alloc(_S):
  _fields_ = [("size", c_u64), ("flags", c_u64), ("va_len", c_u64), ("mmapsize", c_u64), ("id", c_uint),
              ("metadata_len", c_uint), ("metadata", c_u64)]


class kgsl_gpuobj_free(_S):
  _fields_ = [("flags", c_u64), ("priv", c_u64), ("id", c_uint), ("type", c_uint), ("len", c_uint)]


class kgsl_gpuobj_info(_S):
  _fields_ = [("gpuaddr", c_u64), ("flags", c_u64), ("size", c_u64), ("va_len", c_u64), ("va_addr", c_u64), ("id", c_uint)]


class kgsl_command_object(_S):
  _fields_ = [("offset", c_u64), ("gpuaddr", c_u64), ("size", c_u64), ("flags", c_uint), ("id", c_uint)]


class kgsl_command_syncpoint(_S):
  _fields_ = [("priv", c_u64), ("size", c_u64), ("type", c_uint)]


class kgsl_gpu_command(_S):
  _fields_ = [("flags", c_u64), ("cmdlist", c_u64), ("cmdsize", c_uint), ("numcmds", c_uint), ("objlist", c_u64),
              ("objsize", c_uint), ("numobjs", c_uint), ("synclist", c_u64), ("syncsize", c_uint), ("numsyncs", c_uint),
              ("context_id", c_uint), ("timestamp", c_uint)]


SIZES = {kgsl_devinfo: 40, kgsl_device_getproperty: 24, kgsl_device_constraint: 24, kgsl_device_constraint_pwrlevel: 4,
         kgsl_device_waittimestamp_ctxtid: 12, kgsl_cmdstream_readtimestamp_ctxtid: 12, kgsl_drawctxt_create: 8,
         kgsl_drawctxt_destroy: 4, kgsl_map_user_mem: 48, kgsl_sharedmem_free: 8, kgsl_gpuobj_alloc: 48,
         kgsl_gpuobj_free: 32, kgsl_gpuobj_info: 48, kgsl_command_object: 32, kgsl_command_syncpoint: 24,
         kgsl_gpu_command: 64}
for _t, _n in SIZES.items(): assert ctypes.sizeof(_t) == _n, f"{_t.__name__} is {ctypes.sizeof(_t)} bytes, the LP64 ABI {_n}"

# --- ioctls: (_IOWR / _IOW, number, argument) as msm_kgsl.h defines them
IOCTL_KGSL_DEVICE_GETPROPERTY = _ioc(IOC_READ | IOC_WRITE, 0x02, kgsl_device_getproperty)
IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID = _ioc(IOC_WRITE, 0x07, kgsl_device_waittimestamp_ctxtid)
IOCTL_KGSL_DRAWCTXT_CREATE = _ioc(IOC_READ | IOC_WRITE, 0x13, kgsl_drawctxt_create)
IOCTL_KGSL_DRAWCTXT_DESTROY = _ioc(IOC_WRITE, 0x14, kgsl_drawctxt_destroy)
IOCTL_KGSL_MAP_USER_MEM = _ioc(IOC_READ | IOC_WRITE, 0x15, kgsl_map_user_mem)
IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID = _ioc(IOC_READ | IOC_WRITE, 0x16, kgsl_cmdstream_readtimestamp_ctxtid)
IOCTL_KGSL_SHAREDMEM_FREE = _ioc(IOC_WRITE, 0x21, kgsl_sharedmem_free)
IOCTL_KGSL_SETPROPERTY = _ioc(IOC_WRITE, 0x32, kgsl_device_getproperty)
IOCTL_KGSL_GPUOBJ_ALLOC = _ioc(IOC_READ | IOC_WRITE, 0x45, kgsl_gpuobj_alloc)
IOCTL_KGSL_GPUOBJ_FREE = _ioc(IOC_WRITE, 0x46, kgsl_gpuobj_free)
IOCTL_KGSL_GPUOBJ_INFO = _ioc(IOC_READ | IOC_WRITE, 0x47, kgsl_gpuobj_info)
IOCTL_KGSL_GPU_COMMAND = _ioc(IOC_READ | IOC_WRITE, 0x4A, kgsl_gpu_command)
IOCTL_NAMES = {v: k.removeprefix("IOCTL_KGSL_") for k, v in dict(globals()).items() if k.startswith("IOCTL_KGSL_")}
