"""The committed docs read the same on every clone: no file under docs/ (prose or result JSON)
names a path of the machine that wrote it (a model cache under /root, a scratch folder under
/tmp, a checkout under /work or /home)."""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:root|tmp|work|home)/[\w.+-]")


def machine_paths(text: str) -> list[str]:
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


def test_the_pattern_sees_machine_paths_and_leaves_relative_ones():
    assert machine_paths('"model_dir": "/root/.cache/unified/smollm2"') == ["/root/."]
    assert machine_paths("see /tmp/push_time_x/10m and /work/main/logs") == ["/tmp/p", "/work/m"]
    assert machine_paths("docs/results/x.json, logs/bench/tmp/a, https://x.org/work/y, bf16/tmp") == []


def test_no_committed_doc_names_a_machine_path():
    files = subprocess.run(["git", "ls-files", "docs"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert files, "git ls-files found no docs: the check would pass on nothing"
    found = {
        f: machine_paths((REPO / f).read_text(errors="replace"))[:3]
        for f in files
        if f.endswith((".md", ".json", ".txt", ".csv"))
    }
    assert not {f: p for f, p in found.items() if p}, "record a folder's name or a path inside the repo instead"
