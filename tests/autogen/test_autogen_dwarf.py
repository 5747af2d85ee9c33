"""autogen.gen.dwarf against gcc: a C library compiled with -g, its records generated from its DWARF, then read and
written from Python while the C code writes and checks the same members (bit fields, signed enums, anonymous members,
nested arrays, packing, flexible arrays)."""
import ctypes, hashlib, shutil, subprocess
import pytest
from autogen import clayout
from autogen.gen import dwarf

SRC = r"""
#include <stddef.h>
#include <stdint.h>
typedef enum { PROBE_NEG = -2, PROBE_A = 0, PROBE_B = 7 } probe_kind;
enum probe_flag { PROBE_F1 = 1, PROBE_F31 = 0x80000000u };
struct probe_inner { uint16_t h; uint8_t b[3]; };
struct __attribute__((packed)) probe_packed { uint8_t a; uint32_t b; };
typedef struct probe {
  uint8_t first;
  probe_kind kind : 4;
  unsigned wide : 13;
  int neg : 5;
  uint64_t q;
  union { uint32_t u; float f; };
  struct { unsigned lo : 3, hi : 5; };
  struct probe_inner inner[2];
  int16_t grid[2][3];
  char tag[5];
  const char *name;
  struct probe *next;
  void (*cb)(int);
  enum probe_flag flag;
  struct probe_packed packed;
  uint32_t tail[];
} probe;
const probe probe_template = { .first = 9 };
size_t probe_fill(probe *p) {
  p->first = 0xa5; p->kind = PROBE_NEG; p->wide = 0x1abc; p->neg = -11; p->q = 0x0123456789abcdefull; p->u = 0xdeadbeef;
  p->lo = 5; p->hi = 19; p->inner[1].h = 0x4242; p->inner[1].b[2] = 0x77; p->grid[1][2] = -300; p->tag[4] = 'z';
  p->name = "probe"; p->next = p; p->flag = PROBE_F31; p->packed.a = 1; p->packed.b = 0xcafef00d; p->tail[1] = 0x5a5a;
  return sizeof(*p);
}
int probe_check(const probe *p) {
  return p->kind == PROBE_B && p->wide == 0x0fff && p->neg == -16 && p->lo == 7 && p->hi == 1 && p->grid[0][1] == 1234
      && p->packed.b == 0x11223344 && p->first == 0xa5 && p->q == 0x0123456789abcdefull;
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
  gcc = shutil.which("gcc")
  if gcc is None: pytest.skip("gcc not installed: it is the layout reference")
  tmp = tmp_path_factory.mktemp("dwarf")
  (tmp / "probe.c").write_text(SRC)
  lib = tmp / "libprobe.so"
  subprocess.run([gcc, "-shared", "-fPIC", "-g", "-O2", "-o", str(lib), str(tmp / "probe.c")], check=True)
  sha = hashlib.sha256(lib.read_bytes()).hexdigest()
  spec = dwarf.DwarfModule("probe.py", "probe", "libprobe.so", functions=("probe_fill", "probe_check"), records=("probe",),
                           enums=("probe_flag",), variables=("probe_template",))
  wheel = dwarf.Wheel("probe", "0", "none", lib, sha)
  text = dwarf.Emitter(dwarf.Dwarf(lib, spec.functions, spec.variables), wheel, spec).text()
  ns: dict = {}
  exec(compile(text, "probe.py", "exec"), ns)
  return ns, clayout.load(lib, sha, ns["PROTOTYPES"]), text


def test_records_read_what_c_writes(probe):
  m, lib, _ = probe
  buf = (ctypes.c_uint8 * (ctypes.sizeof(m["probe"]) + 8))()
  p = m["probe"].from_buffer(buf)
  assert lib.probe_fill(ctypes.byref(p)) == ctypes.sizeof(m["probe"])
  assert (p.first, p.kind, p.wide, p.neg, p.q, p.u) == (0xa5, m["PROBE_NEG"], 0x1abc, -11, 0x0123456789abcdef, 0xdeadbeef)
  assert (p.lo, p.hi, p.inner[1].h, p.inner[1].b[2], p.grid[1][2]) == (5, 19, 0x4242, 0x77, -300)
  assert buf[m["probe"].tag.offset + 4] == ord("z")                     # a char array reads as a C string (here empty)
  assert (p.name, ctypes.addressof(p.next.contents), p.flag) == (b"probe", ctypes.addressof(p), m["PROBE_F31"])
  assert (p.packed.a, p.packed.b) == (1, 0xcafef00d)
  assert ctypes.cast(ctypes.addressof(p) + m["probe"].tail.offset, ctypes.POINTER(ctypes.c_uint32))[1] == 0x5a5a


def test_c_reads_what_records_write(probe):
  m, lib, _ = probe
  p = m["probe"](first=0xa5, q=0x0123456789abcdef)
  p.kind, p.wide, p.neg, p.lo, p.hi = m["PROBE_B"], 0x0fff, -16, 7, 1
  p.grid[0][1], p.packed.b = 1234, 0x11223344
  assert lib.probe_check(ctypes.byref(p)) == 1
  p.neg = 15                                                              # the other end of a signed 5-bit field
  assert p.neg == 15 and lib.probe_check(ctypes.byref(p)) == 0
  for field, bad in (("neg", 16), ("neg", -17), ("wide", 1 << 13), ("lo", -1)):
    with pytest.raises(ValueError, match=f"probe.{field} is"): setattr(p, field, bad)


def test_generated_text_names_the_layout(probe):
  m, lib, text = probe
  assert 'bits="kind:8:4:s wide:12:13 neg:25:5:s lo:160:3 hi:163:5"' in text   # gcc packs them LSB first from byte 1
  assert m["PROBE_NEG"] == -2 and m["probe_kind"] is ctypes.c_int32 and m["probe_flag"] is ctypes.c_uint32
  assert ctypes.alignment(m["probe_packed"]) == 1 and ctypes.sizeof(m["probe_packed"]) == 5
  assert m["VARIABLES"]["probe_template"] is m["probe"] and m["probe"].in_dll(lib, "probe_template").first == 9
  assert m["PROTOTYPES"]["probe_fill"] == (ctypes.c_uint64, (ctypes.POINTER(m["probe"]),))


def test_a_layout_ctypes_cannot_give_is_refused():
  class overlapping(ctypes.Structure): pass
  with pytest.raises(clayout.LayoutError, match="overlapping: ctypes puts b at 4, not 2"):
    clayout.record(overlapping, 8, [(0, "a", ctypes.c_uint32), (2, "b", ctypes.c_uint32)])
