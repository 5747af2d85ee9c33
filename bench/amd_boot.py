"""Boot time of the emulated chips through the AM userspace driver (Navi31 gfx11, Navi48 and Navi44 gfx12 side by side), and
Navi31's launch overhead against KFD.

Usage: python bench/amd_boot.py   (each boot runs in a fresh process: a cold boot needs a device nobody booted)
  cold_boot_s     open MOCKPCI+AMD[:<chip>] on a device that was never booted: discovery, firmware, PSP, SMU, GMC, IH, queues
  warm_reopen_s   open it again after a clean close (partial boot: the firmware is still running)
  launch_us       end-to-end launch of an empty kernel on MOCKPCI+AMD, and on MOCKKFD+AMD for comparison (gfx12 kernels
                  are not dispatched by the model yet)
The gfx12 chips boot the firmware the driver finds (the Debian backports files scripts/setup.sh unpacks), else synthetic
files (emu/amdgpu/fwbuild.py)."""
import os, subprocess, sys, tempfile
from figures import emit

OPEN = r"""
import sys, time
t0 = time.perf_counter()
from drivers.hcq import open_device
d = open_device(sys.argv[1])
t1 = time.perf_counter()
prg, buf = d.program("empty", d.compiler.compile("__kernel void empty(__global int *x) { }")), d.alloc(64)
prg(buf, global_size=(1,), local_size=(32,), wait=True)
t2 = time.perf_counter()
for _ in range(200): prg(buf, global_size=(1,), local_size=(32,))
d.synchronize()
t3 = time.perf_counter()
print(t1 - t0, (t3 - t2) / 200)
d.close()
"""


BOOT = r"""
import sys, time
t0 = time.perf_counter()
from drivers.hcq import open_device
d = open_device(sys.argv[1])
print(time.perf_counter() - t0)
d.close()
"""


def boot(dev: str, env: dict) -> float:
  return float(subprocess.run([sys.executable, "-c", BOOT, dev], env=env, capture_output=True, text=True, check=True).stdout)


def run(dev: str, env: dict) -> tuple[float, float]:
  out = subprocess.run([sys.executable, "-c", OPEN, dev], env=env, capture_output=True, text=True, check=True).stdout.split()
  return float(out[0]), float(out[1])


def main() -> None:
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with tempfile.TemporaryDirectory() as tmp:   # a device state directory of our own: the first open is a cold boot
    env = dict(os.environ, TMPDIR=tmp, PYTHONPATH=root)
    cold, launch_pci = run("MOCKPCI+AMD", env)
    warm, _ = min((run("MOCKPCI+AMD", env) for _ in range(3)), key=lambda r: r[0])
    _, launch_kfd = run("MOCKKFD+AMD", env)
  emit("amd/cold_boot_s", cold, "s", device="MOCKPCI+AMD")
  emit("amd/warm_reopen_s", warm, "s", device="MOCKPCI+AMD")
  emit("amd/launch_us", launch_pci * 1e6, "us", device="MOCKPCI+AMD")
  emit("amd/launch_us", launch_kfd * 1e6, "us", device="MOCKKFD+AMD")
  from drivers.amd.am.firmware import BACKPORT_DIR
  from emu.amdgpu.chips import NAVI44, NAVI48
  for chip in (NAVI48, NAVI44):
    dev = f"MOCKPCI+AMD:{chip.name}"
    with tempfile.TemporaryDirectory() as tmp:
      env = dict(os.environ, TMPDIR=tmp, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
      if not os.path.exists(os.path.join(BACKPORT_DIR, f"gc_{'_'.join(map(str, chip.versions['GC']))}_mec.bin")):
        from emu.amdgpu.fwbuild import write_firmware
        env["HCQ_FIRMWARE_DIR"] = os.path.join(tmp, "fw")
        write_firmware(env["HCQ_FIRMWARE_DIR"], chip=chip)
      cold = boot(dev, env)
      warm = min(boot(dev, env) for _ in range(3))
    emit("amd/cold_boot_s", cold, "s", device=dev)
    emit("amd/warm_reopen_s", warm, "s", device=dev)


if __name__ == "__main__":
  main()
