"""On a real ConnectX: bring-up, RDMA WRITE through its internal loopback, teardown, and the lock (skipped without one:
they need a ConnectX NIC unbound from mlx5_core, bound to vfio-pci)."""
import json, subprocess, sys
from pathlib import Path

import pytest

from drivers.mlx5 import free_functions
from drivers.rdma import open_context
from drivers.system import DeviceBusyError

HCQ_RDMA = Path(sys.executable).parent / "hcq-rdma"


@pytest.mark.hardware("mlx5")
def test_a_real_nic_comes_up_and_writes_through_its_internal_loopback():
  bus = free_functions()[0].bus
  r = subprocess.run([HCQ_RDMA, "loopback", "--nic", "mlx5", "--pci", bus, "--size", "64K", "--iters", "10", "--json"],
                     capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout.splitlines()[-1])
  assert out["verified"] and out["bytes"] == 10 * 65536


@pytest.mark.hardware("mlx5")
def test_a_real_nic_is_owned_by_one_process_and_gets_its_pages_back():
  bus = free_functions()[0].bus
  ctx = open_context("mlx5", bus, ip="10.0.0.1")
  pages = ctx.provider.pages.given
  with pytest.raises(DeviceBusyError, match=f"device {bus} is in use by pid"):
    open_context("mlx5", bus)
  assert pages
  ctx.close()
  assert not pages
