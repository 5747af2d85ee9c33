"""The emulated Broadcom BCM57508 (NetXtreme-E "Thor", bnxt_en + bnxt_re) RoCEv2 NIC: bcm57508.py is the PCI function
(BARs, doorbells, persistence), hwrm.py its ChiMP firmware channel, backing.py the context memory, rcfw.py the RoCE
firmware channel (CMDQ/CREQ), datapath.py the queues and the RC transport glue, pbl.py and rings.py the memory
structures they share. Each module's docstring says what it checks and what it leaves out."""

from emu.pci import ModelError

__all__ = ["ModelError"]
