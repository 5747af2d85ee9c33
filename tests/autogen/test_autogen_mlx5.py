"""mlx5 bit layouts: gcc's offsetof/sizeof of the `u8 name[N]` structs, MLX5_SET semantics, rdma.md facts."""
import pytest
from autogen import mlx5
from autogen.__main__ import GENERATORS
from autogen_probe import packages, run_probe

SAMPLE = 40


def test_layouts_match_gcc(tmp_path):
  libc, src = packages()
  gen = GENERATORS["mlx5"]
  names = sorted(mlx5.LAYOUTS)
  text = "".join(src.path(h).read_text() for h in gen.headers)
  sample = [mlx5.LAYOUTS[names[i * len(names) // SAMPLE]] for i in range(SAMPLE)]
  sample = [lay for lay in sample if f"mlx5_ifc_{lay.name}_bits" in text]  # unnamed nested records have no C name
  lines = []
  for lay in sample:
    c = f"{'union' if f'union mlx5_ifc_{lay.name}_bits {{' in text else 'struct'} mlx5_ifc_{lay.name}_bits"
    lines.append(f'printf("S {lay.name} %zu\\n", sizeof({c}));')
    lines += [f'printf("F {lay.name} {f} %zu\\n", offsetof({c}, {f}));' for f in lay.fields]
  out = run_probe(tmp_path, [src.path(h) for h in gen.headers], [libc.root, libc.root / "x86_64-linux-gnu"], True, lines)
  for rec in out:
    lay = mlx5.LAYOUTS[rec[1]]
    if rec[0] == "S": assert lay.bits == int(rec[2]), rec[1]
    else: assert lay.fields[rec[2]][0] == int(rec[3]), f"{rec[1]}.{rec[2]}"
  assert sum(r[0] == "S" for r in out) >= 30


def _mlx5_set(buf: bytearray, off: int, width: int, value: int) -> None:
  """MLX5_SET as the kernel defines it: one big-endian dword, shift = 32 - off%32 - width."""
  dw = off // 32 * 4
  shift, mask = 32 - off % 32 - width, (1 << width) - 1
  word = int.from_bytes(buf[dw:dw + 4], "big") & ~(mask << shift) | (value & mask) << shift
  buf[dw:dw + 4] = word.to_bytes(4, "big")


def test_set_get_agree_with_mlx5_set():
  lay = mlx5.create_qp_in
  for path, value in [("opcode", 0x500), ("op_mod", 3), ("input_qpn", 0xABCDE), ("qpc.log_sq_size", 11),
                      ("qpc.pd", 0x123456), ("qpc.st", 0x3), ("qpc.cqn_snd", 0x7F)]:
    ours, ref = bytearray(lay.nbytes), bytearray(lay.nbytes)
    lay.set(ours, path, value)
    off, width, _ = lay.locate(path)
    _mlx5_set(ref, off, width, value)
    assert ours == ref, path
    assert lay.get(ours, path) == value


def test_command_layout_facts():
  # mlx5_ifc.h: permanent MAC at absolute bit 0x820 of QUERY_NIC_VPORT_CONTEXT's output; MTTs at byte 0x110
  assert mlx5.query_nic_vport_context_out.locate("nic_vport_context.permanent_address")[:2] == (0x820, 64)
  assert mlx5.create_mkey_in.locate("klm_pas_mtt")[0] == 0x110 * 8
  assert (mlx5.MLX5_CMD_OP_QUERY_HCA_CAP, mlx5.MLX5_CMD_OP_INIT_HCA, mlx5.MLX5_CMD_OP_CREATE_QP) == (0x100, 0x102, 0x500)
  assert mlx5.MLX5_QUERY_PAGES_IN_OP_MOD_BOOT_PAGES == 1 and mlx5.MLX5_QUERY_PAGES_IN_OP_MOD_INIT_PAGES == 2
  assert mlx5.query_hca_cap_out.locate("capability")[:2] == (0x80, 0x8000)  # a 4096-byte capability page after 16 bytes


def test_bad_paths_and_values_are_clear_errors():
  with pytest.raises(KeyError, match="create_qp_in has no field 'opcod'"): mlx5.create_qp_in.locate("opcod")
  with pytest.raises(ValueError, match=r"create_qp_in.op_mod is 16 bit\(s\) wide"): mlx5.create_qp_in.build(op_mod=1 << 16)
  with pytest.raises(KeyError, match="not an array"): mlx5.create_qp_in.locate("opcode[1]")


def test_core_driver_constants():
  from autogen import mlx5_core  # kernel-internal headers, constants only (include/linux/mlx5/*.h)
  assert (mlx5_core.MLX5_BF_OFFSET, mlx5_core.CMD_OWNER_HW, mlx5_core.MLX5_REG_HOST_ENDIANNESS) == (0x800, 1, 0x7004)
  assert mlx5_core.MLX5_CMD_DATA_BLOCK_SIZE == 512 and mlx5_core.MLX5_OPCODE_RDMA_WRITE == 0x08
  assert mlx5_core.CQE_RSS_HTYPE_IP == 0b1100  # GENMASK(3, 2)
