#!/bin/sh
# Installs everything hcq needs on Debian 12 (bookworm): apt packages, a .venv, the project (editable).
# Idempotent: with everything present it only checks and returns in about a second.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/.venv"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# clang/lld/llvm 22 come from bookworm-security (in Debian's default sources); libusb for pyusb.
# linux-source-6.12 (bookworm-backports) carries the kernel headers autogen/ is generated from.
# firmware-amd-graphics (bookworm non-free-firmware) is what the AM driver loads into the GPU (and the emulated one).
APT_PKGS="clang-22 lld-22 llvm-22 libusb-1.0-0 libudev1 python3-venv linux-source-6.12 firmware-amd-graphics"

# apt sources, each written only if missing: bookworm-backports (packages are taken from it only when named
# "pkg/bookworm-backports") and the non-free-firmware component of bookworm itself.
updated=""
add_source() {   # file suites components
  if [ ! -f "$1" ]; then
    echo "setup: adding $1"
    printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: $2" "Components: $3" \
      "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" | $SUDO tee "$1" >/dev/null
    updated=pending
  fi
}
add_source /etc/apt/sources.list.d/hcq-backports.sources "bookworm-backports" "main contrib non-free-firmware"
add_source /etc/apt/sources.list.d/hcq-nonfree-firmware.sources "bookworm bookworm-updates" "non-free-firmware"
if [ -n "$updated" ]; then
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  updated=1
fi

missing=""
for p in $APT_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing apt packages:$missing"
  [ -n "$updated" ] || $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    $(echo $missing | sed 's,linux-source-6.12,linux-source-6.12/bookworm-backports,')
fi

# gfx12 firmware (RDNA4: Navi44 GC 12.0.0, Navi48 GC 12.0.1) is only in firmware-amd-graphics from bookworm-backports;
# installing that would replace the gfx11 blobs above. Its gfx12 files alone are unpacked into FW12_DIR (searched after
# /lib/firmware/amdgpu by drivers/amd/am/firmware.py), once: the stamp names the package version they came from.
FW12_VERSION="20250410-2~bpo12+1"
FW12_DIR=/usr/local/share/hcq/firmware/amdgpu
if [ "$(cat "$FW12_DIR/.version" 2>/dev/null)" != "$FW12_VERSION" ]; then
  echo "setup: unpacking the gfx12 files of firmware-amd-graphics $FW12_VERSION into $FW12_DIR"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q "firmware-amd-graphics=$FW12_VERSION" 2>/dev/null) || {
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
    (cd "$tmp" && apt-get download -q "firmware-amd-graphics=$FW12_VERSION")
  }
  dpkg-deb -x "$tmp"/firmware-amd-graphics_*.deb "$tmp/x"
  $SUDO mkdir -p "$FW12_DIR"
  (cd "$tmp/x/lib/firmware/amdgpu" && $SUDO cp gc_12_0_[01]_* psp_14_0_[23]_* smu_14_0_[23].bin sdma_7_0_[01].bin "$FW12_DIR/")
  echo "$FW12_VERSION" | $SUDO tee "$FW12_DIR/.version" >/dev/null
  rm -rf "$tmp"
fi

PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
# Reinstall only when the project metadata changed since the last install of these extras
# (HCQ_EXTRAS, default "test"; `make demo` adds "examples").
EXTRAS=${HCQ_EXTRAS:-test}
STAMP="$VENV/.hcq-installed-$(echo "$EXTRAS" | tr ',' '-')"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
  echo "setup: installing hcq[$EXTRAS] into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e "$ROOT[$EXTRAS]"
  touch "$STAMP"
fi
# The headers autogen/ reads: linux-libc-dev of the same version as linux-source-6.12, and the needed
# members of the source tarball, unpacked into ~/.cache/hcq/headers (only once per version).
"$VENV/bin/python" -m autogen.gen.headers
