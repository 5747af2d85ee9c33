"""The emulated Navi48 (Radeon RX 9070 XT, gfx1201; GC 12.0.1, SDMA 7.0.1, MP 14.0.2):
the PCI function of function.py with this chip (chips.py NAVI48)."""
from emu.amdgpu.chips import NAVI48, declaration

# registered under hcq.models (pyproject.toml): open_model("navi48", index) is this device, its state in chips.state_dir
MODEL = declaration(NAVI48, "emulated Navi48 (hcq model)")
