"""mlx5 command-interface helpers: command and status names (mlx5_ifc.h MLX5_CMD_OP_*, device.h MLX5_CMD_STAT_*),
big-endian register values, and the error a refused command raises."""
from __future__ import annotations

from autogen import mlx5 as mlx5_ifc, mlx5_core
from autogen.bitlayout import BitLayout

COMMANDS = {v: k[len("MLX5_CMD_OP_"):] for k, v in vars(mlx5_ifc).items() if k.startswith("MLX5_CMD_OP_") and isinstance(v, int)}
STATUS = {v: k[len("MLX5_CMD_STAT_"):] for k, v in vars(mlx5_core).items() if k.startswith("MLX5_CMD_STAT_") and isinstance(v, int)}
# MLX5_CMD_DELIVERY_STAT_* (mlx5 core cmd.c): why the firmware could not take a command at all
DELIVERY = {1: "SIGNAT_ERR", 2: "TOK_ERR", 3: "BAD_BLK_NUM_ERR", 4: "OUT_PTR_ALIGN_ERR", 5: "IN_PTR_ALIGN_ERR", 6: "FW_ERR",
            7: "IN_LENGTH_ERR", 8: "OUT_LENGTH_ERR", 9: "RES_FLD_NOT_CLR_ERR", 0x10: "CMD_DESCR_ERR"}
SYNDROMES = {v: k[len("MLX5_CQE_SYNDROME_"):] for k, v in vars(mlx5_core).items() if k.startswith("MLX5_CQE_SYNDROME_")}


def swap32(v: int) -> int:
  """A big-endian 32-bit register value as a little-endian CPU access carries it (and back)."""
  return int.from_bytes(v.to_bytes(4, "little"), "big")


def layouts(opcode: int) -> tuple[BitLayout, BitLayout]:
  name = COMMANDS[opcode].lower()
  name = {"2err_qp": "qp_2err", "2rst_qp": "qp_2rst", "access_reg": "access_register"}.get(name, name)
  return mlx5_ifc.LAYOUTS[f"{name}_in"], mlx5_ifc.LAYOUTS[f"{name}_out"]


class CommandError(RuntimeError):
  """A command the firmware refused: names the command, its status and its syndrome."""
  def __init__(self, where: str, opcode: int, status: int, syndrome: int, op_mod: int = 0):
    self.opcode, self.status, self.syndrome = opcode, status, syndrome
    mod = f" op_mod {op_mod:#x}" if op_mod else ""
    super().__init__(f"{where}: {COMMANDS.get(opcode, hex(opcode))} ({opcode:#x}){mod} failed: status "
                     f"{STATUS.get(status, '?')} ({status:#x}), syndrome {syndrome:#010x}")
