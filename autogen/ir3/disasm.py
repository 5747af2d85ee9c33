"""mesa's ir3 disassembler as the tinymesa wheel ships it (libtinymesa.so, mesa 25.2.7), through ctypes:
`disasm_a3xx(uint32_t *dwords, int sizedwords, int level, FILE *out, unsigned gpu_id)` printing into an
open_memstream(3) FILE. An instruction is 64 bits, its low dword first."""
from __future__ import annotations
import ctypes, functools
from importlib.metadata import PackageNotFoundError, version

GPU_ID = 630                                   # the a630 the KGSL model is


def available() -> bool:
  try: return bool(_lib())
  except (ImportError, OSError): return False


def tinymesa_version() -> str:
  try: return version("tinymesa")
  except PackageNotFoundError: return "not installed"


@functools.cache
def _lib():
  import tinymesa
  lib = ctypes.CDLL(str(tinymesa.libtinymesa))
  lib.disasm_a3xx.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint]
  lib.disasm_a3xx.restype = ctypes.c_int
  return lib


_libc = ctypes.CDLL(None)
_libc.open_memstream.restype = ctypes.c_void_p
_libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
_libc.fclose.argtypes = [ctypes.c_void_p]
_libc.free.argtypes = [ctypes.c_void_p]


def disasm(instrs: list[int], gpu_id: int = GPU_ID) -> list[str]:
  """The disassembler's line for each 64-bit instruction ('no match: ...' for an encoding it does not know), without
  its trailing comment (dontcare bits) and without label lines."""
  words = (ctypes.c_uint32 * (2 * len(instrs)))(*(w for i in instrs for w in (i & 0xFFFFFFFF, i >> 32)))
  buf, size = ctypes.c_void_p(), ctypes.c_size_t()
  out = _libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
  if not out: raise OSError(ctypes.get_errno(), "open_memstream failed")
  try: _lib().disasm_a3xx(words, len(words), 0, out, gpu_id)
  finally: _libc.fclose(out)
  try: text = ctypes.string_at(buf, size.value).decode()
  finally: _libc.free(buf)
  lines = (line.split("\t;")[0].strip() for line in text.splitlines())
  return [line for line in lines if not line.endswith(":")]   # branch-target labels (l0:) are not instructions
