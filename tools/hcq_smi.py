"""hcq_smi: list, free and reset the devices hcq drives (GPUs and RDMA NICs).

`hcq_smi` (or `hcq_smi list [--json]`) shows every registered vendor's devices in one table, with what each vendor's
driver reads of them (Vendor.usage) and the emulated devices its kernel-driver models build in each process
(Vendor.kernel_models). `hcq_smi <backend> {list,rmmod,insmod,reset,pids,kill_pids}` works on one family; the
backends are the registered vendors that have a lock prefix (drivers/system/registry.py), named in lower case (amd, nv,
...). A backend's devices are its vendor's PCI functions (drivers/system/discovery), its models' emulated devices that
have state, and the held ownership locks of its prefix (drivers/system/lock), so devices an emulated model opened show
up too, and, for vendors whose GPUs come behind USB bridges, the bridges attached (USB path, bridge firmware). Root-only
commands (modprobe, kill) run through sudo unless hcq_smi already is root; sysfs writes name the file when permission
is missing. Resetting every device of a family asks first (--yes on no terminal)."""
from __future__ import annotations
import argparse, json, os, re, shlex, signal, subprocess, sys, time
from dataclasses import dataclass, field, replace
from typing import Callable

from drivers.system.discovery import PCIInfo, list_pci
from drivers.system.lock import LockInfo, alive, holder, list_locks, lock_dir, process_name
from drivers.system.pci import SysfsPCIDevice, list_models, open_model
from drivers.system.registry import Usage, Vendor, model, vendors
from drivers.system.usb import BridgeInfo, list_bridges
from tools.cli import UserError, add_version, run

NOT_IN_USE = "No processes found using this device"
NOT_VISIBLE = "run hcq_smi as root to see every process"
IN_PROCESS = "in each process that opens it"
MIB = 1 << 20
# a PCI function address as sysfs names it: domain:bus:device.function
PCI_ADDRESS = re.compile(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def backends() -> dict[str, Vendor]:
  """hcq_smi's backends by name: every registered vendor with a lock prefix."""
  return {v.smi_name: v for v in vendors() if v.lock_prefix}


class SmiError(Exception):
  """A failure reported in one line (a command hcq_smi ran, a process it could not kill); the command exits 1."""


def _run(argv: list[str]) -> subprocess.CompletedProcess:
  return subprocess.run(argv, capture_output=True, text=True, check=False)


@dataclass
class Host:
  """Where hcq_smi looks and how it runs commands; tests point the roots at fake trees and swap the runner."""
  sysfs: str = "/sys"
  proc: str = "/proc"
  run: Callable[[list[str]], subprocess.CompletedProcess] = _run
  root: bool = field(default_factory=lambda: os.geteuid() == 0)
  tty: bool = field(default_factory=lambda: sys.stdin.isatty())   # may hcq_smi ask before resetting every device?
  ask: Callable[[str], str] = input
  tries: int = 100            # kill_pids probes each lock this many times, poll_s apart, before giving up
  poll_s: float = 0.05

  def privileged(self, argv: list[str]) -> list[str]: return argv if self.root else ["sudo", *argv]

  def call(self, argv: list[str], what: str) -> None:
    """Run argv (no shell); a failure raises SmiError naming the command."""
    if not self.root: what += " needs root"
    try: r = self.run(argv)
    except FileNotFoundError:
      raise SmiError(f"{what}: `{argv[0]}` is not installed" + ("" if self.root else "; or run hcq_smi as root")) from None
    if r.returncode != 0:
      raise SmiError(f"{what}: `{shlex.join(argv)}` failed (exit {r.returncode}): {(r.stderr or r.stdout or '').strip()}")

  def loaded_modules(self) -> set[str]:
    """Names of the loaded kernel modules (/proc/modules: one line per module, the name first)."""
    try:
      with open(os.path.join(self.proc, "modules")) as f: return {line.split(" ", 1)[0] for line in f if line.strip()}
    except FileNotFoundError: return set()   # a kernel built without module support


@dataclass(frozen=True)
class Device:
  bus: str
  pci: PCIInfo | None         # None: no PCI function of that address here (an emulated device, a USB bridge)
  lock: LockInfo | None       # its ownership lock file, if there is one
  model: str | None = None    # the PCI model emulating it (an emulated device with state)
  usb: BridgeInfo | None = None   # the USB bridge it is behind (a USB-attached device)

  @property
  def kind(self) -> str:
    if PCI_ADDRESS.fullmatch(self.bus): return "pci"
    return "usb" if self.bus.startswith("usb") else "emulated"

  @property
  def pid(self) -> int | None:
    """Holder pid (found in /proc when it wrote none); -1 when the lock is held by a process not visible here; None when free."""
    return self.lock.pid if self.lock is not None else None

  def holder_text(self) -> str:
    if self.pid is None: return NOT_IN_USE
    if self.pid < 0: return f"held by a process not visible to this user (another user's or pid namespace's): {NOT_VISIBLE}"
    return f"pid {self.pid} ({process_name(self.pid)})"


def find_devices(backend: Vendor, host: Host, pci_bus: str | None = None) -> list[Device]:
  """The backend's PCI functions plus every held lock of its prefix that is not one of them; with `pci_bus`,
  those whose bus id starts with it (the PCI domain may be left out, as lspci does)."""
  locks = {lk.bus: lk for lk in list_locks(backend.lock_prefix)} if backend.lock_prefix else {}
  devs = [Device(p.bus, p, locks.pop(p.bus, None)) for p in list_pci(sysfs=host.sysfs)
          if p.vendor_id in backend.pci_vendors and p.base_class in backend.pci_classes]
  devs += [Device(m.bus, m, locks.pop(m.bus, None), kind) for kind in backend.pci_models for m in list_models(kind)]
  if backend.usb_bridges: devs += [Device(b.bus, None, locks.pop(b.bus, None), usb=b) for b in list_bridges()]
  devs += [Device(lk.bus, None, lk) for lk in locks.values() if lk.pid is not None]   # free leftovers are no device
  if pci_bus is None: return devs
  want = pci_bus.lower()
  if not (found := [d for d in devs if d.bus.startswith(want) or d.bus.startswith(f"0000:{want}")]):
    have = ", ".join(d.bus for d in devs) or "none"
    raise UserError(f"no {backend.smi_name} device matches --pci_bus {pci_bus} (devices: {have}); "
                   f"`hcq_smi {backend.smi_name} list` shows them")
  return found


def _how_to_make(v: Vendor) -> str | None:
  """How the vendor's emulated PCI devices come to be (they have no state, so no row, before), if it has any."""
  if not v.pci_models: return None
  what = model(v.pci_models[0]).description
  if v.emulated:
    default = ", the default device when no DEV is set and no hardware is found," if v is next(x for x in vendors() if x.emulated) else ","
    # the vendor's other emulated chips, each opened by naming its model in the device string (drivers/hcq/devspec.py)
    others = [f"{v.emulated}:{name}: {model(name).description}, made the same way: open_device('{v.emulated}:{name}') (device n: "
              f"'{v.emulated}:{name}:<n>')" for name in v.pci_models[1:]]
    return "\n".join([f"{v.emulated}: {what}{default} made when a program first opens it (then listed as mock-0): "
                       f"python -c \"from drivers.hcq import open_device; open_device('{v.emulated}')\"", *others])
  if v.rdma: return f"{v.smi_name} mock-<n>: {what} NICs, made when first opened: hcq-rdma loopback --nic {v.smi_name} --pci mock-0"
  return None


def _nothing_found(backend: Vendor) -> list[str]:
  """What `hcq_smi <backend> list` says with no device to show: where it looked, what exists anyway, how to make one."""
  ids = " or ".join(f"{v:#06x}" for v in backend.pci_vendors) or "(none)"
  made = ", no emulated device made yet" if backend.pci_models else ""
  lines = [f"No {backend.smi_name} hardware here (no PCI function of vendor {ids}){made}, no held {backend.lock_prefix}_*.lock "
           f"in {lock_dir()}. What there is:"]
  lines += [f"{iface}+{backend.name}: {model(kind).description}, built {IN_PROCESS}" for iface, kind in backend.kernel_models.items()]
  return lines + [hint] if (hint := _how_to_make(backend)) else lines


def _json_row(d: Device) -> dict:
  p = d.pci
  return {"bus": d.bus, "kind": d.kind, "vendor_id": f"{p.vendor_id:#06x}" if p else None,
          "device_id": f"{p.device_id:#06x}" if p else None, "name": p.name if p else None,
          "driver": p.driver if p else None, "iommu_group": p.iommu_group if p else None,
          "in_use": d.pid is not None, "pid": d.pid if d.pid is not None and d.pid > 0 else None,
          "process": process_name(d.pid) if d.pid is not None and d.pid > 0 else None,
          "lock": d.lock.path if d.lock else None, "usb_path": d.usb.path if d.usb else None,
          "bridge_firmware": d.usb.firmware if d.usb else None}


def _print_table(rows: list[tuple[str, ...]]) -> None:
  widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
  for r in rows: print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def _name(d: Device) -> str:
  if d.pci is not None: return d.pci.name or "?"
  return f"GPU behind a USB bridge (path {d.usb.path}, bridge firmware {d.usb.firmware})" if d.usb else "-"


def cmd_list(backend: Vendor, host: Host, args: argparse.Namespace) -> int:
  devs = find_devices(backend, host)
  if args.json:
    print(json.dumps([_json_row(d) for d in devs], indent=2))
    return 0
  if not devs:
    print("\n".join(_nothing_found(backend)))
    return 0
  rows = [("BUS", "KIND", "ID", "NAME", "DRIVER", "IOMMU", "IN USE")]
  for d in devs:
    p, u = d.pci, d.usb
    ident = f"{p.vendor_id:04x}:{p.device_id:04x}" if p else f"{u.vendor_id:04x}:{u.product_id:04x}" if u else "-"
    rows.append((d.bus, d.kind, ident, _name(d), (p.driver or "none") if p else "-",
                 str(p.iommu_group) if p and p.iommu_group is not None else "-", "no" if d.pid is None else d.holder_text()))
  _print_table(rows)
  return 0


@dataclass(frozen=True)
class Row:
  """One device of any family in `hcq_smi list`."""
  family: str
  device: Device | None       # None: an emulated device each process builds for itself (a kernel-driver model)
  name: str
  usage: Usage

  @property
  def holder(self) -> str:
    if self.device is None: return "one per process"
    return "no" if self.device.pid is None else self.device.holder_text()


def _interface(d: Device) -> str:
  """How hcq reaches a device whose vendor does not say: through a USB bridge, a model, VFIO, sysfs or a kernel driver."""
  if d.usb is not None: return "USB bridge"
  if d.pci is None: return "-"                 # known only by its lock
  if d.kind == "emulated": return "model"
  return {"vfio-pci": "VFIO", None: "sysfs"}.get(d.pci.driver, f"kernel ({d.pci.driver})")


def family_rows(v: Vendor, host: Host) -> list[Row]:
  """A vendor's devices (`find_devices`) with what its driver reads of them, then the emulated devices each process
  builds for itself. Vendors with device strings are named as in them (AMD), the others as their NICs are (bnxt)."""
  family, rows = v.name if v.interfaces else v.smi_name, []
  for d in find_devices(v, host):
    u = v.usage(d.bus, d.pci) if v.usage else Usage()
    rows.append(Row(family, d, _name(d), replace(u, interface=u.interface or _interface(d))))
  return rows + [Row(family, None, model(kind).description, Usage(f"{iface}+{v.name}")) for iface, kind in v.kernel_models.items()]


def _memory(u: Usage) -> str:
  if u.memory_used is None or u.memory_total is None: return "-"
  return f"{u.memory_used / MIB:.0f} / {u.memory_total / MIB:.0f} MiB"


def list_all(host: Host, as_json: bool) -> int:
  """Every family's devices in one table, as nvidia-smi shows every GPU; then how to make the emulated devices a family
  has none of yet."""
  found = [(v, family_rows(v, host)) for v in vendors()]
  rows = [r for _, rs in found for r in rs]
  if as_json:
    print(json.dumps([{"family": r.family, "bus": r.device.bus if r.device else None, "kind": r.device.kind if r.device else "in-process",
                       "name": r.name, "interface": r.usage.interface, "memory_used": r.usage.memory_used,
                       "memory_total": r.usage.memory_total, "utilisation": r.usage.utilisation,
                       "in_use": r.device is not None and r.device.pid is not None,
                       "pid": r.device.pid if r.device and r.device.pid and r.device.pid > 0 else None, "holder": r.holder}
                      for r in rows], indent=2))
    return 0
  _print_table([("FAMILY", "BUS", "NAME", "INTERFACE", "MEMORY", "UTIL", "IN USE")] +
               [(r.family, r.device.bus if r.device else "-", r.name, r.usage.interface or "-", _memory(r.usage),
                 "-" if r.usage.utilisation is None else f"{r.usage.utilisation}%", r.holder) for r in rows])
  for v, rs in found:
    if (hint := _how_to_make(v)) and not any(r.device is not None and r.device.model for r in rs): print(hint)
  return 0


def _loaded(backend: Vendor, host: Host) -> list[str]:
  return [m for m in backend.modules if m in host.loaded_modules()]


def _unload(backend: Vendor, host: Host) -> None:
  if not (loaded := _loaded(backend, host)):
    print("Kernel modules are not loaded")
    return
  host.call(host.privileged(["modprobe", "-r", *loaded]), "unloading kernel modules")
  if still := _loaded(backend, host): raise SmiError(f"modprobe -r returned success but {', '.join(still)} is still loaded")
  print(f"Unloaded {', '.join(loaded)}")


def cmd_rmmod(backend: Vendor, host: Host, args: argparse.Namespace) -> int:
  if not args.expect:
    _unload(backend, host)
    return 0
  if loaded := _loaded(backend, host):
    print(f"Kernel modules are loaded: {', '.join(loaded)}")
    return 1
  print("Kernel modules are not loaded")
  return 0


def _reset(backend: Vendor, host: Host, devs: list[Device]) -> bool:
  """Function reset through sysfs (an emulated device: through its model); the device lock is taken for it, so a
  device in use is refused."""
  ok = True
  for d in devs:
    try:
      if d.model is not None: dev = open_model(d.model, int(d.bus.rsplit("-", 1)[1]), backend.lock_prefix)
      else: dev = SysfsPCIDevice(d.bus, backend.lock_prefix, sysfs=os.path.join(host.sysfs, "bus", "pci", "devices"))
      with dev: dev.reset()
      print(f"{d.bus}: reset")
    except (OSError, RuntimeError) as e:   # busy, bound to a kernel driver, no permission, gone
      print(f"{d.bus}: reset failed: {e}", file=sys.stderr)
      ok = False
  return ok


def cmd_reset(backend: Vendor, host: Host, args: argparse.Namespace) -> int:
  devs = find_devices(backend, host, args.pci_bus)
  for d in devs:   # only a held lock: no PCI function here, no model state to reset (a USB bridge, another model's lock)
    if d.usb is not None: print(f"{d.bus}: a GPU behind a USB bridge (path {d.usb.path}) has no function reset through "
                                "the bridge: power-cycle it, skipped")
    elif d.pci is None: print(f"{d.bus}: {d.kind} device known only by its lock ({d.holder_text()}): no PCI function here "
                            "and no emulated state to reset, skipped")
  if not (found := [d for d in devs if d.pci is not None]):
    raise UserError(f"no {backend.smi_name} device to reset" + (f" matches --pci_bus {args.pci_bus}" if args.pci_bus else ""))
  if args.pci_bus is None and not args.yes:   # every device: confirmed first, as amd-smi's reset asks
    every = f"every {backend.smi_name} device ({', '.join(d.bus for d in found)})"
    if not host.tty: raise UserError(f"reset without --pci_bus resets {every}: confirm with --yes, or pick one with --pci_bus BUS")
    try: answer = host.ask(f"Reset {every}? [y/N] ")
    except EOFError: answer = ""
    if answer.strip().lower() not in ("y", "yes"):
      print("Nothing was reset")
      return 1
  return 0 if _reset(backend, host, found) else 1


def cmd_insmod(backend: Vendor, host: Host, args: argparse.Namespace) -> int:
  _unload(backend, host)
  if not _reset(backend, host, [d for d in find_devices(backend, host) if d.kind == "pci"]): return 1
  host.call(host.privileged(["modprobe", "-a", *backend.load]), "loading kernel modules")
  if missing := [m for m in backend.load if m not in host.loaded_modules()]:
    raise SmiError(f"modprobe -a returned success but {', '.join(missing)} is not loaded; see `dmesg`")
  print(f"Loaded {', '.join(backend.load)}")
  return 0


def cmd_pids(backend: Vendor, host: Host, args: argparse.Namespace) -> int:
  if not (devs := find_devices(backend, host, args.pci_bus)): print("\n".join(_nothing_found(backend)))
  for d in devs: print(f"{d.bus}: {d.holder_text()}")
  return 0


def _kill(host: Host, pid: int, sudoless: bool) -> None:
  if sudoless:
    try: os.kill(pid, signal.SIGKILL)
    except ProcessLookupError: pass   # exited on its own meanwhile
    except PermissionError:
      raise SmiError(f"no permission to kill pid {pid} ({process_name(pid)}): it belongs to another user; "
                     "run without --sudoless to use `sudo kill`") from None
    return
  try: host.call(host.privileged(["kill", "-KILL", str(pid)]), "killing the lock holder")
  except SmiError:
    if alive(pid): raise


def free_lock(host: Host, bus: str, path: str, sudoless: bool) -> None:
  """SIGKILL the holder of a device lock (and any next holder) until it is free, probing `host.tries` times."""
  killed: list[int] = []
  for _ in range(host.tries):
    if (pid := holder(path)) is None:
      print(f"{bus}: " + (f"killed pid {', '.join(map(str, killed))}" if killed else "the holder exited") + "; the device is free")
      return
    if pid > 0 and pid not in killed:
      print(f"{bus}: killing pid {pid} ({process_name(pid)})")
      _kill(host, pid, sudoless)
      killed.append(pid)
    time.sleep(host.poll_s)
  waited = f"after {host.tries * host.poll_s:g} s"
  if pid < 0: why = f"its holder is not visible to this user; {NOT_VISIBLE}"
  elif alive(pid): why = f"pid {pid} ({process_name(pid)}) has not exited (stuck in the kernel? see /proc/{pid}/stack)"
  else: why = f"pid {pid} has exited but a process it forked keeps the lock open"
  raise SmiError(f"{bus}: lock {path} still held {waited}: {why}")


def cmd_kill_pids(backend: Vendor, host: Host, args: argparse.Namespace) -> int:
  if not (devs := find_devices(backend, host, args.pci_bus)): print("\n".join(_nothing_found(backend)))
  failed = 0
  for d in devs:
    if d.pid is None:
      print(f"{d.bus}: {NOT_IN_USE}")
      continue
    try: free_lock(host, d.bus, d.lock.path, args.sudoless)
    except SmiError as e:
      print(f"hcq_smi: {e}", file=sys.stderr)
      failed += 1
  return 1 if failed else 0


COMMANDS = {"list": cmd_list, "rmmod": cmd_rmmod, "insmod": cmd_insmod, "reset": cmd_reset, "pids": cmd_pids,
            "kill_pids": cmd_kill_pids}


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="hcq_smi", description="List, free and reset the GPUs and NICs hcq drives. With no "
                              "arguments: `list`, every family's devices in one table.")
  add_version(p)
  top = p.add_subparsers(dest="backend", metavar="{list," + ",".join(backends()) + "}")
  top.add_parser("list", help="every device of every family: bus, name, interface, memory, utilisation, lock holder").add_argument(
    "--json", action="store_true", help="machine-readable output")
  for name, v in backends().items():
    _commands(top.add_parser(name, help=f"the {v.name} devices: list, rmmod, insmod, reset, pids, kill_pids"))
  return p


def _commands(backend: argparse.ArgumentParser) -> None:
  sub = backend.add_subparsers(dest="command", required=True, metavar="command")
  sub.add_parser("list", help="every device: bus, ids, name, kernel driver, IOMMU group, lock holder").add_argument(
    "--json", action="store_true", help="machine-readable output")
  sub.add_parser("rmmod", help="unload the kernel modules (modprobe -r)").add_argument(
    "--expect", action="store_true", help="only check they are unloaded (exit 1 if any is loaded)")
  sub.add_parser("insmod", help="rmmod, reset the devices, load the kernel driver again")
  for name, text in (("reset", "PCI function reset through sysfs (an emulated device: through its model)"),
                     ("pids", "pid holding each device's lock"), ("kill_pids", "kill the lock holders and wait until the locks are free")):
    sp = sub.add_parser(name, help=text)
    sp.add_argument("--pci_bus", metavar="BUS", help="only devices whose bus id starts with BUS (0000:03:00.0, 03:00, mock-0)")
    if name == "kill_pids": sp.add_argument("--sudoless", action="store_true", help="signal directly, not through sudo kill")
    if name == "reset": sp.add_argument("--yes", action="store_true", help="without --pci_bus: reset every device without asking")


def main(argv: list[str] | None = None, host: Host | None = None) -> int | None:
  args = parser().parse_args(argv)
  if args.backend in (None, "list"): return run("hcq_smi", lambda: list_all(host or Host(), getattr(args, "json", False)))
  return run("hcq_smi", lambda: COMMANDS[args.command](backends()[args.backend], host or Host(), args), failures=(SmiError,))


if __name__ == "__main__":
  sys.exit(main())
