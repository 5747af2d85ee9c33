"""The emulated Navi31 (Radeon RX 7900 XTX, gfx1100; GC 11.0.0, SDMA 6.0, MP 13.0.0):
the PCI function of function.py with this chip (chips.py NAVI31)."""
from emu.amdgpu.chips import NAVI31, declaration

# registered under hcq.models (pyproject.toml): open_model("navi31", index) is this device, its state in chips.state_dir
MODEL = declaration(NAVI31, "emulated Navi31 (hcq model)")
