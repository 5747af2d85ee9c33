"""The process address space a kernel-driver model hands out (KernelInterface.reserve/anon/release): VA reservations
in a window clear of where host mmaps land (backed by nothing, never handed out twice, like fresh mmap hints) and
anonymous process memory with a real address, which the model can pin as user pages."""
from __future__ import annotations
import ctypes, errno, mmap


class ProcessAddressSpace:
  def __init__(self, base: int, end: int, owner: str):
    self.next_va, self.end, self.owner = base, end, owner
    self.anon_maps: dict[int, mmap.mmap] = {}

  def reserve(self, size: int, align: int) -> int:
    va = -(-self.next_va // align) * align
    if va + size > self.end: raise OSError(errno.ENOMEM, f"{self.owner}: out of virtual address space")
    self.next_va = va + size
    return va

  def anon(self, size: int) -> tuple[int, memoryview]:
    """Process memory (what mmap(MAP_ANONYMOUS) gives)."""
    m = mmap.mmap(-1, size)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    self.anon_maps[addr] = m
    return addr, memoryview(m)

  def release(self, va: int, size: int) -> None:
    self.anon_maps.pop(va, None)

  def holds(self, addr: int, size: int) -> bool:
    """Is [addr, addr+size) inside memory anon() handed out (pages the kernel could pin)?"""
    return any(at <= addr and addr + size <= at + len(m) for at, m in self.anon_maps.items())
