"""The parent's reading of one worker reply: bytes in, an `ExecResult` out, never an exception.

A reply is b"<wait status> <cpu s> <wall s> <verdict>\\n" (written by the trusted worker;
verdict: "cpu" or "wall" for a timeout, "memory" when the call's cgroup hit its memory
limit, "output" when the child wrote more than a reply may hold (the worker killed it at once:
"bad_reply"), "-" otherwise) followed by the child's message b"<status> <len value> <len error>
<len stdout>\\n" + fields (written by a process that ran untrusted code, so: anything at
all). The worker's verdict decides first (a timeout stays a timeout whatever the child
wrote); then the child's message is checked field by field:

- no well-formed message (missing, cut short, lengths that do not add up): "crashed",
  with how the child died;
- a well-formed message whose value is not a literal within the reader's limits
  (`values.from_literal` with `max_chars` = max_output_bytes, what an honest child can
  write; ints of at most `INT_BITS` bits in any base; nesting; crowded hashes):
  "bad_reply", naming the limit. The parent's cost is linear in the reply's size.
"""

from __future__ import annotations

import signal

from unified.values.literal import LiteralError
from unified.values.literal_read import ReadLimits, read_literal

CHILD_STATUSES = ("ok", "error", "banned", "memory")
MAX_ERROR_CHARS = 4000
_NAMES = {"True": True, "False": False, "None": None}
_VERDICTS = {
    "cpu": ("timeout", "CPU-time limit exceeded"),
    "wall": ("timeout", "wall-clock (backstop) limit exceeded"),
    "memory": ("memory", "memory limit of the call (all its processes) exceeded"),
    "output": ("bad_reply", "bad reply: longer than the reply limit (4 x max_output_bytes + 64 KiB); the call was killed"),
}


def parse_reply(reply: bytes, max_output_bytes: int, result_type):
    """`result_type(status, value, error, duration_s, stdout, cpu_s, timeout)` from a reply."""
    try:
        return _parse(reply, max_output_bytes, result_type)
    except Exception as e:  # noqa: BLE001 - whatever the child wrote, the parent goes on
        return result_type("crashed", error=f"unreadable reply: {type(e).__name__}")


def _parse(reply: bytes, max_output_bytes: int, result_type):
    head, _, message = reply.partition(b"\n")
    status_text, cpu_text, wall_text, verdict = head.decode("ascii").split()
    wait_status, cpu, wall = int(status_text), float(cpu_text), float(wall_text)
    timing = {"duration_s": wall, "cpu_s": cpu}
    if verdict in _VERDICTS:
        status, error = _VERDICTS[verdict]
        return result_type(status, error=error, timeout=verdict if status == "timeout" else "", **timing)
    child = _child_message(message, max_output_bytes)
    if child is None:
        return result_type("crashed", error=_death(wait_status), **timing)
    status, value_bytes, error, stdout = child
    if status == "ok":
        try:
            value = _read_value(value_bytes.decode("utf-8"), max_output_bytes)
        except (LiteralError, UnicodeDecodeError) as e:
            return result_type("bad_reply", error=f"bad reply: {str(e)[:200]}", stdout=stdout, **timing)
        return result_type("ok", value, "", stdout=stdout, **timing)
    return result_type(status, None, error[:MAX_ERROR_CHARS], stdout=stdout, **timing)


def _read_value(text: str, max_chars: int):
    """The value `text` writes, read within the limits (module doc), with the commonest
    results (a small decimal int, True, False, None) read directly: the same value,
    without parsing an AST for every call."""
    if text in _NAMES:
        return _NAMES[text]
    digits = text[1:] if text[:1] == "-" else text
    if 0 < len(digits) < 19 and digits.isascii() and digits.isdigit() and (digits[0] != "0" or digits == "0"):
        return int(text)
    return read_literal(text, ReadLimits(max_chars=max_chars))


def _child_message(message: bytes, max_output_bytes: int):
    """(status, value bytes, error, stdout) or None when the message is missing or malformed."""
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
    error = body[lv : lv + le].decode("utf-8", "replace")
    stdout = body[lv + le :][:max_output_bytes].decode("utf-8", "ignore")
    return status, body[:lv], error, stdout


def _death(wait_status: int) -> str:
    if wait_status & 0x7F:  # killed by a signal
        number = wait_status & 0x7F
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}"
    return f"exited with code {(wait_status >> 8) & 0xFF} without a result"
