"""The scheduler: decides which lazy nodes become kernels, and lowers each kernel to a small AST.

Fusion rules:
- elementwise ops and movement ops never make a kernel of their own: they are inlined (recomputed)
  into every kernel that reads them, with movement ops folded into the loads' views;
- a REDUCE takes its whole elementwise input in; its result continues into the elementwise ops that
  consume it (the epilogue, e.g. `+ bias` and `relu` after a matmul) up to the furthest node that all of
  the epilogue feeds into; where that stops (results used twice, a broadcast, another reduce), the
  result is realized. One reduce per kernel: a second reduce meeting the same epilogue is realized alone;
- an inlined node is recomputed once per distinct view it is read through (a shifted or padded read), so a chain of such
  reads multiplies: each step of a log-step scan reads the step before at two offsets, 2^steps copies in one kernel.
  Past RECOMPUTE_LIMIT extra copies in a kernel, the recomputed node nearest its root is realized (and the kernel looked
  at again), which bounds every kernel's expression; stencils of a few shifted reads stay fused;
- targets, CONTIGUOUS and device copies are realization boundaries.

Schedules are cached by the structure of the graph they realize (ops, arguments, shapes, dtypes, devices, which nodes
are realized inputs and which are targets): a structurally equal graph, e.g. the same op on new inputs, gets the cached
schedule bound to its own nodes, and its kernels carry the runtime's compiled programs along (Kernel.cache).
"""
from __future__ import annotations
import dataclasses
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any
from compute.dtypes import DType, dtypes
from compute.lazy import LazyBuffer, Ops, ELEMENTWISE, ZERO_PRESERVING
from compute.shape import ShapeTracker


@dataclass(eq=False)
class KNode:
  """Kernel AST node. LOAD arg=(buffer index, tracker); CONST arg=(value, tracker); ARANGE arg=(start, step,
  tracker); REDUCE arg=(op, axes); elementwise ops as in the lazy graph (CAST arg = dtype)."""
  op: Any
  dtype: DType
  srcs: tuple[KNode, ...] = ()
  arg: Any = None


@dataclass(eq=False)
class Kernel:
  device: str
  root: KNode                      # the value stored to bufs[0]
  out_shape: tuple[int, ...]       # the kernel's output index space (reduced axes are 1)
  full_shape: tuple[int, ...]      # the index space inside the reduce (== out_shape without one)
  reduce: KNode | None
  bufs: list[LazyBuffer] = field(default_factory=list)   # [output, inputs...]
  offsets: list[int] = field(default_factory=list)        # byte offset of each argument into its buffer
  cache: dict = field(default_factory=dict, repr=False)   # shared by every binding of a cached schedule (runtime's)


@dataclass(eq=False)
class Copy:
  dest: LazyBuffer
  src: LazyBuffer


def _toposort(targets: list[LazyBuffer]) -> list[LazyBuffer]:
  order, seen = [], set()
  stack = [(t, False) for t in reversed(targets)]
  while stack:
    n, done = stack.pop()
    if done: order.append(n); continue
    if id(n) in seen or n.realized: continue
    seen.add(id(n))
    stack.append((n, True))
    stack.extend((s, False) for s in reversed(n.srcs) if not s.realized)
  return order


CACHE_SIZE = 1024                                   # schedules kept (least recently used dropped)
_schedules: OrderedDict[tuple, list[tuple[Kernel | None, tuple[int, ...]]]] = OrderedDict()
stats = {"scheduled": 0, "cache_hits": 0}


def _arg_key(n: LazyBuffer) -> Any:
  # constants by type and repr: 0.0 and -0.0, 1 and True, and every NaN make their own kernels
  if n.op is Ops.CONST: return (type(n.arg), repr(n.arg))
  if n.op is Ops.ARANGE: return tuple((type(v), repr(v)) for v in n.arg)
  return n.arg


def structure(targets: list[LazyBuffer]) -> tuple[list[LazyBuffer], tuple]:
  """The nodes `targets` depend on (up to realized ones) in a canonical order, and the graph's structural key."""
  nodes: list[LazyBuffer] = []
  index: dict[int, int] = {}
  parts: list[tuple] = []
  for t in targets:
    stack = [(t, False)]
    while stack:
      n, done = stack.pop()
      if done:
        index[id(n)] = len(nodes)
        nodes.append(n)
        parts.append((n.op, _arg_key(n), n.shape, n.dtype, n.device, tuple([index[id(x)] for x in n.srcs])))
      elif id(n) not in index:
        if n.buffer is not None:   # realized: a leaf
          index[id(n)] = len(nodes)
          nodes.append(n)
          parts.append((n.shape, n.dtype, n.device))
        else:
          stack.append((n, True))
          stack += [(x, False) for x in reversed(n.srcs)]
  return nodes, (tuple(parts), tuple([index[id(t)] for t in targets]))


def create_schedule(targets: list[LazyBuffer]) -> list[Kernel | Copy]:
  """Kernels and copies (in dependency order) that realize `targets` (non-view nodes); cached by graph structure."""
  nodes, key = structure(targets)
  if (plan := _schedules.get(key)) is not None:
    _schedules.move_to_end(key)
    stats["cache_hits"] += 1
  else:
    index = {id(n): i for i, n in enumerate(nodes)}
    plan = [(None, (index[id(it.dest)], index[id(it.src)])) if isinstance(it, Copy) else
            (dataclasses.replace(it, bufs=[]), tuple(index[id(b)] for b in it.bufs)) for it in _schedule(targets)]
    _schedules[key] = plan
    if len(_schedules) > CACHE_SIZE: _schedules.popitem(last=False)
    stats["scheduled"] += 1
  return [Copy(nodes[ix[0]], nodes[ix[1]]) if k is None else
          Kernel(k.device, k.root, k.out_shape, k.full_shape, k.reduce, [nodes[i] for i in ix], k.offsets, k.cache) for k, ix in plan]


def _schedule(targets: list[LazyBuffer]) -> list[Kernel | Copy]:
  order = _toposort(targets)
  children: dict[int, dict[int, LazyBuffer]] = {id(n): {} for n in order}
  for n in order:
    for s in n.srcs:
      if not s.realized: children[id(s)][id(n)] = n
  realize = {id(t) for t in targets}
  for n in order:
    if n.op is Ops.COPY: realize.update((id(n), id(n.srcs[0])))
    elif n.op is Ops.CONTIGUOUS: realize.add(id(n))
  topo = {id(n): i for i, n in enumerate(order)}
  fused: set[int] = set()
  for n in order:
    if n.op is not Ops.REDUCE: continue
    root = _fusion_root(n, children, realize, topo)
    if id(root) in fused: root = n
    fused.add(id(root))
    realize.add(id(root))
  while _split_extra_reduces(order, realize) | _split_recomputation(order, realize, topo): pass
  items: list[Kernel | Copy] = []
  for n in order:
    if id(n) not in realize: continue
    if n.op is Ops.COPY: items.append(Copy(n, n.srcs[0]))
    else: items.append(_lower(n, realize))
  return items


def _fusable(c: LazyBuffer) -> bool: return c.op in ELEMENTWISE or (c.op is Ops.VIEW and c.tracker.is_reshape_of(c.base.shape))


def _fusion_root(r: LazyBuffer, children, realize: set[int], topo: dict[int, int], limit: int = 256) -> LazyBuffer:
  """The furthest consumer T of reduce `r` such that everything between r and T is elementwise (or a plain
  reshape) and feeds only into T: then r and that whole epilogue compute in T's kernel."""
  if id(r) in realize: return r
  cands: list[LazyBuffer] = []
  stack, seen = [r], {id(r)}
  while stack and len(cands) < limit:
    n = stack.pop()
    if n is not r and id(n) in realize: continue   # a realized node ends the epilogue
    for c in children[id(n)].values():
      if id(c) not in seen and _fusable(c):
        seen.add(id(c)); cands.append(c); stack.append(c)
  best = r
  for t in sorted(cands, key=lambda c: topo[id(c)]):
    if t.op is Ops.VIEW: continue
    between, todo = {id(t): t}, [t]
    while todo:
      for s in todo.pop().srcs:
        if id(s) in seen and id(s) not in between: between[id(s)] = s; todo.append(s)
    if id(r) not in between: continue
    if all(id(n) not in realize and all(c in between for c in children[id(n)]) for n in between.values() if n is not t):
      best = t
  return best


def _split_extra_reduces(order: list[LazyBuffer], realize: set[int]) -> bool:
  """A kernel computes one reduce: realize every other reduce its inlined graph reaches (and any reached through
  a real view or inside the reduce's input). Returns whether anything changed."""
  changed = False
  for root in order:
    if id(root) not in realize or root.op is Ops.COPY: continue
    stack, seen, kept = [(root, False)], set(), False
    while stack:
      n, inside = stack.pop()
      if (id(n), inside) in seen or n.realized or (n is not root and id(n) in realize): continue
      seen.add((id(n), inside))
      if n.op is Ops.REDUCE:
        if inside or kept:
          realize.add(id(n)); changed = True
          continue
        kept, inside = True, True
      elif n.op is Ops.VIEW and not n.tracker.is_reshape_of(n.base.shape): inside = True
      stack.extend((s, inside) for s in n.srcs)
  return changed


RECOMPUTE_LIMIT = 64   # extra copies of inlined elementwise nodes one kernel may hold (a padded 3x3 conv backward in tests: 28)


def _split_recomputation(order: list[LazyBuffer], realize: set[int], topo: dict[int, int]) -> bool:
  """Realize recomputed nodes until no kernel holds more than RECOMPUTE_LIMIT extra copies of its inlined elementwise
  nodes (see the module docstring). Returns whether anything changed."""
  changed = False
  for root in reversed(order):   # a node realized here comes earlier in `order`: it is looked at as a root later
    if id(root) not in realize or root.op is Ops.COPY: continue
    while (n := _recomputed(root, realize, topo)) is not None:
      realize.add(id(n)); changed = True
  return changed


def _recomputed(root: LazyBuffer, realize: set[int], topo: dict[int, int]) -> LazyBuffer | None:
  """Once `root`'s kernel holds more than RECOMPUTE_LIMIT extra copies of inlined elementwise nodes (one copy per
  distinct chain of views a node is read through, as _lower builds them), the copied node nearest the root; else None.
  Walked breadth first from the root and stopped at the limit, so an exponential expression costs the limit to find."""
  views: dict[int, int] = {}
  copied: dict[int, LazyBuffer] = {}
  seen, extra = set(), 0
  todo = deque([(root.srcs[0] if root.op is Ops.CONTIGUOUS else root, ())])
  while todo and extra <= RECOMPUTE_LIMIT:
    n, pending = todo.popleft()
    if (id(n), pending) in seen or n.realized or (n is not root and id(n) in realize): continue
    seen.add((id(n), pending))
    if n.op is Ops.VIEW: pending = n.arg + pending
    elif n.op is Ops.REDUCE: pending = ()   # a reduce's input is indexed by the reduce's own loop
    elif n.op in ELEMENTWISE:
      views[id(n)] = views.get(id(n), 0) + 1
      if views[id(n)] > 1: extra += 1; copied[id(n)] = n
    todo.extend((s, pending) for s in n.srcs)
  if extra <= RECOMPUTE_LIMIT: return None
  return max(copied.values(), key=lambda c: topo[id(c)])


def _lower(root: LazyBuffer, realize: set[int]) -> Kernel:
  """The kernel AST for realizing `root`: loads of realized inputs, with every view folded into them."""
  bufs: list[LazyBuffer] = [root]
  offsets: list[int] = [0]
  buf_index: dict[tuple[int, int], int] = {(id(root), 0): 0}
  cache: dict[tuple, KNode] = {}
  red: list[tuple[LazyBuffer, KNode]] = []
  out_shape = _find_reduce_shape(root, realize) or root.shape

  def leaf(n: LazyBuffer) -> bool: return n is not root and (n.realized or id(n) in realize)

  def tracker(shape, pending) -> ShapeTracker:
    st = ShapeTracker.contiguous(shape)
    for op, arg in pending: st = st.apply(op, arg)
    return st

  def walk(n: LazyBuffer, pending: tuple, masked: bool = False) -> KNode:
    """`pending`: movement ops to apply to n's output; `masked`: an ancestor already zeroes padded elements."""
    if n.op is Ops.VIEW: masked = False
    key = (id(n), pending, masked)
    if key in cache: return cache[key]
    if leaf(n):
      st = tracker(n.shape, pending)
      # a positive start offset goes into the buffer address, so e.g. every batch slice shares one kernel; not with a
      # negative stride, whose offset (a padded flip's) can lie past the buffer's end
      off = st.views[0].offset if st.views[0].offset > 0 and all(s >= 0 for s in st.views[0].strides) else 0
      if off: st = ShapeTracker((dataclasses.replace(st.views[0], offset=0),) + st.views[1:])
      if (id(n), off) not in buf_index:
        buf_index[(id(n), off)] = len(bufs)
        bufs.append(n)
        offsets.append(off * n.dtype.itemsize)
      out = KNode("LOAD", n.dtype, (), (buf_index[(id(n), off)], st))
    elif n.op is Ops.VIEW:
      out = walk(n.srcs[0], n.arg + pending)
    elif n.op is Ops.CONST: out = KNode(Ops.CONST, n.dtype, (), (n.arg, tracker(n.shape, pending)))
    elif n.op is Ops.ARANGE: out = KNode(Ops.ARANGE, n.dtype, (), (*n.arg, tracker(n.shape, pending)))
    elif n.op is Ops.CONTIGUOUS: out = walk(n.srcs[0], pending)
    elif n.op is Ops.REDUCE:
      st = tracker(n.shape, pending)
      if red and red[0][0] is n and st.is_reshape_of(n.shape): out = red[0][1]   # the fused reduce again, by another path
      else:
        if not st.is_reshape_of(n.shape) or red: raise RuntimeError(f"internal: reduce {n.shape} fused through a view {st}")
        out = KNode(Ops.REDUCE, n.dtype, (walk(n.srcs[0], ()),), n.arg)
        red.append((n, out))
    else:
      out = KNode(n.op, n.dtype, tuple(walk(s, pending, masked or n.op not in ZERO_PRESERVING) for s in n.srcs), n.arg)
      if n.op not in ZERO_PRESERVING and not masked and pending:
        st = tracker(n.shape, pending)
        if any(v.valid or v.empty for v in st.views):   # padding must read 0 even though f(0) != 0 here
          inside = KNode(Ops.CONST, dtypes.bool, (), (True, st))
          out = KNode(Ops.WHERE, n.dtype, (inside, out, KNode(Ops.CONST, n.dtype, (), (0, ShapeTracker.contiguous(st.shape)))))
    cache[key] = out
    return out

  start = () if out_shape == root.shape else (("reshape", out_shape),)
  top = walk(root.srcs[0] if root.op is Ops.CONTIGUOUS else root, start)
  reduce = red[0][1] if red else None
  full = red[0][0].srcs[0].shape if red else out_shape
  return Kernel(root.device, top, tuple(out_shape), tuple(full), reduce, bufs, offsets)


def _find_reduce_shape(root: LazyBuffer, realize: set[int]) -> tuple[int, ...] | None:
  """If a reduce is fused into `root`'s kernel, its output shape (root's shape, possibly reshaped)."""
  stack, seen = [root.srcs[0] if root.op is Ops.CONTIGUOUS else root], set()
  while stack:
    n = stack.pop()
    if id(n) in seen or n.realized or (id(n) in realize and n is not root): continue
    seen.add(id(n))
    if n.op is Ops.REDUCE: return n.shape
    if n.op is Ops.VIEW and not n.tracker.is_reshape_of(n.base.shape): continue   # a reduce behind a real view is realized
    stack.extend(n.srcs)
  return None
