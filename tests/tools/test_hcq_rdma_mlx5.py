"""hcq-rdma with the mlx5 provider on emulated ConnectX NICs: loopback (two QPs of one NIC through its internal
loopback), connect and serve between two processes, mlx5 <-> every other registered NIC in both directions (RoCEv2 is one wire), and
hcq_smi's mlx5 backend on the models, including a server killed with -9 whose NIC the next driver resets."""
import json, signal, subprocess

import pytest

from drivers.rdma import rdma_vendors
from tests.tools.test_hcq_rdma import HCQ_RDMA, HCQ_SMI, REPO, last_json, run


def test_loopback_writes_and_verifies_through_the_internal_loopback():
  out = last_json(run("loopback", "--nic", "mlx5", "--pci", "mock-0", "--size", "64K", "--iters", "8", "--json"))
  assert out["verified"] is True and out["bytes"] == 8 * 65536


@pytest.mark.parametrize("size", ["1", "4097", "4M+1"])
def test_connect_between_two_processes_writes_and_reads_back(size):
  n = {"1": 1, "4097": 4097, "4M+1": (4 << 20) + 1}[size]
  out = last_json(run("connect", "--nic", "mlx5", "--pci", "mock-0", "--local", "--remote-pci", "mock-1", "--size", str(n),
                      "--iters", "2", "--read", "--json"))
  assert out["verified"] is True and out["read_back"] is True and out["size"] == n


@pytest.mark.parametrize("local,remote", [p for nic in rdma_vendors() if nic != "mlx5" for p in ((nic, "mlx5"), ("mlx5", nic))])
def test_cross_vendor_connect_mlx5_and_every_other_nic_interoperate(local, remote):
  out = last_json(run("connect", "--nic", local, "--pci", "mock-5", "--local", "--remote-nic", remote, "--remote-pci", "mock-6",
                      "--size", "300000", "--iters", "3", "--read", "--json"))
  assert out["verified"] is True and out["read_back"] is True


def smi(*argv: str) -> subprocess.CompletedProcess:
  return subprocess.run([str(HCQ_SMI), "mlx5", *argv], capture_output=True, text=True, timeout=60)


def test_hcq_smi_mlx5_lists_kills_and_resets_emulated_nics_and_the_next_driver_recovers():
  holder = subprocess.Popen([str(HCQ_RDMA), "serve", "--nic", "mlx5", "--pci", "mock-4", "--timeout", "120"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
  try:
    assert json.loads(holder.stdout.readline())["type"] == "hello"    # up, and holding mock-4
    rows = {d["bus"]: d for d in json.loads(smi("list", "--json").stdout)}
    assert (rows["mock-4"]["kind"], rows["mock-4"]["pid"], rows["mock-4"]["device_id"]) == ("emulated", holder.pid, "0x101d")
    r = smi("kill_pids", "--pci_bus", "mock-4", "--sudoless")
    assert r.returncode == 0 and "mock-4: killed pid" in r.stdout and holder.wait(30) == -signal.SIGKILL
  finally:
    if holder.poll() is None: holder.kill()
    holder.wait()
  # the killed driver left the HCA enabled (the state file says so); the next driver resets the function first
  out = last_json(run("loopback", "--nic", "mlx5", "--pci", "mock-4", "--size", "4096", "--iters", "2", "--json"))
  assert out["verified"] is True
  r = smi("reset", "--pci_bus", "mock-4")
  assert (r.returncode, r.stdout.strip()) == (0, "mock-4: reset"), r.stderr
