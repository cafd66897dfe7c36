// SPDX-License-Identifier: Apache-2.0
// How often derived ports collide on a shared node: the scheme core::plan_ports uses against the
// one it replaced, colour = (job_id mod D) * 64 + step_id mod 64 (the baseline, kept here only to
// be measured), side by side on the same draws. Prints what it measured; nothing is asserted.
//
// A collision is two steps on one node that were given a common port (endpoint or master).
// Scenarios: unrelated jobs (random ids) at step 0 with 1-8 tasks each; the same at random steps;
// jobs submitted close together; job arrays of 8 one-task jobs on one node; an array whose ids
// wrap at MaxJobId.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.hpp"
#include "core/ports.hpp"

namespace {

using dtrain::core::PortRange;

struct Step {
  std::uint32_t job = 0;
  std::uint32_t step = 0;
  std::uint32_t tasks = 1;  // on the shared node, which is the step's busiest
};

using Planner = std::function<std::vector<std::uint16_t>(const Step&)>;

// The scheme before this one, exactly as it was: rows of W = floor(R / B) ports, D = floor(W / 64)
// job classes, colour (job mod D) * 64 + step mod 64.
Planner old_scheme(PortRange range, std::uint32_t block) {
  return [range, block](const Step& s) {
    const std::uint32_t width = range.size() / block;
    const std::uint32_t classes = width / 64;
    const std::uint32_t colour = (s.job % classes) * 64 + s.step % 64;
    std::vector<std::uint16_t> ports;
    for (std::uint32_t row = 0; row <= s.tasks; ++row) {
      ports.push_back(static_cast<std::uint16_t>(range.first + row * width + colour));
    }
    return ports;
  };
}

Planner new_scheme(PortRange range, std::uint32_t block) {
  return [range, block](const Step& s) {
    const auto plan = dtrain::core::plan_ports(range, block, s.job, s.step, s.tasks, "");
    auto ports = plan.endpoint_ports;
    ports.push_back(plan.master);
    return ports;
  };
}

bool any_shared(const std::vector<Step>& steps, const Planner& plan) {
  std::vector<std::uint16_t> all;
  for (const auto& s : steps) {
    const auto ports = plan(s);
    all.insert(all.end(), ports.begin(), ports.end());
  }
  std::sort(all.begin(), all.end());
  return std::adjacent_find(all.begin(), all.end()) != all.end();
}

struct Rates {
  std::uint64_t trials = 0;
  std::uint64_t old_hits = 0;
  std::uint64_t new_hits = 0;
};

void print_row(const std::string& what, const Rates& r) {
  const auto pct = [&](std::uint64_t hits) { return 100.0 * hits / r.trials; };
  char ratio[32] = "none now";
  if (r.new_hits) {
    std::snprintf(ratio, sizeof ratio, "%.1f", static_cast<double>(r.old_hits) / r.new_hits);
  }
  std::printf("%-58s %9.3f %% %9.3f %%   %9llu  %s\n", what.c_str(), pct(r.old_hits),
              pct(r.new_hits), static_cast<unsigned long long>(r.trials), ratio);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Collision rates of derived ports on a shared node: the current scheme against the one it "
      "replaced, over the same random draws."};
  std::string ports = "20000-32767";
  std::uint32_t block = 32;
  std::uint64_t pairs = 1000000;
  std::uint64_t seed = 36;
  std::uint32_t max_job_id = 67043328;  // slurm.conf MaxJobId's default
  app.add_option("--ports", ports, "ports= range of plugstack.conf")->capture_default_str();
  app.add_option("--port-block", block, "port_block= of plugstack.conf")->capture_default_str();
  app.add_option("--pairs", pairs, "random draws per scenario")->capture_default_str();
  app.add_option("--seed", seed, "seed of the draws")->capture_default_str();
  app.add_option("--max-job-id", max_job_id, "slurm.conf MaxJobId (job ids are 1..MaxJobId-1)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  dtrain::core::PluginConfig config;
  try {
    config =
        dtrain::core::parse_plugin_args({"ports=" + ports, "port_block=" + std::to_string(block)});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return 2;
  }
  const PortRange range = config.ports;
  const Planner before = old_scheme(range, block);
  const Planner now = new_scheme(range, block);
  const std::uint32_t width = range.size() / block;
  std::printf(
      "dtrain: port-collisions: ports=%s port_block=%u: rows of %u ports; before: %u job classes "
      "x 64 step classes = %u colours; now: %u colours, D = %u\n",
      ports.c_str(), block, width, width / 64, width / 64 * 64,
      dtrain::core::derived_port_colours(range, block),
      dtrain::core::derived_port_job_classes(range, block));
  std::printf("dtrain: port-collisions: %llu draws per scenario, seed %llu, job ids 1..%u\n",
              static_cast<unsigned long long>(pairs), static_cast<unsigned long long>(seed),
              max_job_id - 1);
  std::printf("%-58s %11s %11s   %9s  %s\n", "scenario (steps sharing one node)", "before", "now",
              "draws", "before/now");

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> any_job(1, max_job_id - 1);
  std::uniform_int_distribution<std::uint32_t> tasks_1_8(1, 8);
  const auto tally = [&](Rates& r, const std::vector<Step>& steps) {
    ++r.trials;
    r.old_hits += any_shared(steps, before) ? 1 : 0;
    r.new_hits += any_shared(steps, now) ? 1 : 0;
  };

  {
    Rates r;
    for (std::uint64_t i = 0; i < pairs; ++i) {
      Step a{any_job(rng), 0, tasks_1_8(rng)};
      Step b{any_job(rng), 0, tasks_1_8(rng)};
      if (a.job == b.job) continue;
      tally(r, {a, b});
    }
    print_row("2 jobs, random ids, step 0, 1-8 tasks each", r);
  }
  {
    Rates r;
    std::uniform_int_distribution<std::uint32_t> step_0_9(0, 9);
    for (std::uint64_t i = 0; i < pairs; ++i) {
      Step a{any_job(rng), step_0_9(rng), tasks_1_8(rng)};
      Step b{any_job(rng), step_0_9(rng), tasks_1_8(rng)};
      if (a.job == b.job) continue;
      tally(r, {a, b});
    }
    print_row("2 jobs, random ids, random steps 0-9, 1-8 tasks each", r);
  }
  {
    Rates r;
    std::uniform_int_distribution<std::uint32_t> distance(1, 20);
    for (std::uint64_t i = 0; i < pairs; ++i) {
      Step a{any_job(rng) % (max_job_id - 21) + 1, 0, tasks_1_8(rng)};
      Step b{a.job + distance(rng), 0, tasks_1_8(rng)};
      tally(r, {a, b});
    }
    print_row("2 jobs submitted 1-20 ids apart, step 0, 1-8 tasks each", r);
  }
  {
    Rates r;
    std::uniform_int_distribution<std::uint32_t> distance(1, 20);
    std::uniform_int_distribution<std::uint32_t> step_0_3(0, 3);
    for (std::uint64_t i = 0; i < pairs; ++i) {
      Step a{any_job(rng) % (max_job_id - 21) + 1, step_0_3(rng), tasks_1_8(rng)};
      Step b{a.job + distance(rng), step_0_3(rng), tasks_1_8(rng)};
      tally(r, {a, b});
    }
    print_row("2 jobs submitted 1-20 ids apart, steps 0-3, 1-8 tasks each", r);
  }
  {
    Rates r;
    const std::uint64_t arrays = std::max<std::uint64_t>(1, pairs / 10);
    for (std::uint64_t i = 0; i < arrays; ++i) {
      const std::uint32_t first = any_job(rng) % (max_job_id - 9) + 1;
      std::vector<Step> tasks;
      for (std::uint32_t k = 0; k < 8; ++k) tasks.push_back({first + k, 0, 1});
      tally(r, tasks);
    }
    print_row("job array of 8 one-task jobs on one node, step 0", r);
  }
  {
    Rates r;
    const std::uint64_t arrays = std::max<std::uint64_t>(1, pairs / 10);
    std::uniform_int_distribution<std::uint32_t> step_0_3(0, 3);
    for (std::uint64_t i = 0; i < arrays; ++i) {
      const std::uint32_t first = any_job(rng) % (max_job_id - 9) + 1;
      std::vector<Step> tasks;
      for (std::uint32_t k = 0; k < 8; ++k) tasks.push_back({first + k, step_0_3(rng), 1});
      tally(r, tasks);
    }
    print_row("job array of 8 one-task jobs on one node, steps 0-3", r);
  }
  {
    // Job ids wrap from MaxJobId - 1 to 1 (FirstJobId): every array of 8 that straddles it.
    Rates r;
    for (std::uint32_t before_wrap = 1; before_wrap < 8; ++before_wrap) {
      std::vector<Step> tasks;
      for (std::uint32_t k = 0; k < 8; ++k) {
        const std::uint32_t job =
            k < before_wrap ? max_job_id - before_wrap + k : k - before_wrap + 1;
        tasks.push_back({job, 0, 1});
      }
      tally(r, tasks);
    }
    print_row("job array of 8 across the MaxJobId wrap, step 0 (all 7)", r);
  }
  return 0;
}
