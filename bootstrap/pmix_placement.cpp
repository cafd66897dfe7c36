// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/pmix_placement.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/parse.hpp"

#ifdef DTRAIN_HAVE_PMIX_HEADERS
#include <pmix.h>
#endif

namespace dtrain::bootstrap {

std::optional<NodeMembers> parse_local_peers(const std::string& text, int rank) {
  NodeMembers members;
  try {
    for (std::string_view item : core::split(text, ',')) {
      members.ranks.push_back(
          static_cast<int>(core::parse_unsigned(item, "PMIX_LOCAL_PEERS", 0, 1 << 24)));
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::sort(members.ranks.begin(), members.ranks.end());
  if (!std::binary_search(members.ranks.begin(), members.ranks.end(), rank)) return std::nullopt;
  return members;
}

#ifdef DTRAIN_HAVE_PMIX_HEADERS

std::optional<NodeMembers> launcher_node_members(int mpi_rank) {
  const char* nspace = std::getenv("PMIX_NAMESPACE");
  const char* own_rank = std::getenv("PMIX_RANK");
  if (nspace == nullptr || own_rank == nullptr || std::to_string(mpi_rank) != own_rank) {
    return std::nullopt;
  }
  void* library = dlopen("libpmix.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return std::nullopt;
  using Initialized = int (*)();
  using Get = pmix_status_t (*)(const pmix_proc_t*, const char[], const pmix_info_t[], size_t,
                                pmix_value_t**);
  using Destruct = void (*)(pmix_value_t*);
  const auto initialized = reinterpret_cast<Initialized>(dlsym(library, "PMIx_Initialized"));
  const auto get = reinterpret_cast<Get>(dlsym(library, "PMIx_Get"));
  const auto destruct = reinterpret_cast<Destruct>(dlsym(library, "PMIx_Value_destruct"));
  std::optional<NodeMembers> members;
  if (initialized != nullptr && get != nullptr && initialized()) {
    pmix_proc_t proc;
    std::memset(&proc, 0, sizeof proc);
    std::strncpy(proc.nspace, nspace, PMIX_MAX_NSLEN);
    proc.rank = PMIX_RANK_WILDCARD;
    // Only what the client already holds: never a request to the server.
    pmix_info_t optional;
    std::memset(&optional, 0, sizeof optional);
    std::strncpy(optional.key, PMIX_OPTIONAL, PMIX_MAX_KEYLEN);
    optional.value.type = PMIX_BOOL;
    optional.value.data.flag = true;
    pmix_value_t* value = nullptr;
    if (get(&proc, PMIX_LOCAL_PEERS, &optional, 1, &value) == PMIX_SUCCESS && value != nullptr) {
      if (value->type == PMIX_STRING && value->data.string != nullptr) {
        members = parse_local_peers(value->data.string, mpi_rank);
      }
      if (destruct != nullptr) {
        destruct(value);
      } else if (value->type == PMIX_STRING) {
        std::free(value->data.string);
      }
      std::free(value);
    }
  }
  dlclose(library);
  return members;
}

#else

std::optional<NodeMembers> launcher_node_members(int) {
  return std::nullopt;
}

#endif

}  // namespace dtrain::bootstrap
