// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/event_tick.hpp"

#include <mpi.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/parse.hpp"

#ifndef DTRAIN_OMPI_SYSCONFDIR
#define DTRAIN_OMPI_SYSCONFDIR ""
#endif

namespace dtrain::bootstrap {

namespace {

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

// Open MPI's parameter file syntax: "name = value" per line, '#' starts a comment.
bool file_sets_tick(const std::string& content) {
  std::istringstream lines(content);
  std::string line;
  while (std::getline(lines, line)) {
    line = line.substr(0, line.find('#'));
    const auto equals = line.find('=');
    if (equals == std::string::npos) continue;
    if (trim(std::string_view(line).substr(0, equals)) == "mpi_event_tick_rate") return true;
  }
  return false;
}

std::optional<std::string> read_optional(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::optional<std::string> event_tick_set_elsewhere(const EnvLookup& lookup,
                                                    const OptionalFileReader& read_file,
                                                    const std::vector<std::string>& sysconfdirs) {
  if (lookup(kEventTickVariable)) return std::string("the environment");
  for (const char* name :
       {"OMPI_MCA_mca_base_param_file_prefix", "OMPI_MCA_mca_base_envar_file_prefix"}) {
    if (lookup(name)) return std::string(name) + " (aggregate parameter sets)";
  }
  std::vector<std::string> files;
  auto listed = lookup("OMPI_MCA_mca_base_param_files");
  if (!listed) listed = lookup("OMPI_MCA_mca_param_files");
  if (listed) {
    if (*listed == "none") return std::nullopt;  // Open MPI then reads no file at all
    for (std::string_view file : core::split(*listed, ',')) files.emplace_back(file);
  } else {
    if (const auto home = lookup("HOME")) files.push_back(*home + "/.openmpi/mca-params.conf");
    for (const auto& dir : sysconfdirs) files.push_back(dir + "/openmpi-mca-params.conf");
  }
  for (const auto& dir : sysconfdirs) files.push_back(dir + "/openmpi-mca-params-override.conf");
  for (const auto& file : files) {
    if (const auto content = read_file(file); content && file_sets_tick(*content)) return file;
  }
  return std::nullopt;
}

std::vector<std::string> open_mpi_sysconfdirs(const EnvLookup& lookup) {
  std::vector<std::string> dirs;
  if (const auto dir = lookup("OPAL_SYSCONFDIR")) dirs.push_back(*dir);
  if (const auto prefix = lookup("OPAL_PREFIX")) dirs.push_back(*prefix + "/etc");
  if (std::string(DTRAIN_OMPI_SYSCONFDIR).size() > 0) dirs.emplace_back(DTRAIN_OMPI_SYSCONFDIR);
  return dirs;
}

bool set_event_tick_for_bootstrap() {
#ifdef OPEN_MPI
  if (event_tick_set_elsewhere(process_env, read_optional, open_mpi_sysconfdirs(process_env))) {
    return false;
  }
  return setenv(kEventTickVariable, kEventTickRate, 1) == 0;
#else
  return false;
#endif
}

void unset_event_tick_after_init(bool was_set) {
  if (was_set) unsetenv(kEventTickVariable);
}

}  // namespace dtrain::bootstrap
