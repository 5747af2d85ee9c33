"""The toy vendor's queue-API device: the CPU device's memory, queues and compiler, under its own name."""
from drivers.cpu import CPUDevice
from drivers.system.pci import PCIDevice


class ToyDevice(CPUDevice):
  def __init__(self, name: str, function: PCIDevice):
    super().__init__()
    self.name, self.function = name, function

  def _shutdown(self) -> None:
    self.function.close()    # releases the device lock
