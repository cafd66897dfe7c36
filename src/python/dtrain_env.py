# SPDX-License-Identifier: Apache-2.0
"""The dtrain SPANK plugin's values that were too long for execve, read back and checked.

Linux refuses to start a program when one NAME=value string of its environment exceeds 131072
bytes (MAX_ARG_STRLEN). An endpoint list or TF_CONFIG of a few thousand ranks does. The plugin
then exports, instead of NAME:

    NAME_FILE   /proc/self/fd/N: a sealed memory file (memfd) that the task holds open and that
                every process the task starts inherits, unless it closes its descriptors
    NAME_HASH   the XXH3-64 of the value, 16 hex digits (DTRAIN_ENDPOINTS_HASH is always set)

and removes any NAME the task inherited. TensorFlow and PaddlePaddle read only NAME. Before they
start, a Python program calls:

    import dtrain_env
    dtrain_env.load()      # TF_CONFIG, PADDLE_TRAINER_ENDPOINTS, DTRAIN_ENDPOINTS into os.environ

or, to leave the environment alone, dtrain_env.read("TF_CONFIG").

Each file is checked before its value is used: the memory file's name, which readlink shows as
"/memfd:dtrain:JOB.STEP:rankRANK:NAME[,NAME...] (deleted)", must name this task (SLURM_JOB_ID,
SLURM_STEP_ID, SLURM_PROCID) and the variable; the file must be sealed against changes; and the
value must have NAME_HASH. A process that did not inherit the descriptor (Python's subprocess
closes them by default) finds another file or nothing at /proc/self/fd/N: it then tries the
task's own /proc/SLURM_TASK_PID/fd/N, which works while the task lives, in the task's PID
namespace, for the task's user. Where neither is this task's file, MemoryFileError says what each
path held: another step's file (the task's PID was reused), another file at that number, nothing.

load() puts the values into this process's os.environ only: os.environ, os.getenv and the
frameworks' Python code see them, the C environment does not. A value there would be passed to
every program this process starts with exec, and each would fail with E2BIG ("Argument list too
long"): PaddlePaddle runs shell commands when imported, subprocess and multiprocessing's "spawn"
exec. Those programs get NAME_FILE as the task did and call load() themselves. Only a child
started with an explicit copy of os.environ (env=os.environ.copy()) gets the values, and fails.

Installed by dtrain under share/dtrain/python (PYTHONPATH=/usr/share/dtrain/python); it has no
dependencies beyond the standard library. See spank_dtrain(8), MEMORY FILES.
"""

import fcntl
import os
import re
import stat
import struct

__all__ = ["NAMES", "MemoryFileError", "load", "read", "value_hash"]

# The values the plugin may put into memory files.
NAMES = ("DTRAIN_ENDPOINTS", "PADDLE_TRAINER_ENDPOINTS", "TF_CONFIG")

_REQUIRED_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
_PATH = re.compile(r"/proc/self/fd/([0-9]{1,9})")
_LABEL = re.compile(r"/memfd:dtrain:([0-9]+)\.([0-9]+):rank([0-9]+):([A-Za-z0-9_,]+) \(deleted\)")
_HASH = re.compile(r"[0-9a-f]{16}")
# No value the plugin writes comes near this; a larger file is not one of its memory files.
_MAX_BYTES = 1 << 30


class MemoryFileError(RuntimeError):
    """A memory file the plugin exported cannot be read, or what was read is not it."""


# --- XXH3_64bits (xxHash 0.8, its default secret), as the plugin computes NAME_HASH -----------

_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1
_P32_1, _P32_2, _P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_P64_1, _P64_2, _P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P64_4, _P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_STRIPES_PER_BLOCK = (len(_SECRET) - 64) // 8  # 16
_BLOCK = 64 * _STRIPES_PER_BLOCK               # 1024 bytes


def _u64(data, offset):
    return struct.unpack_from("<Q", data, offset)[0]


def _u32(data, offset):
    return struct.unpack_from("<I", data, offset)[0]


def _xxh64_avalanche(h):
    h ^= h >> 33
    h = (h * _P64_2) & _M64
    h ^= h >> 29
    h = (h * _P64_3) & _M64
    return h ^ (h >> 32)


def _avalanche(h):
    h ^= h >> 37
    h = (h * 0x165667919E3779F9) & _M64
    return h ^ (h >> 32)


def _mul128_fold64(a, b):
    product = a * b
    return (product ^ (product >> 64)) & _M64


def _rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & _M64


def _mix16(data, offset, secret_offset):
    return _mul128_fold64(_u64(data, offset) ^ _u64(_SECRET, secret_offset),
                          _u64(data, offset + 8) ^ _u64(_SECRET, secret_offset + 8))


def _short(data):
    n = len(data)
    if n > 8:
        low = _u64(data, 0) ^ (_u64(_SECRET, 24) ^ _u64(_SECRET, 32))
        high = _u64(data, n - 8) ^ (_u64(_SECRET, 40) ^ _u64(_SECRET, 48))
        swapped = int.from_bytes(low.to_bytes(8, "little"), "big")
        return _avalanche((n + swapped + high + _mul128_fold64(low, high)) & _M64)
    if n >= 4:
        keyed = ((_u32(data, n - 4) + (_u32(data, 0) << 32)) ^
                 (_u64(_SECRET, 8) ^ _u64(_SECRET, 16)))
        keyed ^= _rotl64(keyed, 49) ^ _rotl64(keyed, 24)
        keyed = (keyed * 0x9FB21C651E98DF25) & _M64
        keyed ^= (keyed >> 35) + n
        keyed = (keyed * 0x9FB21C651E98DF25) & _M64
        return keyed ^ (keyed >> 28)
    if n:
        combined = (data[0] << 16) | (data[n >> 1] << 24) | data[n - 1] | (n << 8)
        return _xxh64_avalanche(combined ^ (_u32(_SECRET, 0) ^ _u32(_SECRET, 4)))
    return _xxh64_avalanche(_u64(_SECRET, 56) ^ _u64(_SECRET, 64))


def _medium(data):
    n = len(data)
    acc = (n * _P64_1) & _M64
    if n <= 128:
        for i in range((n - 1) // 32, -1, -1):  # outer pairs first, as xxhash adds them
            acc += _mix16(data, 16 * i, 32 * i) + _mix16(data, n - 16 * (i + 1), 32 * i + 16)
        return _avalanche(acc & _M64)
    for i in range(8):
        acc += _mix16(data, 16 * i, 16 * i)
    acc = _avalanche(acc & _M64)
    for i in range(8, n // 16):
        acc += _mix16(data, 16 * i, 16 * (i - 8) + 3)
    acc += _mix16(data, n - 16, 136 - 17)
    return _avalanche(acc & _M64)


def _accumulate(acc, words, first_word, stripes, secret_words):
    """Adds `stripes` stripes starting at words[first_word] to acc (lanes unmasked)."""
    for lane in range(8):
        values = words[first_word + lane:first_word + lane + 8 * stripes:8]
        keys = secret_words[lane:lane + stripes]
        acc[lane ^ 1] += sum(values)
        acc[lane] += sum(((v ^ k) & _M32) * ((v ^ k) >> 32) for v, k in zip(values, keys))


def _long(data):
    n = len(data)
    words = struct.unpack_from(f"<{n // 8}Q", data)
    secret_words = struct.unpack_from("<24Q", _SECRET)
    scramble = struct.unpack_from("<8Q", _SECRET, len(_SECRET) - 64)
    acc = [_P32_3, _P64_1, _P64_2, _P64_3, _P64_4, _P32_2, _P64_5, _P32_1]
    blocks = (n - 1) // _BLOCK
    for block in range(blocks):
        _accumulate(acc, words, block * _BLOCK // 8, _STRIPES_PER_BLOCK, secret_words)
        for lane in range(8):
            a = acc[lane] & _M64
            acc[lane] = (((a ^ (a >> 47)) ^ scramble[lane]) * _P32_1) & _M64
    stripes = ((n - 1) - blocks * _BLOCK) // 64
    _accumulate(acc, words, blocks * _BLOCK // 8, stripes, secret_words)
    last = struct.unpack_from("<8Q", data, n - 64)  # the last stripe, unaligned
    last_keys = struct.unpack_from("<8Q", _SECRET, len(_SECRET) - 64 - 7)
    _accumulate(acc, last, 0, 1, last_keys)
    acc = [a & _M64 for a in acc]
    result = (n * _P64_1) & _M64
    for i in range(4):
        result += _mul128_fold64(acc[2 * i] ^ _u64(_SECRET, 11 + 16 * i),
                                 acc[2 * i + 1] ^ _u64(_SECRET, 11 + 16 * i + 8))
    return _avalanche(result & _M64)


def xxh3_64(data):
    """XXH3_64bits(data): xxHash's 64-bit XXH3 with its default secret, as libxxhash computes it."""
    data = bytes(data)
    if len(data) <= 16:
        return _short(data)
    if len(data) <= 240:
        return _medium(data)
    return _long(data)


def value_hash(value):
    """NAME_HASH of a value: XXH3-64 of its UTF-8 bytes, 16 lower-case hex digits."""
    if isinstance(value, str):
        value = value.encode()
    return f"{xxh3_64(value):016x}"


# --- Reading a memory file ---------------------------------------------------------------

def _required(environ, name, why):
    value = environ.get(name)
    if value is None or value == "":
        raise MemoryFileError(f"dtrain: {name} is not set: {why}")
    return value


def _slurm_id(environ, name, what):
    text = _required(environ, name, f"{what} cannot be checked against the task's {name}; read "
                     "it in a process of the step's task (srun --distributed-train)")
    if not text.isdigit():
        raise MemoryFileError(f"dtrain: {name}={text!r} is not a number")
    return int(text)


def _examine(place, name, owner, expected_hash):
    """The value at place, or why it is not this task's NAME (the core's memory_file_mismatch
    says the same)."""
    try:
        fd = os.open(place, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as error:
        return None, f"{place}: {error.strerror}"
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
        shown = f"{place} ({''.join(c if ' ' <= c <= '~' else '?' for c in target[:300])})"
        label = _LABEL.fullmatch(target)
        if not label:
            return None, f"{shown} is not a memory file of dtrain"
        found = tuple(int(label.group(i)) for i in (1, 2, 3))
        if found != owner:
            return None, (f"{shown} is the memory file of job {found[0]} step {found[1]} rank "
                          f"{found[2]}, not of this task (job {owner[0]} step {owner[1]} rank "
                          f"{owner[2]}): the path reached another process")
        if name not in label.group(4).split(","):
            return None, f"{shown} holds another value, not {name}"
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        status = os.fstat(fd)
        if (seals & _REQUIRED_SEALS != _REQUIRED_SEALS or not stat.S_ISREG(status.st_mode)
                or status.st_size > _MAX_BYTES):
            return None, f"{shown} is not sealed against changes"
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        content = b"".join(chunks)
    except OSError as error:
        return None, f"{place}: {error.strerror}"
    finally:
        os.close(fd)
    actual = value_hash(content)
    if actual != expected_hash:
        return None, (f"{shown} has hash {actual}, not {name}_HASH={expected_hash}: its content "
                      "is not the value the plugin exported")
    try:
        return content.decode(), None
    except UnicodeDecodeError:
        return None, f"{shown} is not UTF-8 text"


def read(name, environ=None):
    """NAME's value as the plugin exported it: the checked content of NAME_FILE's memory file
    when NAME_FILE is set, else NAME; None when neither is set. Raises MemoryFileError."""
    environ = os.environ if environ is None else environ
    path = environ.get(name + "_FILE")
    if path is None:
        return environ.get(name)
    match = _PATH.fullmatch(path)
    if not match:
        raise MemoryFileError(f"dtrain: {name}_FILE={path!r} is not a memory file of the plugin "
                              "(/proc/self/fd/N); unset it, or launch with srun "
                              "--distributed-train")
    expected_hash = _required(environ, name + "_HASH",
                              f"{name}_FILE's content cannot be checked; the plugin sets both")
    if not _HASH.fullmatch(expected_hash):
        raise MemoryFileError(f"dtrain: {name}_HASH={expected_hash!r} is not 16 hex digits")
    what = f"{name}_FILE"
    owner = (_slurm_id(environ, "SLURM_JOB_ID", what), _slurm_id(environ, "SLURM_STEP_ID", what),
             _slurm_id(environ, "SLURM_PROCID", what))
    places = [path]
    task_pid = environ.get("SLURM_TASK_PID", "")
    if task_pid.isdigit() and int(task_pid) != os.getpid():
        places.append(f"/proc/{task_pid}/fd/{match.group(1)}")
    problems = []
    for place in places:
        value, problem = _examine(place, name, owner, expected_hash)
        if problem is None:
            return value
        problems.append(problem)
    raise MemoryFileError(
        f"dtrain: cannot read {name} from its memory file: " + "; ".join(problems) +
        ". The file lives as long as the step's task and is inherited by the processes it "
        "starts; read it in the task or in a child that kept its descriptors")


def _set_in_this_process(environ, name, value):
    if environ is os.environ and hasattr(environ, "_data"):
        # Not os.environ[name] = value, which also calls putenv(): see the module's text.
        environ._data[environ.encodekey(name)] = environ.encodevalue(value)
    else:
        environ[name] = value


def load(names=NAMES, environ=None):
    """Puts the value of each NAME in `names` whose NAME_FILE is set into environ (os.environ by
    default, for this process only), checked as read() checks it. Returns the names it set.
    Raises MemoryFileError."""
    environ = os.environ if environ is None else environ
    loaded = []
    for name in names:
        if name + "_FILE" in environ:
            _set_in_this_process(environ, name, read(name, environ))
            loaded.append(name)
    return loaded
