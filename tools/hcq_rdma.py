"""hcq-rdma: RDMA WRITE between queue pairs of hcq's NICs (real or emulated), measured like perftest's ib_write_bw.

  hcq-rdma loopback --nic NIC --pci BUS [--ip IP] [-s N | -a] [-n K] [--report_gbits] [--json]
      two QPs on one NIC through its loopback (bnxt: PHY loopback; mlx5: the NIC's internal loopback): WRITE a random
      buffer K times, verify it, loopback off again
  hcq-rdma connect --nic NIC --pci BUS [--ip IP] (--remote USER@HOST --remote-pci BUS | --local --remote-pci BUS |
                   --remote-cmd CMD) [--remote-nic NIC] [--remote-ip IP] [-s N | -a] [-n K] [--read] [--report_gbits] [--json]
      this NIC to another one whose side `hcq-rdma serve` runs: over ssh (BatchMode), as a local subprocess (emulated
      NICs on one machine), or as any command whose stdin/stdout carry the control channel
  hcq-rdma serve --nic NIC --pci BUS [--ip IP] [--max-size N]
      the other side: the control channel on stdin/stdout, messages on stderr; its hello advertises --max-size (1G)

Each size is one row of perftest's ib_write_bw table: bandwidth in MB/sec of 2^20 bytes (Gb/sec of 10^9 bits with
--report_gbits), the message rate in Mpps; -a runs every power of two from 2 B to 8 MiB, as `ib_write_bw -a` does.

The control channel is JSON lines (drivers/rdma/exchange.py checks every field): the server says hello (its QPN,
PSN, GID, MAC, MTU and the largest MR it registers), the client answers with its own and the largest size it writes,
the server registers that MR and says where it is (ready); for each size the client WRITEs into it (sending progress
while it does), asks the server to verify that many bytes by CRC-32 and optionally READs them back; then it says bye.
A malformed, hostile or silent peer ends the tool within --timeout with one line on stderr and exit status 1; the
client never writes outside the MR the peer registered for it.
"""
from __future__ import annotations
import argparse, json, os, re, secrets, select, shlex, signal, subprocess, sys, time, zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from drivers.rdma import (Access, Context, Endpoint, ProtocolError, RemoteMR, SendWR, VerbsError, WROpcode, open_context,
                          rdma_vendors)
from drivers.rdma.exchange import BOOL, MAX_LINE, TEXT, U32, check, choice, decode, size as size_field
from drivers.system.pci import MOCK_BUS
from tools.cli import add_version, run

VERSION = 2                        # 2: a verify per size (-a), of any size up to the registered one
MAX_SIZE = 1 << 30                 # the largest buffer a transfer moves (a WR is at most 2^31 - 1 bytes)
ALL_SIZES = [1 << k for k in range(1, 24)]   # -a: 2 B ... 8 MiB, as perftest's -a
UNITS = {False: ("MB/sec", 1 << 20), True: ("Gb/sec", 10**9 / 8)}   # perftest: MB = 2^20 bytes; --report_gbits: 10^9 bits
DEPTH, MAX_DEPTH = 16, 64          # WRITEs in flight: by default, at most (the send queue and CQ are sized for it)
SLOWEST_RATE = 4 << 20             # bytes/s: the slowest an emulated NIC moves one big message here (1 GiB: ~4 min)
PROGRESS_S = 1.0                   # the client reports progress this often; the bar appears after this long
DEFAULT_IP, DEFAULT_REMOTE_IP = "10.0.0.1", "10.0.0.2"

HELLO_SERVER = {**Endpoint.FIELDS, "version": choice((VERSION,), f"protocol version {VERSION}"),
                "max_size": size_field(1, MAX_SIZE)}
HELLO_CLIENT = {**Endpoint.FIELDS, "version": choice((VERSION,), f"protocol version {VERSION}"),
                "size": size_field(1, MAX_SIZE), "read": BOOL}
READY, PROGRESS, VERIFIED = RemoteMR.FIELDS, {"bytes": size_field(0, 1 << 62)}, {"crc32": U32}
VERIFY = {"crc32": U32, "size": size_field(1, MAX_SIZE)}


class ToolError(Exception):
  """Ends the tool with this one-line message and exit status 1."""


class RemoteError(ToolError):
  """The other side reported a failure."""


# --- the control channel
class Channel:
  """JSON lines over a pair of pipes; every wait ends after `timeout` seconds without a message."""
  def __init__(self, rfd: int, wfile, peer: str, timeout: float):
    self.rfd, self.wfile, self.peer, self.timeout = rfd, wfile, peer, timeout
    self.buf = b""

  def send(self, kind: str, **fields) -> None:
    try:
      self.wfile.write((json.dumps({"type": kind, **fields}) + "\n").encode())
      self.wfile.flush()
    except (BrokenPipeError, ValueError, OSError):
      raise ToolError(f"{self.peer} closed the control channel (sending {kind!r})") from None

  def _line(self, waiting: str) -> bytes:
    deadline = time.monotonic() + self.timeout
    while b"\n" not in self.buf:
      if len(self.buf) > MAX_LINE: raise ProtocolError(f"{self.peer} sent more than {MAX_LINE} bytes without a newline")
      left = deadline - time.monotonic()
      if left <= 0 or not select.select([self.rfd], [], [], left)[0]:
        raise ToolError(f"{self.peer} sent nothing for {self.timeout:g} s while {waiting}")
      chunk = os.read(self.rfd, 65536)
      if not chunk: raise ToolError(f"{self.peer} closed the control channel while {waiting}")
      self.buf += chunk
    line, self.buf = self.buf.split(b"\n", 1)
    return line

  def recv(self, kind: str, fields: dict[str, Callable[[Any], Any]], waiting: str,
           also: dict[str, dict] | None = None) -> tuple[str, dict]:
    """The next message, which must be `kind` (or one of `also`); an "error" message raises RemoteError."""
    msg = decode(self._line(waiting), self.peer)
    if msg["type"] == "error": raise RemoteError(f"{self.peer} failed: {check(msg, {'message': TEXT}, self.peer)['message']}")
    allowed = {kind: fields, **(also or {})}
    if msg["type"] not in allowed:
      raise ProtocolError(f"{self.peer} sent a {msg['type']!r} message while {waiting} (expected {' or '.join(map(repr, allowed))})")
    return msg["type"], check(msg, allowed[msg["type"]], self.peer)


# --- the transfer
@dataclass
class Result:
  size: int
  iters: int
  seconds: float
  lat_us: list[float]
  peak_s: float                      # the shortest time `depth` messages took to complete (the peak rate's window)
  depth: int = DEPTH
  verified: bool = False
  extra: dict = field(default_factory=dict)

  @property
  def bytes(self) -> int: return self.size * self.iters
  @property
  def bytes_per_s(self) -> float: return self.bytes / self.seconds
  @property
  def peak_bytes_per_s(self) -> float: return self.size * min(self.depth, self.iters) / self.peak_s
  @property
  def mpps(self) -> float: return self.iters / self.seconds / 1e6

  def percentile(self, p: float) -> float:
    s = sorted(self.lat_us)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]

  def json(self, gbits: bool) -> dict:
    unit, scale = ("gbits_per_s", 1e9 / 8) if gbits else ("gbytes_per_s", 1e9)
    return {"verified": self.verified, "bytes": self.bytes, "size": self.size, "iters": self.iters, "seconds": round(self.seconds, 6),
            unit: round(self.bytes_per_s / scale, 6), f"{unit}_peak": round(self.peak_bytes_per_s / scale, 6),
            "msg_rate_mpps": round(self.mpps, 6), "lat_us": {"p50": round(self.percentile(50), 3), "p99": round(self.percentile(99), 3)},
            **self.extra}


class Progress:
  """A rich progress bar on stderr for transfers longer than PROGRESS_S (created only then), and the heartbeat."""
  def __init__(self, total: int, show: bool, beat: Callable[[int], None] | None):
    self.total, self.show, self.beat, self.bar = total, show, beat, None
    self.start = self.last = time.monotonic()

  def update(self, done: int) -> None:
    now = time.monotonic()
    if now - self.last < PROGRESS_S: return
    self.last = now
    if self.beat is not None: self.beat(done)
    if not self.show: return
    if self.bar is None:
      from rich.console import Console
      from rich.progress import BarColumn, DownloadColumn, Progress as Bar, TransferSpeedColumn, TimeRemainingColumn
      self.bar = Bar("RDMA WRITE", BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(), TimeRemainingColumn(),
                     console=Console(stderr=True), transient=True)
      self.task = self.bar.add_task("write", total=self.total)
      self.bar.start()
    self.bar.update(self.task, completed=done)

  def close(self) -> None:
    if self.bar is not None: self.bar.stop()


def patience(timeout: float, size: int) -> float:
  """How long to wait for one completion of a `size`-byte message: `timeout` without progress, plus the time the message
  itself takes at SLOWEST_RATE (one message is one completion: its bytes on the wire are progress the CQ cannot show)."""
  return timeout + size / SLOWEST_RATE


def write_loop(qp, cq, local, remote: RemoteMR, size: int, iters: int, depth: int, timeout: float, progress: Progress) -> Result:
  """`iters` RDMA WRITEs of `size` bytes from the start of `local` to the start of `remote`, `depth` in flight."""
  if not remote.contains(0, size): raise ToolError(f"the remote MR holds {remote.size} bytes; a {size}-byte write does not fit")
  posted_at: dict[int, float] = {}
  lat: list[float] = []
  start = time.monotonic()
  ends = [start]
  posted = done = 0
  try:
    while done < iters:
      while posted < iters and posted - done < depth:
        posted_at[posted] = time.monotonic()
        qp.post_send(SendWR(posted, WROpcode.RDMA_WRITE, [local.sge(0, size)], remote_addr=remote.addr, rkey=remote.rkey))
        posted += 1
      for wc in cq.wait(1, patience(timeout, size)):
        ends.append(time.monotonic())
        lat.append((ends[-1] - posted_at.pop(wc.wr_id)) * 1e6)
        done += 1
      progress.update(done * size)
  finally: progress.close()
  k = min(depth, iters)
  peak = min(b - a for a, b in zip(ends, ends[k:]))
  return Result(size, iters, ends[-1] - start, lat, max(peak, 1e-9), k)


def read_back(qp, cq, local, remote: RemoteMR, size: int, timeout: float) -> None:
  qp.post_send(SendWR(1 << 40, WROpcode.RDMA_READ, [local.sge(0, size)], remote_addr=remote.addr, rkey=remote.rkey))
  cq.wait(1, patience(timeout, size))


def random_fill(view: memoryview) -> None: view[:] = np.random.default_rng().bytes(len(view))


# --- output
RULE = "-" * 87


class Report:
  """perftest's table on stdout, a row as each size ends (with --json: one object a line, one per size)."""
  def __init__(self, args: argparse.Namespace):
    self.json, self.gbits, self.depth = args.json, args.report_gbits, args.depth
    self.rows: list[Result] = []

  def start(self, title: str) -> None:
    if self.json: return
    unit = UNITS[self.gbits][0]
    print(RULE)
    print(f" RDMA_Write BW Test ({title})")
    print(f" Number of qps : 1   Transport type : IB (RoCEv2)   Connection type : RC   TX depth : {self.depth}")
    print(RULE)
    print(f" {'#bytes':<11}{'#iterations':<14}{f'BW peak[{unit}]':<19}{f'BW average[{unit}]':<22}{'MsgRate[Mpps]'}", flush=True)

  def row(self, res: Result) -> None:
    self.rows.append(res)
    scale = UNITS[self.gbits][1]
    if self.json: print(json.dumps(res.json(self.gbits)), flush=True)
    else: print(f" {res.size:<11}{res.iters:<14}{res.peak_bytes_per_s / scale:<19.2f}{res.bytes_per_s / scale:<22.2f}"
                f"{res.mpps:.6f}", flush=True)

  def end(self) -> int:
    """The exit status: 0 when every size's data was verified."""
    bad = [str(r.size) for r in self.rows if not r.verified]
    if not self.json:
      print(RULE)
      verdict = f"NOT verified (sizes {', '.join(bad)})" if bad else "verified"
      if len(self.rows) == 1:       # one size: its latency and what the other side said
        res = self.rows[0]
        print(f" latency [usec]: p50 {res.percentile(50):.2f}   p99 {res.percentile(99):.2f}")
        verdict += "".join(f"   {k}: {v}" for k, v in res.extra.items())
      print(f" data {verdict}")
    return 1 if bad else 0


def sizes(args: argparse.Namespace) -> list[int]: return ALL_SIZES if args.all else [args.size]


# --- commands
def cmd_loopback(args: argparse.Namespace) -> int:
  ctx = open_context(args.nic, args.pci, ip=args.ip)
  out = Report(args)
  try:
    ctx.set_loopback(True)
    try: _loopback(ctx, args, out)
    finally: ctx.set_loopback(False)
  finally: ctx.close()
  return out.end()


def _loopback(ctx: Context, args: argparse.Namespace, out: Report) -> None:
  pd, cq = ctx.alloc_pd(), ctx.create_cq(2 * MAX_DEPTH)
  tx, rx = pd.create_qp(cq), pd.create_qp(cq)
  tx_psn, rx_psn = secrets.randbits(24), secrets.randbits(24)
  tx.connect(rx.endpoint(rx_psn), tx_psn)
  rx.connect(tx.endpoint(tx_psn), rx_psn)
  top = max(sizes(args))
  src = pd.reg_mr(ctx.alloc(top), Access.LOCAL_WRITE, top)
  dst = pd.reg_mr(ctx.alloc(top), Access.LOCAL_WRITE | Access.REMOTE_WRITE, top)
  random_fill(src.view)
  out.start(f"loopback on {ctx.name}")
  for size in sizes(args):
    res = write_loop(tx, cq, src, RemoteMR(dst.addr, dst.rkey, dst.length), size, args.iters, args.depth, args.timeout,
                     Progress(size * args.iters, not args.json, None))
    res.verified = bytes(dst.view[:size]) == bytes(src.view[:size])
    out.row(res)


def remote_argv(args: argparse.Namespace) -> list[str]:
  serve = ["serve", "--nic", args.remote_nic or args.nic, "--pci", args.remote_pci, "--ip", args.remote_ip,
           "--timeout", f"{args.timeout:g}"]
  if args.remote_cmd: return ["/bin/sh", "-c", args.remote_cmd]
  if args.local: return [sys.executable, "-m", "tools.hcq_rdma", *serve]
  return ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(args.timeout))}", args.remote,
          shlex.join(["hcq-rdma", *serve])]


def stop(child: subprocess.Popen) -> None:
  """End the other side and whatever it started (its own process group: start_new_session)."""
  try: os.killpg(child.pid, signal.SIGKILL)
  except ProcessLookupError: pass
  child.wait()


def cmd_connect(args: argparse.Namespace) -> int:
  if (args.remote or args.local) and not args.remote_pci: raise ToolError("--remote and --local need --remote-pci BUS")
  ctx = open_context(args.nic, args.pci, ip=args.ip)
  child = None
  try:
    child = subprocess.Popen(remote_argv(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    ch = Channel(child.stdout.fileno(), child.stdin, "the remote side", args.timeout)
    out = Report(args)
    try: _connect(ctx, ch, args, out)
    except Exception as e:            # tell the other side why it is ended (it may be on another host)
      if not isinstance(e, RemoteError):
        try: ch.send("error", message=str(e))
        except ToolError: pass
      raise
    child.stdin.close()
    try: rc = child.wait(args.timeout)
    except subprocess.TimeoutExpired: raise ToolError(f"the remote side did not exit within {args.timeout:g} s after bye") from None
    if rc != 0: raise ToolError(f"the remote side exited with status {rc} after the transfer")
  finally:
    if child is not None: stop(child)
    ctx.close()
  return out.end()


def _connect(ctx: Context, ch: Channel, args: argparse.Namespace, out: Report) -> None:
  _, hello = ch.recv("hello", HELLO_SERVER, "waiting for its hello")
  top = max(sizes(args))
  if top > hello["max_size"]:
    raise ToolError(f"the remote side registers at most {hello['max_size']} bytes; "
                    f"{'-a writes up to' if args.all else '--size is'} {top}")
  peer = Endpoint.from_fields(hello)
  pd, cq = ctx.alloc_pd(), ctx.create_cq(2 * MAX_DEPTH)
  qp, psn = pd.create_qp(cq), secrets.randbits(24)
  src = pd.reg_mr(ctx.alloc(top), Access.LOCAL_WRITE, top)
  back = pd.reg_mr(ctx.alloc(top), Access.LOCAL_WRITE, top) if args.read else None
  random_fill(src.view)
  ch.send("hello", version=VERSION, size=top, read=args.read, **qp.endpoint(psn).to_json())
  _, ready = ch.recv("ready", READY, "waiting for it to register its MR")
  remote = RemoteMR.from_fields(ready, ch.peer)
  if remote.size < top:
    raise ToolError(f"the remote MR is too small: it registered {remote.size} bytes at {remote.addr:#x}; the transfer "
                    f"writes {top}")
  qp.connect(peer, psn)
  out.start(f"{ctx.name} -> remote {args.remote_pci or args.remote_cmd}")
  for size in sizes(args):
    res = write_loop(qp, cq, src, remote, size, args.iters, args.depth, args.timeout,
                     Progress(size * args.iters, not args.json, lambda n: ch.send("progress", bytes=n)))
    crc = zlib.crc32(src.view[:size])
    ch.send("verify", crc32=crc, size=size)
    _, v = ch.recv("verified", VERIFIED, "waiting for it to verify the data")
    res.verified = v["crc32"] == crc
    res.extra["remote_crc32"] = f"{v['crc32']:08x}"
    if back is not None:
      read_back(qp, cq, back, remote, size, args.timeout)
      res.extra["read_back"] = bytes(back.view[:size]) == bytes(src.view[:size])
      res.verified = res.verified and res.extra["read_back"]
    out.row(res)
  ch.send("bye")


def cmd_serve(args: argparse.Namespace) -> int:
  ch = Channel(sys.stdin.fileno(), sys.stdout.buffer, "the client", args.timeout)
  try: ctx = open_context(args.nic, args.pci, ip=args.ip)
  except Exception as e:
    ch.send("error", message=f"{args.pci}: {e}")
    raise
  try: _serve(ctx, ch, args)
  except (ToolError, VerbsError, TimeoutError, OSError, RuntimeError, ValueError) as e:
    if not isinstance(e, RemoteError):
      try: ch.send("error", message=str(e))
      except ToolError: pass
    raise
  finally: ctx.close()
  return 0


def _serve(ctx: Context, ch: Channel, args: argparse.Namespace) -> None:
  pd, cq = ctx.alloc_pd(), ctx.create_cq(2 * MAX_DEPTH)
  qp, psn = pd.create_qp(cq), secrets.randbits(24)
  ch.send("hello", version=VERSION, max_size=args.max_size, **qp.endpoint(psn).to_json())
  _, hello = ch.recv("hello", HELLO_CLIENT, "waiting for its hello")
  size = hello["size"]
  if size > args.max_size: raise ToolError(f"the client asks for {size} bytes; this side registers at most {args.max_size}")
  access = Access.LOCAL_WRITE | Access.REMOTE_WRITE | (Access.REMOTE_READ if hello["read"] else 0)
  mr = pd.reg_mr(ctx.alloc(size), access, size)
  qp.connect(Endpoint.from_fields(hello), psn)
  ch.send("ready", **RemoteMR(mr.addr, mr.rkey, mr.length).to_json())
  verified: list[tuple[int, int]] = []          # (size, CRC-32) of each verify: one per size the client writes
  while True:
    also = {"progress": PROGRESS, **({"bye": {}} if verified else {})}
    kind, msg = ch.recv("verify", VERIFY, "waiting for the transfer to end", also=also)
    if kind == "bye": break
    if kind == "progress": continue
    if msg["size"] > size: raise ToolError(f"the client verifies {msg['size']} bytes of the {size} it registered")
    verified.append((msg["size"], zlib.crc32(mr.view[:msg["size"]])))
    ch.send("verified", crc32=verified[-1][1])
  n, crc = verified[-1]
  what = f"{n} bytes" if len(verified) == 1 else f"{len(verified)} sizes, the last {n} bytes,"
  print(f"hcq-rdma serve: {what} received into {ctx.name}, CRC-32 {crc:08x}", file=sys.stderr)


# --- the command line
def parse_size(text: str) -> int:
  m = re.fullmatch(r"(\d+)\s*([kmg]?)(?:i?b)?(?:\s*\+\s*(\d+))?", text.strip().lower())
  if not m: raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 4096, 64K, 4M, 4M+1)")
  n = int(m[1]) << {"": 0, "k": 10, "m": 20, "g": 30}[m[2]]
  n += int(m[3] or 0)
  if n < 1: raise argparse.ArgumentTypeError(f"size {text!r} is 0 bytes: a transfer moves at least 1")
  if n > MAX_SIZE:
    raise argparse.ArgumentTypeError(f"size {text!r} ({n} bytes) is more than one transfer moves: at most 1G ({MAX_SIZE} "
                                     "bytes), the largest power of two an RDMA WRITE carries (2^31 - 1 bytes)")
  return n


MOCK_TYPO = re.compile(r"mock\W*_?(\d+)", re.I)
BUS_ID = re.compile(r"([0-9a-f]{4,}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", re.I)


def bus_id(text: str) -> str:
  """A PCI bus id (0000:41:00.0, 41:00.0) or mock-<n>; a near miss of mock-<n> (mock0, MOCK_1) is named."""
  if MOCK_BUS.fullmatch(text) or BUS_ID.fullmatch(text): return text
  if m := MOCK_TYPO.fullmatch(text): raise argparse.ArgumentTypeError(f"{text!r} is no device: did you mean mock-{int(m[1])}?")
  raise argparse.ArgumentTypeError(f"{text!r} is not a PCI bus id (0000:41:00.0) or mock-<n> (emulated NIC n)")


def count(text: str) -> int:
  try: v = int(text)
  except ValueError: v = 0
  if v < 1: raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
  return v


def positive(text: str) -> float:
  try: v = float(text)
  except ValueError: v = -1
  if not v > 0: raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
  return v


def parser() -> argparse.ArgumentParser:
  nics = ", ".join(rdma_vendors()) or "none"
  p = argparse.ArgumentParser(prog="hcq-rdma", description="RDMA WRITE between hcq's NICs (real or emulated), "
                              "measured like perftest's ib_write_bw.")
  add_version(p)
  sub = p.add_subparsers(dest="command", required=True, metavar="command")

  def common(sp: argparse.ArgumentParser, ip: str) -> None:
    sp.add_argument("--nic", required=True, help=f"the NIC's driver: {nics}")
    sp.add_argument("--pci", required=True, type=bus_id, metavar="BUS",
                    help="its PCI bus id (0000:41:00.0), or mock-<n> for emulated NIC n")
    sp.add_argument("--ip", default=ip, help=f"its IPv4 address, GID 0 (default {ip})")
    sp.add_argument("--timeout", type=positive, default=30.0, metavar="S",
                    help="give up after S seconds without progress (default 30; a message's own time at 4 MiB/s is added)")

  def transfer(sp: argparse.ArgumentParser) -> None:
    size = sp.add_mutually_exclusive_group()
    size.add_argument("-s", "--size", type=parse_size, default=1 << 20, metavar="N",
                      help="bytes per WRITE (4096, 64K, 4M+1; at most 1G; default 1M)")
    size.add_argument("-a", "--all", action="store_true", help="every power of two from 2 B to 8 MiB, a row each (as ib_write_bw -a)")
    sp.add_argument("-n", "--iters", type=count, default=100, metavar="K", help="WRITEs of each size (default 100)")
    sp.add_argument("--depth", type=int, default=DEPTH, metavar="D", help=f"WRITEs in flight (perftest's tx depth; default {DEPTH})")
    sp.add_argument("--report_gbits", action="store_true", help="bandwidth in Gb/sec (10^9 bits) instead of MB/sec (2^20 bytes)")
    sp.add_argument("--json", action="store_true", help="each size's result as one JSON object a line (bandwidth as "
                    "gbytes_per_s, 10^9 bytes, or gbits_per_s with --report_gbits)")

  lb = sub.add_parser("loopback", help="two QPs on one NIC through its loopback (PHY or internal)")
  common(lb, DEFAULT_IP)
  transfer(lb)
  cn = sub.add_parser("connect", help="this NIC to another one (its side runs `hcq-rdma serve`)")
  common(cn, DEFAULT_IP)
  transfer(cn)
  where = cn.add_mutually_exclusive_group(required=True)
  where.add_argument("--remote", metavar="USER@HOST", help="start the other side over ssh (BatchMode)")
  where.add_argument("--local", action="store_true", help="start the other side as a local process (emulated NICs)")
  where.add_argument("--remote-cmd", metavar="CMD", help="a command whose stdin and stdout carry the control channel")
  cn.add_argument("--remote-pci", type=bus_id, metavar="BUS", help="the other NIC's PCI bus id or mock-<n>")
  cn.add_argument("--remote-nic", metavar="NIC", help="the other NIC's driver (default: --nic)")
  cn.add_argument("--remote-ip", default=DEFAULT_REMOTE_IP, help=f"the other NIC's IPv4 address (default {DEFAULT_REMOTE_IP})")
  cn.add_argument("--read", action="store_true", help="RDMA READ the buffer back after the writes and compare")
  sv = sub.add_parser("serve", help="the other side of connect: the control channel on stdin/stdout")
  common(sv, DEFAULT_REMOTE_IP)
  sv.add_argument("--max-size", type=parse_size, default=MAX_SIZE, metavar="N", help="the largest MR a client may ask for")
  return p


COMMANDS = {"loopback": cmd_loopback, "connect": cmd_connect, "serve": cmd_serve}


def main(argv: list[str] | None = None) -> int:
  args = parser().parse_args(argv)
  if getattr(args, "iters", 1) < 1: parser().error("--iters must be at least 1")
  if not 1 <= getattr(args, "depth", 1) <= MAX_DEPTH: parser().error(f"--depth must be in [1, {MAX_DEPTH}]")
  # the NIC, the peer and the verbs say what went wrong: those failures exit 1, the user's errors (tools/cli.py) 2
  return run(f"hcq-rdma{' serve' if args.command == 'serve' else ''}", lambda: COMMANDS[args.command](args),
             failures=(ToolError, ProtocolError, VerbsError, TimeoutError))


if __name__ == "__main__":
  sys.exit(main())
