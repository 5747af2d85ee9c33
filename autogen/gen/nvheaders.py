"""Where the NVIDIA headers come from: git trees of NVIDIA's open-gpu-kernel-modules (at a pinned tag) and
open-gpu-doc, extracted into a cache outside the repository. No registry ships the RM SDK headers (nvos.h,
ctrl/*.h, alloc params, QMD layouts); only these trees have them. Nothing fetched is committed.

The extracted tree (HCQ_NV_HEADERS for TAG, else ~/.cache/hcq/headers/nv-<tag>, e.g. nv-535.261.03 for the older
branch's layouts that tests compare against) holds
  open-gpu-kernel-modules/   the members of KERNEL_MEMBERS at TAG
  open-gpu-doc/classes/      open-gpu-doc's class headers (compute methods, QMD layouts, copy methods)
  .complete                  the two trees' commits (written last, so a half-extracted tree is never used)

`python -m autogen.gen.nvheaders KERNEL_GIT_DIR DOC_GIT_DIR [--tag TAG]` fills it from two (bare) clones.
"""
from __future__ import annotations
import argparse, os, pathlib, shutil, subprocess, sys, tempfile
from autogen.gen.headers import HeadersMissing, Package, cache_root

TAG = "580.142"     # the driver branch whose layouts the bindings carry
KERNEL_MEMBERS = ("src/common/sdk/nvidia/inc", "src/nvidia/arch/nvalloc/unix/include", "kernel-open/common/inc",
                  "kernel-open/nvidia-uvm")
DOC_MEMBERS = ("classes",)
_HINT = ("extract them with `python -m autogen.gen.nvheaders <open-gpu-kernel-modules git dir> <open-gpu-doc git dir>` "
         "or point HCQ_NV_HEADERS at such a tree")


def tree_dir(tag: str = TAG) -> pathlib.Path:
  if tag == TAG and (env := os.environ.get("HCQ_NV_HEADERS")): return pathlib.Path(env)
  return cache_root() / f"nv-{tag}"


def packages(tag: str = TAG) -> tuple[Package, Package]:
  """(open-gpu-kernel-modules, open-gpu-doc) as extracted; raises HeadersMissing saying what to do."""
  root = tree_dir(tag)
  stamp = root / ".complete"
  if not stamp.exists():
    hint = _HINT if tag == TAG else _HINT.replace("dir>`", f"dir> --tag {tag}`").split(" or point")[0]
    raise HeadersMissing(f"NVIDIA headers ({tag}) not extracted in {root}: {hint}")
  info = dict(line.split("\t") for line in stamp.read_text().splitlines())
  if info.get("tag") != tag: raise HeadersMissing(f"{root} holds open-gpu-kernel-modules {info.get('tag')}, not {tag}: {_HINT}")
  return (Package("open-gpu-kernel-modules", tag, root / "open-gpu-kernel-modules", "open-gpu-kernel-modules/",
                  origin=f"NVIDIA open-gpu-kernel-modules tag {tag} (commit {info['kernel']})"),
          Package("open-gpu-doc", info["doc"][:12], root / "open-gpu-doc", "open-gpu-doc/",
                  origin=f"NVIDIA open-gpu-doc commit {info['doc']}"))


def _archive(git_dir: str, rev: str, members: tuple[str, ...], into: pathlib.Path) -> str:
  commit = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", f"{rev}^{{commit}}"], capture_output=True, text=True)
  if commit.returncode != 0: raise HeadersMissing(f"{git_dir} has no revision {rev}: {commit.stderr.strip()}")
  into.mkdir(parents=True)
  git = subprocess.Popen(["git", f"--git-dir={git_dir}", "archive", rev, *members], stdout=subprocess.PIPE)
  tar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=git.stdout, capture_output=True, text=True)
  if git.wait() != 0 or tar.returncode != 0: raise HeadersMissing(f"git archive {rev} of {git_dir} failed: {tar.stderr.strip()}")
  return commit.stdout.strip()


def fetch(kernel_git: str, doc_git: str, tag: str = TAG, doc_rev: str = "HEAD") -> pathlib.Path:
  """Extract both trees into tree_dir(tag) (idempotent: an existing complete tree of that tag is kept)."""
  root = tree_dir(tag)
  if (root / ".complete").exists(): return root
  root.parent.mkdir(parents=True, exist_ok=True)
  tmp = pathlib.Path(tempfile.mkdtemp(dir=root.parent))
  try:
    kernel = _archive(kernel_git, tag, KERNEL_MEMBERS, tmp / "open-gpu-kernel-modules")
    doc = _archive(doc_git, doc_rev, DOC_MEMBERS, tmp / "open-gpu-doc")
    (tmp / ".complete").write_text(f"tag\t{tag}\nkernel\t{kernel}\ndoc\t{doc}\n")
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
  finally: shutil.rmtree(tmp, ignore_errors=True)
  return root


if __name__ == "__main__":
  ap = argparse.ArgumentParser(prog="python -m autogen.gen.nvheaders", description=__doc__.split("\n")[0])
  ap.add_argument("kernel_git", help="git dir of NVIDIA/open-gpu-kernel-modules (bare clones work)")
  ap.add_argument("doc_git", help="git dir of NVIDIA/open-gpu-doc")
  ap.add_argument("--tag", default=TAG)
  args = ap.parse_args()
  try: print(fetch(args.kernel_git, args.doc_git, args.tag))
  except HeadersMissing as e: sys.exit(f"autogen: {e}")
