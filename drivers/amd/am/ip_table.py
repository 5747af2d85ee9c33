"""Which class drives which discovered IP version: the AM driver's amdgpu_discovery_set_ip_blocks.

BLOCKS lists the IP blocks in init order (Linux adds them in this order too: common, GMC, IH, PSP, SMU, GFX, SDMA);
each row names the IP whose discovered version picks the class, as Linux picks the common and GMC blocks by the GC
version. HELPERS are the register helpers the blocks share (Linux's nbio/hdp funcs and vmhubs), picked the same way.
PTE (the page-table entry layout, as Linux's gmc_v<N>_0.c encodes it) and FIRMWARE (the generation's firmware list)
follow the GC version by drivers/amd/ip.py's rule. Rows are public: another version of a block is its class and one
entry in its row (row("HDP")[(6, 0, 1)] = HDPv6_0_1).
RDNA4 (GC 12.0.0/12.0.1, SDMA 7.0, MP 14.0.2/14.0.3, OSSSYS 7.0, HDP 7.0, NBIF 6.3.1, MMHUB 4.1.0) has its rows here;
another GPU is more rows (MI300: GC 9.4.3).
A discovered version with no class is an UnsupportedIPError naming the block, the version found and the supported ones.
"""
from __future__ import annotations
from typing import TYPE_CHECKING

from drivers.amd.ip import Version, VersionTable, UnsupportedIPError, vstr
from drivers.amd.am.ip_block import IPBlock
from drivers.amd.am.soc21 import SOC21
from drivers.amd.am.gmc_v11_0 import GMCv11_0
from drivers.amd.am.ih_v6_0 import IHv6_0
from drivers.amd.am.psp_v13_0 import PSPv13_0
from drivers.amd.am.smu_v13_0 import SMUv13_0
from drivers.amd.am.gfx_v11_0 import GFXv11_0
from drivers.amd.am.sdma_v6_0 import SDMAv6_0
from drivers.amd.am.nbio_v4_3 import NBIOv4_3
from drivers.amd.am.hdp_v6_0 import HDPv6_0
from drivers.amd.am.mmhub_v3_0 import MMHUBv3_0
from drivers.amd.am.gfxhub_v3_0 import GFXHUBv3_0
from drivers.amd.am.soc24 import SOC24
from drivers.amd.am.gmc_v12_0 import GMCv12_0
from drivers.amd.am.ih_v7_0 import IHv7_0
from drivers.amd.am.psp_v14_0 import PSPv14_0
from drivers.amd.am.smu_v14_0 import SMUv14_0
from drivers.amd.am.gfx_v12_0 import GFXv12_0
from drivers.amd.am.sdma_v7_0 import SDMAv7_0
from drivers.amd.am.nbif_v6_3_1 import NBIFv6_3_1
from drivers.amd.am.hdp_v7_0 import HDPv7_0
from drivers.amd.am.mmhub_v4_1_0 import MMHUBv4_1_0
from drivers.amd.am.gfxhub_v12_0 import GFXHUBv12_0
if TYPE_CHECKING: from drivers.amd.am.core import AMCore

Row = tuple[str, str, dict[Version, type]]    # (block, the discovered IP that picks its class, {version: class})

BLOCKS: tuple[Row, ...] = (
  ("SOC", "GC", {(11, 0, 0): SOC21, (12, 0, 0): SOC24, (12, 0, 1): SOC24}),
  ("GMC", "GC", {(11, 0, 0): GMCv11_0, (12, 0, 0): GMCv12_0, (12, 0, 1): GMCv12_0}),
  ("IH", "OSSSYS", {(6, 0, 0): IHv6_0, (7, 0, 0): IHv7_0}),
  ("PSP", "MP0", {(13, 0, 0): PSPv13_0, (14, 0, 2): PSPv14_0, (14, 0, 3): PSPv14_0}),
  ("SMU", "MP1", {(13, 0, 0): SMUv13_0, (14, 0, 2): SMUv14_0, (14, 0, 3): SMUv14_0}),
  ("GFX", "GC", {(11, 0, 0): GFXv11_0, (12, 0, 0): GFXv12_0, (12, 0, 1): GFXv12_0}),
  ("SDMA", "SDMA0", {(6, 0, 0): SDMAv6_0, (7, 0, 0): SDMAv7_0, (7, 0, 1): SDMAv7_0}),
)
HELPERS: tuple[Row, ...] = (
  ("NBIO", "NBIO", {(4, 3, 0): NBIOv4_3, (6, 3, 1): NBIFv6_3_1}),
  ("HDP", "HDP", {(6, 0, 0): HDPv6_0, (7, 0, 0): HDPv7_0}),
  ("MMHUB", "MMHUB", {(3, 0, 0): MMHUBv3_0, (4, 1, 0): MMHUBv4_1_0}),
  ("GFXHUB", "GC", {(11, 0, 0): GFXHUBv3_0, (12, 0, 0): GFXHUBv12_0, (12, 0, 1): GFXHUBv12_0}),
)
PTE = VersionTable("PTE layout", "GC", {(11, 0, 0): "drivers.amd.am.pte_gfx11:PTEgfx11", (12, 0, 0): "drivers.amd.am.pte_gfx12:PTEgfx12"})
FIRMWARE = VersionTable("firmware list", "GC", {(11, 0, 0): "drivers.amd.am.firmware_gc11",      # its load(versions)
                                                 (12, 0, 0): "drivers.amd.am.firmware_gc12"})


def row(block: str) -> dict[Version, type]:
  """The {version: class} row of a block or helper."""
  return next(table for name, _, table in BLOCKS + HELPERS if name == block)


def classes(rows: tuple[Row, ...], versions: dict[str, Version]) -> dict[str, type]:
  """{block: class} for the discovered `versions`, in row order; every version without a class in one error."""
  out, missing = {}, []
  for block, ip, table in rows:
    found = versions[ip]
    if (cls := table.get(found)) is None:
      missing.append(f"{block} block for {ip} {vstr(found)} (supported: {', '.join(map(vstr, table))})")
    else: out[block] = cls
  if missing: raise UnsupportedIPError("this driver has no " + "; no ".join(missing))
  return out


def instantiate(core: AMCore) -> tuple[dict[str, IPBlock], dict[str, object]]:
  """({block: instance} in init order, {helper: instance}) for the core's discovered versions; the error names the device."""
  try: found = classes(BLOCKS + HELPERS, core.versions)
  except UnsupportedIPError as e: raise UnsupportedIPError(f"{core.pci.bus}: {e}") from None
  make = lambda rows: {block: found[block](core) for block, _, _ in rows}
  return make(BLOCKS), make(HELPERS)
