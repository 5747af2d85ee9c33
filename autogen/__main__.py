"""`python -m autogen [name ...] [--out DIR]`: regenerate binding modules from real headers.

GENERATORS maps a name to a callable `gen(outdir: pathlib.Path) -> list[pathlib.Path]` that writes its
module(s) under `outdir` (the autogen/ package directory by default). Add a generator with one line.
"""
from __future__ import annotations
import argparse, pathlib, sys, time
from autogen.gen.cmodule import CModule
from autogen.gen.headers import HeadersMissing

_AMD, _AMDGPU, _PMFW = "drivers/gpu/drm/amd/include", "drivers/gpu/drm/amd/amdgpu", "drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if"

GENERATORS = {
  "kfd": CModule("kfd.py", "libc", ("linux/kfd_ioctl.h",), doc="AMD KFD ioctl ABI (/dev/kfd)."),
  "vfio": CModule("vfio.py", "libc", ("linux/vfio.h",), doc="VFIO ioctl ABI (/dev/vfio)."),
  "pci": CModule("pci.py", "libc", ("linux/pci_regs.h",), doc="PCI configuration space registers."),
  "amdgpu_drm": CModule("amdgpu_drm.py", "libc", ("drm/amdgpu_drm.h",), doc="amdgpu DRM ioctl ABI (/dev/dri/renderD*)."),
}


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m autogen", description=__doc__.split("\n")[0])
  ap.add_argument("names", nargs="*", help=f"generators to run (default: all): {', '.join(GENERATORS)}")
  ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).parent, help="output directory")
  args = ap.parse_args(argv)
  unknown = [n for n in args.names if n not in GENERATORS]
  if unknown: ap.error(f"unknown generator(s) {', '.join(unknown)}; known: {', '.join(GENERATORS)}")
  for name in args.names or list(GENERATORS):
    t = time.perf_counter()
    try: paths = GENERATORS[name](args.out)
    except HeadersMissing as e:
      print(f"autogen: {name}: {e}", file=sys.stderr)
      return 1
    sizes = ", ".join(f"{p.relative_to(args.out)} ({p.stat().st_size // 1024} KiB)" for p in paths)
    print(f"autogen: {name}: {sizes} in {time.perf_counter() - t:.1f} s")
  return 0


if __name__ == "__main__":
  sys.exit(main())
