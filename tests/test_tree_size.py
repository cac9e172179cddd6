"""The tracked tree travels whole with every GPU check (the device machine takes at most 64
MiB per call, docs/gpu.md), beside the wheels it lacks (~10 MB): committed results' weights
must leave room for them. Superseded weights leave the tree (their JSON's
`model_path_retired` says how to restore them from git history)."""

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CARRY = 64 * 2**20  # bytes one device call takes
WHEELS = 10 * 2**20  # the wheels carried beside the tree (docs/gpu.md)


def test_the_tracked_tree_leaves_room_for_the_wheels():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\0")
    sizes = {f: (REPO / f).stat().st_size for f in files if f and (REPO / f).is_file()}
    assert len(sizes) > 100, "git ls-files listed almost nothing: the check would pass on nothing"
    total = sum(sizes.values())
    biggest = sorted(sizes, key=sizes.get, reverse=True)[:3]
    assert total + WHEELS <= CARRY, (
        f"the tracked tree is {total / 2**20:.1f} MiB: with the wheels it no longer fits "
        f"one device call ({CARRY // 2**20} MiB); the largest files: {biggest}. Retire "
        "superseded weights (git rm; note `model_path_retired` in their JSON)"
    )
