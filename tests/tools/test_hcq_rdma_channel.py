"""hcq-rdma's control channel without a NIC: every message a peer sends is checked (schema, types, 24-bit QPNs and
PSNs, 32-bit keys, 64-bit addresses, sizes), a silent or vanished peer ends the wait within the timeout, and the
client never posts a WRITE that does not fit the MR the peer registered."""
import argparse, json, os, re, threading

import pytest

from drivers.rdma import Endpoint, ProtocolError
from tests.drivers.rdma.fakenic import fake_context
from tools.hcq_rdma import HELLO_SERVER, Channel, RemoteError, Report, ToolError, _connect, parse_size, parser

SERVER_HELLO = {"type": "hello", "version": 2, "qpn": 0x12, "psn": 0x345, "gid": "00000000000000000000ffff0a000002",
                "mac": "02aabbccdd02", "mtu": 4096, "max_size": 1 << 20}


@pytest.fixture
def pipe():
  """(a Channel reading what `feed` writes, feed(bytes), close())."""
  r, w = os.pipe()
  peer_r, peer_w = os.pipe()
  ch = Channel(r, os.fdopen(peer_w, "wb"), "the remote side", timeout=0.3)
  wf = os.fdopen(w, "wb")
  def feed(data: bytes) -> None:
    wf.write(data)
    wf.flush()
  yield ch, feed, wf.close, peer_r
  for f in (wf, ch.wfile):
    try: f.close()
    except OSError: pass
  for fd in (r, peer_r): os.close(fd)


def msg(**fields) -> bytes: return (json.dumps({**SERVER_HELLO, **fields}) + "\n").encode()


def test_a_valid_hello_gives_its_endpoint(pipe):
  ch, feed, _, _ = pipe
  feed(msg())
  kind, f = ch.recv("hello", HELLO_SERVER, "waiting for its hello")
  assert kind == "hello" and Endpoint.from_fields(f) == Endpoint(0x12, 0x345, bytes(10) + b"\xff\xff\x0a\0\0\x02",
                                                                 bytes.fromhex("02aabbccdd02"), 4096)


@pytest.mark.parametrize("line,expect", [
  (b"garbage\n", "the remote side sent invalid JSON"),
  (b"{\"type\": \"hello\", \n", "sent invalid JSON"),
  (b"[1, 2]\n", "sent list '\\[1, 2\\]', not a message object"),
  (b"{\"qpn\": 1}\n", "not a message object with a \"type\""),
  (msg(qpn="18"), "'hello' message: qpn must be a 24-bit integer, got '18'"),
  (msg(qpn=1 << 24), "qpn must be a 24-bit integer, got 16777216"),
  (msg(psn=True), "psn must be a 24-bit integer, got True"),
  (msg(psn=-1), "psn must be a 24-bit integer, got -1"),
  (msg(gid="00" * 15), "gid must be a 16-byte GID \\(32 hex digits\\)"),
  (msg(gid="zz" * 16), "gid must be a 16-byte GID"),
  (msg(mac=None), "mac must be a 6-byte MAC address"),
  (msg(mtu=1500), "mtu must be a path MTU \\(256, 512, 1024, 2048, 4096\\), got 1500"),
  (msg(max_size=0), "max_size must be a size in \\[1, 1073741824\\] bytes, got 0"),
  (msg(max_size=2.5), "max_size must be a size"),
  (msg(version=1), "version must be protocol version 2, got 1"),
  (msg(extra=1), "'hello' message has unknown fields extra"),
  ((json.dumps({"type": "hello", "qpn": 1}) + "\n").encode(), "'hello' message lacks gid, mac, max_size, mtu, psn, version"),
  (b'{"type": "ready", "addr": 0, "rkey": 0, "size": 1}\n', "sent a 'ready' message while waiting for its hello \\(expected 'hello'\\)"),
])
def test_a_malformed_message_is_a_protocol_error_naming_the_field(pipe, line, expect):
  ch, feed, _, _ = pipe
  feed(line)
  with pytest.raises(ProtocolError, match=expect):
    ch.recv("hello", HELLO_SERVER, "waiting for its hello")


def test_a_silent_peer_ends_the_wait_within_the_timeout(pipe):
  ch, feed, _, _ = pipe
  feed(b'{"type": "hel')                   # half a message, then nothing
  with pytest.raises(ToolError, match="the remote side sent nothing for 0.3 s while waiting for its hello"):
    ch.recv("hello", HELLO_SERVER, "waiting for its hello")


def test_a_peer_that_goes_away_is_named(pipe):
  ch, _, close, _ = pipe
  close()
  with pytest.raises(ToolError, match="the remote side closed the control channel while waiting for its hello"):
    ch.recv("hello", HELLO_SERVER, "waiting for its hello")


def test_an_endless_line_is_refused(pipe):
  ch, feed, _, _ = pipe
  threading.Thread(target=feed, args=(b"x" * (70 << 10),), daemon=True).start()
  with pytest.raises(ProtocolError, match="sent more than 65536 bytes without a newline"):
    ch.recv("hello", HELLO_SERVER, "waiting for its hello")


def test_the_peers_error_message_is_raised_as_its_failure(pipe):
  ch, feed, _, _ = pipe
  feed(b'{"type": "error", "message": "mock-1 is in use by pid 7"}\n')
  with pytest.raises(RemoteError, match="the remote side failed: mock-1 is in use by pid 7"):
    ch.recv("hello", HELLO_SERVER, "waiting for its hello")


def connect_args(size: int) -> argparse.Namespace:
  return argparse.Namespace(size=size, all=False, iters=1, depth=16, read=False, json=True, report_gbits=False, timeout=0.3)


@pytest.mark.parametrize("ready,expect", [
  ({"addr": 0x1000, "rkey": 5, "size": 4096}, "the remote MR is too small: it registered 4096 bytes at 0x1000; the transfer writes 4097"),
  ({"addr": (1 << 64) - 8, "rkey": 5, "size": 8192}, "MR \\[0xfffffffffffffff8, \\+0x2000\\) runs past 2\\^64"),
  ({"addr": 1 << 64, "rkey": 5, "size": 8192}, "addr must be a 64-bit integer"),
  ({"addr": 0, "rkey": 1 << 32, "size": 8192}, "rkey must be a 32-bit integer"),
])
def test_the_client_never_writes_outside_the_mr_the_peer_registered(pipe, ready, expect):
  ch, feed, _, peer_r = pipe
  ctx = fake_context()
  feed(msg() + (json.dumps({"type": "ready", **ready}) + "\n").encode())
  with pytest.raises((ToolError, ProtocolError), match=expect):
    _connect(ctx, ch, connect_args(4097), Report(connect_args(4097)))
  (qp,) = ctx.provider.qps
  assert qp.sent == [] and qp.modifies == []               # not even connected
  assert json.loads(os.read(peer_r, 4096).splitlines()[0])["size"] == 4097   # what the client asked for


def test_a_size_above_the_peers_limit_is_refused_before_anything_is_registered(pipe):
  ch, feed, _, _ = pipe
  ctx = fake_context()
  feed(msg(max_size=4096))
  with pytest.raises(ToolError, match="the remote side registers at most 4096 bytes; --size is 4097"):
    _connect(ctx, ch, connect_args(4097), Report(connect_args(4097)))
  assert ctx.provider.mrs == []


@pytest.mark.parametrize("text,n", [("4096", 4096), ("64K", 65536), ("4M", 4 << 20), ("4M+1", (4 << 20) + 1), ("1MiB", 1 << 20)])
def test_sizes_take_binary_suffixes_and_a_remainder(text, n):
  assert parse_size(text) == n


@pytest.mark.parametrize("text,expect", [("0", "'0' is 0 bytes"), ("-1", "not a size"), ("4X", "not a size"), ("", "not a size"),
                                         ("2G", "'2G' \\(2147483648 bytes\\) is more than one transfer moves: at most 1G")])
def test_bad_sizes_are_refused_in_words(text, expect):
  with pytest.raises(argparse.ArgumentTypeError, match=expect):
    parse_size(text)


def test_perftests_short_flags_name_the_same_settings():
  short = parser().parse_args(["loopback", "--nic", "bnxt", "--pci", "mock-0", "-s", "4K", "-n", "7", "--report_gbits"])
  long = parser().parse_args(["loopback", "--nic", "bnxt", "--pci", "mock-0", "--size", "4096", "--iters", "7", "--report_gbits"])
  assert short == long and (short.size, short.iters, short.all, short.report_gbits) == (4096, 7, False, True)
  assert parser().parse_args(["connect", "--nic", "bnxt", "--pci", "0000:41:00.0", "--local", "--remote-pci", "41:00.1", "-a"]).all


@pytest.mark.parametrize("argv,expect", [
  (["-s", "4K", "-a"], "argument -a/--all: not allowed with argument -s/--size"),
  (["-n", "0"], "argument -n/--iters: '0' is not a whole number of at least 1"),
  (["--pci", "mock-0", "--pci", "41:00"], "argument --pci: '41:00' is not a PCI bus id \\(0000:41:00.0\\) or mock-<n>"),
])
def test_bad_flags_are_refused_in_words(capsys, argv, expect):
  with pytest.raises(SystemExit) as e:
    parser().parse_args(["loopback", "--nic", "bnxt", "--pci", "mock-0", *argv])
  assert e.value.code == 2 and re.search(expect, capsys.readouterr().err)


def test_the_remote_side_starts_over_ssh_in_batch_mode_or_locally():
  from tools.hcq_rdma import parser, remote_argv
  args = parser().parse_args(["connect", "--nic", "bnxt", "--pci", "mock-0", "--remote", "me@box", "--remote-pci",
                              "0000:41:00.0", "--remote-ip", "10.0.200.6", "--timeout", "7"])
  assert remote_argv(args) == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=7", "me@box",
                               "hcq-rdma serve --nic bnxt --pci 0000:41:00.0 --ip 10.0.200.6 --timeout 7"]
  args = parser().parse_args(["connect", "--nic", "bnxt", "--pci", "mock-0", "--local", "--remote-pci", "mock-1"])
  assert remote_argv(args)[1:] == ["-m", "tools.hcq_rdma", "serve", "--nic", "bnxt", "--pci", "mock-1", "--ip", "10.0.0.2",
                                   "--timeout", "30"]
  args = parser().parse_args(["connect", "--nic", "bnxt", "--pci", "mock-0", "--remote-cmd", "nc box 9000"])
  assert remote_argv(args) == ["/bin/sh", "-c", "nc box 9000"]


def test_a_transfer_past_a_second_gets_a_progress_bar_and_heartbeats(monkeypatch, capsys):
  import tools.hcq_rdma as tool
  beats, clock = [], [100.0]
  monkeypatch.setattr(tool.time, "monotonic", lambda: clock[0])
  p = tool.Progress(1 << 20, show=True, beat=beats.append)
  p.update(1000)                              # within the first second: nothing yet
  assert p.bar is None and beats == []
  clock[0] += 1.5
  p.update(4096)
  assert p.bar is not None and beats == [4096] and p.bar.tasks[0].completed == 4096
  p.close()
  quiet = tool.Progress(1 << 20, show=False, beat=None)   # --json: no bar
  clock[0] += 5
  quiet.update(10)
  assert quiet.bar is None
