#include "spank_fake.hpp"

#include <sched.h>
#include <slurm/slurm.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace dtrain::testing {

SpankFake& fake() {
  static SpankFake instance;
  return instance;
}

void reset_fake() {
  fake() = SpankFake{};
  // task_init binds the calling process, which here is the test itself: every test starts with
  // the CPUs the test program started with, as every real task starts with slurmstepd's.
  static const cpu_set_t started_with = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    return set;
  }();
  sched_setaffinity(0, sizeof started_with, &started_with);
}

spank_t handle() {
  return reinterpret_cast<spank_t>(&fake());
}

namespace {
__attribute__((format(printf, 1, 0))) std::string format(const char* fmt, va_list ap) {
  char buf[8192];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  return buf;
}
}  // namespace

}  // namespace dtrain::testing

using dtrain::testing::fake;

namespace {
// spank.h defines the ESPANK_* codes as plain ints.
spank_err_t err(int code) {
  return static_cast<spank_err_t>(code);
}
}  // namespace

extern "C" {

spank_context_t spank_context(void) {
  return fake().context;
}

const char* spank_strerror(spank_err_t err) {
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "fake spank error %d", static_cast<int>(err));
  return buf;
}

spank_err_t spank_option_register(spank_t, struct spank_option* opt) {
  fake().options.push_back(opt);
  return err(ESPANK_SUCCESS);
}

spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
  va_list ap;
  // The signature is spank.h's: its last named parameter is an enum, which clang flags because
  // an enum is promoted when passed through "...". Slurm's own spank_get_item does the same.
#ifdef __clang__
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wvarargs"
#endif
  va_start(ap, item);
#ifdef __clang__
#pragma clang diagnostic pop
#endif
  spank_err_t rc = err(ESPANK_SUCCESS);
  if (item == S_JOB_LOCAL_TO_GLOBAL_ID) {
    const auto local = va_arg(ap, std::uint32_t);
    auto* out = va_arg(ap, std::uint32_t*);
    if (local < fake().local_to_global.size()) {
      *out = fake().local_to_global[local];
    } else {
      rc = err(ESPANK_BAD_ARG);
    }
  } else if (item == S_TASK_ID) {
    *va_arg(ap, int*) = fake().task_id;
  } else {
    auto it = fake().items.find(item);
    if (it == fake().items.end()) {
      rc = err(ESPANK_NOT_AVAIL);
    } else {
      *va_arg(ap, std::uint32_t*) = it->second;
    }
  }
  va_end(ap);
  return rc;
}

spank_err_t spank_getenv(spank_t, const char* var, char* buf, int len) {
  auto it = fake().job_env.find(var);
  if (it == fake().job_env.end()) return err(ESPANK_ENV_NOEXIST);
  if (static_cast<int>(it->second.size()) + 1 > len) return err(ESPANK_NOSPACE);
  std::memcpy(buf, it->second.c_str(), it->second.size() + 1);
  return err(ESPANK_SUCCESS);
}

spank_err_t spank_setenv(spank_t, const char* var, const char* val, int overwrite) {
  if (fake().fail_setenv_calls > 0) {
    --fake().fail_setenv_calls;
    return err(ESPANK_ERROR);
  }
  if (!overwrite && fake().job_env.count(var)) return err(ESPANK_ENV_EXISTS);
  fake().job_env[var] = val;
  return err(ESPANK_SUCCESS);
}

spank_err_t spank_unsetenv(spank_t, const char* var) {
  fake().job_env.erase(var);
  return err(ESPANK_SUCCESS);
}

void slurm_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake().errors.push_back(dtrain::testing::format(fmt, ap));
  va_end(ap);
}

void slurm_info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake().infos.push_back(dtrain::testing::format(fmt, ap));
  va_end(ap);
}

void slurm_verbose(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake().infos.push_back(dtrain::testing::format(fmt, ap));
  va_end(ap);
}

void slurm_debug(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake().debugs.push_back(dtrain::testing::format(fmt, ap));
  va_end(ap);
}

slurm_step_layout_t* slurm_job_step_layout_get(slurm_step_id_t*) {
  return nullptr;
}
void slurm_job_step_layout_free(slurm_step_layout_t*) {}

}  // extern "C"
