"""Synthetic firmware files for tests, for a chip of chips.py (Navi31 by default; the gfx12 chips get their PSP 14 image
ids, an SDMA v3.0 file with the one RS64 ucode and an RLC v2.2 file without P/V, as their Debian files are): the six
files a driver loads, with valid amdgpu_ucode.h headers
and small payloads that the emulated PSP accepts (firmware.py's signed-image format), laid out as the Debian
firmware-amd-graphics blobs are:

  psp_13_0_0_sos.bin  psp_firmware_header_v2_0; bin table SYS_DRV, SOS, TOC, KDB, SPL, RL (offsets from the
                      ucode array at 256)
  smu_13_0_0.bin      smc_firmware_header_v2_1; the PMFW image at the ucode array, one soft PPTable entry
  sdma_6_0_0.bin      sdma_firmware_header_v2_0; TH0 (ctx) at the ucode array, TH1 (ctl) at ctl_ucode_offset,
                      which is a file offset
  gc_11_0_0_mec.bin   gfx_firmware_header_v2_0; RS64 MEC at ucode_offset_bytes, its P0 stack at data_offset_bytes
                      (file offsets; the stack image is zero-padded), ucode_start_addr 0x7000000003000
  gc_11_0_0_imu.bin   imu_firmware_header_v1_0; IRAM then DRAM, offsets relative to the ucode array
  gc_11_0_0_rlc.bin   rlc_firmware_header_v2_3; RLC_G at the ucode array; IRAM, DRAM_BOOT, P, V at file offsets;
                      no restore lists (v2.1 sizes 0)

The TOC body is in the model's TOC layout (firmware.py): the TMR size `toc_tmr` and every LOAD_IP_FW component but
those in `toc_omit`.

Corruptions for negative tests: `omit` leaves components out (a PSP bin, an RLC/IMU piece: size 0; a file's
only component: no file), `damage` maps a component to "magic" (not a signed image), "unsigned" (zero
signature), "size" (header sizes disagree) or "id" (another component's image id), `bad_header` names files
whose common header claims an unknown header version.
"""
from __future__ import annotations
import ctypes, os, zlib

from autogen.amd import amdgpu_ucode
from emu.amdgpu import firmware
from emu.amdgpu.chips import Chip, NAVI31

ARRAY = 256                       # ucode_array_offset_bytes of every file
SOS_VERSION, SMU_VERSION = 0x00310025, 0x004E4B00
PSP_BINS = (("SYS_DRV", amdgpu_ucode.PSP_FW_TYPE_PSP_SYS_DRV), ("SOS", amdgpu_ucode.PSP_FW_TYPE_PSP_SOS), ("TOC", amdgpu_ucode.PSP_FW_TYPE_PSP_TOC),
            ("KDB", amdgpu_ucode.PSP_FW_TYPE_PSP_KDB), ("SPL", amdgpu_ucode.PSP_FW_TYPE_PSP_SPL), ("RL", amdgpu_ucode.PSP_FW_TYPE_PSP_RL))
# every component's signed-image body size and version
COMPONENTS = {**{n: (0x200, SOS_VERSION if n in ("SOS", "SYS_DRV") else 1) for n, _ in PSP_BINS},
              "SMU": (0x400, firmware.pmfw_image_version(SMU_VERSION)), "SDMA_UCODE_TH0": (0x300, 1), "SDMA_UCODE_TH1": (0x280, 1),
              "RS64_MEC": (0x600, 1), "RS64_MEC_P0_STACK": (0x100, 1), "IMU_I": (0x300, 1), "IMU_D": (0x300, 1),
              "RLC_G": (0x400, 1), **{n: (0x200, 1) for n in ("RLC_IRAM", "RLC_DRAM_BOOT", "RLC_P", "RLC_V")}}


def _image(name: str, size: int, damage: dict[str, str], version: int = 1, body: bytes | None = None,
           rules: firmware.Rules = firmware.PSP13) -> bytes:
  body = bytes((i * 7 + len(name)) & 0xFF for i in range(size)) if body is None else body
  img = bytearray(firmware.make_image(name, body, version, image_id=0x0135 if name == "RL" else rules.image_ids[name]))
  how = damage.get(name)
  if how == "magic": img[firmware.OFF_MAGIC:firmware.OFF_MAGIC + 4] = b"JUNK"
  elif how == "unsigned": img[-firmware.SIGNATURE:] = bytes(firmware.SIGNATURE)
  elif how == "size": img[firmware.OFF_BODY:firmware.OFF_BODY + 4] = (len(body) + 16).to_bytes(4, "little")
  elif how == "id": img[firmware.OFF_ID:firmware.OFF_ID + 2] = rules.image_ids["KDB" if name != "KDB" else "SOS"].to_bytes(2, "little")
  elif how is not None: raise ValueError(f"unknown damage {how!r} for {name}; use magic, unsigned, size or id")
  return bytes(img)


def _common(hdr, file_size: int, header_struct, major: int, minor: int, ip: tuple[int, int], ucode: bytes, bad: bool) -> None:
  c = hdr      # each header version begins with the one it extends, down to the common header
  while not isinstance(c, amdgpu_ucode.common_firmware_header): c = getattr(c, c._fields_[0][0])
  c.size_bytes, c.header_size_bytes = file_size, ctypes.sizeof(header_struct)
  c.header_version_major, c.header_version_minor = (9 if bad else major), minor
  c.ip_version_major, c.ip_version_minor = ip
  c.ucode_version, c.ucode_size_bytes, c.ucode_array_offset_bytes, c.crc32 = 1, len(ucode), ARRAY, zlib.crc32(ucode)


def _file(hdr, payload: bytes) -> bytes:
  out = bytearray(ARRAY + len(payload))
  out[:ctypes.sizeof(hdr)] = bytes(hdr)
  out[ARRAY:] = payload
  return bytes(out)


def images(omit: tuple[str, ...] = (), damage: dict[str, str] | None = None, toc_tmr: int = firmware.TMR_SIZE,
           toc_omit: tuple[str, ...] = (), chip: Chip = NAVI31) -> dict[str, bytes]:
  """The signed image of each component (what the PSP is handed), as write_firmware packs them into the files."""
  rules = firmware.RULES[chip.versions["MP0"]]
  toc = firmware.toc_body(toc_tmr, tuple(n for n in rules.ip_firmware if n not in toc_omit), rules)
  return {n: _image(n, size, damage or {}, version, toc if n == "TOC" else None, rules)
          for n, (size, version) in COMPONENTS.items() if n not in omit and (n in rules.image_ids or n == "RL")}


def write_firmware(path: str, omit: tuple[str, ...] = (), damage: dict[str, str] | None = None,
                   bad_header: tuple[str, ...] = (), toc_tmr: int = firmware.TMR_SIZE, toc_omit: tuple[str, ...] = (),
                   chip: Chip = NAVI31) -> dict[str, str]:
  """Write the synthetic files of `chip` into directory `path`; returns {file name: full path} of those written."""
  files, imgs = {}, images(omit, damage, toc_tmr, toc_omit, chip)
  img = lambda name: imgs.get(name, b"")
  os.makedirs(path, exist_ok=True)
  v = lambda ip: "_".join(map(str, chip.versions[ip]))
  sos_n, smu_n, sdma_n = f"psp_{v('MP0')}_sos.bin", f"smu_{v('MP1')}.bin", f"sdma_{v('SDMA0')}.bin"
  mec_n, imu_n, rlc_n = f"gc_{v('GC')}_mec.bin", f"gc_{v('GC')}_imu.bin", f"gc_{v('GC')}_rlc.bin"
  mp, sdma_ip, gc = chip.versions["MP0"][:2], chip.versions["SDMA0"][:2], chip.versions["GC"][:2]

  # PSP sOS: v2.0 header, then a table of psp_fw_bin_desc right after it
  bins = [(n, t, img(n)) for n, t in PSP_BINS]
  bins = [b for b in bins if b[2]]
  table_at = amdgpu_ucode.psp_firmware_header_v2_0.psp_fw_bin.offset
  payload, descs = b"", []
  for name, t, data in bins:
    descs.append(amdgpu_ucode.psp_fw_bin_desc(fw_type=t, fw_version=1, offset_bytes=len(payload), size_bytes=len(data)))
    payload += data
  hdr = amdgpu_ucode.psp_firmware_header_v2_0(psp_fw_bin_count=len(descs))
  _common(hdr, ARRAY + len(payload), amdgpu_ucode.psp_firmware_header_v2_0, 2, 0, mp, payload, sos_n in bad_header)
  raw = bytearray(_file(hdr, payload))
  for i, d in enumerate(descs): raw[table_at + 16 * i:table_at + 16 * (i + 1)] = bytes(d)
  files[sos_n] = bytes(raw)

  # SMU: the PMFW image, then a soft PPTable entry table and one table
  if smu := img("SMU"):
    ppt_entry_at = ARRAY + len(smu)
    ppt = bytes(64)
    hdr = amdgpu_ucode.smc_firmware_header_v2_1(pptable_count=1, pptable_entry_offset=ppt_entry_at)
    hdr.v1_0.ucode_start_addr = 0x20000
    entry = bytes(amdgpu_ucode.smc_soft_pptable_entry(id=0, ppt_offset_bytes=ppt_entry_at + 12, ppt_size_bytes=len(ppt)))
    _common(hdr, ppt_entry_at + 12 + len(ppt), amdgpu_ucode.smc_firmware_header_v2_1, 2, 1, mp, smu, smu_n in bad_header)
    files[smu_n] = _file(hdr, smu + entry + ppt)

  th0, th1 = img("SDMA_UCODE_TH0"), img("SDMA_UCODE_TH1")
  if sdma_ip[0] >= 7:   # SDMA 7: v3.0, the one RS64 ucode at the ucode array
    hdr = amdgpu_ucode.sdma_firmware_header_v3_0(ucode_feature_version=70, ucode_offset_bytes=0, ucode_size_bytes=len(th0))
    _common(hdr, ARRAY + len(th0), amdgpu_ucode.sdma_firmware_header_v3_0, 3, 0, sdma_ip, th0, sdma_n in bad_header)
    files[sdma_n] = _file(hdr, th0)
  else:                 # SDMA 6: ctx (TH0) at the ucode array, ctl (TH1) right after (ctl_ucode_offset is from the file start)
    hdr = amdgpu_ucode.sdma_firmware_header_v2_0(ucode_feature_version=60, ctx_ucode_size_bytes=len(th0), ctx_jt_offset=0, ctx_jt_size=0,
                                                 ctl_ucode_offset=ARRAY + len(th0), ctl_ucode_size_bytes=len(th1), ctl_jt_offset=0, ctl_jt_size=0)
    _common(hdr, ARRAY + len(th0) + len(th1), amdgpu_ucode.sdma_firmware_header_v2_0, 2, 0, sdma_ip, th0 + th1, sdma_n in bad_header)
    files[sdma_n] = _file(hdr, th0 + th1)

  # MEC: RS64 code + P0 stack (the stack buffer is larger than its signed image, as in the real file)
  mec, stack = img("RS64_MEC"), img("RS64_MEC_P0_STACK")
  stack += bytes(0x1000 - len(stack)) if stack else b""
  hdr = amdgpu_ucode.gfx_firmware_header_v2_0(ucode_feature_version=29, ucode_size_bytes=len(mec), ucode_offset_bytes=ARRAY,
                                              data_size_bytes=len(stack), data_offset_bytes=ARRAY + len(mec),
                                              ucode_start_addr_lo=firmware.MEC_ENTRY & 0xFFFFFFFF, ucode_start_addr_hi=firmware.MEC_ENTRY >> 32)
  _common(hdr, ARRAY + len(mec) + len(stack), amdgpu_ucode.gfx_firmware_header_v2_0, 2, 0, gc, mec + stack, mec_n in bad_header)
  files[mec_n] = _file(hdr, mec + stack)

  # IMU: IRAM then DRAM, offsets from the ucode array
  iram, dram = img("IMU_I"), img("IMU_D")
  hdr = amdgpu_ucode.imu_firmware_header_v1_0(imu_iram_ucode_size_bytes=len(iram), imu_iram_ucode_offset_bytes=0,
                                              imu_dram_ucode_size_bytes=len(dram), imu_dram_ucode_offset_bytes=len(iram))
  _common(hdr, ARRAY + len(iram) + len(dram), amdgpu_ucode.imu_firmware_header_v1_0, 1, 0, gc, iram + dram, imu_n in bad_header)
  files[imu_n] = _file(hdr, iram + dram)

  # RLC v2.3 (gfx11; gfx12: v2.2, no P/V): RLC_G at the ucode array, the other pieces after it at file offsets
  g, v23 = img("RLC_G"), gc[0] < 12
  pieces = [(n, img(n)) for n in ("RLC_IRAM", "RLC_DRAM_BOOT", *(("RLC_P", "RLC_V") if v23 else ()))]
  hdr, at = (amdgpu_ucode.rlc_firmware_header_v2_3() if v23 else amdgpu_ucode.rlc_firmware_header_v2_2()), ARRAY + len(g)
  offsets = {}
  for n, data in pieces: offsets[n], at = (at if data else 0), at + len(data)
  v22 = hdr.v2_2 if v23 else hdr
  (iram_n, iram), (dram_n, dram) = pieces[:2]
  v22.rlc_iram_ucode_size_bytes, v22.rlc_iram_ucode_offset_bytes = len(iram), offsets[iram_n]
  v22.rlc_dram_ucode_size_bytes, v22.rlc_dram_ucode_offset_bytes = len(dram), offsets[dram_n]
  if v23:
    (p_n, p), (v_n, vv) = pieces[2:]
    hdr.rlcp_ucode_size_bytes, hdr.rlcp_ucode_offset_bytes = len(p), offsets[p_n]
    hdr.rlcv_ucode_size_bytes, hdr.rlcv_ucode_offset_bytes = len(vv), offsets[v_n]
  v22.v2_1.v2_0.ucode_feature_version = 1
  _common(hdr, at, type(hdr), 2, 3 if v23 else 2, gc, g, rlc_n in bad_header)
  files[rlc_n] = _file(hdr, g + b"".join(d for _, d in pieces))

  out = {}
  for name, data in files.items():
    with open(os.path.join(path, name), "wb") as f: f.write(data)
    out[name] = os.path.join(path, name)
  return out
