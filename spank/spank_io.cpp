// SPDX-License-Identifier: Apache-2.0
#include "spank/spank_io.hpp"

#include <cstdio>
#include <vector>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::spank {
namespace {

[[noreturn]] void fail(const std::string& call, spank_err_t rc) {
  throw Error(ErrorKind::kResource, call + " failed: " + spank_strerror(rc));
}

}  // namespace

void log_error(const std::string& message) {
  slurm_error("dtrain: %s", message.c_str());
}
void log_info(const std::string& message) {
  slurm_info("dtrain: %s", message.c_str());
}
void log_verbose(const std::string& message) {
  slurm_verbose("dtrain: %s", message.c_str());
}
void log_debug(const std::string& message) {
  slurm_debug("dtrain: %s", message.c_str());
}

void warn_task(const std::string& message) {
  std::fprintf(stderr, "dtrain: warning: %s\n", message.c_str());
}

void error_task(const std::string& message) {
  std::fprintf(stderr, "dtrain: error: %s\n", message.c_str());
  std::fflush(stderr);
}

std::uint32_t get_u32(spank_t sp, spank_item_t item, const char* what) {
  std::uint32_t value = 0;
  const spank_err_t rc = spank_get_item(sp, item, &value);
  if (rc != ESPANK_SUCCESS) fail(std::string("spank_get_item(") + what + ")", rc);
  return value;
}

int get_int(spank_t sp, spank_item_t item, const char* what) {
  int value = 0;
  const spank_err_t rc = spank_get_item(sp, item, &value);
  if (rc != ESPANK_SUCCESS) fail(std::string("spank_get_item(") + what + ")", rc);
  return value;
}

std::uint32_t local_to_global(spank_t sp, std::uint32_t local_id) {
  std::uint32_t global = 0;
  const spank_err_t rc = spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, local_id, &global);
  if (rc != ESPANK_SUCCESS) fail("spank_get_item(S_JOB_LOCAL_TO_GLOBAL_ID)", rc);
  return global;
}

std::optional<std::string> get_env(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  while (true) {
    const spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buf.data());
    if (rc == ESPANK_ENV_NOEXIST) return std::nullopt;
    if (rc != ESPANK_NOSPACE) fail(std::string("spank_getenv(") + name + ")", rc);
    if (buf.size() > core::kMaxInputBytes) {
      throw Error(ErrorKind::kInvalidInput, std::string("environment variable ") + name +
                                                " is longer than " +
                                                std::to_string(core::kMaxInputBytes) + " bytes");
    }
    buf.resize(buf.size() * 4);
  }
}

void set_env(spank_t sp, const std::string& name, const std::string& value) {
  const spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
  if (rc != ESPANK_SUCCESS) fail("spank_setenv(" + name + ")", rc);
}

void unset_env(spank_t sp, const std::string& name) {
  const spank_err_t rc = spank_unsetenv(sp, name.c_str());
  if (rc != ESPANK_SUCCESS) fail("spank_unsetenv(" + name + ")", rc);
}

}  // namespace dtrain::spank
