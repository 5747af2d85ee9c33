"""The toy NIC's model: the emulated ConnectX-6 Dx under the toy NIC's name (emu/nic/function.py NICFunction: its kind
names its port and its state directories, its MAC prefix its MACs), imported when one is made or listed."""
from emu.nic.mlx5.cx6dx import CX6DX


class ToyNIC(CX6DX):
  kind, mac_prefix = "toynic", bytes((0x02, 0x70, 0x79, 0))      # 02:70:79 ("toy" on a locally administered OUI)
