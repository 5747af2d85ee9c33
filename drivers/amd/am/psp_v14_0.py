"""PSP 14.0 (MP0 14.0.2 / 14.0.3), the security processor of GC 12 GPUs (Linux psp_v14_0.c): PSP 13.0's bootloader
handshake, KM ring and load sequence on the same mailbox numbers, named MPASP_SMN_C2PMSG_<n> in mp_14_0_2 (psp_v14_0.c)."""
from types import SimpleNamespace
from autogen.amd import mp_14_0_2 as mp
from drivers.amd.am.psp_v13_0 import PSPv13_0


class PSPv14_0(PSPv13_0):
  M = SimpleNamespace(BL_CMD=mp.regMPASP_SMN_C2PMSG_35, BL_ADDR=mp.regMPASP_SMN_C2PMSG_36, SOS_ALIVE=mp.regMPASP_SMN_C2PMSG_81,
                      RING_CTL=mp.regMPASP_SMN_C2PMSG_64, RING_WPTR=mp.regMPASP_SMN_C2PMSG_67, RING_LO=mp.regMPASP_SMN_C2PMSG_69,
                      RING_HI=mp.regMPASP_SMN_C2PMSG_70, RING_SIZE=mp.regMPASP_SMN_C2PMSG_71)
