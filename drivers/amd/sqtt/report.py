"""HCQ_SQTT=1 (with HCQ_PROFILE=path.json): trace every kernel of an AMD device (capture.py); when the device's work is
collected, each traced launch's raw per-SE buffers and code object are saved under path.json.sqtt/<n>-<kernel>/ (se0.bin
..., code.hsaco, meta.json: target, base, unit, overflow; `hcq-sqtt decode` reads them again), and the Perfetto trace gets
one track per traced wave with a slice per instruction (name: its disassembly; args: PC and stall)."""
from __future__ import annotations
import json, os
from typing import TYPE_CHECKING

from drivers.hcq import profile
from drivers.amd.sqtt.capture import Capture, ThreadTracer
from drivers.amd.sqtt.waves import Code, Wave, decode, map_code
if TYPE_CHECKING: from drivers.amd.device import AMDDevice

SCLK_MHZ = 2500       # the shader clock the token times are converted with (assumed: Navi31's boost clock; not read)


def from_env(device: AMDDevice) -> ThreadTracer | None:
  flag = os.environ.get("HCQ_SQTT", "")
  if flag in ("", "0"): return None
  if flag != "1": raise ValueError(f"HCQ_SQTT={flag!r}: set 1 to trace kernels, 0 or nothing not to")
  if not profile.enabled(): raise ValueError("HCQ_SQTT=1 needs HCQ_PROFILE=path.json: the traces are written next to it")
  tt = ThreadTracer(device)
  profile.add_collector(device.name, lambda: events(device, tt))
  return tt


def waves(c: Capture, target: str) -> list[Wave]:
  """The decoded waves of a capture that has been read, mapped onto its code object."""
  code = Code.from_code_object(c.lib, c.base, c.kernel)
  out = []
  for se, data in enumerate(c.buffers):
    ws = decode(data, se, target, c.unit)
    map_code(ws, code)
    out += ws
  return out


def save(c: Capture, n: int, target: str, root: str) -> None:
  d = os.path.join(root, f"{n:04d}-{c.kernel}")
  os.makedirs(d, exist_ok=True)
  for se, data in enumerate(c.buffers):
    with open(os.path.join(d, f"se{se}.bin"), "wb") as f: f.write(data)
  with open(os.path.join(d, "code.hsaco"), "wb") as f: f.write(c.lib)
  with open(os.path.join(d, "meta.json"), "w") as f:
    json.dump({"kernel": c.kernel, "target": target, "base": c.base, "unit": list(c.unit), "overflow": c.overflow}, f)


def events(device: AMDDevice, tt: ThreadTracer) -> list[dict]:
  out: list[dict] = []
  for n, c in enumerate(tt.captures):
    c.read()
    device.free_owned(c.mem)                                # type: ignore[arg-type]
    save(c, n, device.arch, profile.PATH + ".sqtt")
    t0 = c.begin.timestamp
    for w in waves(c, device.arch):
      track = f"{c.kernel} #{n} SE{w.se} SA{w.sa} WGP{w.wgp} SIMD{w.simd} slot {w.slot}"
      out += [{"device": device.name, "queue": track, "name": i.text or i.op, "ts": t0 + i.time / SCLK_MHZ, "dur": 1 / SCLK_MHZ,
               "args": {"pc": f"{i.pc:#x}" if i.pc is not None else None, "stall": i.stall}} for i in w.insts]
  tt.captures.clear()
  return out
