"""Where the C headers come from: Debian packages, unpacked into a cache outside the repository.

Both header packages are built from Debian's `linux` 6.12 source in bookworm-backports and are used at the
same version: `linux-source-6.12` (installed by scripts/setup.sh; its tarball is /usr/src/linux-source-6.12.tar.xz)
and `linux-libc-dev` (downloaded as a .deb of that exact version and unpacked, so the system's own
/usr/include is never changed). Only the members listed in SOURCE_MEMBERS are extracted from the tarball.

Cache: ~/.cache/hcq/headers/<package>-<version>/ (override with HCQ_HEADERS_CACHE).
`python -m autogen.gen.headers` fills it (idempotent; a second run only checks stamps).
"""
from __future__ import annotations
import hashlib, os, pathlib, shutil, subprocess, sys, tempfile
from dataclasses import dataclass

SOURCE_PKG = "linux-source-6.12"
LIBC_PKG = "linux-libc-dev"
TARBALL = pathlib.Path("/usr/src/linux-source-6.12.tar.xz")
SUITE = "bookworm-backports"

# Paths inside linux-source-6.12/ that the generators read (whole headers, plus what they #include).
ASIC_REG = "drivers/gpu/drm/amd/include/asic_reg"
ASIC_REG_IPS = {  # generated module name -> header stem under asic_reg/: the gfx11 (Navi31) IP set, then gfx12's (Navi44/48)
  "gc_11_0_0": "gc/gc_11_0_0", "mmhub_3_0_0": "mmhub/mmhub_3_0_0", "nbio_4_3_0": "nbio/nbio_4_3_0",
  "mp_13_0_0": "mp/mp_13_0_0", "osssys_6_0_0": "oss/osssys_6_0_0", "hdp_6_0_0": "hdp/hdp_6_0_0",
  "smuio_13_0_6": "smuio/smuio_13_0_6",
  "gc_12_0_0": "gc/gc_12_0_0", "mmhub_4_1_0": "mmhub/mmhub_4_1_0", "nbif_6_3_1": "nbif/nbif_6_3_1",
  "mp_14_0_2": "mp/mp_14_0_2", "osssys_7_0_0": "oss/osssys_7_0_0", "hdp_7_0_0": "hdp/hdp_7_0_0",
}
SOURCE_MEMBERS = sorted([
  *(f"{ASIC_REG}/{stem}_{kind}.h" for stem in ASIC_REG_IPS.values() for kind in ("offset", "sh_mask")),
  "drivers/gpu/drm/amd/include/discovery.h",
  "drivers/gpu/drm/amd/include/soc15_hw_ip.h",
  "drivers/gpu/drm/amd/include/soc15_ih_clientid.h",
  "drivers/gpu/drm/amd/include/ivsrcid/gfx/irqsrcs_gfx_11_0_0.h",
  "drivers/gpu/drm/amd/include/v11_structs.h",
  "drivers/gpu/drm/amd/include/soc21_enum.h",
  "drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h",
  "drivers/gpu/drm/amd/amdgpu/amdgpu_psp.h",
  "drivers/gpu/drm/amd/amdgpu/amdgpu_vm.h",
  "drivers/gpu/drm/amd/amdgpu/amdgpu_socbb.h",
  "drivers/gpu/drm/amd/amdgpu/psp_gfx_if.h",
  "drivers/gpu/drm/amd/amdgpu/nvd.h",
  "drivers/gpu/drm/amd/amdgpu/sdma_v6_0_0_pkt_open.h",
  "drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if/smu_v13_0_0_ppsmc.h",
  "drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if/smu13_driver_if_v13_0_0.h",
  "drivers/gpu/drm/amd/include/v12_structs.h",
  "drivers/gpu/drm/amd/include/soc24_enum.h",
  "drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if/smu_v14_0_2_ppsmc.h",
  "drivers/gpu/drm/amd/pm/swsmu/inc/pmfw_if/smu14_driver_if_v14_0.h",
  "drivers/net/ethernet/broadcom/bnxt/bnxt_hsi.h",
  "drivers/net/ethernet/broadcom/bnxt/bnxt_hwrm.h",
  "drivers/infiniband/hw/bnxt_re/roce_hsi.h",
  "drivers/infiniband/hw/bnxt_re/qplib_rcfw.h",
  "drivers/infiniband/hw/bnxt_re/qplib_res.h",
  "include/linux/mlx5/mlx5_ifc.h",
  "include/linux/mlx5/mlx5_ifc_fpga.h",
  "include/linux/mlx5/device.h",
  "include/linux/mlx5/doorbell.h",
  "include/linux/mlx5/driver.h",
  "include/linux/mlx5/qp.h",
  "include/linux/mlx5/cq.h",
])


class HeadersMissing(RuntimeError):
  """The header packages are not installed or not unpacked; the message says what to run."""


def cache_root() -> pathlib.Path:
  if env := os.environ.get("HCQ_HEADERS_CACHE"): return pathlib.Path(env)
  return pathlib.Path.home() / ".cache" / "hcq" / "headers"  # not XDG_CACHE_HOME: tests point that at a temp dir


def installed_version(pkg: str) -> str | None:
  r = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", pkg], capture_output=True, text=True)
  if r.returncode != 0 or "ok installed" not in r.stdout: return None
  return r.stdout.split("\t")[1]


@dataclass(frozen=True)
class Package:
  """One unpacked header package: `root` is the directory the header paths are relative to."""
  name: str
  version: str
  root: pathlib.Path
  prefix: str  # how header paths are shown: where they sit inside the package
  origin: str = ""  # where the package comes from, if not Debian (a git tree at a tag and commit)

  def path(self, rel: str) -> pathlib.Path: return self.root / rel


def _source_dir(version: str) -> pathlib.Path:
  """One directory per version and header list, so checkouts that need different headers never share one."""
  digest = hashlib.sha256("\n".join(SOURCE_MEMBERS).encode()).hexdigest()[:10]
  return cache_root() / f"{SOURCE_PKG}-{version}-{digest}"
def _libc_dir(version: str) -> pathlib.Path: return cache_root() / f"{LIBC_PKG}-{version}"
_SETUP_HINT = "run scripts/setup.sh (it installs linux-source-6.12 from bookworm-backports and unpacks the headers)"


def packages() -> tuple[Package, Package]:
  """(linux-libc-dev, linux-source-6.12) as unpacked in the cache; raises HeadersMissing with what to do."""
  version = installed_version(SOURCE_PKG)
  if version is None: raise HeadersMissing(f"Debian package {SOURCE_PKG} is not installed: {_SETUP_HINT}")
  src, libc = _source_dir(version), _libc_dir(version)
  for d in (src, libc):
    if not (d / ".complete").exists(): raise HeadersMissing(f"headers not unpacked in {d}: {_SETUP_HINT}")
  if (src / ".complete").read_text() != "\n".join(SOURCE_MEMBERS):
    raise HeadersMissing(f"{src} holds a different header list than this generator needs: {_SETUP_HINT}")
  return (Package(LIBC_PKG, version, libc / "usr/include", "/usr/include/"),
          Package(SOURCE_PKG, version, src, "linux-source-6.12/"))


def _apt_download(spec: str, into: pathlib.Path) -> pathlib.Path:
  for attempt in range(2):
    r = subprocess.run(["apt-get", "download", "-q", spec], cwd=into, capture_output=True, text=True)
    if r.returncode == 0: return next(into.glob("*.deb"))
    if attempt == 0: subprocess.run(["apt-get", "update", "-q"], capture_output=True)  # stale lists: refresh once
  raise HeadersMissing(f"apt-get download {spec} failed: {r.stderr.strip()}")


def fetch() -> None:
  """Unpack both header packages into the cache for the installed linux-source-6.12 version (idempotent)."""
  version = installed_version(SOURCE_PKG)
  if version is None: raise HeadersMissing(f"Debian package {SOURCE_PKG} is not installed: {_SETUP_HINT}")
  src, libc = _source_dir(version), _libc_dir(version)
  stamp = "\n".join(SOURCE_MEMBERS)
  if not ((src / ".complete").exists() and (src / ".complete").read_text() == stamp):
    print(f"autogen: extracting {len(SOURCE_MEMBERS)} headers from {TARBALL} into {src}", file=sys.stderr)
    shutil.rmtree(src, ignore_errors=True)
    cache_root().mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=cache_root()))  # same file system, so the final rename is atomic
    try:  # one pass of tar over the 150 MB tarball; it fails (and names the member) if one is missing
      r = subprocess.run(["tar", "-xJf", str(TARBALL), "-C", str(tmp), *(f"linux-source-6.12/{m}" for m in SOURCE_MEMBERS)],
                         capture_output=True, text=True)
      if r.returncode != 0: raise HeadersMissing(f"extracting from {TARBALL} failed: {r.stderr.strip()}")
      (tmp / "linux-source-6.12").rename(src)
    finally: shutil.rmtree(tmp)
    (src / ".complete").write_text(stamp)
  if not (libc / ".complete").exists():
    print(f"autogen: unpacking {LIBC_PKG} {version} into {libc}", file=sys.stderr)
    shutil.rmtree(libc, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
      deb = _apt_download(f"{LIBC_PKG}={version}", pathlib.Path(tmp))
      subprocess.run(["dpkg-deb", "-x", str(deb), str(libc)], check=True)
    (libc / ".complete").write_text(version)


if __name__ == "__main__":
  try: fetch()
  except HeadersMissing as e: sys.exit(f"autogen: {e}")
