"""Qualcomm Adreno GPUs (a6xx, a7xx) through the KGSL kernel driver (autogen.msm_kgsl: its ioctl ABI;
drivers.qcom.kgsl: one GPU's context, memory, submission and timestamps; drivers.qcom.cp: CP packets;
drivers.qcom.compiler and program: kernels as ir3 variants and their dispatch; drivers.qcom.device: the queue API).
Device strings: QCOM (/dev/kgsl-3d0), MOCK+QCOM (the same driver against the KGSL model, emu/kgsl: its `mocks` entry)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from drivers.system.registry import Mock, Vendor

if TYPE_CHECKING:
  from drivers.hcq.devspec import DeviceSpec
  from drivers.qcom.device import QCOMDevice


def _open(spec: DeviceSpec) -> QCOMDevice:
  from drivers.qcom.device import QCOMDevice
  from drivers.qcom.kgsl import KGSL
  from drivers.system.kernel import kernel_interface
  mock = spec.iface == "MOCK"
  return QCOMDevice("MOCK+QCOM" if mock else "QCOM", KGSL(VENDOR.open_mock("MOCK") if mock else kernel_interface()))


VENDOR = Vendor("QCOM", interfaces=("MOCK",), open=_open, single=True, mocks={"MOCK": Mock("kgsl", "kernel")},
                kernels=True)
