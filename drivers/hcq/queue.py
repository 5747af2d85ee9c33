"""Queue: the builder of one command stream. Vendors encode each command (PM4, SDMA, GPFIFO methods,
CP packets, or a CPU worker's command list) in the underscore methods; this base adds argument checks
and profiling, and keeps the public calls chainable. Queues of hardware rings build on drivers.hcq.ring.RingQueue, which
holds their words and what the commands point at, submits and seals.

Launch encodings are cached here, per program: what a launch's commands depend on besides its arguments and
grid (the program, the workgroup size, what `_launch_state` names) is encoded once by `_encode_launch`, and
`encoded_launch` hands the vendor that encoding to copy and patch for each launch.

Sealing (what Graph replays): a queue built with `patch=` keys on its commands can be `seal()`ed into a Sealed stream,
its commands encoded once as constant words plus a table of patch points: where each key's signal/wait value, copy
address or kernel-argument address lies. A vendor encoder reports each such field with `_patch_point`, and `_seal`
hands the words to a Sealed of its own kind (drivers.hcq.ring.RingSealed for hardware rings); a replay patches the
values and submits the stream as it is."""
from __future__ import annotations
import functools, weakref
from typing import TYPE_CHECKING, Any, ClassVar, Hashable
from drivers.hcq import profile
if TYPE_CHECKING:
  from drivers.hcq.device import Device
  from drivers.hcq.buffer import Buffer
  from drivers.hcq.program import Program, KernArgs
  from drivers.hcq.signal import Signal


def dims3(v: tuple[int, ...] | list[int] | int, what: str) -> tuple[int, int, int]:
  """A 1- to 3-dimensional size as 3 dims (checked once per distinct size: every launch normalizes two of them)."""
  t = v if isinstance(v, (int, tuple)) else tuple(v)
  try: return _dims3(t, what)
  except TypeError: raise ValueError(f"{what} must be 1 to 3 positive ints, got {v!r}") from None   # unhashable parts


@functools.lru_cache(maxsize=4096)
def _dims3(v: tuple[int, ...] | int, what: str) -> tuple[int, int, int]:
  t = (v,) if isinstance(v, int) else v
  if not 1 <= len(t) <= 3 or any(not isinstance(x, int) or x < 1 for x in t):
    raise ValueError(f"{what} must be 1 to 3 positive ints, got {v!r}")
  return t + (1,) * (3 - len(t))  # type: ignore[return-value]


class Queue:
  kind = "compute"   # or "copy"
  posts_rdma = False # the vendor's queue can post RDMA requests itself (rdma_write: _rdma)
  _launches: ClassVar[weakref.WeakKeyDictionary[Program, dict]] = weakref.WeakKeyDictionary()   # program -> key -> encoding

  def __init__(self, device: Device):
    self.device = device
    self.submitted = False
    self.posts = False         # it holds rdma_write commands: each took its own send-queue slot, so it runs once
    self.patches: list[tuple[tuple[Hashable, str], Any, int, int]] = []   # ((key, role), where, bits, addend)
    self._patch_key: Hashable | None = None

  # --- vendor encoders
  def _exec(self, prg: Program, args: KernArgs, global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
    raise NotImplementedError(f"{type(self).__name__} ({self.kind} queue) cannot run kernels")
  def _copy(self, dest_va: int, src_va: int, size: int) -> None:
    raise NotImplementedError(f"{type(self).__name__} ({self.kind} queue) cannot copy")
  def _signal(self, sig: Signal, value: int) -> None: raise NotImplementedError
  def _wait(self, sig: Signal, value: int) -> None: raise NotImplementedError
  def _timestamp(self, sig: Signal) -> None: raise NotImplementedError
  def _memory_barrier(self) -> None: pass   # queues with coherent memory need nothing
  def _hold(self, obj: Any) -> None:
    """Keep `obj` (the kernel arguments or signal the command just encoded points at) alive until the device is done
    with the command (drivers.hcq.ring.RingQueue); commands that hold their objects themselves need nothing."""
  def _rdma(self, cmds: Any) -> None:
    """Encode a device-posted RDMA request (drivers.rdma.device_post.DeviceCommands): once earlier commands are done and
    their writes visible to other devices, the memory writes in order, the one doorbell store, then a wait for the
    completion word."""
    raise NotImplementedError
  def _submit(self) -> None: raise NotImplementedError
  def _encode_launch(self, prg: Program, local_size: tuple[int, int, int]) -> Any:
    """The commands of a launch of `prg` with this workgroup size, with holes for arguments and grid (for
    encoded_launch). The encoding must not reference `prg` itself: the cache holds programs weakly."""
    raise NotImplementedError(f"{type(self).__name__} does not cache launch encodings")
  def _launch_state(self) -> Hashable:
    """What else a launch encoding depends on (e.g. a scratch address that moves when scratch grows)."""
    return None
  def _seal(self) -> Sealed:
    """The commands so far as a Sealed stream carrying self.patches (see seal)."""
    raise NotImplementedError(f"{type(self).__name__} ({self.kind} queue) cannot seal its commands")

  def _patch_point(self, role: str, where: Any, bits: int = 64, addend: int = 0) -> None:
    """Called by vendor encoders for each field of the command being encoded that a replay may change: `role` is
    "value" (a signal's or wait's value), "dest"/"src" (copy addresses) or "args" (the kernel-argument address);
    `where` says where the field lies in the sealed stream (for words: the index of its low dword, the high one next, or
    (index, shift) pairs for a value split across dwords apart: drivers.hcq.ring.RingSealed._put),
    `bits` its width, `addend` what the field holds beyond the patched value (e.g. the offset of one copy chunk)."""
    if self._patch_key is not None: self.patches.append(((self._patch_key, role), where, bits, addend))

  def encoded_launch(self, prg: Program, local_size: tuple[int, int, int]) -> Any:
    """`_encode_launch(prg, local_size)`, made once per program, workgroup size and launch state."""
    if (per_prg := Queue._launches.get(prg)) is None: per_prg = Queue._launches.setdefault(prg, {})
    key = (type(self), local_size, self._launch_state())
    if (enc := per_prg.get(key)) is None: enc = per_prg[key] = self._encode_launch(prg, local_size)
    return enc

  # --- the contract (`patch`: a key under which seal() keeps the command's patch points; see Sealed.patch)
  def exec(self, prg: Program, args: KernArgs, global_size=(1, 1, 1), local_size=(1, 1, 1), patch: Hashable | None = None) -> Queue:
    """Launch `prg`: `global_size` workgroups of `local_size` threads each (patch role "args": args.va)."""
    gs, ls = dims3(global_size, "global_size"), dims3(local_size, "local_size")
    if prg.device is not self.device: raise ValueError(f"program {prg.name} belongs to {prg.device.name}, not {self.device.name}")
    self._patch_key = patch
    with self._profiled(prg.name):
      self._exec(prg, args, gs, ls)
      self._hold(args)
    self._patch_key = None
    return self

  def copy(self, dest: Buffer, src: Buffer, size: int | None = None, dest_offset: int = 0, src_offset: int = 0,
           patch: Hashable | None = None) -> Queue:
    """Copy `size` bytes (default: all of src) from src+src_offset to dest+dest_offset (patch roles "dest", "src": the
    buffers' addresses; the offsets stay with the fields)."""
    size = src.size - src_offset if size is None else size
    if size < 0 or src_offset < 0 or dest_offset < 0 or src_offset + size > src.size or dest_offset + size > dest.size:
      raise ValueError(f"copy of {size} bytes (src offset {src_offset} of {src.size}, dest offset {dest_offset} of {dest.size}) "
                       "is out of bounds")
    for b in (dest, src):
      if b.device is not self.device: raise ValueError(f"buffer on {b.device.name} copied by a {self.device.name} queue")
    if size:
      self._patch_key, first = patch, len(self.patches)
      with self._profiled(f"copy {size} B"): self._copy(dest.va + dest_offset, src.va + src_offset, size)
      self._patch_key = None
      self.patches[first:] = [(k, w, b, a + (dest_offset if k[1] == "dest" else src_offset)) for k, w, b, a in self.patches[first:]]
    return self

  def rdma_write(self, qp: Any, local: Any, remote: Any, size: int | None = None, local_offset: int = 0,
                 remote_offset: int = 0, wr_id: int = 0) -> Queue:
    """Post an RDMA WRITE on `qp` (an RTS queue pair of drivers.rdma) from this queue itself: `size` bytes (default: the
    rest of the MR) from `local` (this device's Buffer registered on the QP's PD, or the MR) + local_offset into the
    peer's MR `remote` (an MR or a RemoteMR) at remote_offset; its completion carries `wr_id`. Once the commands before
    it are done (a kernel's output goes out as soon as the kernel ends), the queue writes the WQE into the NIC's send
    queue, rings its doorbell through the NIC's BAR, and waits until the completion arrived; commands after it (a
    signal) follow that. The host polls the completion as for any request (qp.send_cq.wait, which raises for an error
    completion). The request takes its send-queue slot here: submit the queue (it cannot be sealed for replay), as
    until it runs the QP takes no other request. NotImplementedError where this device cannot post RDMA itself (post
    from the host with qp.post_send after waiting for the queue's signal)."""
    if not self.posts_rdma:
      raise NotImplementedError(f"{type(self).__name__} ({self.device.name} {self.kind} queue) cannot post RDMA requests "
                                "itself: post from the host (qp.post_send) once a signal says its work is done")
    cmds = qp.device_write(self.device, local, remote, size, local_offset, remote_offset, wr_id)
    with self._profiled(f"rdma_write {cmds.length} B"): self._rdma(cmds)
    self.posts = True
    return self

  def signal(self, sig: Signal, value: int, patch: Hashable | None = None) -> Queue:
    """Set `sig` to `value` (and its timestamp) once all earlier commands of this queue are done (patch role "value")."""
    sig.last_queue = f"{self.kind}"
    self._patch_key = patch
    self._signal(sig, value)
    self._hold(sig)
    self._patch_key = None
    return self

  def wait(self, sig: Signal, value: int, patch: Hashable | None = None) -> Queue:
    """Stall this queue until sig >= value (patch role "value")."""
    self._patch_key = patch
    self._wait(sig, value)
    self._hold(sig)
    self._patch_key = None
    return self

  def timestamp(self, sig: Signal) -> Queue:
    """Write the device clock into sig's timestamp once earlier commands are done."""
    self._timestamp(sig)
    self._hold(sig)
    return self

  def memory_barrier(self) -> Queue:
    """Make earlier writes visible to later readers on this device and to the host (cache flush/invalidate)."""
    self._memory_barrier()
    return self

  def submit(self, device: Device | None = None) -> Queue:
    if device is not None and device is not self.device:
      raise ValueError(f"queue built for {self.device.name} submitted to {device.name}")
    self.device.check_faults()
    self._submit()
    self.submitted = True
    return self

  def seal(self) -> Sealed:
    """This queue's commands, encoded once, for submitting many times (Graph replay): constant words and the patch
    points of every command given a `patch` key. The queue itself is not submitted."""
    if self.posts:
      raise ValueError(f"a {self.device.name} queue with rdma_write commands cannot be sealed for replay: each request "
                       "takes its own send-queue slot and completion, so build a new queue for each")
    sealed = self._seal()
    sealed.launch_state, sealed._state_of = self._launch_state(), self
    self.submitted = True
    return sealed

  # --- profiling: begin/end timestamps around each command
  def _profiled(self, name: str):
    return _Profiled(self, name) if profile.enabled() else _NOOP


class Sealed:
  """A queue's command stream encoded once: constant words plus patch points, keyed by (patch key, role).
  A vendor supplies `_put` (write one field) and `submit` (hand the whole stream to the device: for a hardware
  ring one copy and one doorbell)."""
  launch_state: Hashable = None
  _state_of: Queue   # the queue it was sealed from

  def __init__(self, device: Device, kind: str, patches: list[tuple[tuple[Hashable, str], Any, int, int]], keep: list):
    self.device, self.kind, self.keep = device, kind, keep
    self.points: dict[tuple[Hashable, str], list[tuple[Any, int, int]]] = {}
    for key, where, bits, addend in patches: self.points.setdefault(key, []).append((where, bits, addend))

  def patch(self, key: Hashable, role: str, value: int) -> None:
    """Set every field recorded under (key, role) to value (+ its addend)."""
    try: points = self.points[(key, role)]
    except KeyError: raise KeyError(f"the sealed {self.kind} stream of {self.device.name} has no patch point {role!r} of {key!r}") from None
    for where, bits, addend in points:
      if not 0 <= (v := value + addend) < 1 << bits:
        raise ValueError(f"{v:#x} does not fit the {bits}-bit {role} field of {key!r} in the sealed {self.kind} stream")
      self._put(where, bits, v)

  @property
  def stale(self) -> bool:
    """Whether what the encoding depends on changed since sealing (see Queue._launch_state): seal again."""
    return self._state_of._launch_state() != self.launch_state

  def _put(self, where: Any, bits: int, value: int) -> None: raise NotImplementedError
  def submit(self) -> None: raise NotImplementedError


class _Noop:
  def __enter__(self): return self
  def __exit__(self, *a): return False


_NOOP = _Noop()


class _Profiled:
  def __init__(self, q: Queue, name: str): self.q, self.name = q, name
  def __enter__(self):
    self.begin = self.q.device.new_signal(name="profile")
    self.q.timestamp(self.begin)
  def __exit__(self, *exc):
    if exc[0] is not None: return False
    end = self.q.device.new_signal(name="profile")
    self.q.timestamp(end)
    profile.record(self.q.device.name, self.q.kind, self.name, self.begin, end)
    return False
