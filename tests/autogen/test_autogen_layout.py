"""Layout truth: generated ctypes records have gcc's sizeof, _Alignof and offsetof, for a sample across all modules."""
import ctypes, importlib, keyword, pathlib, re
import pytest
from autogen.__main__ import GENERATORS
from autogen.gen.cmodule import CModule
from autogen_probe import c_names, packages, run_probe

PER_MODULE = 25  # records sampled per module (evenly over the sorted names); small modules are checked whole
AUTOGEN = pathlib.Path(__file__).parents[2] / "autogen"
C_MODULES = {n: g for n, g in GENERATORS.items() if isinstance(g, CModule)}
# modules with records (the rest are macros and enums only: pci_regs.h, nvd.h, ...)
RECORD_MODULES = sorted(n for n, g in C_MODULES.items() if re.search(r"^class \w+\((Structure|Union)\)", (AUTOGEN / g.out).read_text(), re.M))


def _records(mod) -> list[type]:
  return sorted((v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, (ctypes.Structure, ctypes.Union))
                 and v.__module__ == mod.__name__), key=lambda c: c.__name__)


def _sample(recs: list) -> list:
  if len(recs) <= PER_MODULE: return recs
  return [recs[i * len(recs) // PER_MODULE] for i in range(PER_MODULE)]


@pytest.mark.parametrize("name", RECORD_MODULES)
def test_records_match_gcc_layout(name, tmp_path):
  gen = C_MODULES[name]
  libc, src = packages()
  pkg = libc if gen.package == "libc" else src
  hdrs = [pkg.path(h) for h in gen.headers]
  names = c_names("".join(h.read_text() for h in hdrs))
  mod = importlib.import_module(f"autogen.{gen.out.removesuffix('.py').replace('/', '.')}")
  checked, lines = [], []
  for cls in _sample([c for c in _records(mod) if c.__name__ in names]):
    c = names[cls.__name__]
    lines.append(f'printf("S {cls.__name__} %zu %zu\\n", sizeof({c}), _Alignof({c}));')
    for f in cls._fields_:
      if len(f) == 2 and not f[0].startswith("_"):  # bitfields and anonymous members have no offsetof
        cname = f[0][:-1] if f[0].endswith("_") and keyword.iskeyword(f[0][:-1]) else f[0]  # `in_` is C's `in`
        lines.append(f'printf("F {cls.__name__} {f[0]} %zu\\n", offsetof({c}, {cname}));')
    checked.append(cls)
  assert checked, f"{name}: no record has a C name to probe"
  # records the generator left out (kernel driver state) may use kernel types gcc lacks too: opaque stand-ins
  # for those keep the header compiling; no sampled record uses them (the generator drops such users)
  left_out = re.findall(r"incomplete type '(struct \w+)'", pathlib.Path(mod.__file__).read_text())
  out = run_probe(tmp_path, hdrs, [pkg.path(d) for d in gen.include] + [libc.root, libc.root / "x86_64-linux-gnu"],
                  gen.kernel, lines, gen.defines, "".join(f"{s} {{ char opaque; }};\n" for s in sorted(set(left_out))))
  for rec in out:
    cls = getattr(mod, rec[1])
    if rec[0] == "S": assert (ctypes.sizeof(cls), ctypes.alignment(cls)) == (int(rec[2]), int(rec[3])), rec[1]
    else: assert getattr(cls, rec[2]).offset == int(rec[3]), f"{rec[1]}.{rec[2]}"
  assert sum(r[0] == "S" for r in out) == len(checked)


def test_sample_covers_at_least_50_records():
  total = 0
  libc, src = packages()
  for gen in C_MODULES.values():
    pkg = libc if gen.package == "libc" else src
    names = c_names("".join(pkg.path(h).read_text() for h in gen.headers))
    classes = re.findall(r"^class (\w+)\((?:Structure|Union)\)", (AUTOGEN / gen.out).read_text(), re.M)
    total += min(PER_MODULE, sum(1 for c in classes if c in names))
  assert total >= 50
