"""HCQ_PROFILE writes a Chrome trace: one process per device, one track per queue, spans that nest."""
import json, os, subprocess, sys

SCRIPT = r"""
import numpy as np
from drivers.hcq import open_device
from tests.hcq.conftest import VADD_SRC
dev = open_device("CPU")
vadd = dev.program("vadd", dev.compiler.compile(VADD_SRC))
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
  subprocess.run([sys.executable, "-c", SCRIPT], check=True, env=env, timeout=120)
  trace = json.loads(path.read_text())
  spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
  names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
  procs = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
  assert procs == {"CPU"} and names == {"compute", "copy"}
  assert sum(e["name"] == "vadd" for e in spans) == 5 and sum(e["name"].startswith("copy") for e in spans) == 5
  for e in spans: assert e["dur"] >= 0 and e["ts"] > 0
  # within one track spans never partially overlap: each is disjoint from or nested in the others
  for tid in {e["tid"] for e in spans}:
    track = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e["tid"] == tid)
    for (s1, e1), (s2, e2) in zip(track, track[1:]): assert e1 <= s2 or e2 <= e1
  # the copy of launch i starts after kernel i ended: the timeline orders the two queues
  ker = sorted(e["ts"] + e["dur"] for e in spans if e["name"] == "vadd")
  cop = sorted(e["ts"] for e in spans if e["name"].startswith("copy"))
  assert all(c >= k for k, c in zip(ker, cop))
