"""The range allocator drivers use for device memory, GPU virtual addresses, IOVA and argument arenas: the one in emu/
(drivers/system is the layer that may import emu/), so models and drivers share one implementation."""
from emu.alloc import RangeAllocator

__all__ = ["RangeAllocator"]
