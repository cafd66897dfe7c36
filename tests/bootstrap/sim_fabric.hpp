// SPDX-License-Identifier: Apache-2.0
#pragma once
// n ranks of the bootstrap's agreement protocol (bootstrap/agreement.hpp) in one process and
// one thread: each rank's protocol is a coroutine over its own Fabric, and World runs them
// until every one finished, or one gave up at its deadline (MPI_Abort ends the job then).
//
// Point-to-point messages are matched as MPI matches them (in order, source or any, tag);
// a synchronous send completes when matched. Collectives complete when every rank posted
// them. What each rank sends and receives is counted: point-to-point exactly, the all-reduce
// as the MPI fabric runs it (recursive doubling, exactly), the other collectives as Open MPI
// 4.1's libnbc runs them for small messages (broadcast: linear up to 4 ranks, else binomial;
// barrier: dissemination; MPI_Comm_idup: three 4-byte all-reduces, each a binomial reduce to
// rank 0 and a binomial broadcast back; MPI_Comm_split_type: four).
// Time is virtual: it stands still while any rank can run and jumps to the next deadline
// when none can, so a missing rank costs no waiting. Memory: see sim_memory.hpp.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/agreement.hpp"

namespace dtrain::bootstrap::sim {

struct RankCounts {
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t records_decoded = 0;
  std::uint64_t collectives = 0;
  std::uint64_t peak_bytes = 0;  // heap, while this rank's code ran (sim_memory.hpp)
};

class World;

class RankFabric final : public Fabric {
 public:
  RankFabric(World& world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override;
  Clock::time_point now() const override;
  OpId allreduce(std::span<std::uint64_t> words, Reduction reduction) override;
  OpId broadcast(std::span<std::byte> data, int root) override;
  OpId barrier() override;
  OpId duplicate() override;
  OpId split_node(NodeMembers& out) override;
  OpId send(int dest, int tag, std::vector<std::byte> data, bool synchronous) override;
  OpId receive(int source, int tag) override;
  bool test(OpId op) override;
  Received take(OpId op) override;
  void release(OpId op) override;
  void cancel(OpId op) override;
  void note_records_decoded(std::size_t count) override;

 private:
  friend class World;
  struct Op {
    bool used = false;
    bool done = false;
    Received received;
  };
  OpId allocate();
  World& world_;
  int rank_;
  std::vector<Op> ops_;
  std::vector<OpId> free_;
  std::uint64_t collectives_posted_ = 0;
};

class World {
 public:
  // `node_of(rank)`: the ranks sharing rank's node, for split_node.
  World(int size, std::function<NodeMembers(int)> node_of);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int size() const { return size_; }
  Clock::time_point now() const { return now_; }
  RankFabric& fabric(int rank) { return *fabrics_[static_cast<std::size_t>(rank)]; }
  Suspension& suspension(int rank) { return suspensions_[static_cast<std::size_t>(rank)]; }

  // Runs `task` as rank's protocol (allocations count for that rank); a rank never started is
  // a rank that never arrived.
  void start(int rank, Task<Outcome> task);
  // Until every started rank finished, or one timed out (then the others stop there).
  void run();

  const std::optional<Outcome>& outcome(int rank) const {
    return outcomes_[static_cast<std::size_t>(rank)];
  }
  std::optional<int> aborted_by() const { return aborted_by_; }
  RankCounts counts(int rank) const;

 private:
  friend class RankFabric;
  struct Posted {
    OpId op;
    int source;
    int tag;
  };
  struct Message {
    int source;
    int tag;
    std::vector<std::byte> data;
    std::optional<OpId> synchronous_op;  // the sender's op, done when matched
  };
  enum class CollectiveKind { kAllreduce, kBroadcast, kBarrier, kDuplicate, kSplit };
  struct Member {
    int rank;
    OpId op;
    std::span<std::uint64_t> words;
    std::span<std::byte> bytes;
    NodeMembers* node = nullptr;
  };
  struct Collective {
    CollectiveKind kind = CollectiveKind::kBarrier;
    Reduction reduction = Reduction::kSum;
    std::vector<std::uint64_t> accumulated;
    std::vector<std::byte> root_data;
    int root = 0;
    std::size_t payload = 0;
    std::vector<Member> members;
  };

  OpId post_collective(int rank, CollectiveKind kind, Member member, Reduction reduction, int root);
  void complete(Collective& collective);
  void count_collective(const Collective& collective);
  OpId post_send(int rank, int dest, int tag, std::vector<std::byte> data, bool synchronous);
  OpId post_receive(int rank, int source, int tag);
  void deliver(int dest, Posted posted, Message message);
  void done(int rank, OpId op);
  void wake(int rank);
  bool ready(int rank);
  void resume(int rank);

  int size_;
  std::function<NodeMembers(int)> node_of_;
  Clock::time_point now_;
  std::vector<std::unique_ptr<RankFabric>> fabrics_;
  std::vector<Suspension> suspensions_;
  std::vector<std::optional<Task<Outcome>>> tasks_;
  std::vector<std::optional<Outcome>> outcomes_;
  std::vector<RankCounts> counts_;
  std::vector<std::vector<Posted>> posted_;
  std::vector<std::deque<Message>> unexpected_;
  std::deque<Collective> collectives_;
  std::uint64_t first_collective_ = 0;
  std::deque<int> ready_;
  std::vector<char> queued_;
  std::optional<int> aborted_by_;
};

}  // namespace dtrain::bootstrap::sim
