"""Kernel-level profiling of an AMD device with HCQ_PROFILE=path.json: HCQ_SQTT=1 traces every kernel
(sqtt/capture_gfx11.py), HCQ_PMC=1 counts it (pmc_gfx11.py), each picked by the GC version (ip.py). When the device's
work is collected, each traced launch's raw per-SE buffers and code object are saved under
path.json.sqtt/<n>-<kernel>/ (se0.bin ..., code.hsaco, meta.json: kernel, target, base, unit, overflow; `hcq-sqtt
decode` reads them again); the Perfetto trace gets one track per traced wave with a slice per instruction (name: its
disassembly; args: PC and stall) and one counter track per PMC counter; at exit a table sums up each kernel."""
from __future__ import annotations
import atexit, json, os
from collections import Counter
from typing import TYPE_CHECKING

from drivers.hcq import profile
from drivers.amd import ip
if TYPE_CHECKING:
  from drivers.amd.device import AMDDevice
  from drivers.amd.sqtt.capture_gfx11 import Capture

SCLK_MHZ = 2500       # the shader clock the token times are converted with (assumed: Navi31's boost clock; not read)
_rows: list[dict] = []   # the exit summary: one row per profiled launch


def _flag(name: str) -> bool:
  v = os.environ.get(name, "")
  if v not in ("", "0", "1"): raise ValueError(f"{name}={v!r}: set 1 to enable, 0 or nothing not to")
  if v == "1" and not profile.enabled(): raise ValueError(f"{name}=1 needs HCQ_PROFILE=path.json: the results are written there")
  return v == "1"


def enable(device: AMDDevice) -> None:
  """Set up what HCQ_SQTT / HCQ_PMC ask for on `device` (PM4Queue brackets each launch with them)."""
  gc = device.iface.ip_versions["GC"]
  device.thread_trace = ip.THREAD_TRACE.pick(gc)(device) if _flag("HCQ_SQTT") else None
  device.perf_counters = ip.PERF_COUNTERS.pick(gc)(device) if _flag("HCQ_PMC") else None
  if device.thread_trace is not None or device.perf_counters is not None: profile.add_collector(device.name, lambda: events(device))


def save(c: Capture, n: int, target: str, root: str) -> None:
  d = os.path.join(root, f"{n:04d}-{c.kernel}")
  os.makedirs(d, exist_ok=True)
  for se, data in enumerate(c.buffers):
    with open(os.path.join(d, f"se{se}.bin"), "wb") as f: f.write(data)
  with open(os.path.join(d, "code.hsaco"), "wb") as f: f.write(c.lib)
  with open(os.path.join(d, "meta.json"), "w") as f:
    json.dump({"kernel": c.kernel, "target": target, "base": c.base, "unit": list(c.unit), "overflow": c.overflow}, f)


def events(device: AMDDevice) -> list[dict]:
  out: list[dict] = []
  tt, pc = device.thread_trace, device.perf_counters
  rows: dict[int, dict] = {}
  for n, s in enumerate(pc.samples if pc is not None else ()):
    v = pc.read(s)                                            # type: ignore[union-attr]
    device.free_owned(s.mem)
    for name, value in v.items():
      out += [{"ph": "C", "device": device.name, "name": name, "ts": s.begin.timestamp, "args": {"value": value}},
              {"ph": "C", "device": device.name, "name": name, "ts": s.end.timestamp, "args": {"value": 0}}]
    rows[n] = {"kernel": s.kernel, "us": s.end.timestamp - s.begin.timestamp, **v}
  for n, c in enumerate(tt.captures if tt is not None else ()):
    c.read()
    device.free_owned(c.mem)
    save(c, n, device.arch, profile.PATH + ".sqtt")
    hot: Counter = Counter()
    for w in c.waves(device.arch):
      track = f"{c.kernel} #{n} SE{w.se} SA{w.sa} WGP{w.wgp} SIMD{w.simd} slot {w.slot}"
      for i in w.insts:
        hot[i.text or i.op] += i.stall + 1
        out.append({"device": device.name, "queue": track, "name": i.text or i.op, "ts": c.begin.timestamp + i.time / SCLK_MHZ,
                    "dur": 1 / SCLK_MHZ, "args": {"pc": f"{i.pc:#x}" if i.pc is not None else None, "stall": i.stall}})
    rows.setdefault(n, {"kernel": c.kernel})["busiest"] = ", ".join(t for t, _ in hot.most_common(3))
  if tt is not None: tt.captures.clear()
  if pc is not None: pc.samples.clear()
  _rows.extend({"device": device.name, **r} for _, r in sorted(rows.items()))
  return out


@atexit.register
def _summary() -> None:
  if not _rows: return
  from rich.console import Console
  from rich.table import Table
  t = Table(title=f"hcq profile: {len(_rows)} profiled kernel launches")
  cols = [("device", "device"), ("kernel", "kernel"), ("us", "time (us)"), ("WAVES", "waves"), ("INSTS_VALU", "VALU"),
          ("INSTS_SALU", "SALU"), ("busiest", "busiest instructions (issue + stall clocks, traced waves)")]
  for _, title in cols: t.add_column(title)
  for r in _rows: t.add_row(*(f"{r[k]:.1f}" if k == "us" and k in r else str(r.get(k, "")) for k, _ in cols))
  Console(stderr=True).print(t)
