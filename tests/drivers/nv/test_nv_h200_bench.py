"""bench/nv_h200.py (the prepared script for a lent H200) runs end to end on MOCK+NV with small sizes, so it cannot rot."""
import json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_h200_script_on_mock():
  r = subprocess.run([sys.executable, "bench/nv_h200.py", "--mock", "--small", "--budget", "300"], cwd=ROOT,
                     capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr
  lines = r.stdout.splitlines()
  assert "NVIDIA driver 580.142" in lines[0] and "sm_90" in lines[0], lines[0]
  figs = {d["bench"]: d for d in map(json.loads, (l for l in lines if l.startswith("{")))}
  for b in ("vector_add", "matmul_f32_check", "matmul_bf16_check", "matmul_f32_tflops", "matmul_bf16_tflops", "launch_us",
            "launch_gpu_us", "h2d_gbps", "d2h_gbps"):
    assert "value" in figs[f"nv_h200/{b}"], (b, figs.get(f"nv_h200/{b}"), r.stderr)
  assert figs["nv_h200/vector_add"]["value"] == 0 and figs["nv_h200/matmul_f32_check"]["value"] <= 1e-4
  assert figs["nv_h200/h2d_gbps"]["value"] > 0 and figs["nv_h200/launch_us"]["value"] > 0
  assert "torch_launch_us" in "".join(figs)                  # its torch line: a figure, or "torch: not available"
