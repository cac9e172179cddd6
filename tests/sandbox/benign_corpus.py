"""A corpus of honest programs that ask the machine ordinary questions through the standard
library (platform, os, sys, time, datetime, calendar, hashlib, random, logging, threads,
multiprocessing's helpers, ...): each `f()` returns what any Linux machine answers the same
way, so a call must return what a plain interpreter returns (tests/sandbox/test_benign_corpus.py).
The allowlist's introspection calls were decided from it (`sandbox.allowlist`).

`SAFE`: the programs that import no module banned for safety, so they run under the default
policy as well (the determinism bans do not apply outside `run_twice`)."""

PROGRAMS = {
    "platform": """
import platform
def f():
    return [platform.system(), platform.machine(), platform.release(), platform.python_version(),
            platform.python_implementation(), platform.architecture()[0], platform.node() != '',
            platform.platform(), platform.uname().system, platform.libc_ver()[0]]
""",
    "uname": """
import os
def f():
    u = os.uname()
    return [u.sysname, u.machine, u.release, u.version, u.nodename == os.uname()[1]]
""",
    "umask": """
import os
def f():
    old = os.umask(0o027)
    back = os.umask(old)
    return [back, 0 <= old <= 0o777]
""",
    "affinity": """
import os
def f():
    cpus = os.sched_getaffinity(0)
    return [len(cpus) >= 1, all(isinstance(c, int) for c in cpus), os.cpu_count() is not None and os.cpu_count() >= 1,
            len(cpus) <= (os.cpu_count() or 1)]
""",
    "ids": """
import os
def f():
    return [os.getppid() > 0, os.getpid() > 0, os.getpgrp() > 0, os.getsid(0) > 0, os.getuid() >= 0,
            os.geteuid() == os.getuid(), os.getgid() >= 0, isinstance(os.getgroups(), list),
            len(os.getresuid()) == 3, len(os.getresgid()) == 3]
""",
    "sysconf": """
import os
def f():
    return [os.sysconf('SC_PAGE_SIZE'), os.sysconf('SC_CLK_TCK'), os.sysconf('SC_NPROCESSORS_ONLN') >= 1,
            os.sysconf('SC_OPEN_MAX') > 0, os.sysconf('SC_ARG_MAX') > 0]
""",
    "paths": """
import os
def f():
    return [os.path.isdir('/'), os.path.isdir('/tmp'), os.access('/tmp', os.W_OK), os.access('/', os.R_OK),
            os.path.realpath('/tmp'), os.getcwd() != '', os.path.join('a', 'b'), os.sep, os.name,
            os.path.abspath('x').endswith('/x')]
""",
    "time": """
import time
def f():
    return [time.time() > 1.7e9, time.monotonic() > 0, time.perf_counter() >= 0, time.process_time() >= 0,
            time.thread_time() >= 0, time.gmtime(0).tm_year, time.strftime('%Y-%m-%d', time.gmtime(86400 * 366)),
            time.localtime().tm_year >= 2024, time.get_clock_info('monotonic').monotonic,
            time.time_ns() > 10 ** 18, time.sleep(0.001)]
""",
    "datetime": """
import datetime
def f():
    d = datetime.date(2024, 2, 29)
    return [d.isoformat(), d.weekday(), (datetime.datetime(2020, 1, 1) + datetime.timedelta(days=40)).isoformat(),
            datetime.datetime.now().year >= 2024, datetime.datetime.fromtimestamp(0, datetime.timezone.utc).isoformat(),
            datetime.date.today() >= datetime.date(2024, 1, 1), datetime.datetime.strptime('2021-03-04', '%Y-%m-%d').day]
""",
    "calendar": """
import calendar
def f():
    return [calendar.isleap(2024), calendar.monthrange(2023, 2), calendar.weekday(2000, 1, 1),
            calendar.month_name[3], len(calendar.monthcalendar(2024, 5))]
""",
    "hashlib": """
import hashlib, hmac
def f():
    return [hashlib.sha256(b'abc').hexdigest(), hashlib.md5(b'abc').hexdigest(), hashlib.sha1(b'').hexdigest(),
            hashlib.blake2b(b'x', digest_size=8).hexdigest(), hmac.new(b'k', b'm', 'sha256').hexdigest()[:16],
            sorted(hashlib.algorithms_guaranteed)[:3]]
""",
    "random": """
import random, secrets, uuid
def f():
    r = random.Random(42)
    return [r.random(), r.randint(1, 100), random.Random(1).sample(range(10), 3), len(secrets.token_hex(8)),
            str(uuid.uuid5(uuid.NAMESPACE_DNS, 'example.org')), uuid.uuid4().version, 0 <= random.random() < 1]
""",
    "logging": """
import io, logging
def f():
    stream = io.StringIO()
    log = logging.getLogger('corpus')
    log.addHandler(logging.StreamHandler(stream))
    log.setLevel(logging.INFO)
    log.info('hello %s', 'world')
    log.debug('hidden')
    logging.basicConfig()
    return stream.getvalue()
""",
    "sys": """
import sys
def f():
    return [sys.maxsize, sys.byteorder, sys.getrecursionlimit() >= 1000, sys.platform, list(sys.version_info[:2]),
            sys.getdefaultencoding(), sys.float_info.max, sys.hash_info.width, sys.int_info.bits_per_digit,
            sys.getfilesystemencoding(), sys.stdin.isatty(), sys.stdout.isatty()]
""",
    "locale": """
import locale, string
def f():
    return [locale.getpreferredencoding(False), locale.getlocale()[1], string.ascii_letters[:5],
            '{:,}'.format(1234567), locale.str(1.5)]
""",
    "threads": """
import threading, queue
from concurrent.futures import ThreadPoolExecutor
def f():
    out = queue.Queue()
    workers = [threading.Thread(target=lambda k=k: out.put(k * k)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with ThreadPoolExecutor(2) as pool:
        mapped = list(pool.map(lambda x: x + 1, range(5)))
    lock = threading.Lock()
    with lock:
        held = lock.locked()
    event = threading.Event()
    event.set()
    return [sorted(out.get() for _ in range(4)), mapped, held, event.wait(0.1), threading.active_count() >= 1]
""",
    "multiprocessing": """
import multiprocessing, os
def f():
    return [multiprocessing.cpu_count() >= 1, multiprocessing.cpu_count() == os.cpu_count(),
            multiprocessing.current_process().name, multiprocessing.get_start_method(allow_none=True) in (None, 'fork', 'forkserver', 'spawn')]
""",
    "files": """
import os, tempfile, resource
def f():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'x.txt')
        with open(path, 'w') as fh:
            fh.write('abc')
        size = os.path.getsize(path)
        names = os.listdir(d)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return [size, names, tempfile.gettempdir(), soft > 0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0,
            resource.getpagesize()]
""",
    "host": """
import platform, socket
def f():
    return [socket.gethostname() == platform.node(), int(socket.AF_INET), socket.has_ipv6]
""",
}

SAFE = (
    "platform",
    "uname",
    "umask",
    "affinity",
    "ids",
    "sysconf",
    "paths",
    "time",
    "datetime",
    "calendar",
    "hashlib",
    "random",
    "logging",
    "sys",
    "locale",
)
