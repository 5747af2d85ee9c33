"""The SQTT decoder (drivers/amd/sqtt) and hcq-sqtt: token layouts checked against bytes laid out by hand from the gfx11
layout facts, every token type through encode/pack/decode at both nibble alignments, wave assembly, code mapping
errors and the console script."""
import json, random
import pytest
from tools import hcq_sqtt
from drivers.amd.sqtt import TraceError, decode, gfx11, gfx12, pack

F = gfx11.FORMAT
HEADER = (F["LAYOUT_HEADER"], F["LAYOUT_HEADER"].encode(layout=3))


def test_hand_laid_tokens():
  # LAYOUT_HEADER: code 0010001 [6:0], layout 3 at [12:7] -> 0x191, 16 nibbles; WAVESTART: 01100 [4:0], delta [6:5] = 1,
  # sa [7] 0, simd [9:8] 1, wgp [12:10] 2, wave [17:13] 5 -> 0xA92C (8 nibbles); VALUINST: 011, delta [5:3] = 2, wave
  # [11:7] 5 -> 0x293 (3 nibbles); WAVEEND: 10101, delta [7:5] = 3, simd [10:9] 1, wgp [13:11] 2, wave [19:15] 5 -> 0x29275
  # (5 nibbles); nibbles go low first: 3 9 2 | 5 7 2 9 2
  raw = (0x191).to_bytes(8, "little") + bytes.fromhex("2ca90000") + bytes([0x93, 0x52, 0x27, 0x29])
  toks = [(t.name, time) for t, time, _ in F.tokens(raw)]
  assert toks == [("LAYOUT_HEADER", 0), ("WAVESTART", 1), ("VALUINST", 3), ("WAVEEND", 6)]
  (w,) = decode(raw, se=2, unit=(0, 2, 1))
  assert (w.se, w.sa, w.wgp, w.simd, w.slot, w.start, w.end, w.detail) == (2, 0, 2, 1, 5, 1, 6, True)
  assert [(i.op, i.time, i.stall) for i in w.insts] == [("VALU", 3, 1)]


def test_gfx12_layouts_by_hand():
  # layout 4: INST delta [5:3] = 2, wave [11:7] = 3, op [19:12] = 0x8c (WMMA) -> 0x8C192 (5 nibbles); WAVESTART wgp [13:10] = 9,
  # wave [19:15] = 4 -> 0x2242C (8 nibbles); gfx12's INST class numbering
  G = gfx12.FORMAT
  raw = (0x211).to_bytes(8, "little") + (0x2242C).to_bytes(4, "little") + bytes([0x92, 0xC1, 0x08])   # + NOP nibble pad
  toks = [(t.name, time, t.fields and {k: t.get(w, k) for k in ("wave", "wgp", "op") if k in t.fields}) for t, time, w in G.tokens(raw)]
  assert toks[:3] == [("LAYOUT_HEADER", 0, {}), ("WAVESTART", 1, {"wave": 4, "wgp": 9}), ("INST", 3, {"wave": 3, "op": 0x8C})]
  # the INST names slot 3, whose wave started before the trace did: a wave without a start
  early, started = sorted(decode(raw, target="gfx1200", unit=(0, 9, 0)), key=lambda w: w.slot)
  assert (started.wgp, started.slot, started.start, started.end, started.insts) == (9, 4, 1, None, [])
  assert (early.slot, early.start, [(i.op, i.time, i.stall) for i in early.insts]) == (3, None, [("WMMA_8", 3, 0)])
  with pytest.raises(TraceError, match="a gfx1200 trace starts with a LAYOUT_HEADER of layout 4"): decode(pack([HEADER]), target="gfx1200")


@pytest.mark.parametrize("F", [gfx11.FORMAT, gfx12.FORMAT], ids=["gfx11", "gfx12"])
@pytest.mark.parametrize("odd", [False, True])
def test_every_token_type_round_trips(odd, F):
  rng = random.Random(31)
  toks = [(F["LAYOUT_HEADER"], F["LAYOUT_HEADER"].encode(layout=3))] + ([(F["NOP"], 0)] if odd else [])
  for t in F.types.values():
    if t.name == "LAYOUT_HEADER": continue
    fields = {n: rng.randrange(1 << w) for n, (_, w) in t.fields.items()}
    if t.marker: fields.update(pl=0, rt=0)
    delta = t.delta_add + rng.randrange(1 << t.delta[1]) if t.delta else 0
    toks.append((t, t.encode(delta, **fields)))
  out = list(F.tokens(pack(toks)))[:len(toks)]
  assert [t.name for t, _, _ in out] == [t.name for t, _ in toks]
  assert [w for _, _, w in out] == [w for _, w in toks]
  times, now = [], 0
  for t, w in toks: now += t.time_delta(w); times.append(now)
  assert [tm for _, tm, _ in out] == times


def test_marker_has_no_delta():
  t = F["TS_DELTA_OR_MARK"]
  assert t.time_delta(t.encode(100, rt=1, pl=0)) == 0 and t.time_delta(t.encode(100, rt=1, pl=1)) == 100


def test_waves_and_instruction_classes():
  tok = lambda name, d=0, **kw: (F[name], F[name].encode(d, **kw))
  data = pack([HEADER, tok("WAVESTART", 1, wave=0), tok("WAVESTART", 1, wave=1, simd=1), tok("INST", 3, wave=0, op=0x1),
               tok("INST", 1, wave=0, op=0x55), tok("IMMEDIATE_MASK", 4, mask=0b1), tok("INST", 2, wave=0, op=0x3),
               tok("WAVEEND", 1, wave=1, simd=1), tok("WAVEEND", 2, wave=0)])
  a, b = sorted(decode(data), key=lambda w: w.simd)
  assert [(i.op, i.time, i.stall) for i in a.insts] == [("SMEM", 5, 3), ("IMMEDIATE", 10, 4), ("BRANCH_TAKEN", 12, 1)]
  assert (a.start, a.end, b.start, b.end, b.insts, b.detail) == (1, 15, 2, 13, [], False)


def test_bad_traces():
  with pytest.raises(TraceError, match="is empty"): decode(b"")
  with pytest.raises(TraceError, match="starts with WAVESTART"): decode(pack([(F["WAVESTART"], F["WAVESTART"].encode())]))
  with pytest.raises(TraceError, match="layout 4"): decode(pack([(F["LAYOUT_HEADER"], F["LAYOUT_HEADER"].encode(layout=4))]))
  with pytest.raises(TraceError, match="no SQTT token format for target 'gfx942'"): decode(pack([HEADER]), target="gfx942")


def test_cli_decode_json_and_errors(tmp_path, capsys):
  tok = lambda name, d=0, **kw: (F[name], F[name].encode(d, **kw))
  (tmp_path / "se0.bin").write_bytes(pack([HEADER, tok("WAVESTART", 1), tok("VALUINST", 2), tok("WAVEEND", 3)]))
  assert hcq_sqtt.main(["decode", "--target", "gfx1100", "--json", str(tmp_path / "se0.bin")]) == 0
  (w,) = json.loads(capsys.readouterr().out)
  assert w == {"se": 0, "sa": 0, "wgp": 0, "simd": 0, "slot": 0, "start": 1, "end": 6, "insts": [{"pc": None, "time": 3, "stall": 1, "op": "VALU"}]}
  assert hcq_sqtt.main(["summary", "--target", "gfx1100", str(tmp_path / "se0.bin")]) == 0
  assert "VALU" in capsys.readouterr().out
  assert hcq_sqtt.main(["decode", "--target", "gfx942", str(tmp_path / "se0.bin")]) == 2
  assert capsys.readouterr().err.strip() == "hcq-sqtt: no SQTT token format for target 'gfx942': supported are gfx11, gfx12 (e.g. gfx1100)"
  assert hcq_sqtt.main(["decode", "--target", "gfx1201", str(tmp_path / "se0.bin")]) == 2
  assert "starts with a LAYOUT_HEADER of layout 4" in capsys.readouterr().err


def _code():
  """A hand-made program at 0x1000: s_mov; loop: v_add, s_delay_alu, s_cbranch_scc1 loop (-3 dwords); s_endpgm."""
  from drivers.amd.sqtt.waves import Code, Inst
  insts = [Inst("s_mov_b32", 4, "s_mov_b32 s2, 2", 0), Inst("v_add_f32_e32", 4, "v_add_f32_e32 v1, v1, v1", 0),
           Inst("s_delay_alu", 4, "s_delay_alu instid0(VALU_DEP_1)", 0), Inst("s_cbranch_scc1", 4, "s_cbranch_scc1 65533", 0xFFFD),
           Inst("s_endpgm", 4, "s_endpgm", 0)]
  return Code({0x1000 + 4 * i: inst for i, inst in enumerate(insts)}, 0x1000, 0x1000)


def _wave(*issues):
  tok = lambda name, d=0, **kw: (F[name], F[name].encode(d, **kw))
  return decode(pack([HEADER, tok("WAVESTART", 1), *(tok(n, 1, **kw) for n, kw in issues), tok("WAVEEND", 2)]))


def test_mapping_follows_branches_and_lists_silent_instructions():
  from drivers.amd.sqtt import map_code
  waves = _wave(("INST", {"op": 0x0}), ("VALUINST", {}), ("INST", {"op": 0x3}), ("VALUINST", {}), ("INST", {"op": 0x4}))
  map_code(waves, _code())
  assert [(i.pc, i.op) for i in waves[0].insts] == [(0x1000, "SALU"), (0x1004, "VALU"), (0x1008, "NONE"), (0x100c, "BRANCH_TAKEN"),
                                                     (0x1004, "VALU"), (0x1008, "NONE"), (0x100c, "BRANCH_NOT_TAKEN"), (0x1010, "ENDPGM")]
  assert waves[0].insts[-1].text == "s_endpgm" and waves[0].insts[2].stall == 0


def test_mapping_refuses_tokens_that_do_not_fit_the_code():
  from drivers.amd.sqtt import map_code
  with pytest.raises(TraceError, match=r"token VALU at time 2 cannot be `s_mov_b32 s2, 2` at PC 0x1000"): map_code(_wave(("VALUINST", {})), _code())
  with pytest.raises(TraceError, match="token SALU .* cannot be `s_cbranch_scc1"):
    map_code(_wave(("INST", {"op": 0}), ("VALUINST", {}), ("INST", {"op": 0})), _code())
  waves = _wave()                          # no instruction tokens (its SE excluded them): left unmapped
  map_code(waves, _code())
  assert waves[0].insts == []
