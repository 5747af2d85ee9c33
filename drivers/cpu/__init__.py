"""The CPU reference device (DEV=CPU): C kernels, worker-thread queues."""
from drivers.cpu.device import CPUDevice, CPUProgram, CPUQueue

__all__ = ["CPUDevice", "CPUProgram", "CPUQueue"]
