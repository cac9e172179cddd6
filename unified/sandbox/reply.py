"""The parent's reading of one worker reply: bytes in, an `ExecResult` out, never an exception.

A reply is b"<wait status> <cpu s> <wall s> <timeout kind>\\n" (written by the trusted
worker) followed by the child's message b"<status> <len value> <len error> <len stdout>\\n"
+ fields (written by a process that ran untrusted code, so: anything at all). The
worker's verdict decides first (a timeout stays a timeout whatever the child wrote);
then the child's message is checked field by field and the value is read with
`values.from_literal` (an AST walk, never eval). Whatever does not fit, however large,
malformed or deeply nested, becomes status "crashed".
"""

from __future__ import annotations

import signal

from unified.pipeline.values import from_literal

CHILD_STATUSES = ("ok", "error", "banned", "memory")
MAX_ERROR_CHARS = 4000
_NAMES = {"True": True, "False": False, "None": None}


def parse_reply(reply: bytes, max_output_bytes: int, result_type):
    """`result_type(status, value, error, duration_s, stdout, cpu_s, timeout)` from a reply."""
    try:
        return _parse(reply, max_output_bytes, result_type)
    except Exception as e:  # noqa: BLE001 - whatever the child wrote, the parent goes on
        return result_type("crashed", error=f"unreadable reply: {type(e).__name__}")


def _parse(reply: bytes, max_output_bytes: int, result_type):
    head, _, message = reply.partition(b"\n")
    status_text, cpu_text, wall_text, kind = head.decode("ascii").split()
    wait_status, cpu, wall = int(status_text), float(cpu_text), float(wall_text)
    timing = {"duration_s": wall, "cpu_s": cpu}
    if kind in ("cpu", "wall"):
        what = "CPU-time" if kind == "cpu" else "wall-clock (backstop)"
        return result_type("timeout", error=f"{what} limit exceeded", timeout=kind, **timing)
    child = _child_message(message, max_output_bytes)
    if child is None:
        return result_type("crashed", error=_death(wait_status), **timing)
    status, value_text, error, stdout = child
    if status == "ok":
        try:
            value = _read_value(value_text)
        except Exception as e:  # noqa: BLE001 - LiteralError, or anything the parser raised
            return result_type("crashed", error=f"unreadable result: {str(e)[:200]}", stdout=stdout, **timing)
        return result_type("ok", value, "", stdout=stdout, **timing)
    return result_type(status, None, error[:MAX_ERROR_CHARS], stdout=stdout, **timing)


def _read_value(text: str):
    """`from_literal(text)`, with the commonest results (a small decimal int, True, False,
    None) read directly: the same value, without parsing an AST for every call."""
    if text in _NAMES:
        return _NAMES[text]
    digits = text[1:] if text[:1] == "-" else text
    if 0 < len(digits) < 19 and digits.isascii() and digits.isdigit() and (digits[0] != "0" or digits == "0"):
        return int(text)
    return from_literal(text)


def _child_message(message: bytes, max_output_bytes: int):
    """(status, value text, error, stdout) or None when the message is missing or malformed."""
    head, sep, body = message.partition(b"\n")
    if not sep or len(head) > 64:
        return None
    words = head.split()
    if len(words) != 4 or not all(w.isdigit() and len(w) <= 9 for w in words[1:]):
        return None
    status = words[0].decode("ascii", "replace")
    lv, le, lo = (int(w) for w in words[1:])
    if status not in CHILD_STATUSES or lv + le + lo != len(body):
        return None
    value = body[:lv].decode("utf-8")
    error = body[lv : lv + le].decode("utf-8", "replace")
    stdout = body[lv + le :][:max_output_bytes].decode("utf-8", "ignore")
    return status, value, error, stdout


def _death(wait_status: int) -> str:
    if wait_status & 0x7F:  # killed by a signal
        number = wait_status & 0x7F
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}"
    return f"exited with code {(wait_status >> 8) & 0xFF} without a result"
