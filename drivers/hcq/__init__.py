"""The queue API: the small, device-neutral contract every backend implements and the compute layer uses.

  dev = open_device("CPU")                 # or any registered vendor's device string (None: the default device)
  a = dev.alloc(n); a.copyin(data)         # Buffer
  prg = dev.program("vadd", dev.compiler.compile(src))
  prg(out, a, b, global_size=(g,), local_size=(l,), wait=True)
  dev.compute_queue().wait(sig, 1).exec(...).signal(dev.timeline, v).submit()
"""
from drivers.hcq.devspec import DeviceSpec, parse_device, valid_forms, available_vendors
from drivers.hcq.signal import Signal, SignalTimeout
from drivers.hcq.buffer import Buffer
from drivers.hcq.program import Program, KernArgs
from drivers.hcq.queue import Queue
from drivers.hcq.graph import Graph
from drivers.hcq.compiler import Compiler, CompileError, llvm_tool
from drivers.hcq.device import Device, DeviceFault, open_device, default_device_name

__all__ = ["DeviceSpec", "parse_device", "valid_forms", "Signal", "SignalTimeout", "Buffer", "Program", "KernArgs", "Queue",
           "Graph", "Compiler", "CompileError", "llvm_tool", "Device", "DeviceFault", "open_device",
           "default_device_name", "available_vendors"]
