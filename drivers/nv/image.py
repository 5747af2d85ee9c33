"""An NV kernel image: the cubin NVRTC built and the PTX it was built from, as one bytes object (what the compute
layer's compile cache stores and `NVDevice.program` takes). Real GPUs run the cubin's SASS; MOCK+NV's PTX engine
cannot execute SASS, so it runs the PTX the cubin was compiled from (issue 17: the program carries both)."""
from __future__ import annotations
import struct

MAGIC = b"HCQNVIMG"
_HEAD = struct.Struct("<8sII")            # magic, cubin bytes, PTX bytes


def pack(cubin: bytes, ptx: str) -> bytes:
  """One image from a cubin (an ELF) and its PTX source."""
  if cubin[:4] != b"\x7fELF": raise ValueError("NV kernel image: the cubin is not an ELF file (want NVRTC's CUBIN output)")
  text = ptx.encode()
  return _HEAD.pack(MAGIC, len(cubin), len(text)) + bytes(cubin) + text


def unpack(image: bytes) -> tuple[bytes, str]:
  """(cubin, PTX) from `pack`'s output; a clear ValueError for anything else."""
  if len(image) < _HEAD.size or image[:8] != MAGIC:
    raise ValueError(f"NV kernel image: no {MAGIC.decode()} header (got {bytes(image[:8])!r}); "
                     "build it with drivers.nv.image.pack(cubin, ptx), as the NV compiler does")
  _, nc, nt = _HEAD.unpack_from(image)
  if len(image) != _HEAD.size + nc + nt:
    raise ValueError(f"NV kernel image: {len(image)} bytes, its header says {_HEAD.size + nc + nt} (truncated or padded)")
  cubin, text = image[_HEAD.size:_HEAD.size + nc], image[_HEAD.size + nc:]
  if cubin[:4] != b"\x7fELF": raise ValueError("NV kernel image: its cubin is not an ELF file")
  return bytes(cubin), text.decode()
