"""The emulated ConnectX-6 Dx's init segment and command interface, driven command by command (drivers/mlx5's command
queue, nothing else brought up): big-endian registers, the initializing bit, mailbox chains both ways, delivery errors,
and the status and syndrome of commands the firmware refuses (out of order, bad pages, unwritable capabilities)."""
import pytest

from autogen import mlx5 as mlx5_ifc, mlx5_core
from drivers.mlx5.cmdq import CMD_DBELL, CommandQueue
from drivers.mlx5.ifc import CommandError, layouts, swap32
from drivers.system import open_model
from emu.nic.mlx5 import ModelError, syndrome
from emu.nic.mlx5.pages import BOOT, BOOT_PAGES, INIT, INIT_PAGES


class Raw:
  """A model with bus mastering and the command queue set up, and raw commands."""
  def __init__(self, pci):
    self.pci, self.model = pci, pci.model
    pci.enable_bus_master()
    self.bar = pci.map_bar(0)
    while swap32(self.bar.read32(0x1FC)) >> 31: pass
    self.q = CommandQueue(pci, self.bar, "test")
    while swap32(self.bar.read32(0x1FC)) >> 31: pass

  def __call__(self, opcode: int, op_mod: int = 0, payload: bytes = b"", outlen: int | None = None, **fields) -> bytes:
    lin, lout = layouts(opcode)
    inp = lin.build({**fields, "opcode": opcode, "op_mod": op_mod})
    return self.q.exec(bytes(inp) + payload, outlen or lout.nbytes)

  def pages(self, n: int) -> list[int]:
    return [self.pci.alloc_dma(4096).bus_addr(0) for _ in range(n)]

  def give(self, addrs: list[int]) -> None:
    self(mlx5_ifc.MLX5_CMD_OP_MANAGE_PAGES, mlx5_ifc.MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_SUCCESS, input_num_entries=len(addrs),
         payload=b"".join(a.to_bytes(8, "big") for a in addrs))


@pytest.fixture
def raw():
  pci = open_model("mlx5", 0)
  pci.reset()
  yield Raw(pci)
  pci.close()


def refused(status: int, key: str):
  return pytest.raises(CommandError,
                       match=f"status {[k for k, v in vars(mlx5_core).items() if k.startswith('MLX5_CMD_STAT_') and v == status][0][14:]} "
                                            rf"\({status:#x}\), syndrome {syndrome(key):#010x}")


def test_the_init_segment_is_big_endian_and_the_firmware_initializes_first():
  pci = open_model("mlx5", 0)
  try:
    pci.reset()
    bar = pci.map_bar(0)
    assert swap32(bar.read32(0)) == 39 << 16 | 22 and swap32(bar.read32(4)) == 5 << 16 | 1002
    assert swap32(bar.read32(0x14)) & 0xFF == 5 << 4 | 6                  # 32 slots of 64 bytes
    assert swap32(bar.read32(0x1FC)) >> 31 == 1 and swap32(bar.read32(0x1FC)) >> 31 == 0
    bar.write32(0x14, swap32(0x1000))
    with pytest.raises(ModelError, match="while the firmware is initializing"): bar.write32(CMD_DBELL, swap32(1))
    with pytest.raises(ModelError, match="UAR page 5 is not allocated"): bar.write64(5 * 4096 + 0x800, 0)
  finally: pci.close()


def test_commands_out_of_order_are_refused_with_their_syndromes(raw):
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, "hca not enabled"): raw(mlx5_ifc.MLX5_CMD_OP_QUERY_PAGES, BOOT)
  raw(mlx5_ifc.MLX5_CMD_OP_ENABLE_HCA)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, "hca already enabled"): raw(mlx5_ifc.MLX5_CMD_OP_ENABLE_HCA)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, "hca not initialized"): raw(mlx5_ifc.MLX5_CMD_OP_ALLOC_PD)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, "issi not set"): raw(mlx5_ifc.MLX5_CMD_OP_INIT_HCA)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "issi not supported"): raw(mlx5_ifc.MLX5_CMD_OP_SET_ISSI, current_issi=2)
  raw(mlx5_ifc.MLX5_CMD_OP_SET_ISSI, current_issi=1)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, "host endianness not set"): raw(mlx5_ifc.MLX5_CMD_OP_INIT_HCA)
  reg = dict(register_id=mlx5_core.MLX5_REG_HOST_ENDIANNESS)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "big-endian host not modelled"):
    raw(mlx5_ifc.MLX5_CMD_OP_ACCESS_REG, mlx5_ifc.MLX5_ACCESS_REGISTER_IN_OP_MOD_WRITE, payload=b"\x80" + bytes(15), **reg)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "register not modelled"):
    raw(mlx5_ifc.MLX5_CMD_OP_ACCESS_REG, mlx5_ifc.MLX5_ACCESS_REGISTER_IN_OP_MOD_WRITE, payload=bytes(16), register_id=0x5001)
  raw(mlx5_ifc.MLX5_CMD_OP_ACCESS_REG, mlx5_ifc.MLX5_ACCESS_REGISTER_IN_OP_MOD_WRITE, payload=bytes(16), **reg)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, "init pages missing"): raw(mlx5_ifc.MLX5_CMD_OP_INIT_HCA)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_OP_ERR, "command not implemented"): raw(mlx5_ifc.MLX5_CMD_OP_CREATE_TIR)


def test_pages_must_be_aligned_reachable_new_and_asked_for(raw):
  raw(mlx5_ifc.MLX5_CMD_OP_ENABLE_HCA)
  q = lambda op_mod: layouts(mlx5_ifc.MLX5_CMD_OP_QUERY_PAGES)[1].get(raw(mlx5_ifc.MLX5_CMD_OP_QUERY_PAGES, op_mod), "num_pages")
  assert q(BOOT) == BOOT_PAGES
  good = raw.pages(BOOT_PAGES + 1)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "page not aligned"): raw.give([good[0] + 8])
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "page not reachable"): raw.give([0x7000_0000_0000])
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "page given twice"): raw.give([good[0], good[0]])
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "more pages than requested"): raw.give(raw.pages(40))
  raw.give(good[:2])
  assert q(BOOT) == BOOT_PAGES - 2 and set(raw.model.pages.kind) == set(good[:2])
  raw.give(good[2:BOOT_PAGES])
  assert q(BOOT) == 0 and q(INIT) == INIT_PAGES
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_RES_STATE_ERR, "pages still given"): raw(mlx5_ifc.MLX5_CMD_OP_DISABLE_HCA)


def test_capabilities_come_through_output_mailboxes_and_only_writable_ones_change(raw):
  raw(mlx5_ifc.MLX5_CMD_OP_ENABLE_HCA)
  out = raw(mlx5_ifc.MLX5_CMD_OP_QUERY_HCA_CAP, mlx5_core.MLX5_CAP_GENERAL << 1 | 1)    # 4112 bytes: 16 inline, 8 mailbox blocks
  caps = mlx5_ifc.LAYOUTS["query_hca_cap_out"]
  assert caps.get(out, "capability.cmd_hca_cap.log_max_msg") == 30 and caps.get(out, "capability.cmd_hca_cap.roce") == 1
  blob = bytearray(out[16:])
  mlx5_ifc.LAYOUTS["cmd_hca_cap"].set(blob, "log_max_cq", 3)
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_PARAM_ERR, "capability not writable"):
    raw(mlx5_ifc.MLX5_CMD_OP_SET_HCA_CAP, mlx5_core.MLX5_CAP_GENERAL << 1, payload=bytes(blob))
  with refused(mlx5_core.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR, "outlen too short"):
    raw(mlx5_ifc.MLX5_CMD_OP_QUERY_HCA_CAP, mlx5_core.MLX5_CAP_GENERAL << 1 | 1, outlen=1000)


def test_a_mailbox_block_with_a_wrong_token_is_a_delivery_error(raw):
  q, lin = raw.q, layouts(mlx5_ifc.MLX5_CMD_OP_SET_HCA_CAP)[0]
  data = bytes(lin.build({"opcode": mlx5_ifc.MLX5_CMD_OP_SET_HCA_CAP}))
  q.token = 9
  q._chain(q.mbox, 0, data[16:], 8)
  q.mbox.view[3 * 1024 + 573] = 10                       # block 3 says another command's token
  lay = bytearray(64)
  lay[0], lay[4:8], lay[8:16], lay[16:32] = mlx5_core.MLX5_PCI_CMD_XPORT, len(data).to_bytes(4, "big"), q.mbox.bus_addr(0).to_bytes(8,
                                                                                                                                    "big"), data[:16]
  lay[48:56], lay[56:60], lay[60], lay[63] = q.mbox.bus_addr(8 * 1024).to_bytes(8, "big"), (16).to_bytes(4, "big"), 9, 1
  q.page.view[0:64] = lay
  raw.bar.write32(CMD_DBELL, swap32(1))
  assert q.page.view[63] == 2 << 1                       # MLX5_CMD_DELIVERY_STAT_TOK_ERR, owned by software again
  assert raw.model.cmdq.executed == []                   # the command did not run
