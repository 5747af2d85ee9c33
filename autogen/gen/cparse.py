"""libclang front end: parse headers, list their records/enums/typedefs/macros, and evaluate macros.

libclang comes from the PyPI `libclang` wheel (pinned in pyproject.toml); its Python bindings lack
`clang_Cursor_Evaluate` and `clang_Cursor_isMacroFunctionLike`, which are bound here with ctypes.
Integer macros are evaluated by clang itself: every candidate becomes `static const __auto_type x = (MACRO);`
in a probe translation unit that includes the headers, so sizeof/_IOWR/casts are computed exactly as a C
compiler would; a candidate that is not an integer constant expression is dropped (it is a type, a string, ...).
"""
from __future__ import annotations
import ctypes, pathlib, re
from dataclasses import dataclass, field
import clang.cindex as ci
from autogen.gen.pyexpr import literal

TARGET = "x86_64-pc-linux-gnu"
PRELUDE_NAME = "/hcq-autogen/prelude.h"
PROBE_NAME = "/hcq-autogen/probe.c"

# Kernel-internal headers (amdgpu, bnxt, mlx5) use the kernel's own type names; this stands in for
# <linux/types.h>-based kernel headers that no registry ships as userspace headers.
KERNEL_PRELUDE = """#include <linux/types.h>
#include <linux/stddef.h>
typedef __u8 u8; typedef __u16 u16; typedef __u32 u32; typedef __u64 u64;
typedef __s8 s8; typedef __s16 s16; typedef __s32 s32; typedef __s64 s64;
typedef __u8 uint8_t; typedef __u16 uint16_t; typedef __u32 uint32_t; typedef __u64 uint64_t;
typedef __s8 int8_t; typedef __s16 int16_t; typedef __s32 int32_t; typedef __s64 int64_t;
typedef _Bool bool;
#define __packed __attribute__((packed))
#define __aligned(x) __attribute__((aligned(x)))
#define __printf(a, b) __attribute__((format(printf, a, b)))
#define DECLARE_FLEX_ARRAY(TYPE, NAME) __DECLARE_FLEX_ARRAY(TYPE, NAME)
#define BIT(nr) (1UL << (nr))
#define BIT_ULL(nr) (1ULL << (nr))
#define GENMASK(h, l) ((~0UL << (l)) & (~0UL >> (63 - (h))))
#define GENMASK_ULL(h, l) ((~0ULL << (l)) & (~0ULL >> (63 - (h))))
"""


class ParseError(RuntimeError):
  """clang reported errors in a header; the message lists the first ones with file:line."""


def _lib():
  lib = ci.conf.lib
  if not getattr(lib, "_hcq_bound", False):
    for name, args, res in [("clang_Cursor_Evaluate", [ci.Cursor], ctypes.c_void_p),
                            ("clang_EvalResult_getKind", [ctypes.c_void_p], ctypes.c_int),
                            ("clang_EvalResult_isUnsignedInt", [ctypes.c_void_p], ctypes.c_uint),
                            ("clang_EvalResult_getAsUnsigned", [ctypes.c_void_p], ctypes.c_ulonglong),
                            ("clang_EvalResult_getAsLongLong", [ctypes.c_void_p], ctypes.c_longlong),
                            ("clang_EvalResult_dispose", [ctypes.c_void_p], None),
                            ("clang_Cursor_isMacroFunctionLike", [ci.Cursor], ctypes.c_uint)]:
      fn = getattr(lib, name)
      fn.argtypes, fn.restype = args, res
    lib._hcq_bound = True
  return lib


def evaluate_int(cursor: ci.Cursor) -> int | None:
  """The integer value of a constant initializer (clang_Cursor_Evaluate), or None if it is not an integer."""
  lib = _lib()
  res = lib.clang_Cursor_Evaluate(cursor)
  if not res: return None
  try:
    if lib.clang_EvalResult_getKind(res) != 1: return None  # CXEval_Int
    if lib.clang_EvalResult_isUnsignedInt(res): return lib.clang_EvalResult_getAsUnsigned(res)
    return lib.clang_EvalResult_getAsLongLong(res)
  finally: lib.clang_EvalResult_dispose(res)


@dataclass
class Macro:
  name: str
  params: list[str] | None  # None for object-like macros
  body: list[str]           # token spellings after the name (and parameter list)
  file: str
  line: int


@dataclass
class Header:
  """What one parse found in the target headers (in source order) plus the parse itself."""
  tu: ci.TranslationUnit
  files: list[str]
  args: list[str]
  unsaved: list[tuple[str, str]]
  records: list[ci.Cursor] = field(default_factory=list)   # struct/union definitions (incl. nested ones)
  enums: list[ci.Cursor] = field(default_factory=list)
  typedefs: list[ci.Cursor] = field(default_factory=list)
  macros: list[Macro] = field(default_factory=list)


def _errors(tu: ci.TranslationUnit, limit: int = 8) -> list[str]:
  return [f"{d.location.file}:{d.location.line}: {d.spelling}" for d in tu.diagnostics
          if d.severity >= ci.Diagnostic.Error][:limit]


def parse(headers: list[pathlib.Path], include_dirs: list[pathlib.Path], prelude: str = "",
          defines: tuple[str, ...] = (), tolerate_errors: bool = False, blank_includes: bool = False) -> Header:
  """Parse `headers` (all included, in order, from one probe file) and collect the declarations they define.
  `blank_includes`: the headers' own #include lines are blanked (kernel-internal headers whose includes no
  registry ships); only what the headers define themselves is then meaningful."""
  args = ["-x", "c", "-std=gnu11", f"--target={TARGET}", "-nostdinc", "-ferror-limit=0",
          *(f"-I{d}" for d in include_dirs), *(f"-D{d}" for d in defines)]
  unsaved = []
  if prelude:
    args += ["-include", PRELUDE_NAME]
    unsaved.append((PRELUDE_NAME, prelude))
  if blank_includes:
    unsaved += [(str(h), re.sub(r"^[ \t]*#[ \t]*include\b.*$", "", h.read_text(), flags=re.M)) for h in headers]
  main = "".join(f'#include "{h}"\n' for h in headers)
  tu = ci.Index.create().parse(PROBE_NAME, args=args, unsaved_files=unsaved + [(PROBE_NAME, main)],
                               options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
  if (errs := _errors(tu)) and not tolerate_errors:
    raise ParseError(f"clang errors parsing {[str(h) for h in headers]}:\n  " + "\n  ".join(errs))
  files = [str(h) for h in headers]
  out = Header(tu, files, args, unsaved + [(PROBE_NAME, main)])
  lib = _lib()

  def visit(cur: ci.Cursor) -> None:
    for c in cur.get_children():
      if c.location.file is None or c.location.file.name not in files: continue
      if c.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL) and c.is_definition():
        visit(c)  # nested definitions first, so users follow what they use
        out.records.append(c)
      elif c.kind == ci.CursorKind.ENUM_DECL and c.is_definition(): out.enums.append(c)
      elif c.kind == ci.CursorKind.TYPEDEF_DECL and cur.kind == ci.CursorKind.TRANSLATION_UNIT: out.typedefs.append(c)
      elif c.kind == ci.CursorKind.MACRO_DEFINITION:
        toks = [t.spelling for t in c.get_tokens()]
        if lib.clang_Cursor_isMacroFunctionLike(c):
          close = toks.index(")")
          params, body = [t for t in toks[2:close] if t != ","], toks[close + 1:]
        else: params, body = None, toks[1:]
        out.macros.append(Macro(c.spelling, params, body, c.location.file.name, c.location.line))
  visit(tu.cursor)
  return out


def literal_value(body: list[str]) -> int | None:
  """Fast path for the common `N`, `(N)`, `-N`, `(-N)` macro bodies; None if the body is anything else."""
  toks = body[1:-1] if len(body) >= 3 and body[0] == "(" and body[-1] == ")" else body
  if len(toks) == 1: return literal(toks[0])
  if len(toks) == 2 and toks[0] == "-" and (v := literal(toks[1])) is not None: return -v
  return None


def evaluate_macros(hdr: Header, names: list[str]) -> dict[str, int]:
  """Values of the object-like macros `names` that are integer constant expressions (evaluated by clang)."""
  if not names: return {}
  probe_main = hdr.unsaved[-1][1] + "".join(f"static const __auto_type __hcq_m{i} = ({n});\n" for i, n in enumerate(names))
  tu = ci.Index.create().parse(PROBE_NAME, args=hdr.args, unsaved_files=hdr.unsaved[:-1] + [(PROBE_NAME, probe_main)],
                               options=ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES)
  bad_lines = {d.location.line for d in tu.diagnostics
               if d.severity >= ci.Diagnostic.Error and d.location.file and d.location.file.name == PROBE_NAME}
  first = probe_main.count("\n", 0, len(hdr.unsaved[-1][1])) + 1
  out = {}
  for c in tu.cursor.get_children():
    if c.kind != ci.CursorKind.VAR_DECL or not c.spelling.startswith("__hcq_m"): continue
    if c.location.line in bad_lines: continue
    i = int(c.spelling[7:])
    assert c.location.line == first + i
    if (v := evaluate_int(c)) is not None: out[names[i]] = v
  return out
