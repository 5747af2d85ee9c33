"""Scratch in a ring of GPU memory (what a GPU model gives a dispatch, emu.amdgcn.dispatch.Scratch): each wave's slot
holds its lanes' private dwords swizzled with index stride = the wave's lanes (dword k of lane l at (k * W + l) * 4),
workgroup k uses engine k % ses, and an access past a lane's share of the slot faults."""
import numpy as np
import pytest

from emu.amdgcn import Memory, WaveFault
from emu.amdgcn.dispatch import Launch, Scratch, execute
from tests.emu.amdgcn.exec_helpers import assemble

# lane value = tgid * 1000 + id, stored as dword 1 and dword 3 (one b64 store at offset 8 holds dwords 2, 3)
CODE = """
  s_mul_i32 s4, s0, 1000
  v_add_nc_u32 v1, s4, v0
  v_mov_b32 v2, 0
  scratch_store_b32 off, v1, off offset:4
  scratch_store_b64 off, v[2:3], off offset:8
  v_mov_b32 v3, v1
  scratch_store_b64 off, v[2:3], off offset:8
  s_endpgm"""


@pytest.mark.parametrize("wave64", [False, True])
def test_slots_are_dword_swizzled_per_wave_and_rings_follow_each_other_per_engine(wave64):
  lanes = 64 if wave64 else 32
  mem = Memory()
  code = assemble(CODE, wave64=wave64)
  pc = mem.alloc(len(code)); mem.write(pc, code)
  slot, waves = 4 * 4 * lanes, 128 // lanes               # 4 dwords per lane; a 128-thread block
  ring = mem.alloc(3 * waves * slot)
  launch = Launch(pc, [], wave64, tgid_enable=(True, False, False), scratch=Scratch(ring, slot, waves * slot, 3))
  execute(mem, launch, (3, 1, 1), (128, 1, 1))
  got = np.frombuffer(mem.read(ring, 3 * waves * slot), np.uint32).reshape(3, waves, 4, lanes)   # engine, slot, dword, lane
  for k in range(3):
    ids = k * 1000 + np.arange(128).reshape(waves, lanes)
    np.testing.assert_array_equal(got[k, :, 1], ids)
    np.testing.assert_array_equal(got[k, :, 3], ids)
    assert not got[k, :, 0].any() and not got[k, :, 2].any()


def test_a_lane_past_its_share_of_the_slot_faults_and_an_unmapped_ring_faults():
  mem = Memory()
  code = assemble("v_mov_b32 v1, 1\nscratch_store_b32 off, v1, off offset:16\ns_endpgm")
  pc = mem.alloc(len(code)); mem.write(pc, code)
  ring = mem.alloc(4096)
  with pytest.raises(WaveFault, match=r"scratch \(private\) address 0x10 \(each lane has 16 bytes\)"):
    execute(mem, Launch(pc, [], scratch=Scratch(ring, 16 * 32)), (1, 1, 1), (32, 1, 1))
  with pytest.raises(WaveFault, match="scratch backing memory"):
    execute(mem, Launch(pc, [], scratch=Scratch(0x7000_0000_0000, 64 * 32)), (1, 1, 1), (32, 1, 1))
