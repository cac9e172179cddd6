"""Where a layer or a per-call limit is missing, the executor says so once, in one line."""

import logging

from unified.sandbox import notice

FULL = {"root_user": True, "pidns_per_call": True, "tmpfs_per_call": True, "runtime_copy": True, "seccomp": True}
ALL_LIMITS = {"memory": True, "pids": True, "cpu": True}


def test_nothing_is_said_when_everything_is_on(caplog):
    with caplog.at_level(logging.WARNING, logger="unified"):
        assert notice.say_what_is_missing(FULL, ALL_LIMITS) is None
    assert not caplog.records


def test_missing_cgroups_are_one_line_said_once(caplog, monkeypatch):
    monkeypatch.setattr(notice, "_said", set())
    no_cgroups = {"memory": False, "pids": False, "cpu": False}
    with caplog.at_level(logging.WARNING, logger="unified"):
        line = notice.say_what_is_missing(FULL, no_cgroups)
        assert notice.say_what_is_missing(FULL, no_cgroups) == line
    assert [r.getMessage() for r in caplog.records] == [line]
    assert "\n" not in line and all(word in line for word in ("memory", "process count", "CPU time"))


def test_without_root_or_libseccomp_the_line_says_what_is_lost(monkeypatch):
    monkeypatch.setattr(notice, "_said", set())
    assert "not root" in notice.say_what_is_missing({"root_user": False}, {})
    assert "keyrings" in notice.say_what_is_missing(FULL | {"seccomp": False}, ALL_LIMITS)
