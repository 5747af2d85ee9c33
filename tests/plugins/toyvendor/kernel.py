"""The toy vendor's kernel-driver model, plugged in as its PCI model is: a KernelModel named by an entry point of group
hcq.models (toykernel), on emu/kernel_model.py. It declares only its device file, its sysfs text and its ioctl; the
base gives it the fd table, ioctl decoding and size rules, errno failures naming it and the call log. Nothing in emu/ or
drivers/ knows it.

/dev/toy_accel takes TOY_IOC_ADD (_IOWR('t', 1, struct toy_add)): the driver adds a and b into sum, modulo 2^64."""
import ctypes
from common.plugin import KernelModel
from emu.kernel_model import EXACT, IOC_READ, IOC_WRITE, Ioctl, Ioctls, KernelDriverModel, ioc

DEVICE, VERSION = "/dev/toy_accel", "/sys/module/toy_accel/version"


class ToyAdd(ctypes.Structure):
  _fields_ = [("a", ctypes.c_uint64), ("b", ctypes.c_uint64), ("sum", ctypes.c_uint64)]


TOY_IOC_ADD = ioc(IOC_READ | IOC_WRITE, ord("t"), 1, ctypes.sizeof(ToyAdd))


class ToyKernel(KernelDriverModel):
  name = "toy_accel model"

  def __init__(self):
    super().__init__(0x7100_0000_0000, 0x7101_0000_0000)
    self.devices, self.files = (DEVICE,), {VERSION: "1.0\n"}
    self.ioctls = {DEVICE: Ioctls([Ioctl(TOY_IOC_ADD, "TOY_IOC_ADD", self._add, ToyAdd, EXACT)])}

  def _add(self, fd: int, arg: ToyAdd) -> None: arg.sum = arg.a + arg.b     # (a c_uint64 field keeps the low 64 bits)


MODEL = KernelModel("toykernel", ToyKernel, "emulated toy accelerator (its kernel driver)")
