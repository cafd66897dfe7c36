# SPDX-License-Identifier: Apache-2.0
"""src/python/dtrain_env.py alone: its XXH3-64 is libxxhash's (the plugin's NAME_HASH), and it
refuses what it cannot check. tests/unit/test_memory_files.cpp runs it on the plugin's own files.

Run: PYTHONPATH=src/python python3 -m unittest tests/unit/test_dtrain_env.py
"""
import ctypes
import ctypes.util
import os
import random
import unittest

import dtrain_env


def libxxhash():
    path = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
    lib = ctypes.CDLL(path)
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib


def task(name, path, value, **more):
    environ = {f"{name}_FILE": path, f"{name}_HASH": dtrain_env.value_hash(value),
               "SLURM_JOB_ID": "501", "SLURM_STEP_ID": "2", "SLURM_PROCID": "7"}
    environ.update(more)
    return environ


class Hash(unittest.TestCase):
    def test_matches_libxxhash_at_every_length_class(self):
        lib = libxxhash()
        rnd = random.Random(36)
        # Every length up to two blocks and a stripe (0-16, 17-128, 129-240, then long inputs
        # with 0, 1 and 2 scrambles), then sizes around execve's limit and a 100k-rank list.
        lengths = list(range(0, 2200)) + [131071, 131072, 131073, 1_800_059]
        for n in lengths:
            data = bytes(rnd.getrandbits(8) for _ in range(n)) if n < 5000 else os.urandom(n)
            self.assertEqual(dtrain_env.xxh3_64(data), lib.XXH3_64bits(data, n), n)

    def test_value_hash_is_sixteen_hex_digits_of_the_utf8_bytes(self):
        self.assertEqual(dtrain_env.value_hash(""), f"{libxxhash().XXH3_64bits(b'', 0):016x}")
        self.assertEqual(dtrain_env.value_hash("a:1,b:2"), dtrain_env.value_hash(b"a:1,b:2"))


class Refusals(unittest.TestCase):
    def test_without_a_file_the_plain_value_is_read(self):
        self.assertEqual(dtrain_env.read("TF_CONFIG", {"TF_CONFIG": "{}"}), "{}")
        self.assertIsNone(dtrain_env.read("TF_CONFIG", {}))
        environ = {"TF_CONFIG": "{}"}
        self.assertEqual(dtrain_env.load(environ=environ), [])
        self.assertEqual(environ, {"TF_CONFIG": "{}"})

    def test_a_path_that_is_not_a_memory_file_is_refused(self):
        environ = task("TF_CONFIG", "/tmp/tf_config.json", "{}")
        with self.assertRaisesRegex(dtrain_env.MemoryFileError,
                                    "TF_CONFIG_FILE='/tmp/tf_config.json' is not a memory file"):
            dtrain_env.read("TF_CONFIG", environ)

    def test_missing_hash_or_ids_are_named(self):
        environ = task("TF_CONFIG", "/proc/self/fd/512", "{}")
        del environ["TF_CONFIG_HASH"]
        with self.assertRaisesRegex(dtrain_env.MemoryFileError, "TF_CONFIG_HASH is not set"):
            dtrain_env.read("TF_CONFIG", environ)
        environ = task("TF_CONFIG", "/proc/self/fd/512", "{}")
        del environ["SLURM_PROCID"]
        with self.assertRaisesRegex(dtrain_env.MemoryFileError, "SLURM_PROCID is not set"):
            dtrain_env.read("TF_CONFIG", environ)

    def test_an_unrelated_file_at_the_number_is_refused(self):
        fd = os.open("/proc/self/status", os.O_RDONLY)
        try:
            environ = task("TF_CONFIG", f"/proc/self/fd/{fd}", "{}")
            with self.assertRaisesRegex(dtrain_env.MemoryFileError,
                                        r"/status\) is not a memory file of dtrain"):
                dtrain_env.load(environ=environ)
            self.assertNotIn("TF_CONFIG", environ)
        finally:
            os.close(fd)

    def test_an_unsealed_or_changed_file_is_refused(self):
        value = '{"task":{"index":7}}'
        fd = os.memfd_create("dtrain:501.2:rank7:TF_CONFIG", os.MFD_ALLOW_SEALING)
        try:
            os.write(fd, value.encode())
            environ = task("TF_CONFIG", f"/proc/self/fd/{fd}", value)
            with self.assertRaisesRegex(dtrain_env.MemoryFileError, "not sealed against changes"):
                dtrain_env.read("TF_CONFIG", environ)
            import fcntl
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK |
                        fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
            self.assertEqual(dtrain_env.read("TF_CONFIG", environ), value)
            environ["TF_CONFIG_HASH"] = dtrain_env.value_hash(value + " ")
            with self.assertRaisesRegex(dtrain_env.MemoryFileError,
                                        "its content is not the value the plugin exported"):
                dtrain_env.read("TF_CONFIG", environ)
            # Another task's file: rank 8 reads rank 7's.
            environ = task("TF_CONFIG", f"/proc/self/fd/{fd}", value, SLURM_PROCID="8")
            with self.assertRaisesRegex(dtrain_env.MemoryFileError,
                                        "is the memory file of job 501 step 2 rank 7, not of "
                                        r"this task \(job 501 step 2 rank 8\)"):
                dtrain_env.read("TF_CONFIG", environ)
        finally:
            os.close(fd)


if __name__ == "__main__":
    unittest.main()
