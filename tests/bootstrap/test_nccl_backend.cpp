// SPDX-License-Identifier: Apache-2.0
// The NCCL path on a real GPU: a one-rank bootstrap with the NCCL backend, every collective
// through the same four-function tests as dtrain-bench, on device buffers. Skips (reported as
// skipped by ctest) where no CUDA device is visible or dtrain was built without NCCL.
#include <gtest/gtest.h>

#include "bench/collectives/collective.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/buffer.hpp"
#include "bootstrap/nccl_backend.hpp"

namespace {

using namespace dtrain::bootstrap;

int g_argc = 0;
char** g_argv = nullptr;

TEST(NcclBackend, EveryCollectiveIsCorrectOnDeviceBuffers) {
  if (!nccl_compiled_in()) GTEST_SKIP() << "this dtrain was built without the NCCL backend";
  if (visible_device_count() == 0) GTEST_SKIP() << "no CUDA device is visible (cudaGetDeviceCount)";
  BootstrapConfig config;
  config.backend = Backend::kNccl;
  config.quiet = true;
  auto session = init(g_argc, g_argv, config);
  Communicator& comm = session->communicator();
  ASSERT_EQ(comm.backend(), Backend::kNccl);
  for (const auto* test : collectives::all_collective_tests()) {
    for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                          DataType::kFloat16, DataType::kBFloat16}) {
      const ReduceOp op = test->uses_op ? ReduceOp::kAvg : ReduceOp::kSum;
      const auto counts = test->counts(4096, comm.size());
      const std::size_t ts = type_size(type);
      BackendBuffer send(Backend::kNccl, counts.send_count * ts);
      BackendBuffer recv(Backend::kNccl, counts.recv_count * ts);
      collectives::HostData data;
      test->init_data({type, op, 0, comm.rank(), comm.size(), 7, counts}, data);
      send.upload(0, data.input.data(), data.input.size());
      recv.zero();
      test->run(comm, send.data(), recv.data(), counts.param_count, type, op, 0);
      comm.synchronize();
      std::vector<std::byte> got(data.expected.size());
      recv.download(0, got.data(), got.size());
      if (data.checked) {
        EXPECT_EQ(collectives::count_wrong(type, got.data(), data.expected.data(),
                                           data.expected.size() / ts),
                  0u)
            << test->name << " " << type_name(type);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  g_argc = argc;
  g_argv = argv;
  return RUN_ALL_TESTS();
}
