"""unified/files.py: the one digest, JSONL reader and `latest` pointer the package shares."""

import hashlib

from unified.files import latest_checkpoint, read_jsonl, sha256


def test_sha256_is_the_digest_of_the_files_in_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * (3 << 20))
    b.write_bytes(b"yz")
    assert sha256(a, b) == hashlib.sha256(a.read_bytes() + b.read_bytes()).hexdigest()
    assert sha256(a) != sha256(b, a)


def test_read_jsonl_skips_a_torn_line_and_non_objects(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"round": 1}\n\n[1, 2]\n{"round": 2}\n{"round": 3, "tor')
    assert read_jsonl(path) == [{"round": 1}, {"round": 2}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_latest_checkpoint_follows_the_pointer(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    (tmp_path / "latest").write_text("round_000002\n")
    assert latest_checkpoint(tmp_path) == tmp_path / "round_000002"
