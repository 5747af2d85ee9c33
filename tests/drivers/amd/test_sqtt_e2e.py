"""Thread traces end to end on MOCKPCI+AMD and MOCKKFD+AMD: the driver programs SQTT around each launch from the
compute queue (drivers/amd/sqtt/capture_gfx11.py), the emulated GPU writes tokens from what its waves ran, the decoder maps
them onto the code object: a straight-line kernel's traced waves issue exactly its llvm-objdump disassembly in order, a
branching kernel's PCs follow its control flow, every wave of the dispatch is in the trace; and HCQ_PROFILE + HCQ_SQTT
write the raw buffers, code object and per-wave Perfetto tracks that hcq-sqtt decodes again. With HCQ_PMC the SQ counters
equal the instructions the kernel's disassembly says each wave runs, times its waves."""
import json, os, re, subprocess, sys
import numpy as np
import pytest
from drivers.hcq import open_device
from drivers.hcq.compiler import llvm_tool
from drivers.amd.sqtt import capture_gfx11 as capture
from drivers.amd.pmc_gfx11 import PerfCounters
from tools import hcq_sqtt

SRC = r"""
#define GID (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())
__kernel void axpy(__global float *out, __global const float *a, __global const float *b) { int i = GID; out[i] = 2.0f * a[i] + b[i]; }
__kernel void clamp_add(__global float *out, __global const float *a, int n) {
  int i = GID; float x = a[i]; for (int k = 0; k < (i & 3); k++) x += 1.0f; if (i < n) out[i] = x; }
"""
LINE = re.compile(r"^\t(\S.*?)\s*// ([0-9A-F]+):", re.M)


@pytest.fixture(scope="module", params=["MOCKPCI+AMD", "MOCKKFD+AMD"])
def dev(request):
  d = open_device(request.param)
  yield d
  d.close()


def listing(lib: bytes, kernel: str, tmp_path) -> list[tuple[int, str]]:
  """(offset, text) of `kernel`'s instructions from its symbol on, as llvm-objdump prints them."""
  path = tmp_path / "k.hsaco"
  path.write_bytes(lib)
  text = subprocess.run([llvm_tool("llvm-objdump"), "-d", "--mcpu=gfx1100", str(path)], capture_output=True, text=True, check=True).stdout
  body = text.split(f"<{kernel}>:\n", 1)[1].split("\n\n", 1)[0]
  return [(int(m.group(2), 16), m.group(1)) for m in LINE.finditer(body)]


def traced(dev, lib, kernel, n, *bufs, local=64, vals=()):
  dev.thread_trace = tt = capture.ThreadTracer(dev)
  try: dev.program(kernel, lib)(*bufs, global_size=(n // local,), local_size=(local,), vals=vals, wait=True)
  finally: dev.thread_trace = None
  (c,) = tt.captures
  c.read()
  dev.free_owned(c.mem)
  return c, c.waves(dev.arch)


def test_straight_line_kernel_issues_its_disassembly_in_order(dev, tmp_path):
  lib = dev.compiler.compile(SRC)
  n = 64 * 14
  a, b = np.random.default_rng(0).standard_normal((2, n), dtype=np.float32)
  bufs = [dev.alloc(n * 4) for _ in range(3)]
  bufs[1].copyin(a.data); bufs[2].copyin(b.data)
  c, waves = traced(dev, lib, "axpy", n, *bufs)
  np.testing.assert_array_equal(np.frombuffer(bufs[0].copyout(), np.float32), 2.0 * a + b)
  assert len(waves) == 14 * 2 and not any(c.overflow)                       # every wave of the dispatch, on its SE
  code = listing(lib, "axpy", tmp_path)
  assert "s_cbranch" not in " ".join(t for _, t in code) and code[-1][1] == "s_endpgm"
  detail = [w for w in waves if w.detail]
  assert detail and all(w.insts for w in detail)
  for w in detail:
    assert [i.text for i in w.insts] == [t for _, t in code]
    assert [i.pc - c.base for i in w.insts] == [o for o, _ in code]
    assert all(i.stall >= 0 for i in w.insts) and w.insts[-1].time == w.end


def test_branching_kernel_follows_its_control_flow(dev, tmp_path):
  lib = dev.compiler.compile(SRC)
  n = 64 * 6
  a = np.arange(n, dtype=np.float32)
  out, pa = dev.alloc(n * 4), dev.alloc(n * 4)
  pa.copyin(a.data)
  c, waves = traced(dev, lib, "clamp_add", n, out, pa, vals=(n - 5,))
  got = np.frombuffer(out.copyout(), np.float32)
  np.testing.assert_array_equal(got[:n - 5], (a + np.arange(n) % 4)[:n - 5])
  code = listing(lib, "clamp_add", tmp_path)
  size = {o: nxt - o for (o, _), (nxt, _) in zip(code, code[1:])}
  taken = 0
  for w in (w for w in waves if w.detail):
    assert w.insts[-1].text == "s_endpgm"
    for i, j in zip(w.insts, w.insts[1:]):   # each next PC is the fall-through or, after a taken branch, its target
      pc = i.pc - c.base
      if i.op == "BRANCH_TAKEN": taken += 1; assert j.pc - c.base == pc + 4 + ((int(i.text.split()[-1]) & 0xFFFF ^ 0x8000) - 0x8000) * 4
      else: assert j.pc - c.base == pc + size[pc]
  assert taken


SOPP = ("s_waitcnt", "s_delay_alu", "s_endpgm", "s_nop", "s_clause", "s_sendmsg", "s_barrier", "s_code_end")


def test_counters_equal_the_instructions_each_wave_runs(dev, tmp_path):
  lib = dev.compiler.compile(SRC)
  n = 64 * 9
  bufs = [dev.alloc(n * 4) for _ in range(3)]
  dev.perf_counters = pc = PerfCounters(dev)
  try: dev.program("axpy", lib)(*bufs, global_size=(9,), local_size=(64,), wait=True)
  finally: dev.perf_counters = None
  (s,) = pc.samples
  v = pc.read(s)
  dev.free_owned(s.mem)
  ops = [t.split()[0] for _, t in listing(lib, "axpy", tmp_path)]
  waves = 9 * 2
  by = lambda f: waves * sum(map(f, ops))
  assert v["WAVES"] == waves and v["INSTS_ALL"] == waves * len(ops)
  assert v["INSTS_VALU"] == by(lambda o: o.startswith("v_")) > 0
  assert v["INSTS_SMEM"] == by(lambda o: o.startswith(("s_load", "s_buffer_load"))) > 0
  assert v["INSTS_SALU"] == by(lambda o: o.startswith("s_") and not o.startswith(("s_load", "s_buffer_load", "s_waitcnt")) and o not in SOPP)
  assert v["INSTS_FLAT"] == by(lambda o: o.startswith(("global_", "flat_", "scratch_"))) > 0
  assert v["INSTS_LDS"] == v["INSTS_TEX"] == 0 and v["GUI_ACTIVE"] > 0


def test_profile_writes_raw_buffers_and_wave_tracks(tmp_path, capsys):
  out = tmp_path / "trace.json"
  script = ("import numpy as np\nfrom drivers.hcq import open_device\nfrom tests.drivers.amd.test_sqtt_e2e import SRC\n"
            "d = open_device('MOCKPCI+AMD'); lib = d.compiler.compile(SRC); n = 128\n"
            "bufs = [d.alloc(n * 4) for _ in range(3)]\n"
            "d.program('axpy', lib)(*bufs, global_size=(2,), local_size=(64,), wait=True)\nd.close()\n")
  env = {**os.environ, "HCQ_PROFILE": str(out), "HCQ_SQTT": "1", "HCQ_PMC": "1", "HCQ_SQTT_BUFFER": "65536", "COLUMNS": "200"}
  p = subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=os.getcwd(), capture_output=True, text=True)
  assert "1 profiled kernel launches" in p.stderr and "axpy" in p.stderr      # the summary table
  events = json.loads(out.read_text())["traceEvents"]
  assert {e["args"]["value"] for e in events if e.get("ph") == "C" and e["name"] == "WAVES"} == {4, 0}
  tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
  assert any(t.startswith("axpy #0 SE0 SA0 WGP0 SIMD0 slot 0") for t in tracks)
  slices = [e for e in events if e.get("ph") == "X" and "stall" in e.get("args", {})]
  assert slices[-1]["name"] == "s_endpgm" and slices[0]["args"]["pc"].startswith("0x")
  (d,) = list((tmp_path / "trace.json.sqtt").iterdir())
  meta = json.loads((d / "meta.json").read_text())
  ses = sorted(d.glob("se*.bin"), key=lambda p: int(p.stem[2:]))
  assert hcq_sqtt.main(["decode", "--target", meta["target"], "--code-object", str(d / "code.hsaco"), "--base", str(meta["base"]),
                        "--kernel", meta["kernel"], "--json", *map(str, ses)]) == 0
  by_files = json.loads(capsys.readouterr().out)
  assert hcq_sqtt.main(["decode", "--json", str(d)]) == 0              # the directory says the rest
  assert json.loads(capsys.readouterr().out) == by_files
  assert [i["text"] for w in by_files if w["insts"] for i in w["insts"]][-1] == "s_endpgm"
  assert hcq_sqtt.main(["decode", str(tmp_path)]) == 2
  assert "not a saved trace" in capsys.readouterr().err


def test_bad_options_are_named(dev, monkeypatch):
  from drivers.amd import profiler
  from drivers.hcq import profile
  monkeypatch.setattr(profile, "PATH", "")
  monkeypatch.setenv("HCQ_SQTT", "1")
  with pytest.raises(ValueError, match="HCQ_SQTT=1 needs HCQ_PROFILE"): profiler.enable(dev)
  monkeypatch.setenv("HCQ_SQTT", "yes")
  with pytest.raises(ValueError, match="HCQ_SQTT='yes'"): profiler.enable(dev)
  monkeypatch.setenv("HCQ_SQTT_BUFFER", "1000")
  with pytest.raises(ValueError, match="HCQ_SQTT_BUFFER=1000: give a positive multiple of 4096"): capture.ThreadTracer(dev)
  monkeypatch.setenv("HCQ_SQTT_BUFFER", "4096")
  monkeypatch.setenv("HCQ_SQTT_SES", "0,9")
  with pytest.raises(ValueError, match=r"HCQ_SQTT_SES: the GPU has SEs 0-5, not \[9\]"): capture.ThreadTracer(dev)
