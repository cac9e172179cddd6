"""The system calls a sandboxed call may make, and its zygote between calls: everything else
answers EPERM (`sandbox.seccomp_filter` builds the filter from these lists).

Recorded, not guessed: `python -m bench.seccomp_record` ran every MBPP+ (399) and HumanEval (164)
canonical solution on every input of EvalPlus's verdict (43,624 calls) and a short corpus of
behaviours allowed on purpose (threads, a thread pool, a fork, sleeping, files in /tmp, an
AF_UNIX socket pair, large allocations and a MemoryError, stdlib imports, printing, deep
recursion, a CPU loop) with the filter in LOG mode; the kernel's audit records named each
call off the list (docs/results/seccomp_record.json, with the uid that made it: 0 is the
harness, before the call drops to its own uid), and `strace -f` on a zygote gave the
arguments of the calls narrowed below. Then reviewed by hand: a few calls were added that
serve the same purpose on another kernel or C library (marked "same call elsewhere": a
glibc that calls `select` where this one calls `pselect6` would otherwise stop the zygote),
or that no recorded program happened to reach but every process may need (`rt_sigreturn`,
the clocks when the vDSO cannot serve them), each with its reason. Nothing recorded was
left out. Not on the list, so refused (EPERM), among others: sysinfo, statfs/fstatfs, uname,
io_setup/io_submit, io_uring_*, fadvise64, readahead, mincore, preadv2/pwritev2, flock,
inotify/fanotify, memfd_create, execve, ptrace, bpf, perf_event_open, keyctl, SysV and POSIX
IPC, userfaultfd, prctl (but PR_SET_SECCOMP), sched_setaffinity, mlock, and every call a later
kernel adds. A call gets a second filter on top (`CALL_DENIED`), and the introspection calls
honest programs make (uname, umask, sched_getaffinity, getppid, ...) were added from a corpus
of benign programs (tests/sandbox/benign_corpus.py) that must answer inside a call as in a
plain interpreter.
"""

from __future__ import annotations

# Flag values: the same on x86_64 and aarch64 (asm-generic), the architectures the project runs on.
AF_UNIX = 1
F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC = 0, 1, 2, 3, 4, 1030
TCGETS, FIONBIO, FIONCLEX, FIOCLEX = 0x5401, 0x5421, 0x5450, 0x5451
MADV_DONTNEED = 4
MAP_SHARED_TYPE, MAP_PRIVATE = 0x03, 0x02  # MAP_SHARED 0x01, MAP_SHARED_VALIDATE 0x03
MAP_LOCKED, MAP_POPULATE, MAP_HUGETLB, MAP_SYNC = 0x2000, 0x8000, 0x40000, 0x80000
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_NAMESPACES = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
CLONE_PIDFD = 0x00001000  # a pidfd: its inode number counts every process the machine made (pidfs)
FUTEX_PRIVATE_FLAG = 128
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
MS_NOSUID, MS_NODEV, MS_MOVE, MNT_DETACH = 2, 4, 8192, 2

CALLS = (
    # recorded, made by the programs (uid of the call)
    "read", "write", "close", "openat", "newfstatat", "lseek", "getdents64", "mkdir", "rename", "unlink",
    "getcwd", "brk", "munmap", "mremap", "mprotect", "exit", "exit_group", "getpid", "gettid",
    "set_robust_list", "rseq", "rt_sigaction", "rt_sigprocmask", "clock_nanosleep", "getrandom",
    "getsockname", "sendto", "recvfrom", "epoll_create1",
    # recorded, made by the harness (sandbox.child before the uid drop; the zygote between calls)
    "pread64", "pwrite64", "dup2", "close_range", "pipe2", "chdir", "wait4", "kill", "setgroups",
    "setresgid", "setresuid", "getpriority", "setpriority", "getrusage", "pselect6", "pidfd_open",
    # not recorded, needed by any process: returning from a signal handler; the clocks, which the
    # vDSO answered here without a system call (not every clocksource allows it)
    "rt_sigreturn", "clock_gettime", "clock_getres", "gettimeofday",
    # not recorded (no run here lacked root): the zygote empties /tmp itself where a call gets no tmpfs of its own
    "rmdir", "unlinkat",
    # not recorded, harmless: the call's own identity (the same uid owns its /tmp, which stat shows)
    "getuid", "geteuid", "getgid", "getegid",
    # what honest programs ask of the machine and get on any other (the benign corpus,
    # tests/sandbox/benign_corpus.py: refused, os.uname, platform.system, os.umask and
    # os.sched_getaffinity raised and os.getppid answered -1): fixed for every call of a pool
    # (the jail's own UTS namespace; the process's own mask; the CPUs it may run on, which no
    # call can change; its parent, outside its PID namespace: 0, shown as 1 by sandbox.guards)
    "uname", "umask", "sched_getaffinity", "getppid", "getpgid", "getpgrp", "getsid", "getresuid", "getresgid",
    "getgroups", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
    # the zygote's reading of its cgroup's counters into one fixed buffer (sandbox.meter): pread64
    # with a vector (glibc makes it preadv2 without flags: CONDITIONAL), and a reply read into the
    # zygote's one fixed frame buffer (sandbox.worker): read with a vector
    "preadv", "readv",
    # the call's own session and process group (sandbox.child): kill(0, ...) reaches its processes only
    "setsid",
    # same call elsewhere (another C library or architecture makes these for the recorded ones)
    "select", "dup", "dup3", "pipe", "open", "fstat", "stat", "lstat", "statx", "getdents", "mkdirat", "renameat",
    "renameat2",
)  # fmt: skip  # table: one group of system calls a line, under its comment
ZYGOTE = ()  # the zygote's own needs are in CALLS (pselect6, pidfd_open, ...) or narrowed below (mount, setns, ...)
# Refused to a call by its own filter on top (`seccomp_filter.call_bpf`, loaded by the child right
# after the fork), needed by the zygote between calls: their objects' inode numbers come from
# machine-wide counters (pipes and sockets: get_next_ino, ~6.5-7 bits per call pair moved by
# making many; pidfds: pidfs numbers every process the machine made), and no benchmark program
# makes them (subprocess, multiprocessing, socket and os.pipe are banned for programs anyway)
CALL_DENIED = ("pipe", "pipe2", "socket", "socketpair", "pidfd_open")

# Allowed only with these arguments: per call, alternatives (any matches) of conditions (all
# hold): (argument index, "eq", value) or (argument index, "masked_eq", value, mask).
CONDITIONAL: dict[str, tuple[tuple[tuple, ...], ...]] = {
    # descriptor and status flags, dup (recorded: none; the stdlib's set_blocking/set_inheritable/fdopen):
    # no locks, leases, F_NOTIFY (dnotify), F_SETOWN/F_SETSIG, pipe sizes, seals
    "fcntl": tuple(((1, "eq", cmd),) for cmd in (F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC)),
    # recorded TCGETS (isatty when a file is opened) and FIONBIO (a socket's blocking mode); FIOCLEX /
    # FIONCLEX are the descriptor flags os.set_inheritable sets through ioctl
    "ioctl": tuple(((1, "eq", req),) for req in (TCGETS, FIONBIO, FIOCLEX, FIONCLEX)),
    # recorded AF_UNIX only (a socket pair): inet sockets meet no interface, netlink reply buffers are not
    # charged to the call's memory, AF_VSOCK reaches the VM's host
    "socket": (((0, "eq", AF_UNIX),),),
    "socketpair": (((0, "eq", AF_UNIX),),),
    # threads and plain forks (recorded: fork's flags; threads under this filter use clone, clone3
    # answers ENOSYS): no namespace flag, no pidfd (CLONE_PIDFD: see CALL_DENIED)
    "clone": (((0, "masked_eq", 0, CLONE_NAMESPACES | CLONE_PIDFD),),),
    # private futexes only (recorded: CPython's locks and conditions, glibc's; all process-private):
    # a shared one is keyed by (file, offset), and on a page of a file every worker maps (the
    # runtime copy, libc's own text) a wake crossed workers and pools: 48 of 48 bits
    "futex": (((1, "masked_eq", FUTEX_PRIVATE_FLAG, FUTEX_PRIVATE_FLAG),),),
    # glibc's preadv (sandbox.meter): no flags; RWF_NOWAIT (a page-cache probe) and the rest refused
    "preadv2": (((5, "eq", 0),),),
    # a filter on top of its own (the child loads the call's, `sandbox.world.seal`): it can only refuse more
    "prctl": (((0, "eq", PR_SET_SECCOMP), (1, "eq", SECCOMP_MODE_FILTER)),),
    # recorded MADV_DONTNEED (a thread's stack, malloc's trim): not MERGEABLE (KSM, machine-wide), WILLNEED /
    # POPULATE / COLD / PAGEOUT (page cache and reclaim), HWPOISON
    "madvise": (((2, "eq", MADV_DONTNEED),),),
    # recorded: private mappings only (anonymous, stacks, the loader's); not shared, locked, populated
    # (page cache), huge pages (a machine-wide pool) or MAP_SYNC
    "mmap": (((3, "masked_eq", MAP_PRIVATE, MAP_SHARED_TYPE | MAP_LOCKED | MAP_POPULATE | MAP_HUGETLB | MAP_SYNC),),),
    # recorded: the process's own limits (pid 0); the call lowers them, it cannot raise them
    "prlimit64": (((0, "eq", 0),),),
    # the zygote's, recorded: its calls' PID namespace and /tmp (a call has no capabilities, the kernel refuses it these)
    "unshare": (((0, "eq", CLONE_NEWPID),),),
    "setns": (((1, "eq", CLONE_NEWPID),),),
    "mount": (((3, "eq", MS_NOSUID | MS_NODEV),), ((3, "eq", MS_MOVE),)),
    "umount2": (((1, "eq", MNT_DETACH),),),
}
