"""Views: how a kernel index maps to a memory offset, and when an element is valid (padding reads 0).

A View is an affine map from an index over `shape` to memory: offset + sum(strides * idx). Validity is
a list of affine constraints `lo <= const + sum(coefs * idx) < hi`; padding adds one, and because
shrink/flip/windowing keep every form affine, they all compose exactly in one view. Only a reshape that
merges dims whose forms do not line up needs a second view (the outer one then yields a flat index into
the inner view's shape, decoded with division and modulo).
"""
from __future__ import annotations
from dataclasses import dataclass
from functools import lru_cache
from math import prod

Constraint = tuple[tuple[int, ...], int, int, int]   # (coefs, const, lo, hi)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  n = max(len(s) for s in shapes)
  padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
  out = []
  for dims in zip(*padded):
    m = max(dims) if 0 not in dims else 0
    if any(d not in (1, m) for d in dims):
      raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together")
    out.append(m)
  return tuple(out)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
  out, acc = [], 1
  for n in reversed(shape):
    out.append(acc if n != 1 else 0)
    acc *= n
  return tuple(reversed(out))


def form_range(coefs: tuple[int, ...], const: int, shape: tuple[int, ...]) -> tuple[int, int]:
  """Smallest and largest value of const + coefs.idx over the index box."""
  lo = const + sum(min(0, c * (n - 1)) for c, n in zip(coefs, shape))
  hi = const + sum(max(0, c * (n - 1)) for c, n in zip(coefs, shape))
  return lo, hi


@dataclass(frozen=True)
class View:
  shape: tuple[int, ...]
  strides: tuple[int, ...]
  offset: int = 0
  valid: tuple[Constraint, ...] = ()
  empty: bool = False      # no index is valid: every element reads as 0

  @staticmethod
  def contiguous(shape: tuple[int, ...]) -> View: return View(tuple(shape), contiguous_strides(tuple(shape)))

  @property
  def is_contiguous(self) -> bool:
    return not self.valid and not self.empty and self.offset == 0 and self.strides == contiguous_strides(self.shape)

  def _remap(self, shape: tuple[int, ...], fn, extra: tuple[Constraint, ...] = ()) -> View:
    """Apply fn((coefs, const)) -> (coefs, const) to the memory form and every constraint, then simplify."""
    strides, offset = fn((self.strides, self.offset))
    valid = [(*fn((c, k)), lo, hi) for c, k, lo, hi in self.valid] + list(extra)
    return View._make(shape, strides, offset, valid, self.empty)

  @staticmethod
  def _make(shape, strides, offset, valid, empty) -> View:
    shape = tuple(shape)
    z = lambda c: tuple(0 if n == 1 else x for x, n in zip(c, shape))   # a size-1 dim's index is always 0
    strides, keep = z(strides), dict[tuple, tuple]()
    if 0 not in shape:
      for c, k, lo, hi in valid:
        c = z(c)
        mn, mx = form_range(c, k, shape)
        if mx < lo or mn >= hi: empty = True
        if mn >= lo and mx < hi: continue
        plo, phi = keep.get((c, k), (lo, hi))
        keep[(c, k)] = (max(lo, plo), min(hi, phi))
    if empty: return View(shape, (0,) * len(shape), 0, (), True)
    return View(shape, strides, offset, tuple((c, k, lo, hi) for (c, k), (lo, hi) in keep.items()))

  def permute(self, order: tuple[int, ...]) -> View:
    return self._remap(tuple(self.shape[i] for i in order), lambda f: (tuple(f[0][i] for i in order), f[1]))

  def expand(self, shape: tuple[int, ...]) -> View:
    return self._remap(shape, lambda f: f)   # expanded dims had size 1, so their coefs are already 0

  def pad(self, pads: tuple[tuple[int, int], ...]) -> View:
    shape = tuple(n + b + a for n, (b, a) in zip(self.shape, pads))
    shift = lambda f: (f[0], f[1] - sum(c * b for c, (b, _) in zip(f[0], pads)))
    unit = lambda d: tuple(int(i == d) for i in range(len(shape)))
    extra = tuple((unit(d), 0, b, b + n) for d, (n, (b, a)) in enumerate(zip(self.shape, pads)) if b or a)
    return self._remap(shape, shift, extra)

  def shrink(self, bounds: tuple[tuple[int, int], ...]) -> View:
    shape = tuple(e - s for s, e in bounds)
    return self._remap(shape, lambda f: (f[0], f[1] + sum(c * s for c, (s, _) in zip(f[0], bounds))))

  def flip(self, axes: tuple[int, ...]) -> View:
    def fn(f):
      return (tuple(-c if i in axes else c for i, c in enumerate(f[0])),
              f[1] + sum(c * (self.shape[i] - 1) for i, c in enumerate(f[0]) if i in axes))
    return self._remap(self.shape, fn)

  def window(self, axis: int, k: int, stride: int, dilation: int) -> View:
    """Split dim `axis` (size n) into (o, k) with old index = o*stride + k*dilation (sliding windows)."""
    n = self.shape[axis]
    o = (n - dilation * (k - 1) - 1) // stride + 1
    shape = self.shape[:axis] + (o, k) + self.shape[axis + 1:]
    fn = lambda f: (f[0][:axis] + (f[0][axis] * stride, f[0][axis] * dilation) + f[0][axis + 1:], f[1])
    return self._remap(shape, fn)

  def reshape(self, shape: tuple[int, ...]) -> View | None:
    """The same elements in a new shape, or None if that needs a second view."""
    shape = tuple(shape)
    if 0 in self.shape or 0 in shape or self.empty:
      return View(shape, (0,) * len(shape), 0, (), True) if self.empty else View.contiguous(shape)
    forms = [self.strides] + [c for c, *_ in self.valid]
    old = [d for d, n in enumerate(self.shape) if n != 1]
    new = [d for d, n in enumerate(shape) if n != 1]
    out = [[0] * len(shape) for _ in forms]
    oi = nj = 0
    while oi < len(old):
      og, ng = [old[oi]], [new[nj]]
      po, pn = self.shape[old[oi]], shape[new[nj]]
      oi, nj = oi + 1, nj + 1
      while po != pn:
        if po < pn: og.append(old[oi]); po *= self.shape[old[oi]]; oi += 1
        else: ng.append(new[nj]); pn *= shape[new[nj]]; nj += 1
      for f, o in zip(forms, out):
        if any(f[a] != f[b] * self.shape[b] for a, b in zip(og, og[1:])): return None   # dims do not merge
        acc = f[og[-1]]
        for d in reversed(ng):
          o[d] = acc
          acc *= shape[d]
    return View._make(shape, tuple(out[0]), self.offset,
                      [(tuple(o), k, lo, hi) for o, (_, k, lo, hi) in zip(out[1:], self.valid)], False)


@dataclass(frozen=True)
class ShapeTracker:
  """A stack of views; views[-1] is indexed by the kernel, each view's memory form indexes the one below."""
  views: tuple[View, ...]

  @staticmethod
  def contiguous(shape: tuple[int, ...]) -> ShapeTracker: return ShapeTracker((View.contiguous(tuple(shape)),))

  @property
  def shape(self) -> tuple[int, ...]: return self.views[-1].shape
  @property
  def size(self) -> int: return prod(self.shape)
  @property
  def is_contiguous(self) -> bool: return len(self.views) == 1 and self.views[0].is_contiguous

  def is_reshape_of(self, shape: tuple[int, ...]) -> bool:
    """Reads every element of a row-major `shape` in order (a plain reshape of it)."""
    return self.is_contiguous and self.size == prod(shape)

  def _with(self, v: View) -> ShapeTracker:
    views = self.views[:-1] + (v,)
    if len(views) > 1 and views[0].is_contiguous: views = views[1:]   # a plain row-major base adds nothing
    return ShapeTracker(views)

  def reshape(self, shape: tuple[int, ...], strict: bool = False) -> ShapeTracker | None:
    if (v := self.views[-1].reshape(shape)) is not None: return self._with(v)
    return None if strict else ShapeTracker(self.views + (View.contiguous(tuple(shape)),))

  def permute(self, order): return self._with(self.views[-1].permute(tuple(order)))
  def expand(self, shape): return self._with(self.views[-1].expand(tuple(shape)))
  def pad(self, pads): return self._with(self.views[-1].pad(tuple(pads)))
  def shrink(self, bounds): return self._with(self.views[-1].shrink(tuple(bounds)))
  def flip(self, axes): return self._with(self.views[-1].flip(tuple(axes)))
  def window(self, axis, k, stride, dilation): return self._with(self.views[-1].window(axis, k, stride, dilation))

  def apply(self, op: str, arg) -> ShapeTracker:
    try: hash(arg)
    except TypeError: return _apply.__wrapped__(self, op, arg)   # an argument in lists: not memoized
    return _apply(self, op, arg)


@lru_cache(maxsize=4096)
def _apply(st: ShapeTracker, op: str, arg) -> ShapeTracker:
  """One movement op on a tracker; memoized (trackers are immutable), as the same views recur in every step of a loop."""
  return getattr(st, op)(*arg) if op == "window" else getattr(st, op)(arg)
