"""HCQ_PROFILE writes a Chrome trace: one process per device, one track per queue, spans that nest."""
import json, os, subprocess, sys

SCRIPT = r"""
import numpy as np
from drivers.hcq import open_device
from tests.hcq.conftest import VADD_SRC
from tests.drivers.amd.kernels import SRC as AMD_SRC
for name in ("CPU", "MOCKPCI+AMD"):
  dev = open_device(name)
  vadd = dev.program("vadd", dev.compiler.compile(VADD_SRC if name == "CPU" else AMD_SRC))
  n = 4096
  a = dev.alloc(n * 4); a.copyin(np.arange(n, dtype=np.int32).data)
  out, tmp = dev.alloc(n * 4), dev.alloc(n * 4)
  for i in range(5):
    vadd(out, a, a, global_size=(n // 64,), local_size=(64,), vals=(n,))
    out.transfer(tmp)
  dev.synchronize()
"""


def test_profile_trace_loads_and_spans_nest(tmp_path):
  path = tmp_path / "trace.json"
  env = dict(os.environ, HCQ_PROFILE=str(path), PYTHONPATH=os.getcwd())
  subprocess.run([sys.executable, "-c", SCRIPT], check=True, env=env, timeout=300)
  trace = json.loads(path.read_text())
  meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
  procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
  assert sorted(procs.values()) == ["CPU", "MOCKPCI+AMD"]
  for pid, device in procs.items():
    tracks = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name" and e["pid"] == pid}
    assert sorted(tracks.values()) == ["compute", "copy"], device
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == pid]
    assert sum(e["name"] == "vadd" for e in spans) == 5, device
    if device != "CPU": assert any(e["name"].startswith("copyin ") for e in spans)   # staging copies show up too
    for e in spans: assert e["dur"] >= 0 and e["ts"] > 0
    # within one track spans never partially overlap: each is disjoint from or nested in the others
    for tid in tracks:
      track = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e["tid"] == tid)
      for (s1, e1), (s2, e2) in zip(track, track[1:]): assert e1 <= s2 or e2 <= e1, device
    # the copy after launch i starts after kernel i ended: the timeline orders the two queues
    ker = sorted(e["ts"] + e["dur"] for e in spans if e["name"] == "vadd")
    cop = sorted(e["ts"] for e in spans if e["name"] == f"copy {4096 * 4} B")
    assert len(cop) == 5 and all(c >= k for k, c in zip(ker, cop)), device


def test_collectors_add_tracks_and_counters_of_their_device(monkeypatch):
  from drivers.hcq import profile
  monkeypatch.setattr(profile, "_events", [])
  monkeypatch.setattr(profile, "_collectors", [])
  profile.add_collector("A", lambda: [{"device": "A", "queue": "wave 0", "name": "v_add", "ts": 1.0, "dur": 0.5, "args": {"pc": "0x10"}},
                                      {"ph": "C", "device": "A", "name": "WAVES", "ts": 1.0, "args": {"value": 3}}])
  profile.add_collector("B", lambda: [{"device": "B", "queue": "compute", "name": "k", "ts": 2.0, "dur": 1.0}])
  profile.collect("A")                                  # only A's collector runs (its device closed)
  assert [d for d, _ in profile._collectors] == ["B"]
  events = profile.trace()["traceEvents"]               # the rest at the end
  assert not profile._collectors
  (x,) = [e for e in events if e["ph"] == "X" and e["name"] == "v_add"]
  assert x["args"] == {"pc": "0x10"} and x["dur"] == 0.5
  (c,) = [e for e in events if e["ph"] == "C"]
  assert (c["name"], c["args"], c["pid"]) == ("WAVES", {"value": 3}, x["pid"])
  assert {e["args"]["name"] for e in events if e["name"] == "thread_name"} == {"wave 0", "compute"}
