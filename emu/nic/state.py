"""Where an emulated NIC keeps what survives its process: one file `state` under $TMPDIR/hcq-emu/<kind>-<index>/
holding a ctypes structure that starts with a magic and a layout version, written whole (a temporary file renamed
over it), so a process killed with -9 leaves the last complete state."""
from __future__ import annotations
import ctypes, os, tempfile


def state_dir(kind: str, index: int) -> str:
  return os.path.join(os.environ.get("TMPDIR") or tempfile.gettempdir(), "hcq-emu", f"{kind}-{index}")


def load(path: str, layout: type[ctypes.Structure], magic: int, version: int) -> ctypes.Structure | None:
  """The state saved in `path`, or None when there is none (or it is another layout's)."""
  try:
    with open(os.path.join(path, "state"), "rb") as f: st = layout.from_buffer_copy(f.read(ctypes.sizeof(layout)))
  except (OSError, ValueError): return None
  return st if (st.magic, st.version) == (magic, version) else None


def load_or_new(path: str | None, layout: type[ctypes.Structure], magic: int, version: int, oui: bytes, index: int):
  """The state saved in `path` (None: keep none), or a new one whose `mac` is the 4-byte `oui` then `index` (16 bits)."""
  st = (load(path, layout, magic, version) if path else None) or layout(magic, version)
  if not any(st.mac): st.mac[:] = bytes(oui) + bytes((index >> 8 & 0xFF, index & 0xFF))
  return st


def save(path: str, state: ctypes.Structure) -> None:
  os.makedirs(path, exist_ok=True)
  tmp = os.path.join(path, f"state.{os.getpid()}")
  with open(tmp, "wb") as f: f.write(bytes(state))
  os.replace(tmp, os.path.join(path, "state"))


def saved(kind: str, layout: type[ctypes.Structure], magic: int, version: int) -> list[int]:
  """Indexes of the emulated `kind` NICs with saved state."""
  root, prefix = os.path.dirname(state_dir(kind, 0)), f"{kind}-"
  names = os.listdir(root) if os.path.isdir(root) else []
  return sorted(int(n[len(prefix):]) for n in names if n.startswith(prefix) and n[len(prefix):].isdigit()
                and load(os.path.join(root, n), layout, magic, version))
