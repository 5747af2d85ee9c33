"""AMD structs and packet helpers: MQD offsets against the header's own offset comments, plus documented facts."""
import ctypes, re
from autogen.amd import (amdgpu_ucode, discovery, nvd, psp_gfx_if, sdma_v6_0_0_pkt_open as sdma_defs, smu13_driver_if_v13_0_0 as smu_if,
                         smu_v13_0_0_ppsmc as ppsmc, soc15_hw_ip, soc15_ih_clientid, soc21_enum, v11_structs)
from autogen_probe import packages


def test_mqd_field_offsets_match_header_offset_comments():
  _, src = packages()
  text = src.path("drivers/gpu/drm/amd/include/v11_structs.h").read_text()
  checked = 0
  for struct, body in re.findall(r"struct (v11_\w+) \{(.*?)\n\};", text, re.S):
    cls = getattr(v11_structs, struct)
    for field, dec, hexa in re.findall(r"uint32_t (\w+); // offset: (\d+)\s+\((0x[0-9a-fA-F]+)\)", body):
      if int(dec) != int(hexa, 16): continue  # a comment typo (v11_sdma_mqd.reserved_71 says "0 (0x47)")
      assert getattr(cls, field).offset == 4 * int(dec), f"{struct}.{field}"
      checked += 1
  assert checked > 1000
  assert ctypes.sizeof(v11_structs.v11_compute_mqd) == 2048 and ctypes.sizeof(v11_structs.v11_sdma_mqd) == 512


def test_pm4_type3_header_encoding():
  # PM4 type-3 header: type 3 in bits 30-31, dword count - 1 in bits 16-29, opcode in bits 8-15
  assert nvd.PACKET3(nvd.PACKET3_RELEASE_MEM, 6) == 3 << 30 | 6 << 16 | 0x49 << 8
  assert nvd.CP_PACKET3_GET_OPCODE(nvd.PACKET3(nvd.PACKET3_DISPATCH_DIRECT, 3)) == 0x15
  assert nvd.PACKET3_SET_SH_REG == 0x76 and nvd.PACKET3_SET_SH_REG_START == 0x2C00
  assert nvd.PACKET3_ACQUIRE_MEM == 0x58 and nvd.PACKET3_WAIT_REG_MEM == 0x3C and nvd.PACKET3_INDIRECT_BUFFER == 0x3F


def test_sdma6_copy_linear_header():
  header = (sdma_defs.SDMA_PKT_COPY_LINEAR_HEADER_OP(sdma_defs.SDMA_OP_COPY)
            | sdma_defs.SDMA_PKT_COPY_LINEAR_HEADER_SUB_OP(sdma_defs.SDMA_SUBOP_COPY_LINEAR))
  assert (sdma_defs.SDMA_OP_COPY, sdma_defs.SDMA_SUBOP_COPY_LINEAR, header) == (1, 0, 0x1)
  assert sdma_defs.SDMA_PKT_COPY_LINEAR_HEADER_OP(0x1FF) == 0xFF  # helpers mask to the field width
  assert sdma_defs.SDMA_OP_FENCE == 5 and sdma_defs.SDMA_OP_TRAP == 6 and sdma_defs.SDMA_OP_POLL_REGMEM == 8


def test_discovery_and_firmware_headers():
  assert discovery.BINARY_SIGNATURE == 0x28211407 and discovery.DISCOVERY_TABLE_SIGNATURE == 0x53445049
  assert (soc15_hw_ip.GC_HWID, soc15_hw_ip.SDMA0_HWID, soc15_hw_ip.MP1_HWID, soc15_hw_ip.NBIF_HWID) == (11, 42, 1, 108)
  assert soc15_ih_clientid.SOC15_IH_CLIENTID_GRBM_CP == 0x14 and soc15_ih_clientid.SOC21_IH_CLIENTID_GFX == 0x0a
  assert ctypes.sizeof(discovery.ip_v4) == 8 and discovery.ip_v4.variant.offset == 7  # bases follow the 8-byte entry
  assert ctypes.sizeof(amdgpu_ucode.common_firmware_header) == 32
  assert amdgpu_ucode.common_firmware_header.ucode_array_offset_bytes.offset == 24  # then crc32 @28


def test_psp_and_smu_interfaces():
  assert ctypes.sizeof(psp_gfx_if.psp_gfx_rb_frame) == 64
  assert psp_gfx_if.GFX_CMD_ID_LOAD_IP_FW == 6 and psp_gfx_if.GFX_CMD_ID_SETUP_TMR == 5
  assert (ppsmc.PPSMC_MSG_TestMessage, ppsmc.PPSMC_MSG_GetSmuVersion, ppsmc.PPSMC_Result_OK) == (1, 2, 1)
  assert smu_if.SMU13_0_0_DRIVER_IF_VERSION == 0x3D and ctypes.alignment(smu_if.PPTable_t) == 1  # #pragma pack(1)
  assert soc21_enum.CP_PERFMON_STATE_DISABLE_AND_RESET == 0
