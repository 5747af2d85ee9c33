"""Translate the simple function-like C macros that headers use for register/packet fields into Python.

Only bodies made of the macro's parameters, integer literals, names this module already defines, calls of
other translated macros, parentheses, the integer operators `<< >> & | ^ ~ + - * / %` and comparisons are translated;
anything else (casts, `?:`, `&&`, strings, statements, GCC builtins) is left out and listed by the caller.
"""
from __future__ import annotations
import keyword

_OPS = {"<<", ">>", "&", "|", "^", "~", "+", "-", "*", "%", "(", ")", ",", "==", "!=", "<", ">", "<=", ">="}


def literal(tok: str) -> int | None:
  """An integer literal token's value (C suffixes and octal handled), else None."""
  t = tok.rstrip("uUlL")
  try:
    if t.startswith(("0x", "0X", "0b", "0B")): return int(t, 0)
    if len(t) > 1 and t[0] == "0" and t.isdigit(): return int(t, 8)
    if t.isdigit(): return int(t)
  except ValueError: pass
  return None


def pyname(name: str) -> str:
  """A C identifier as a Python identifier (keywords get a trailing underscore)."""
  return name + "_" if keyword.iskeyword(name) or name in ("None", "True", "False") else name


def translate(params: list[str], body: list[str], known: set[str], functions: set[str]) -> str | None:
  """Python expression text for a macro body, or None if the body uses something outside the supported subset."""
  if not body or params and params[-1] == "...": return None
  out, depth = [], 0
  for i, tok in enumerate(body):
    nxt = body[i + 1] if i + 1 < len(body) else None
    if tok in params: out.append(pyname(tok))
    elif (v := literal(tok)) is not None: out.append(hex(v) if tok.lower().startswith("0x") else str(v))
    elif tok in functions and nxt == "(": out.append(pyname(tok) + "\0")  # \0: no space before its "("
    elif tok in known and tok not in functions: out.append(pyname(tok))
    elif tok == "/": out.append("//")
    elif tok in _OPS:
      if tok == ",": 
        if depth == 0: return None  # a comma expression, not an argument list
      depth += (tok == "(") - (tok == ")")
      # `(type)x` casts cannot reach here: type names are neither params nor known names
      out.append(tok)
    else: return None
  text = " ".join(out).replace("\0 ", "").replace("( ", "(").replace(" )", ")").replace(" ,", ",").replace("~ ", "~")
  try: compile(text, "<macro>", "eval")
  except SyntaxError: return None
  return text
