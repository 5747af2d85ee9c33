"""The emulated Navi44 (Radeon RX 9060 XT, gfx1200; GC 12.0.0, SDMA 7.0.0, MP 14.0.3):
the PCI function of function.py with this chip (chips.py NAVI44)."""
from emu.amdgpu.chips import NAVI44, declaration

# registered under hcq.models (pyproject.toml): open_model("navi44", index) is this device, its state in chips.state_dir
MODEL = declaration(NAVI44, "emulated Navi44 (hcq model)")
