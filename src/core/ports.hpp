// SPDX-License-Identifier: Apache-2.0
#pragma once
// Port planning. Endpoint port of a rank = endpoint_ports[local rank]; the master port is
// outside that set. Identical on every node of a step, since it depends only on step-wide data.
//
// Derived scheme (when Slurm reserved no ports), with F the first port of the range, R its size
// and B = port_block, the most ports a step may use on one node (its busiest node's tasks + the
// master):
//   row width W = floor(R / B) (at least 64: config validation), colours S = the largest odd
//   number <= W (399 by default: R = 12768, B = 32), job classes D = max(1, floor(S / 64))
//   colour c = (64 * job_id + step_id) mod S        (exact integers, no 32-bit wrap)
//   port of local rank l = F + l * W + c;  master = F + max_local * W + c
// A port p of the range has exactly one (row, colour) = ((p - F) div W, (p - F) mod W), since
// c < W; a step's ports are the ports of colour c in rows 0..max_local, and every step uses
// row 0. So two steps share a port if and only if their colours are equal, whatever their task
// counts (up to B - 1 per node). Write dj = j - j', ds = s - s' for job ids j, j' and step ids
// s, s'. Then:
//   (G0) (j, s) and (j', s') collide if and only if 64 * dj + ds = 0 (mod S).
//   (G1) Steps of one job (dj = 0) collide if and only if their step ids differ by a multiple
//        of S: any S consecutive step ids of a job never collide (S >= 63; 399 by default).
//   (G2) Jobs whose ids differ by 1..D-1, at step ids that differ by less than 64, never
//        collide: 64 <= |64 dj| <= 64 (D - 1) and |ds| <= 63 give 0 < |64 dj + ds| <= 64 D - 1,
//        and 64 D - 1 < S when D >= 2. The bound is exact: jobs D apart collide at steps
//        |S - 64 D| (< 64) apart (6 and 15 by default).
//   (G3) Steps with equal ids (ds = 0) collide if and only if their job ids differ by a multiple
//        of S, since S is odd and so coprime to 64: any S consecutive job ids (job arrays, het
//        job components) never collide at equal step ids.
// Two jobs with unrelated ids collide at given step ids with probability 1/S (G0 holds for one
// residue of dj mod S); tests/bench/port_collisions prints the measured rate. By Minkowski's
// theorem no colouring of this row layout whose collisions depend only on (dj, ds) keeps a box
// |dj| < J, |ds| < T free of collisions when J * T > W (such collisions form a subgroup of Z^2 of
// index at most W); (G1) and (G2) together keep the box J = D, T = 64, and 64 D > S - 64.
// Each row keeps W - S (0 or 1) ports unused.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"

namespace dtrain::core {

enum class PortSource { kReserved, kDerived };

struct StepPorts {
  std::vector<std::uint16_t> endpoint_ports;  // index: local rank
  std::uint16_t master = 0;
  PortSource source = PortSource::kDerived;
  std::string note;  // why reserved ports were not used, when they were present
};

// Parses SLURM_STEP_RESV_PORTS ("12000-12007" or "12000,12002-12004") into a port list.
std::vector<std::uint16_t> parse_port_list(std::string_view text);

// The number of colours of the derived scheme (S above), or 0 when the range holds fewer than
// kDerivedPortMinRowWidth ports per block (config validation refuses that).
std::uint32_t derived_port_colours(const PortRange& range, std::uint32_t port_block);

// The bound D above on the distance of job ids whose steps less than 64 ids apart never collide:
// at least 1 for every configuration config validation accepts, 0 for a range that is too small.
std::uint32_t derived_port_job_classes(const PortRange& range, std::uint32_t port_block);

// The derived colour of a step (c above): its ports are F + row * W + colour.
std::uint32_t derived_port_colour(std::uint32_t colours, std::uint32_t job_id,
                                  std::uint32_t step_id);

// The step-id window of guarantee (G2), and the job-id factor of the colour.
inline constexpr std::uint32_t kDerivedPortStepClasses = 64;
// The fewest ports a row may have (W): the range must hold this many per port_block.
inline constexpr std::uint32_t kDerivedPortMinRowWidth = 64;

// Which exported frameworks bind a port of the step in its own task, for the check of a port that
// another process of the step's user already holds when the step starts (an earlier step still
// running, say): such a port stops the step early when a framework the step exports binds it,
// since that framework would fail later with EADDRINUSE while the other ranks talk to the
// holder; otherwise it is a warning. What binds what:
//   master port, on rank 0's node: PyTorch's TCPStore server (MASTER_ADDR:MASTER_PORT, rank 0:
//     torch/distributed/rendezvous.py, env://) and PaddlePaddle's (MASTER_ADDR:MASTER_PORT or
//     PADDLE_MASTER, rank 0: python/paddle/distributed/parallel.py, init_parallel_env), JAX's
//     coordinator (JAX_COORDINATOR_ADDRESS, process 0: jax/_src/distributed.py, binding [::]:port)
//     and torchrun's static rendezvous store (PET_MASTER_PORT, node rank 0);
//   endpoint port of a task: TensorFlow's gRPC server of each worker (its TF_CONFIG cluster
//     entry) and PaddlePaddle's trainers (PADDLE_CURRENT_ENDPOINT: the NCCL id exchange of
//     init_parallel_env's NCCLParallelContext, and rank 0's key-value server for Gloo).
// dtrain's own bootstrap listens on every endpoint port too, and names a busy one itself.
// Returns the binders' names ("PyTorch (MASTER_PORT) and PaddlePaddle (PADDLE_MASTER)"), or ""
// when no exported framework binds the port.
enum class StepPortKind { kMaster, kEndpoint };
std::string frameworks_binding(const FrameworkSet& exported, StepPortKind kind);

StepPorts plan_ports(const PortRange& range, std::uint32_t port_block, std::uint32_t job_id,
                     std::uint32_t step_id, std::uint32_t max_local_tasks,
                     std::string_view reserved_ports);

}  // namespace dtrain::core
