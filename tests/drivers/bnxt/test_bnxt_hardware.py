"""On a real NetXtreme-E: bring-up, RDMA WRITE through PHY loopback, and the lock (skipped without one: they need a
Thor NIC unbound from bnxt_en, bound to vfio-pci)."""
import json, subprocess, sys
from pathlib import Path

import pytest

from drivers.bnxt import free_functions
from drivers.rdma import open_context
from drivers.system import DeviceBusyError

HCQ_RDMA = Path(sys.executable).parent / "hcq-rdma"


@pytest.mark.hardware("bnxt")
def test_a_real_nic_comes_up_and_writes_through_its_phy_loopback():
  bus = free_functions()[0].bus
  r = subprocess.run([HCQ_RDMA, "loopback", "--nic", "bnxt", "--pci", bus, "--size", "64K", "--iters", "10", "--json"],
                     capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout.splitlines()[-1])
  assert out["verified"] and out["bytes"] == 10 * 65536


@pytest.mark.hardware("bnxt")
def test_a_real_nic_is_owned_by_one_process():
  bus = free_functions()[0].bus
  with open_context("bnxt", bus, ip="10.0.0.1"):
    with pytest.raises(DeviceBusyError, match=f"device {bus} is in use by pid"):
      open_context("bnxt", bus)
