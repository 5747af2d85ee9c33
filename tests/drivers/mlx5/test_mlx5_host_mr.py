"""MRs over memory the context did not allocate, on the emulated ConnectX: the NetXtreme-E's tests
(tests/drivers/bnxt/test_bnxt_host_mr.py) on an mlx5 context, through the ConnectX's loopback (existing host memory
is mapped for the NIC by PCIDevice.map_dma, as on bnxt)."""
from tests.drivers.bnxt.test_bnxt_host_mr import (  # noqa: F401 (collected here, with this module's nic fixture)
  test_closing_the_context_deregisters_its_mrs_and_lets_their_buffers_go, test_the_responder_enforces_a_host_memory_mrs_bounds_and_access,
  test_write_and_read_into_an_mr_over_a_numpy_array, test_a_1_gib_mr_of_4_kib_pages_registers_and_takes_writes_at_both_ends,
  test_a_1_gib_mr_over_one_bus_run_takes_1_gib_pages)
from tests.drivers.mlx5.test_mlx5_model import nic  # noqa: F401 (the fixture)
