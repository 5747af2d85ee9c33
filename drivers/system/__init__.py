"""The hardware boundary: PCI functions, register access, DMA memory, device locks, discovery.

This is the only package that imports emu/ (it turns MOCK device strings into models)."""
from drivers.system.mmio import MMIO, MemMMIO, CallbackMMIO
from drivers.system.dma import DMAMemory
from drivers.system.pci import PCIDevice, ModelPCIDevice, SysfsPCIDevice, open_pci, open_model, list_models
from drivers.system.vfio import VFIOPCIDevice
from drivers.system.lock import DeviceLock, DeviceBusyError, list_locks
from drivers.system.discovery import PCIInfo, list_pci

__all__ = ["MMIO", "MemMMIO", "CallbackMMIO", "DMAMemory", "PCIDevice", "ModelPCIDevice", "SysfsPCIDevice", "VFIOPCIDevice",
           "open_pci", "open_model", "list_models", "DeviceLock", "DeviceBusyError", "list_locks", "PCIInfo", "list_pci"]
