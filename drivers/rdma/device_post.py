"""Send requests another device's queue posts itself (GPU-initiated RDMA): the verbs side of hcq's Queue.rdma_write.

The host checks the request as post_send does and takes its place in the send queue and the send CQ; the provider lays
out what posting it takes (DevicePost: the WQE bytes into the SQ's memory, one doorbell store, the CQE word that says
it completed); this module maps that memory and the doorbell for the device once per QP (host memory through the
device's DMA mapping, the doorbell page at its bus address in the NIC's BAR) and hands the device queue its commands
at its own addresses. The queue runs them after the commands before it (a kernel), so the data goes out as soon as
they are done. The completion is polled by the host as for any request (CQ.wait: an error completion raises there).

While a device-posted request is outstanding the host posts nothing else on that QP (the device rings the doorbell
for its slot only when its queue gets there), and the QP's send CQ must hold only this QP's signaled send completions,
so the place of the request's completion is known when the commands are built.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drivers.hcq.buffer import Buffer
from drivers.system.dma import PAGE, host_address
from drivers.rdma.verbs import SendFlags, SendWR, VerbsError, WROpcode
if TYPE_CHECKING: from drivers.rdma.queues import QP


@dataclass
class DeviceCommands:
  """What the device's queue does to post one request, at the device's addresses: the memory writes in order, one store
  of the doorbell bytes, then a wait until the 32-bit word at `done[0]` has (word & done[1]) == done[2]."""
  writes: list[tuple[int, bytes]]
  doorbell: tuple[int, bytes]
  done: tuple[int, int, int]
  length: int


def _local_mr(qp: QP, local: Any) -> tuple[Any, int]:
  """(the MR, offset in it) for `local`: an MR, or an hcq Buffer (or a view of one) registered on the QP's PD."""
  if isinstance(local, Buffer):
    base = local.base or local
    mrs = [h for h in base.holders if getattr(h, "pd", None) is not None]
    if not mrs: raise ValueError(f"{local!r} is not registered: register it on the QP's PD first (pd.reg_mr(buffer, access))")
    mr = next((m for m in mrs if m.pd is qp.pd), mrs[0])
    return mr, local.va - base.va
  if not hasattr(local, "lkey") or not hasattr(local, "pd"):
    raise TypeError(f"the local side of an RDMA WRITE is an MR or a registered hcq Buffer, not {type(local).__name__}")
  return local, 0


def _map(qp: QP, device: Any, key: tuple, make) -> Buffer:
  maps = qp.device_maps.setdefault(device, {})
  if (buf := maps.get(key)) is None or buf.freed: buf = maps[key] = make()
  return buf


def device_write(qp: QP, device: Any, local: Any, remote: Any, size: int | None = None, local_offset: int = 0,
                 remote_offset: int = 0, wr_id: int = 0) -> DeviceCommands:
  """An RDMA WRITE of `size` bytes (default: the rest of `local`'s MR) from `local` (+local_offset) into `remote` (the
  peer's MR: an MR, or a RemoteMR it sent) at remote_offset, for `device`'s queue to post; its completion carries
  `wr_id`. See the module docstring."""
  prov = qp.ctx.provider
  if not hasattr(qp.hw, "device_post"):
    raise NotImplementedError(f"{prov.name} cannot lay out a request for another device to post: post it from the host "
                              "(qp.post_send) once the device's work is done")
  mr, off = _local_mr(qp, local)
  if mr.pd is not qp.pd:
    raise VerbsError(f"QP {qp.qp_num:#x}: the local {mr!r} is registered on another protection domain than the QP's: "
                     "register the buffer on the QP's PD")
  off += local_offset
  size = mr.length - off if size is None else size
  if size < 1 or off < 0 or off + size > mr.length:
    raise ValueError(f"RDMA WRITE of {size} bytes at offset {off} is outside the local {mr.length}-byte MR (lkey {mr.lkey:#x})")
  rlen = getattr(remote, "length", getattr(remote, "size", None))
  if rlen is None or not hasattr(remote, "rkey"):
    raise TypeError(f"the remote side of an RDMA WRITE is the peer's MR (an MR or a RemoteMR), not {type(remote).__name__}")
  if remote_offset < 0 or remote_offset + size > rlen:
    raise ValueError(f"RDMA WRITE of {size} bytes at offset {remote_offset} is outside the remote {rlen}-byte MR (rkey {remote.rkey:#x})")
  wr = SendWR(wr_id, WROpcode.RDMA_WRITE, [mr.sge(off, size)], SendFlags.SIGNALED, remote_addr=remote.addr + remote_offset,
              rkey=remote.rkey)
  qp.check_device_post(wr)
  # map what the device writes before anything is taken: a device that cannot map it leaves the QP as it was
  mems, db_page = qp.hw.device_targets(qp.send_cq.hw)
  known = dict(qp.device_maps.get(device, {}))
  try:
    db = _map(qp, device, ("bus", db_page), lambda: device.import_bus([db_page], PAGE, 0, PAGE))   # (the one most refuse)
    maps = {id(m): _map(qp, device, ("host", host_address(m), m.nbytes), lambda m=m: device.import_host(m)) for m in mems}
  except BaseException as e:
    for key, buf in qp.device_maps.pop(device, {}).items():      # what this call mapped goes again
      if known.get(key) is buf: qp.device_maps.setdefault(device, {})[key] = buf
      else: buf.free()
    if not isinstance(e, NotImplementedError): raise
    raise NotImplementedError(f"{device.name} cannot post RDMA requests itself ({e}): post from the host (qp.post_send) "
                              "once its work is done") from None
  ahead = qp.send_cq.expected
  seq = qp.take_device_post(wr)
  post = qp.hw.device_post(seq, wr, qp.send_cq.hw, ahead)
  def va(mem: memoryview, at: int) -> int:
    if (buf := maps.get(id(mem))) is None: raise AssertionError(f"{prov.name} laid out an access to memory device_targets did not name")
    return buf.va + at
  if not 0 <= (at := post.doorbell[0] - db_page) <= PAGE - len(post.doorbell[1]):
    raise AssertionError(f"{prov.name} laid out a doorbell at {post.doorbell[0]:#x}, outside the page at {db_page:#x} it named")
  mem, off, mask, value = post.done
  return DeviceCommands([(va(m, a), data) for m, a, data in post.writes], (db.va + at, post.doorbell[1]), (va(mem, off), mask, value), size)
