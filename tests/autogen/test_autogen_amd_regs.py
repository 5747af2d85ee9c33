"""AMD register tables: every register and field against a plain-text reading of the headers, plus hardware facts."""
import importlib, re
import pytest
from autogen.gen import headers
from autogen.regfields import Reg
from autogen_probe import packages

_DEF = re.compile(r"^#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)L?\s*$", re.M)


@pytest.mark.parametrize("ip", sorted(headers.ASIC_REG_IPS))
def test_every_register_and_field_matches_the_header_text(ip):
  _, src = packages()
  stem = f"{headers.ASIC_REG}/{headers.ASIC_REG_IPS[ip]}"
  offs = {n: int(v, 0) for n, v in _DEF.findall(src.path(f"{stem}_offset.h").read_text())}
  masks = {n: int(v, 0) for n, v in _DEF.findall(src.path(f"{stem}_sh_mask.h").read_text())}
  mod = importlib.import_module(f"autogen.amd.{ip}")
  regs = {n: offs[n] for n in offs if not n.endswith("_BASE_IDX")}
  for name, off in regs.items():
    r = getattr(mod, name)
    assert (r.offset, r.base_idx) == (off, offs.get(f"{name}_BASE_IDX")), name
  n_fields = 0
  for name, shift in masks.items():
    if not name.endswith("__SHIFT") or f"{name[:-7]}_MASK" not in masks: continue
    reg, field = name[:-7].split("__", 1)
    mask = masks[f"{name[:-7]}_MASK"]
    if mask >> shift << shift != mask or (mask >> shift) & ((mask >> shift) + 1): continue  # listed as inconsistent
    holder = next((getattr(mod, p + reg) for p in ("reg", "ix", "cfg", "") if isinstance(getattr(mod, p + reg, None), Reg)))
    assert holder.mask(field) == mask and holder.fields[field][0] == shift, f"{reg}.{field}"
    n_fields += 1
  assert n_fields > 0 and len(regs) > 0


def test_gc11_compute_dispatch_registers():
  from autogen.amd import gc_11_0_0 as gc  # offsets as gc_11_0_0_offset.h has them (segment 0)
  facts = {"COMPUTE_DISPATCH_INITIATOR": 0x1ba0, "COMPUTE_START_X": 0x1ba4, "COMPUTE_NUM_THREAD_X": 0x1ba7,
           "COMPUTE_PGM_LO": 0x1bac, "COMPUTE_PGM_RSRC1": 0x1bb2, "COMPUTE_PGM_RSRC2": 0x1bb3,
           "COMPUTE_TMPRING_SIZE": 0x1bb8, "COMPUTE_PGM_RSRC3": 0x1bc8, "COMPUTE_USER_DATA_0": 0x1be0}
  for name, off in facts.items():
    r = getattr(gc, f"reg{name}")
    assert (r.offset, r.base_idx) == (off, 0), name
  assert gc.regCOMPUTE_PGM_LO.addr([0x1260, 0xA000]) == 0x1260 + 0x1bac


def test_encode_decode_dispatch_initiator():
  from autogen.amd import gc_11_0_0 as gc
  di = gc.regCOMPUTE_DISPATCH_INITIATOR
  v = di.encode(COMPUTE_SHADER_EN=1, FORCE_START_AT_000=1, CS_W32_EN=1)
  assert v == 1 << 0 | 1 << 2 | 1 << 15
  d = di.decode(v)
  assert d["CS_W32_EN"] == 1 and d["FORCE_START_AT_000"] == 1 and d["PARTIAL_TG_EN"] == 0
  assert di.encode(**{k: x for k, x in d.items() if x}) == v
  assert gc.regCOMPUTE_PGM_RSRC2.mask("USER_SGPR") == 0x3e  # USER_SGPR count: bits 1..5


def test_encode_rejects_bad_fields_with_clear_errors():
  from autogen.amd import gc_11_0_0 as gc
  with pytest.raises(ValueError, match=r"CS_W32_EN is 1 bit\(s\) wide; 0x2 does not fit"):
    gc.regCOMPUTE_DISPATCH_INITIATOR.encode(CS_W32_EN=2)
  with pytest.raises(ValueError, match="has no field 'WAVE32'.*CS_W32_EN"):
    gc.regCOMPUTE_DISPATCH_INITIATOR.encode(WAVE32=1)


def test_nbio_hdp_flush_and_mp_mailbox_registers():
  from autogen.amd import mp_13_0_0 as mp, nbio_4_3_0 as nbio
  assert nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ.base_idx == nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_DONE.base_idx
  assert nbio.regBIF_BX_PF0_GPU_HDP_FLUSH_REQ.fields["CP0"] == (0, 1)
  # C2PMSG_n are consecutive dwords: the PSP/SMU mailboxes the driver writes by number
  assert mp.regMP1_SMN_C2PMSG_66.offset - mp.regMP1_SMN_C2PMSG_64.offset == 2
  assert mp.regMP0_SMN_C2PMSG_81.offset - mp.regMP0_SMN_C2PMSG_64.offset == 17
