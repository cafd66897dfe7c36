// SPDX-License-Identifier: Apache-2.0
// dtrain-nccl-allreduce-loop: the smallest honest NCCL baseline for dtrain-bench's all_reduce.
// One process drives every visible GPU through ncclCommInitAll (as nccl-tests' -g does), calls
// ncclAllReduce (float, sum) back to back and divides the wall time by the count, the way
// src/bench/timing.hpp times dtrain-bench. Sizes use dtrain-bench's syntax and sweep, and the
// bandwidths nccl-tests' definitions, so the two tables line up row by row.
#include <cuda_runtime.h>
#include <nccl.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/sweep.hpp"
#include "core/error.hpp"

namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) {
    throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(status));
  }
}

struct Device {
  int id = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
};

class Devices {
 public:
  Devices(int count, std::size_t max_bytes) : devices_(static_cast<std::size_t>(count)) {
    std::vector<ncclComm_t> comms(devices_.size());
    std::vector<int> ids(devices_.size());
    for (int d = 0; d < count; ++d) ids[static_cast<std::size_t>(d)] = d;
    check_nccl(ncclCommInitAll(comms.data(), count, ids.data()), "ncclCommInitAll");
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      Device& dev = devices_[d];
      dev.id = ids[d];
      dev.comm = comms[d];
      check_cuda(cudaSetDevice(dev.id), "cudaSetDevice");
      check_cuda(cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&dev.send), max_bytes), "cudaMalloc");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&dev.recv), max_bytes), "cudaMalloc");
      // Random-looking, not zero: a reduction of zeros can run faster than real data.
      std::vector<float> pattern(max_bytes / sizeof(float));
      for (std::size_t i = 0; i < pattern.size(); ++i) {
        pattern[i] = static_cast<float>((i * 2654435761u + d) % 1021) / 1021.0f;
      }
      check_cuda(cudaMemcpy(dev.send, pattern.data(), pattern.size() * sizeof(float),
                            cudaMemcpyHostToDevice),
                 "cudaMemcpy");
      check_cuda(cudaMemcpy(dev.recv, pattern.data(), pattern.size() * sizeof(float),
                            cudaMemcpyHostToDevice),
                 "cudaMemcpy");
    }
  }
  ~Devices() {
    for (Device& dev : devices_) {
      cudaSetDevice(dev.id);
      if (dev.comm != nullptr) ncclCommDestroy(dev.comm);
      if (dev.stream != nullptr) cudaStreamDestroy(dev.stream);
      cudaFree(dev.send);
      cudaFree(dev.recv);
    }
  }
  Devices(const Devices&) = delete;
  Devices& operator=(const Devices&) = delete;

  void all_reduce(std::size_t count, bool in_place) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (Device& dev : devices_) {
      check_nccl(ncclAllReduce(in_place ? dev.recv : dev.send, dev.recv, count, ncclFloat, ncclSum,
                               dev.comm, dev.stream),
                 "ncclAllReduce");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }
  void synchronize() {
    for (Device& dev : devices_) {
      check_cuda(cudaSetDevice(dev.id), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(dev.stream), "cudaStreamSynchronize");
    }
  }
  int size() const { return static_cast<int>(devices_.size()); }

 private:
  std::vector<Device> devices_;
};

struct Timing {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
};

Timing time_all_reduce(Devices& devices, std::size_t bytes, int warmup, int iters, bool in_place) {
  const std::size_t count = bytes / sizeof(float);
  for (int i = 0; i < warmup; ++i) devices.all_reduce(count, in_place);
  devices.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) devices.all_reduce(count, in_place);
  devices.synchronize();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  const double seconds = elapsed.count() / iters;
  const int n = devices.size();
  Timing t;
  t.time_us = seconds * 1e6;
  t.algbw = static_cast<double>(count * sizeof(float)) / 1e9 / seconds;
  t.busbw = t.algbw * 2.0 * (n - 1) / n;  // nccl-tests' all_reduce factor
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-nccl-allreduce-loop: a plain ncclAllReduce loop (float, sum) over every visible "
      "GPU in one process, timed as dtrain-bench times all_reduce; the baseline of "
      "tests/gpu/device_check.sh."};
  std::string min_bytes = "1M", max_bytes = "256M", step_bytes = "1M";
  std::uint64_t step_factor = 2;
  int iters = 20, warmup = 5, gpus = 0;
  std::string json_path;
  app.add_option("-b,--minbytes", min_bytes, "smallest size (bytes; K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", step_factor, "multiply the size by this (>1)")
      ->capture_default_str();
  app.add_option("-i,--stepbytes", step_bytes, "add this many bytes when -f is 1")
      ->capture_default_str();
  app.add_option("-n,--iters", iters, "timed iterations per size")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", warmup, "untimed iterations before timing")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("-g,--gpus", gpus, "GPUs to use (0: every visible one)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-nccl-allreduce-loop: %s (see --help)\n", error.what());
    return 2;
  }
  std::vector<std::uint64_t> sizes;
  try {
    dtrain::bench::SweepSpec spec;
    spec.min_bytes = dtrain::bench::parse_size(min_bytes, "-b/--minbytes");
    spec.max_bytes = dtrain::bench::parse_size(max_bytes, "-e/--maxbytes");
    spec.step_factor = step_factor;
    spec.step_bytes = dtrain::bench::parse_size(step_bytes, "-i/--stepbytes");
    sizes = dtrain::bench::sweep_sizes(spec);
  } catch (const dtrain::Error& error) {
    std::fprintf(stderr, "dtrain: dtrain-nccl-allreduce-loop: %s\n", error.what());
    return 2;
  }
  try {
    int visible = 0;
    if (cudaGetDeviceCount(&visible) != cudaSuccess || visible == 0) {
      std::fprintf(stderr,
                   "dtrain: dtrain-nccl-allreduce-loop: no CUDA device is visible "
                   "(cudaGetDeviceCount); run it on a GPU machine\n");
      return 1;
    }
    if (gpus > visible) {
      std::fprintf(stderr,
                   "dtrain: dtrain-nccl-allreduce-loop: -g %d, but only %d GPUs are "
                   "visible; pass -g %d or less\n",
                   gpus, visible, visible);
      return 2;
    }
    const int used = gpus == 0 ? visible : gpus;
    Devices devices(used, sizes.back());
    int nccl_version = 0;
    check_nccl(ncclGetVersion(&nccl_version), "ncclGetVersion");
    std::printf("# dtrain-nccl-allreduce-loop: %d GPU(s), NCCL %d, warmup %d, iters %d\n", used,
                nccl_version, warmup, iters);
    std::printf("# %12s %12s %10s %8s %8s %10s %8s %8s\n", "size(B)", "count", "oop(us)", "algbw",
                "busbw", "ip(us)", "algbw", "busbw");
    nlohmann::json report = {{"tool", "dtrain-nccl-allreduce-loop"},
                             {"gpus", used},
                             {"nccl_version", nccl_version},
                             {"iters", iters},
                             {"warmup_iters", warmup},
                             {"rows", nlohmann::json::array()}};
    for (std::uint64_t bytes : sizes) {
      const std::uint64_t used_bytes = bytes / sizeof(float) * sizeof(float);
      const Timing oop = time_all_reduce(devices, used_bytes, warmup, iters, false);
      const Timing ip = time_all_reduce(devices, used_bytes, warmup, iters, true);
      std::printf("  %12llu %12llu %10.2f %8.2f %8.2f %10.2f %8.2f %8.2f\n",
                  static_cast<unsigned long long>(used_bytes),
                  static_cast<unsigned long long>(used_bytes / sizeof(float)), oop.time_us,
                  oop.algbw, oop.busbw, ip.time_us, ip.algbw, ip.busbw);
      const auto as_json = [](const Timing& t) {
        return nlohmann::json{{"time_us", t.time_us}, {"algbw", t.algbw}, {"busbw", t.busbw}};
      };
      report["rows"].push_back({{"size", used_bytes},
                                {"count", used_bytes / sizeof(float)},
                                {"out_of_place", as_json(oop)},
                                {"in_place", as_json(ip)}});
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << report.dump(2) << "\n";
      if (!out) {
        std::fprintf(stderr, "dtrain: dtrain-nccl-allreduce-loop: cannot write --json %s\n",
                     json_path.c_str());
        return 1;
      }
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dtrain: dtrain-nccl-allreduce-loop: %s\n", error.what());
    return 1;
  }
}
