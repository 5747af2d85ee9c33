"""compute/ imports in one direction: the modules' imports of each other (module- and function-level) form a DAG,
and each goes to a lower layer of the table in compute's docstring.

Imports under `if TYPE_CHECKING:` are left out: they never run, so they may name a higher layer for annotations
(a name from them used at runtime would raise NameError in the tests)."""
import ast
from pathlib import Path
import compute

ROOT = Path(compute.__file__).parent
PKG = ROOT.name


def _module_name(path: Path) -> str:
  parts = (PKG, *path.relative_to(ROOT).with_suffix("").parts)
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
  t = node.test
  return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, here: str, is_pkg: bool, modules: set[str]):
  """Every package module that `tree` imports, with the line, skipping TYPE_CHECKING blocks."""
  stack = [tree]
  while stack:
    node = stack.pop()
    if isinstance(node, ast.If) and _is_type_checking(node):
      stack.extend(node.orelse)
      continue
    stack.extend(ast.iter_child_nodes(node))
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.name == PKG or a.name.startswith(PKG + "."): yield a.name, node.lineno
    elif isinstance(node, ast.ImportFrom):
      if node.level:   # relative: resolve against this module's package
        base = here.split(".")[:len(here.split(".")) - node.level + is_pkg]
        src = ".".join(base + ([node.module] if node.module else []))
      else: src = node.module or ""
      if src != PKG and not src.startswith(PKG + "."): continue
      for a in node.names:   # `from compute import function` imports the submodule compute.function
        yield (f"{src}.{a.name}" if f"{src}.{a.name}" in modules else src), node.lineno


def import_graph() -> dict[str, dict[str, int]]:
  """module -> {imported package module: first line}"""
  files = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
  graph: dict[str, dict[str, int]] = {}
  for name, path in files.items():
    edges = graph.setdefault(name, {})
    for dst, line in _imports(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py", set(files)):
      if dst != name: edges[dst] = min(line, edges.get(dst, line))
  return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
  """One import cycle as [a, b, ..., a], or None."""
  state: dict[str, int] = {}   # 1: on the DFS path, 2: finished
  path: list[str] = []
  def visit(n: str) -> list[str] | None:
    state[n] = 1
    path.append(n)
    for m in graph.get(n, {}):
      if state.get(m) == 1: return path[path.index(m):] + [m]
      if m not in state and (c := visit(m)): return c
    path.pop()
    state[n] = 2
    return None
  for n in sorted(graph):
    if n not in state and (c := visit(n)): return c
  return None


def test_compute_imports_form_a_dag():
  graph = import_graph()
  assert {"compute.lazy", "compute.runtime", "compute.tensor"} <= set(graph), sorted(graph)
  cycle = find_cycle(graph)
  if cycle:
    steps = "\n  ".join(f"{a} -> {b}  (line {graph[a][b]} of {a})" for a, b in zip(cycle, cycle[1:]))
    raise AssertionError(f"import cycle in compute/:\n  {steps}")


def documented_layers() -> dict[str, int]:
  """module -> its row in the layer table of compute's docstring (0 = bottom); the package itself is on top."""
  table = compute.__doc__.split("Modules import only modules of lower layers")[1].strip().splitlines()[1:]
  rows = [[f"{PKG}.{m.strip()}" for m in line.split("  ")[1].split(",")] for line in table if line.startswith("  ")]
  return {m: i for i, row in enumerate(rows + [[PKG]]) for m in row}


def test_imports_go_down_the_documented_layers():
  graph, layer = import_graph(), documented_layers()
  assert set(graph) == set(layer), f"modules missing from compute's layer table: {sorted(set(graph) ^ set(layer))}"
  up = [f"{a} -> {b}  (line {line} of {a})" for a, edges in graph.items() for b, line in edges.items() if layer[b] > layer[a]]
  assert not up, "imports of a higher layer than compute's docstring gives:\n  " + "\n  ".join(up)


def test_cycle_finder_reports_the_cycle():
  g = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}}
  assert find_cycle(g) == ["a", "b", "c", "a"]
  del g["c"]["a"]
  assert find_cycle(g) is None


def test_function_level_and_relative_imports_are_edges():
  src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING: from compute.tensor import Tensor\n" \
        "def f():\n  from compute.runtime import Device\n  from . import lazy\n  import compute.shape\n"
  modules = {"compute", "compute.lazy", "compute.runtime", "compute.shape", "compute.tensor"}
  got = {m for m, _ in _imports(ast.parse(src), "compute.codegen", False, modules)}
  assert got == {"compute.runtime", "compute.lazy", "compute.shape"}


# --- Tensor's layers: TensorCore (compute/core.py) and its mixins, siblings that call each other only through it
MIXINS = ("movement", "indexing", "reductions", "nnops", "sorting", "torchops", "inplace")


def _class_names(tree: ast.Module, cls: str) -> tuple[set[str], set[str]]:
  """(names `cls` defines, names it declares under `if TYPE_CHECKING:`) in its body."""
  node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
  defined, declared = set(), set()
  def collect(body, into):
    for n in body:
      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)): into.add(n.name)
      elif isinstance(n, ast.Assign): into.update(t.id for t in n.targets if isinstance(t, ast.Name))
      elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name): into.add(n.target.id)
      elif isinstance(n, ast.If) and _is_type_checking(n): collect(n.body, declared)
  collect(node.body, defined)
  return defined, declared


def _attribute_uses(tree: ast.Module) -> dict[str, int]:
  """attribute name -> first line, for every `x.name` where x is not an imported module or name; `x[i]` counts as
  __getitem__ (the scan cannot tell a tensor from a tuple: it may count more uses, never fewer)."""
  imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
  uses: dict[str, int] = {}
  for n in ast.walk(tree):
    if isinstance(n, ast.Attribute) and not (isinstance(n.value, ast.Name) and n.value.id in imported):
      uses.setdefault(n.attr, n.lineno)
    elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load): uses.setdefault("__getitem__", n.lineno)
  return uses


def tensor_layers() -> tuple[set[str], set[str], dict[str, set[str]]]:
  """(TensorCore's defined names, its declared names, mixin module -> the names its class defines)."""
  core = ast.parse((ROOT / "core.py").read_text())
  defined, declared = _class_names(core, "TensorCore")
  mixins = {}
  for m in MIXINS:
    tree = ast.parse((ROOT / f"{m}.py").read_text())
    cls = next(n.name for n in tree.body if isinstance(n, ast.ClassDef) and any(getattr(b, "id", "") == "TensorCore" for b in n.bases))
    mixins[m] = _class_names(tree, cls)[0]
  return defined, declared, mixins


def test_tensor_mixins_are_siblings_on_tensor_core():
  """Each mixin is a class on TensorCore and imports no other mixin (nor tensor.py) outside TYPE_CHECKING."""
  graph = import_graph()
  bad = [f"{PKG}.{m} -> {dst}" for m in MIXINS for dst in graph[f"{PKG}.{m}"] if dst.split(".")[-1] in MIXINS + ("tensor",)]
  assert bad == [], "a Tensor mixin imports a sibling (call it through a TensorCore declaration instead):\n  " + "\n  ".join(bad)
  from compute.core import TensorCore
  from compute.tensor import Tensor
  assert [c.__module__.split(".")[-1] for c in Tensor.__mro__[1:-2]] == ["inplace", "torchops", "sorting", "nnops", "reductions",
                                                                         "indexing", "movement"]
  assert all(c.__bases__ == (TensorCore,) for c in Tensor.__mro__[1:-2])


def test_tensor_mixins_call_each_other_only_through_tensor_core():
  """A name one mixin defines is used by another module of the tensor layer (a sibling or core.py) only if TensorCore
  declares it; every declaration is defined by exactly one mixin and used outside it."""
  defined, declared, mixins = tensor_layers()
  owner = {name: m for m, names in mixins.items() for name in names}
  undeclared = []
  used_elsewhere: set[str] = set()
  for m in ("core",) + MIXINS:
    for name, line in _attribute_uses(ast.parse((ROOT / f"{m}.py").read_text())).items():
      if name in owner and owner[name] != m and name not in defined:
        used_elsewhere.add(name)
        if name not in declared: undeclared.append(f"compute/{m}.py:{line}: .{name} (compute/{owner[name]}.py)")
  assert undeclared == [], "calls into a sibling mixin that TensorCore does not declare:\n  " + "\n  ".join(undeclared)
  assert sorted(n for n in declared if sum(n in names for names in mixins.values()) != 1) == [], "declared, not defined by one mixin"
  assert sorted(declared - used_elsewhere) == [], "declared in TensorCore but used by no other module"
  assert sorted(defined & set(owner) - {"__slots__"}) == [], "defined both in TensorCore and in a mixin"


def test_layer_scan_finds_a_sibling_call():
  """The scan sees a call through `self`, through another tensor and through type(self), and not module attributes."""
  src = "import numpy as np\ndef f(self, t):\n  self.sum(); t.reshape(1); type(self).arange(3); np.sort(t); t[0]\n"
  assert set(_attribute_uses(ast.parse(src))) == {"sum", "reshape", "arange", "__getitem__"}
