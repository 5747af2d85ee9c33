"""Memory regions: CREATE_MKEY with an MTT (mlx5_ifc.h mkc; kernel mlx5_ib mr.c).

The MKEY translates [iova, iova + length) through one big-endian page address per MR page (after input byte 0x110,
two per 16-byte octword). Rights: lr always, lw, rr, rw from the access flags. The key is mkey_index << 8 | a variant
byte the driver picks (it changes with every registration, so a stale key does not match a new MR at the same index)."""
from __future__ import annotations
from typing import TYPE_CHECKING

from autogen import mlx5 as mlx5_ifc
from drivers.rdma.provider import mr_page_shift
from drivers.rdma.verbs import Access

if TYPE_CHECKING: from drivers.mlx5.device import MLX5Device

MR_PAGE_SIZES = sum(1 << s for s in range(12, 31))     # mkc log_page_size 12 (4 KiB) ... 30 (1 GiB)


class MR:
  def __init__(self, dev: MLX5Device, pd: int, pages: list[int], page_size: int, iova: int, length: int, access: Access):
    shift = mr_page_shift(dev.name, page_size, MR_PAGE_SIZES)
    dev.mkey_variant = variant = dev.mkey_variant % 255 + 1
    self.dev, octs = dev, -(-len(pages) // 2)
    mtt = b"".join(p.to_bytes(8, "big") for p in pages).ljust(16 * octs, b"\0")
    m = "memory_key_mkey_entry."
    index = dev.cmd(mlx5_ifc.MLX5_CMD_OP_CREATE_MKEY, {
      f"{m}access_mode_1_0": 1, f"{m}lr": 1, f"{m}lw": int(bool(access & Access.LOCAL_WRITE)),
      f"{m}rr": int(bool(access & Access.REMOTE_READ)), f"{m}rw": int(bool(access & Access.REMOTE_WRITE)),
      f"{m}qpn": 0xFFFFFF, f"{m}mkey_7_0": variant, f"{m}pd": pd, f"{m}start_addr": iova, f"{m}len": length,
      f"{m}log_page_size": shift, f"{m}translations_octword_size": octs,
      "translations_octword_actual_size": octs}, payload=mtt).get("mkey_index")
    self.lkey = self.rkey = index << 8 | variant

  def deregister(self) -> None:
    self.dev.cmd(mlx5_ifc.MLX5_CMD_OP_DESTROY_MKEY, mkey_index=self.lkey >> 8)
