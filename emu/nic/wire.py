"""The wire between emulated NICs: each NIC model's port is a real UDP socket on the loopback network, and each
datagram is one Ethernet frame (emu/nic/roce.py), the way QEMU's `-netdev dgram` carries a virtual link. Vendor-neutral:
a NIC model owns a `WirePort`, gives it a receive callback, and routes frames by GID through the `GIDTable`.

- Addresses: a port binds 127.0.0.1 (or any 127.0.0.0/8 address) on port 0 (an ephemeral port: two processes never
  collide), or on the port asked for, 4791 included. Any address outside 127.0.0.0/8 is refused with ValueError, for
  binding and for sending: the model never puts a datagram on a real network.
- GIDs to endpoints: a NIC that owns a GID publishes it in $TMPDIR/hcq-emu/wire/ (one file per GID, named by its 32
  hex digits, holding "host port token"), and withdraws it when the GID goes; a sender resolves the destination GID
  there. A port holds an flock on its own file there while it is open, so a GID whose port is gone (its process died,
  even if its pid or port number was reused since) resolves to nothing: the frame is lost, as one sent to an absent
  host. Publishing a GID another live port holds raises GIDConflict (an address conflict on a real network).
- Receive: a thread per port waits (select) on the socket and a wake-up pipe, hands each datagram to the callback as a
  memoryview (valid only during the call), and runs the timers `call_later` scheduled (retransmission, RNR waits).
  Exceptions from callbacks are kept in `errors` and do not stop the port. It stops on `close()`, or by itself
  (releasing its socket) once its owner, the NIC model, was garbage-collected without closing it: it looks at every
  wake-up, at least every IDLE_S. Every wait is bounded.
- Batches: a port whose owner gives `on_batch` receives datagrams in batches (recvmmsg, emu/nic/fastpath.py) and hands
  each batch to it; `send_many` sends a batch of frames (a roce.FrameRun) with one call. Both are C (fastpath.c) when a
  host C compiler is there; without one, and while taps are installed or faults are planned, frames go one by one.
- Faults (tests): `faults` mistreats chosen datagrams this port sends, counting from 1 in the order sent: "drop" (never
  sent), "dup" (sent twice), "reorder" (held back and sent right after the next one, or after REORDER_HOLD_S if none
  follows), "corrupt" (one byte flipped: the receiver's ICRC check drops it). Set per process by the environment,
  HCQ_WIRE_FAULTS="drop:3,dup:5,reorder:7,corrupt:9", or per port: `port.faults.add("drop", port.sent + 1)`.
"""
from __future__ import annotations
import fcntl, heapq, ipaddress, itertools, os, select, socket, threading, time, weakref
from typing import Any, Callable

from emu.nic import fastpath
from emu.state import emu_dir

FAULT_ENV = "HCQ_WIRE_FAULTS"
FAULT_KINDS = ("drop", "dup", "reorder", "corrupt")
REORDER_HOLD_S = 0.05         # long enough for the next datagram to come first on a loaded host
RCVBUF = 4 << 20                 # socket buffers (limited by net.core.rmem_max / wmem_max)
MAX_DATAGRAM = 65535
IDLE_S = 0.5                     # the longest a receive thread sleeps before it checks whether it should stop
RESOLVE_TTL_S = 1.0              # how long a resolved GID is trusted before the table is read again


class GIDConflict(RuntimeError):
  """The GID is already published by another live port."""


_LOOPBACK: set[str] = set()         # hosts checked already


def check_loopback(host: str) -> str:
  """`host` if it is an address in 127.0.0.0/8, else ValueError: the wire never leaves this machine."""
  if host in _LOOPBACK: return host
  try: addr = ipaddress.ip_address(host)
  except ValueError: raise ValueError(f"{host!r} is not an IP address: the NIC model's wire binds loopback addresses only") from None
  if not (addr.version == 4 and addr in ipaddress.ip_network("127.0.0.0/8")):
    raise ValueError(f"{host} is not a loopback address (127.0.0.0/8): the NIC model's wire never leaves this machine")
  _LOOPBACK.add(host)
  return host


def table_dir() -> str:
  return emu_dir("wire")


class GIDTable:
  """GID -> UDP endpoint, shared by every process through files under $TMPDIR/hcq-emu/wire/. A port holds an flock
  on its own file (port-<host>-<port>, holding a token of its incarnation) for as long as it is open, so a GID whose
  port is gone (its process died, or its port number now belongs to another port) resolves to nothing."""
  def __init__(self, path: str | None = None):
    self.path = path or table_dir()
    self._cache: dict[bytes, tuple[float, tuple[str, int] | None]] = {}

  def _file(self, gid: bytes) -> str: return os.path.join(self.path, bytes(gid).hex())
  def _port_file(self, endpoint: tuple[str, int]) -> str: return os.path.join(self.path, f"port-{endpoint[0]}-{endpoint[1]}")

  def hold(self, endpoint: tuple[str, int]) -> tuple[int, str]:
    """Mark `endpoint` live for as long as the returned descriptor stays open: (descriptor, incarnation token)."""
    os.makedirs(self.path, exist_ok=True)
    fd = os.open(self._port_file(endpoint), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # a previous holder of this port number is gone: free
    except BlockingIOError:
      os.close(fd)
      raise RuntimeError(f"{self._port_file(endpoint)} is held by another open port: the GID table is inconsistent") from None
    token = f"{os.getpid()}-{os.urandom(8).hex()}"
    os.ftruncate(fd, 0)
    os.pwrite(fd, token.encode(), 0)
    return fd, token

  def _live_token(self, endpoint: tuple[str, int]) -> str | None:
    """The token of the port open at `endpoint`, or None if none is."""
    try: fd = os.open(self._port_file(endpoint), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError: return None
    try:
      try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None                                 # nobody holds it
      except BlockingIOError: return os.pread(fd, 64, 0).decode(errors="replace")
    finally: os.close(fd)

  def _read(self, gid: bytes) -> tuple[str, int, str] | None:
    try:
      with open(self._file(gid)) as f: host, port, token = f.read().split()
    except (OSError, ValueError): return None
    return check_loopback(host), int(port), token

  def publish(self, gid: bytes, endpoint: tuple[str, int], token: str) -> None:
    os.makedirs(self.path, exist_ok=True)
    if (cur := self._read(gid)) is not None and cur[:2] != endpoint and self._live_token(cur[:2]) == cur[2]:
      raise GIDConflict(f"GID {format_gid(gid)} is already on the wire at {cur[0]}:{cur[1]} (port {cur[2]})")
    tmp = f"{self._file(gid)}.{os.getpid()}.tmp"
    with open(tmp, "w") as f: f.write(f"{endpoint[0]} {endpoint[1]} {token}\n")
    os.replace(tmp, self._file(gid))
    self._cache.pop(bytes(gid), None)

  def withdraw(self, gid: bytes, endpoint: tuple[str, int]) -> None:
    if (cur := self._read(gid)) is not None and cur[:2] == endpoint:
      try: os.unlink(self._file(gid))
      except FileNotFoundError: pass
    self._cache.pop(bytes(gid), None)

  def resolved(self, gid: bytes) -> tuple[tuple[str, int] | None, float]:
    """What `resolve` gives for `gid` now, and until when (time.monotonic) it will give it without reading the table."""
    found = self.resolve(gid)
    return found, self._cache[bytes(gid)][0] + RESOLVE_TTL_S

  def resolve(self, gid: bytes, refresh: bool = False) -> tuple[str, int] | None:
    """The endpoint that owns `gid`, or None (no such GID, or the port that published it is gone)."""
    gid, now = bytes(gid), time.monotonic()
    if not refresh and (hit := self._cache.get(gid)) is not None and now - hit[0] < RESOLVE_TTL_S: return hit[1]
    cur = self._read(gid)
    found = cur[:2] if cur is not None and self._live_token(cur[:2]) == cur[2] else None
    self._cache[gid] = (now, found)
    return found


def format_gid(gid: bytes) -> str:
  gid = bytes(gid)
  if gid[:12] == bytes(10) + b"\xff\xff": return f"::ffff:{'.'.join(str(b) for b in gid[12:])}"
  return str(ipaddress.IPv6Address(gid))


class Faults:
  """Which datagrams a port mistreats, by their number (1 = the first this port sends)."""
  def __init__(self, spec: str = ""):
    self.plan: dict[int, str] = {}
    self.applied: list[tuple[int, str]] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
      kind, _, n = item.partition(":")
      if not n.isdigit(): raise ValueError(f"{FAULT_ENV} entry {item!r}: expected <kind>:<datagram number>, kinds {', '.join(FAULT_KINDS)}")
      self.add(kind, int(n))

  def add(self, kind: str, n: int) -> None:
    if kind not in FAULT_KINDS: raise ValueError(f"unknown wire fault {kind!r}; kinds: {', '.join(FAULT_KINDS)}")
    if n < 1: raise ValueError(f"wire fault {kind}:{n}: datagrams are numbered from 1")
    self.plan[n] = kind

  def take(self, n: int) -> str | None:
    if (kind := self.plan.pop(n, None)) is not None: self.applied.append((n, kind))
    return kind


class Timer:
  __slots__ = ("when", "fn", "cancelled")

  def __init__(self, when: float, fn: Callable[[], None]): self.when, self.fn, self.cancelled = when, fn, False
  def cancel(self) -> None: self.cancelled = True


class WirePort:
  """One NIC port on the wire: a UDP socket on a loopback address, its receive thread and its timers."""
  def __init__(self, name: str, on_frame: Callable[[memoryview, tuple[str, int]], None], host: str = "127.0.0.1",
               port: int = 0, faults: str | None = None, table: GIDTable | None = None, on_batch: Callable | None = None):
    self.name, self.table = name, table or GIDTable()
    self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
      for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF): self.sock.setsockopt(socket.SOL_SOCKET, opt, RCVBUF)
      self.sock.bind((check_loopback(host), port))
    except BaseException:
      self.sock.close()
      raise
    self.endpoint: tuple[str, int] = self.sock.getsockname()
    self._port_lock, self.token = self.table.hold(self.endpoint)
    self.faults = Faults(os.environ.get(FAULT_ENV, "") if faults is None else faults)
    self.sent = self.received = 0
    self.taps: list[Callable[[bytes], None]] = []    # each frame this port sends, before faults (tests, tracing)
    self.errors: list[str] = []
    self._held: tuple[int, list] | None = None
    self._timers: list[tuple[float, int, Timer]] = []
    self._sleeping_until = float("inf")              # until when the receive thread waits in select (-1: it is awake)
    self._seq = itertools.count()
    self._tlock = threading.Lock()
    self._txlock = threading.Lock()
    self._wake_r, self._wake_w = os.pipe()
    os.set_blocking(self._wake_w, False)
    self._stop = False
    self._on_frame = weakref.WeakMethod(on_frame) if hasattr(on_frame, "__self__") else (lambda: on_frame)
    self.rx = fastpath.Receiver() if on_batch is not None and fastpath.lib() is not None else None
    self._on_batch = weakref.WeakMethod(on_batch) if self.rx is not None else None
    self._thread = threading.Thread(target=self._run, name=f"emu-wire-{name}", daemon=True)
    self._thread.start()

  @property
  def unwatched(self) -> bool:
    """Nothing sees or mistreats the datagrams this port sends: no taps, no planned faults, none held back (so the C
    datapath may send them itself)."""
    return not self.taps and not self.faults.plan and self._held is None

  # --- sending
  def send(self, endpoint: tuple[str, int], parts: list) -> None:
    """Send one frame (a list of buffers) as one datagram to `endpoint`, applying the planned faults."""
    check_loopback(endpoint[0])
    for tap in self.taps: tap(b"".join(parts))
    with self._txlock:
      self.sent += 1
      if not self.faults.plan and self._held is None:          # (nothing planned or held back: most frames)
        self.sock.sendmsg(parts, [], 0, endpoint)
        return
      n, kind = self.sent, self.faults.take(self.sent)
      held, self._held = self._held, None
      if kind == "drop": pass
      elif kind == "reorder":
        self._held = (n, [endpoint, [bytes(x) for x in parts]])
        self.call_later(REORDER_HOLD_S, lambda: self._send_held(n))
      else:
        if kind == "corrupt":
          frame = bytearray(b"".join(parts))
          frame[len(frame) // 2] ^= 0x40
          parts = [frame]
        self.sock.sendmsg(parts, [], 0, endpoint)
        if kind == "dup": self.sock.sendmsg(parts, [], 0, endpoint)
      if held is not None: self.sock.sendmsg(held[1][1], [], 0, held[1][0])

  def send_many(self, endpoint: tuple[str, int], run) -> None:
    """Send the frames of `run` (a roce.FrameRun), each as one datagram, in one batch when nothing needs to see them
    one by one (taps, planned faults, a datagram held back to reorder). Its payload is read before anything is sent."""
    check_loopback(endpoint[0])
    done = 0
    if not self.taps and fastpath.lib() is not None:
      head, crc, bth = run.headers()
      payload = fastpath.spans(run.source, run.offset, run.n * run.mtu)
      with self._txlock:
        if not self.faults.plan and self._held is None:
          done = max(0, fastpath.send_run(self.sock.fileno(), endpoint, head, crc, bth, run.mtu, run.psn, run.n, run.k0,
                                          run.ack_every, payload))
          self.sent += done
    for frame in run.frames(done): self.send(endpoint, frame)

  def _send_held(self, n: int) -> None:
    with self._txlock:
      if self._held is not None and self._held[0] == n:
        (endpoint, parts), self._held = self._held[1], None
        self.sock.sendmsg(parts, [], 0, endpoint)

  # --- timers (run in the receive thread)
  def call_later(self, delay_s: float, fn: Callable[[], None]) -> Timer:
    t = Timer(time.monotonic() + max(delay_s, 0.0), fn)
    with self._tlock:
      heapq.heappush(self._timers, (t.when, next(self._seq), t))
      wake = t.when < self._sleeping_until        # the thread sleeps past it: wake it (else it sees the timer anyway)
    if wake: self._wake()
    return t

  def _wake(self) -> None:
    try: os.write(self._wake_w, b"\0")
    except OSError: pass                          # full (it wakes anyway) or closed (the port is gone)

  def _due(self) -> tuple[list[Timer], float]:
    """The timers due now, and how long to sleep when there are none (the thread is then taken as sleeping)."""
    now, due = time.monotonic(), []
    with self._tlock:
      while self._timers and (self._timers[0][2].cancelled or self._timers[0][0] <= now):
        t = heapq.heappop(self._timers)[2]
        if not t.cancelled: due.append(t)
      wait = min(self._timers[0][0] - now, IDLE_S) if self._timers else IDLE_S
      self._sleeping_until = -1.0 if due else now + wait
    return due, wait

  # --- receiving
  def _run(self) -> None:
    buf = bytearray(MAX_DATAGRAM)
    view = memoryview(buf)
    orphaned = False                             # the NIC model was garbage-collected without closing its port
    while not self._stop and not orphaned:
      due, wait = self._due()
      # frames that arrived while this thread was held up (a loaded host) are taken before the due timers run, so a
      # retransmission timer sees the progress they made and fires only on a real silence
      ready, _, _ = select.select([self.sock, self._wake_r], [], [], 0 if due else wait)
      with self._tlock: self._sleeping_until = -1.0
      if self._wake_r in ready: os.read(self._wake_r, 4096)
      orphaned = self._on_frame() is None
      if self.sock in ready and not orphaned: orphaned = self._receive(buf, view)
      if not orphaned:
        for t in due: self._call(t.fn)
    if orphaned: self._close_fds()

  def _receive(self, buf: bytearray, view: memoryview) -> bool:
    """The datagrams waiting, a bounded number, then timers get their turn: True if the owner is gone."""
    if self.rx is not None: return self._receive_batches()
    for _ in range(256):
      try: n, addr = self.sock.recvfrom_into(buf, MAX_DATAGRAM, socket.MSG_DONTWAIT)
      except (BlockingIOError, InterruptedError): break
      except OSError as e:
        if not self._stop: self._error(f"receive: {e}")
        break
      self.received += 1
      if (cb := self._on_frame()) is None: return True
      self._call(cb, view[:n], addr)
      del cb
    return False

  def _receive_batches(self) -> bool:
    """Up to 8 batches, then timers get their turn: True if the owner is gone."""
    for _ in range(8):
      n = self.rx.recv(self.sock.fileno())
      if n < 0 and not self._stop: self._error(f"receive: {os.strerror(-n)}")
      if n <= 0: return False
      self.received += n
      if (cb := self._on_batch()) is None: return True
      self._call(cb, self.rx, n)
      del cb
    return False

  def _call(self, fn: Callable[..., None], *args: Any) -> None:
    try: fn(*args)
    except Exception as e: self._error(f"{type(e).__name__}: {e}")

  def _error(self, msg: str) -> None:
    self.errors.append(msg)
    del self.errors[:-100]

  def close(self) -> None:
    if self.sock.fileno() < 0: return                 # closed already
    self._stop = True
    self._wake()
    if self._thread.is_alive() and threading.current_thread() is not self._thread: self._thread.join(timeout=5)
    self._close_fds()

  def _close_fds(self) -> None:
    with self._tlock:
      if self.sock.fileno() < 0: return
      self.sock.close()
      for fd in (self._wake_r, self._wake_w, self._port_lock): os.close(fd)
