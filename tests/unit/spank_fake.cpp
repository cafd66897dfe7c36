// SPDX-License-Identifier: Apache-2.0
#include "spank_fake.hpp"

#include <sched.h>
#include <slurm/slurm.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
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

namespace {
// slurm_kill_job_step, whatever its signature.
int record_kill(std::uint32_t job_id, std::uint32_t step_id, int signal) {
  fake().kill_requests.push_back({job_id, step_id, signal});
  if (fake().kill_error == 0) return SLURM_SUCCESS;
  errno = fake().kill_error;
  return SLURM_ERROR;
}

// slurm_load_job, whatever its signature.
int load_job(job_info_msg_t** resp, std::uint32_t job_id) {
  *resp = nullptr;
  if (fake().load_job_error != 0) {
    errno = fake().load_job_error;
    return SLURM_ERROR;
  }
  auto* msg = static_cast<job_info_msg_t*>(calloc(1, sizeof(job_info_msg_t)));
  msg->record_count = 1;
  msg->job_array = static_cast<slurm_job_info_t*>(calloc(1, sizeof(slurm_job_info_t)));
  msg->job_array[0].job_id = job_id;
  const auto het = fake().het_job_ids.find(job_id);
  msg->job_array[0].het_job_id = het == fake().het_job_ids.end() ? 0 : het->second;
  *resp = msg;
  return SLURM_SUCCESS;
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

slurm_step_layout_t* slurm_job_step_layout_get(slurm_step_id_t* id) {
  const auto it = fake().step_layouts.find(id->job_id);
  if (it == fake().step_layouts.end() || it->second.error) {
    errno = it == fake().step_layouts.end() ? ESLURM_INVALID_JOB_ID : it->second.error;
    return nullptr;
  }
  const auto& want = it->second;
  auto* layout = static_cast<slurm_step_layout_t*>(calloc(1, sizeof(slurm_step_layout_t)));
  std::string nodes;
  for (const auto& host : want.hosts) {
    if (!nodes.empty()) nodes += ',';
    nodes += host;
  }
  layout->node_list = strdup(nodes.c_str());
  layout->node_cnt = static_cast<uint32_t>(want.hosts.size());
  layout->tasks = static_cast<uint16_t*>(calloc(want.hosts.size(), sizeof(uint16_t)));
  layout->tids = static_cast<uint32_t**>(calloc(want.hosts.size(), sizeof(uint32_t*)));
  for (std::size_t node = 0; node < want.hosts.size(); ++node) {
    const auto& ids = want.task_ids.at(node);
    layout->tasks[node] = static_cast<uint16_t>(ids.size());
    layout->task_cnt += static_cast<uint32_t>(ids.size());
    layout->tids[node] = static_cast<uint32_t*>(calloc(ids.size() + 1, sizeof(uint32_t)));
    std::copy(ids.begin(), ids.end(), layout->tids[node]);
  }
  return layout;
}
void slurm_job_step_layout_free(slurm_step_layout_t* layout) {
  if (!layout) return;
  for (uint32_t node = 0; node < layout->node_cnt; ++node) free(layout->tids[node]);
  free(layout->tids);
  free(layout->tasks);
  free(layout->node_list);
  free(layout);
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
int slurm_load_job(job_info_msg_t** resp, slurm_step_id_t step_id, uint16_t /*show_flags*/) {
  return load_job(resp, step_id.job_id);
}
#else
int slurm_load_job(job_info_msg_t** resp, uint32_t job_id, uint16_t /*show_flags*/) {
  return load_job(resp, job_id);
}
#endif
void slurm_free_job_info_msg(job_info_msg_t* msg) {
  if (!msg) return;
  free(msg->job_array);
  free(msg);
}

namespace {
int answer_step_query(std::uint32_t job_id, std::uint32_t step_id,
                      job_step_info_response_msg_t** steps) {
  ++fake().step_queries;
  *steps = nullptr;
  if (fake().step_query_error) {
    errno = fake().step_query_error;
    return SLURM_ERROR;
  }
  auto* response =
      static_cast<job_step_info_response_msg_t*>(calloc(1, sizeof(job_step_info_response_msg_t)));
  if (!fake().step_gone) {
    response->job_step_count = 1;
    response->job_steps = static_cast<job_step_info_t*>(calloc(1, sizeof(job_step_info_t)));
    response->job_steps[0].step_id.job_id = job_id;
    response->job_steps[0].step_id.step_id = step_id;
  }
  *steps = response;
  return SLURM_SUCCESS;
}
}  // namespace

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
int slurm_get_job_steps(slurm_step_id_t* id, job_step_info_response_msg_t** steps, uint16_t) {
  return answer_step_query(id->job_id, id->step_id, steps);
}
#else
int slurm_get_job_steps(time_t, uint32_t job_id, uint32_t step_id,
                        job_step_info_response_msg_t** steps, uint16_t) {
  return answer_step_query(job_id, step_id, steps);
}
#endif
void slurm_free_job_step_info_response_msg(job_step_info_response_msg_t* steps) {
  if (!steps) return;
  free(steps->job_steps);
  free(steps);
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
int slurm_kill_job_step(slurm_step_id_t* step_id, uint16_t signal, uint16_t /*flags*/) {
  return record_kill(step_id->job_id, step_id->step_id, signal);
}
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
int slurm_kill_job_step(uint32_t job_id, uint32_t step_id, uint16_t signal, uint16_t /*flags*/) {
  return record_kill(job_id, step_id, signal);
}
#else
int slurm_kill_job_step(uint32_t job_id, uint32_t step_id, uint16_t signal) {
  return record_kill(job_id, step_id, signal);
}
#endif

}  // extern "C"
