"""KFD+AMD on a machine without the amdgpu kernel driver: a clear error that names what is missing and what to use
instead, not a raw FileNotFoundError on a sysfs path."""
import os
import pytest
from drivers.amd.kfd import KFDIface
from drivers.system.kernel import OSKernel, kernel_interface

WHAT_INSTEAD = r"choose another interface: DEV=PCI\+AMD .*, DEV=MOCKKFD\+AMD or DEV=MOCKPCI\+AMD \(the emulated GPU\)"


class Hiding:
  """A kernel interface as seen on a machine where the paths under `gone` do not exist."""
  def __init__(self, kernel, *gone: str): self.kernel, self.gone = kernel, gone
  def exists(self, path: str) -> bool: return not path.startswith(self.gone) and self.kernel.exists(path)
  def __getattr__(self, name: str): return getattr(self.kernel, name)


def test_no_kfd_at_all_names_both_paths_and_the_alternatives():
  k = Hiding(OSKernel(), "/dev/kfd", "/sys/devices/virtual/kfd")
  with pytest.raises(RuntimeError, match=r"KFD\+AMD: the amdgpu kernel driver's compute interface \(KFD\) is not present "
                     r"on this machine \(no /dev/kfd and no /sys/devices/virtual/kfd/kfd/topology/nodes\): load amdgpu "
                     r"\(`sudo modprobe amdgpu`\) where an AMD GPU is installed, or " + WHAT_INSTEAD):
    KFDIface(k)


def test_a_topology_without_its_device_file_names_the_device_file():
  k = Hiding(kernel_interface("kfd"), "/dev/kfd")
  with pytest.raises(RuntimeError, match=r"is not present on this machine \(no /dev/kfd\): "):
    KFDIface(k)


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this machine has amdgpu's /dev/kfd")
def test_opening_kfd_amd_here_says_kfd_is_not_present():
  from drivers.hcq import open_device
  with pytest.raises(RuntimeError, match=r"KFD\+AMD: .* is not present on this machine .*" + WHAT_INSTEAD): open_device("KFD+AMD")
