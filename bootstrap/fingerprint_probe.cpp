// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/fingerprint_probe.hpp"

#include <mpi.h>
#include <xxhash.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "bootstrap/endpoints.hpp"
#include "bootstrap/nccl_backend.hpp"

#ifndef DTRAIN_VERSION
#error "DTRAIN_VERSION must be defined by the build"
#endif

namespace dtrain::bootstrap {

namespace {

std::string executable_hash() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) return "unreadable";
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    XXH3_64bits_update(state, chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  const auto hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hex64(hash);
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<std::size_t>(std::max(length, 0)));
  version = version.substr(0, version.find_first_of("\r\n"));
  while (!version.empty() && (version.back() == ' ' || version.back() == '\0')) version.pop_back();
  return version;
}

}  // namespace

Fingerprint collect_fingerprint() {
  Fingerprint fingerprint;
  fingerprint.executable_hash = executable_hash();
  fingerprint.dtrain_version = DTRAIN_VERSION;
  fingerprint.mpi_library = mpi_library_version();
  probe_cuda_fingerprint(fingerprint);
  return fingerprint;
}

}  // namespace dtrain::bootstrap
