"""The emulated Navi44 (Radeon RX 9060 XT, gfx1200; GC 12.0.0, SDMA 7.0.0, MP 14.0.3):
the PCI function of function.py with this chip (chips.py NAVI44)."""
from __future__ import annotations
from emu.amdgpu.chips import NAVI44
from emu.amdgpu.function import GPUFunction, model


class Navi44(GPUFunction):
  chip = NAVI44


# registered under hcq.models (pyproject.toml): open_model("navi44", index) is this device, its state in function.state_dir
MODEL = model(Navi44, "emulated Navi44 (hcq model)")
