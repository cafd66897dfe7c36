// SPDX-License-Identifier: Apache-2.0
// Leaks inside third-party libraries, compiled into every fuzz target so that a bare run of a
// fuzzer reports only dtrain's own leaks. tests/lsan.supp lists the same libraries for the
// sanitizer unit tests, which unwind slowly and can match hwloc's entry point; the fuzzers keep
// ASan's fast unwinder (six times the executions on fuzz_topology), which stops inside hwloc
// because it has no frame pointers, so here only hwloc's module name can match.

extern "C" const char* __lsan_default_suppressions() {
  return
      // libslurm 22.05 loses its working copy of the string when slurm_hostlist_create refuses
      // a malformed range such as "n[1-x3]"; Slurm itself never writes such a node list.
      "leak:slurm_hostlist_create\n"
      // hwloc 2.9 loses the object being imported when the XML below it is invalid, e.g. an
      // <info> without value= (upstream fixed such paths later, open-mpi/hwloc#781). dtrain
      // releases its topology through a unique_ptr (src/topology/load_io.cpp).
      "leak:libhwloc.so\n";
}
