"""Profiling: with HCQ_PROFILE=path.json every exec/copy carries begin/end timestamps, and at exit all
queues of all devices are written as one Chrome/Perfetto trace (one process per device, one track per queue). A vendor
adds detail of its own (per-wave instruction tracks, counters) with `add_collector`."""
from __future__ import annotations
import atexit, json, os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable
if TYPE_CHECKING: from drivers.hcq.signal import Signal

PATH = os.environ.get("HCQ_PROFILE", "")


@dataclass
class Span:
  device: str
  queue: str
  name: str
  begin: Signal
  end: Signal


_pending: list[Span] = []
_events: list[dict] = []
_collectors: list[tuple[str, Callable[[], list[dict]]]] = []


def add_collector(device: str, fn: Callable[[], list[dict]]) -> None:
  """`fn()` gives more events of `device` when its spans are collected (its work is done): dicts with device, queue (the
  track), name, ts and dur (microseconds) and optionally args, or with "ph": "C" a counter sample (name, ts, args)."""
  _collectors.append((device, fn))


def enabled() -> bool: return bool(PATH)


def record(device: str, queue: str, name: str, begin: Signal, end: Signal) -> None:
  _pending.append(Span(device, queue, name, begin, end))


def collect(device: str | None = None) -> None:
  """Turn finished spans (of one device, or all) into trace events; called before a device closes."""
  global _pending
  keep = []
  for s in _pending:
    if device is not None and s.device != device: keep.append(s)
    else: _events.append({"device": s.device, "queue": s.queue, "name": s.name, "ts": s.begin.timestamp,
                          "dur": max(s.end.timestamp - s.begin.timestamp, 0.0)})
  _pending = keep
  global _collectors
  run = [fn for d, fn in _collectors if device is None or d == device]
  _collectors = [(d, fn) for d, fn in _collectors if not (device is None or d == device)]
  for fn in run: _events.extend(fn())


def trace() -> dict:
  """The Chrome trace-event JSON object for everything recorded so far."""
  collect()
  pids: dict[str, int] = {}
  tids: dict[tuple[str, str], int] = {}
  out: list[dict] = []
  for e in _events:
    if e["device"] not in pids:
      pids[e["device"]] = len(pids) + 1
      out.append({"ph": "M", "name": "process_name", "pid": pids[e["device"]], "args": {"name": e["device"]}})
    if e.get("ph") == "C":
      out.append({"ph": "C", "name": e["name"], "pid": pids[e["device"]], "ts": e["ts"], "args": e["args"]})
      continue
    if (e["device"], e["queue"]) not in tids:
      tids[(e["device"], e["queue"])] = len(tids) + 1
      out.append({"ph": "M", "name": "thread_name", "pid": pids[e["device"]], "tid": tids[(e["device"], e["queue"])],
                  "args": {"name": e["queue"]}})
    out.append({"ph": "X", "name": e["name"], "cat": e["queue"], "pid": pids[e["device"]], "tid": tids[(e["device"], e["queue"])],
                "ts": e["ts"], "dur": e["dur"], **({"args": e["args"]} if "args" in e else {})})
  return {"traceEvents": out, "displayTimeUnit": "ns"}


def write(path: str) -> None:
  with open(path, "w") as f: json.dump(trace(), f)


@atexit.register
def _write_at_exit() -> None:
  if PATH and (_pending or _events or _collectors): write(PATH)
