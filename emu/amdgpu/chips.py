"""What differs between the emulated AMD GPUs of the SOC21/SOC24 family (Navi31, Navi48, Navi44): PCI ids, the IP
versions and segment bases their IP discovery table lists (discovery.h ip_v4; the driver reads both from it), the GC
info table, and the register module of each IP (generated from Linux's <ip>_<version>_offset.h / _sh_mask.h), which
every block model of emu/amdgpu addresses and decodes its registers with. Versions and chips: amdgpu_discovery.c
(amdgpu_discovery_set_ip_blocks and the per-IP switches: GC 12.0.0 Navi44, 12.0.1 Navi48; SDMA 7.0.0/7.0.1; MP0/MP1
14.0.3/14.0.2; OSSSYS 7.0.0; HDP 7.0.0; NBIF 6.3.1; MMHUB 4.1.0); PCI ids: pci.ids."""
from __future__ import annotations
import importlib
from dataclasses import dataclass, field
from types import ModuleType

from autogen.amd import soc15_hw_ip as hw_ip
from common.plugin import PCIModel
from emu import state

Version = tuple[int, int, int]
VENDOR_ID, CLASS_VGA = 0x1002, 0x030000
# segment bases (dwords) of each IP, as the discovery table lists them: register dword address = base[reg.base_idx] + reg.offset.
# Navi31's; the gfx12 chips use the same layout (their registers' offsets and segment indexes are the headers')
SOC21_BASES = {
  "GC": (0x1260, 0xA000, 0x1C000, 0x2402C00),
  "MMHUB": (0x1A000, 0x2408800),
  "NBIO": (0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000),
  "MP0": (0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00),
  "MP1": (0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00),
  "HDP": (0xF20, 0x240A400),
  "OSSSYS": (0x10A0, 0x240A000),
  "SDMA0": (0x1260, 0xA000, 0x1C000, 0x2402C00),   # SDMA 6.0 / 7.0 registers sit in the GC register space
}
HWIDS = {"GC": hw_ip.GC_HWID, "SDMA0": hw_ip.SDMA0_HWID, "MMHUB": hw_ip.MMHUB_HWID, "NBIO": hw_ip.NBIF_HWID, "MP0": hw_ip.MP0_HWID,
         "MP1": hw_ip.MP1_HWID, "HDP": hw_ip.HDP_HWID, "OSSSYS": hw_ip.OSSSYS_HWID}
# the gc_info_v1_2 fields every chip here shares (wave32, 16 waves per SIMD, 64 KiB LDS, ...)
_GC_COMMON = dict(gc_num_wgp1_per_sa=0, gc_num_rb_per_se=4, gc_num_gprs=1536, gc_num_max_gs_thds=32, gc_gs_table_depth=32,
                  gc_gsprim_buff_depth=1792, gc_parameter_cache_depth=1024, gc_double_offchip_lds_buffer=1, gc_wave_size=32,
                  gc_max_waves_per_simd=16, gc_max_scratch_slots_per_cu=32, gc_lds_size=64, gc_num_sc_per_se=1, gc_num_sa_per_se=2,
                  gc_num_packer_per_sc=4, gc_num_gl2a=4, gc_num_tcp_per_sa=8)


@dataclass(frozen=True)
class Chip:
  name: str                                  # the model name it registers under (hcq.models)
  device_id: int
  revision: int
  versions: dict[str, Version]               # IP -> version, in discovery-table order
  regs: dict[str, str]                       # IP -> its register module (autogen.amd.<name>), imported when first used
  gc_info: dict[str, int]
  pte: str                                   # the page-table entry format its MMUs walk (emu.amdgpu.mmu FORMATS: gfx11, gfx12)
  ip_bases: dict[str, tuple[int, ...]] = field(default_factory=lambda: SOC21_BASES)

  def reg(self, ip: str) -> ModuleType:
    """The register module of `ip` (GC, MMHUB, NBIO, MP0, MP1, HDP, OSSSYS)."""
    return importlib.import_module(f"autogen.amd.{self.regs[ip]}")

  def ips(self) -> list[tuple[str, int, Version]]:
    """(IP, HWID, version) in discovery-table order."""
    return [(ip, HWIDS[ip], v) for ip, v in self.versions.items()]


# RX 7900 XTX: 6 shader engines x 2 shader arrays x 4 WGPs (96 CUs)
NAVI31 = Chip("navi31", 0x744C, 0xC8,
              {"GC": (11, 0, 0), "SDMA0": (6, 0, 0), "MMHUB": (3, 0, 0), "NBIO": (4, 3, 0), "MP0": (13, 0, 0), "MP1": (13, 0, 0),
               "HDP": (6, 0, 0), "OSSSYS": (6, 0, 0)},
              {"GC": "gc_11_0_0", "MMHUB": "mmhub_3_0_0", "NBIO": "nbio_4_3_0", "MP0": "mp_13_0_0", "MP1": "mp_13_0_0", "HDP": "hdp_6_0_0",
               "OSSSYS": "osssys_6_0_0"},
              dict(_GC_COMMON, gc_num_se=6, gc_num_wgp0_per_sa=4, gc_num_gl2c=16, gc_num_sdp_interface=16, gc_num_tcps=96), "gfx11")
_GFX12_REGS = {"GC": "gc_12_0_0", "MMHUB": "mmhub_4_1_0", "NBIO": "nbif_6_3_1", "MP0": "mp_14_0_2", "MP1": "mp_14_0_2", "HDP": "hdp_7_0_0",
               "OSSSYS": "osssys_7_0_0"}
# RX 9070 XT: 4 shader engines x 2 shader arrays x 4 WGPs (64 CUs)
NAVI48 = Chip("navi48", 0x7550, 0xC0,
              {"GC": (12, 0, 1), "SDMA0": (7, 0, 1), "MMHUB": (4, 1, 0), "NBIO": (6, 3, 1), "MP0": (14, 0, 2), "MP1": (14, 0, 2),
               "HDP": (7, 0, 0), "OSSSYS": (7, 0, 0)}, _GFX12_REGS,
              dict(_GC_COMMON, gc_num_se=4, gc_num_wgp0_per_sa=4, gc_num_gl2c=16, gc_num_sdp_interface=16, gc_num_tcps=64), "gfx12")
# RX 9060 XT: 2 shader engines x 2 shader arrays x 4 WGPs (32 CUs)
NAVI44 = Chip("navi44", 0x7590, 0xC0,
              {"GC": (12, 0, 0), "SDMA0": (7, 0, 0), "MMHUB": (4, 1, 0), "NBIO": (6, 3, 1), "MP0": (14, 0, 3), "MP1": (14, 0, 3),
               "HDP": (7, 0, 0), "OSSSYS": (7, 0, 0)}, _GFX12_REGS,
              dict(_GC_COMMON, gc_num_se=2, gc_num_wgp0_per_sa=4, gc_num_gl2c=8, gc_num_sdp_interface=8, gc_num_tcps=32), "gfx12")


def state_dir(chip: Chip, index: int) -> str:
  """Where device `index` of `chip` keeps its state: $TMPDIR/hcq-emu/<chip>-<index>."""
  return state.state_dir(chip.name, index)


def declaration(chip: Chip, description: str) -> PCIModel:
  """The hcq.models registration of a chip (navi31.py, ...): open_model(<chip>, index) is device `index` of it, its state in
  state_dir. Light to load: the model itself (function.py, the GPU core, the shader core) is imported when a device is made."""
  def create(bus: str, index: int, **options) -> object:
    from emu.amdgpu.function import GPUFunction
    return GPUFunction(chip, bus, path=state_dir(chip, index), **options)

  def saved() -> list[int]:
    from emu.amdgpu.function import DeviceState, STATE_MAGIC, STATE_VERSION
    return state.saved(chip.name, DeviceState, STATE_MAGIC, STATE_VERSION)
  return PCIModel(chip.name, VENDOR_ID, chip.device_id, CLASS_VGA, description, create, saved)
