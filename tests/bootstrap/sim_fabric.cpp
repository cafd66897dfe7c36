// SPDX-License-Identifier: Apache-2.0
#include "sim_fabric.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "sim_memory.hpp"

namespace dtrain::bootstrap::sim {

namespace {

// Children of `rank` in the binomial tree rooted at 0 that libnbc's small allreduce and
// broadcast use: rank + 2^(k-1) for every k with rank % 2^k == 0, below `size`.
std::uint64_t binomial_children(int rank, int size) {
  std::uint64_t children = 0;
  for (long step = 1; step < size; step *= 2) {
    if (rank % (2 * step) != 0) break;
    if (rank + step < size) ++children;
  }
  return children;
}

std::uint64_t ceil_log2(int size) {
  std::uint64_t rounds = 0;
  while ((1L << rounds) < size) ++rounds;
  return rounds;
}

}  // namespace

// ---- RankFabric ------------------------------------------------------------------------------

int RankFabric::size() const {
  return world_.size();
}

Clock::time_point RankFabric::now() const {
  return world_.now();
}

OpId RankFabric::allocate() {
  OpId op;
  if (!free_.empty()) {
    op = free_.back();
    free_.pop_back();
  } else {
    op = static_cast<OpId>(ops_.size());
    ops_.emplace_back();
  }
  ops_[op] = Op{};
  ops_[op].used = true;
  return op;
}

OpId RankFabric::allreduce(std::span<std::uint64_t> words, Reduction reduction) {
  World::Member member{rank_, 0, words, {}, nullptr};
  return world_.post_collective(rank_, World::CollectiveKind::kAllreduce, member, reduction, 0);
}

OpId RankFabric::broadcast(std::span<std::byte> data, int root) {
  World::Member member{rank_, 0, {}, data, nullptr};
  return world_.post_collective(rank_, World::CollectiveKind::kBroadcast, member, Reduction::kSum,
                                root);
}

OpId RankFabric::barrier() {
  return world_.post_collective(rank_, World::CollectiveKind::kBarrier, {rank_, 0, {}, {}, nullptr},
                                Reduction::kSum, 0);
}

OpId RankFabric::duplicate() {
  return world_.post_collective(rank_, World::CollectiveKind::kDuplicate,
                                {rank_, 0, {}, {}, nullptr}, Reduction::kSum, 0);
}

OpId RankFabric::split_node(NodeMembers& out) {
  return world_.post_collective(rank_, World::CollectiveKind::kSplit, {rank_, 0, {}, {}, &out},
                                Reduction::kSum, 0);
}

OpId RankFabric::send(int dest, int tag, std::vector<std::byte> data, bool synchronous) {
  return world_.post_send(rank_, dest, tag, std::move(data), synchronous);
}

OpId RankFabric::receive(int source, int tag) {
  return world_.post_receive(rank_, source, tag);
}

bool RankFabric::test(OpId op) {
  return ops_.at(op).done;
}

Received RankFabric::take(OpId op) {
  Received received = std::move(ops_.at(op).received);
  release(op);
  return received;
}

void RankFabric::release(OpId op) {
  if (!ops_.at(op).used || !ops_[op].done) {
    throw std::logic_error("sim: release of an operation that is not complete");
  }
  ops_[op] = Op{};
  free_.push_back(op);
}

void RankFabric::cancel(OpId op) {
  if (ops_.at(op).done) return;
  auto& posted = world_.posted_[static_cast<std::size_t>(rank_)];
  const auto it = std::find_if(posted.begin(), posted.end(),
                               [op](const World::Posted& p) { return p.op == op; });
  if (it == posted.end())
    throw std::logic_error("sim: cancel of an operation that is not a receive");
  posted.erase(it);
  ops_[op].done = true;
}

void RankFabric::note_records_decoded(std::size_t count) {
  world_.counts_[static_cast<std::size_t>(rank_)].records_decoded += count;
}

// ---- World -----------------------------------------------------------------------------------

World::World(int size, std::function<NodeMembers(int)> node_of)
    : size_(size), node_of_(std::move(node_of)) {
  OwnerScope simulator(-1);
  const auto n = static_cast<std::size_t>(size);
  for (int r = 0; r < size; ++r) fabrics_.push_back(std::make_unique<RankFabric>(*this, r));
  suspensions_.resize(n);
  tasks_.resize(n);
  outcomes_.resize(n);
  counts_.resize(n);
  posted_.resize(n);
  unexpected_.resize(n);
  queued_.assign(n, 0);
}

World::~World() {
  // Each rank's coroutine frame is its own memory.
  for (int r = 0; r < size_; ++r) {
    OwnerScope scope(r);
    tasks_[static_cast<std::size_t>(r)].reset();
  }
}

void World::start(int rank, Task<Outcome> task) {
  const auto r = static_cast<std::size_t>(rank);
  tasks_[r].emplace(std::move(task));
  OwnerScope scope(rank);
  tasks_[r]->start();
  if (tasks_[r]->done()) {
    outcomes_[r] = tasks_[r]->result();
  } else {
    wake(rank);
  }
}

RankCounts World::counts(int rank) const {
  RankCounts counts = counts_[static_cast<std::size_t>(rank)];
  counts.peak_bytes = peak_bytes(rank);
  return counts;
}

void World::wake(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  if (queued_[r]) return;
  queued_[r] = 1;
  OwnerScope simulator(-1);  // the scheduler's queue is nobody's memory
  ready_.push_back(rank);
}

bool World::ready(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  const WaitFor* wait = suspensions_[r].pending;
  if (wait == nullptr || !tasks_[r] || tasks_[r]->done()) return false;
  if (now_ >= wait->until) return true;
  auto& fabric = *fabrics_[r];
  for (OpId op : wait->any) {
    if (fabric.test(op)) return true;
  }
  return std::all_of(wait->all.begin(), wait->all.end(),
                     [&](OpId op) { return fabric.test(op); }) &&
         (!wait->all.empty() || wait->any.empty());
}

void World::resume(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  WaitFor* wait = suspensions_[r].pending;
  suspensions_[r].pending = nullptr;
  {
    OwnerScope scope(rank);
    wait->handle.resume();
  }
  if (tasks_[r]->done()) {
    OwnerScope scope(rank);
    outcomes_[r] = tasks_[r]->result();
    if (outcomes_[r]->kind == Outcome::Kind::kTimedOut && !aborted_by_) aborted_by_ = rank;
  }
}

void World::run() {
  while (!aborted_by_) {
    while (!ready_.empty() && !aborted_by_) {
      const int rank = ready_.front();
      ready_.pop_front();
      queued_[static_cast<std::size_t>(rank)] = 0;
      if (ready(rank)) resume(rank);
    }
    if (aborted_by_) break;
    // Nobody can run: time moves on to the earliest wait's end.
    std::optional<Clock::time_point> next;
    for (int r = 0; r < size_; ++r) {
      const WaitFor* wait = suspensions_[static_cast<std::size_t>(r)].pending;
      if (wait != nullptr && (!next || wait->until < *next)) next = wait->until;
    }
    if (!next) break;
    now_ = std::max(now_, *next);
    for (int r = 0; r < size_; ++r) {
      const WaitFor* wait = suspensions_[static_cast<std::size_t>(r)].pending;
      if (wait != nullptr && wait->until <= now_) wake(r);
    }
  }
}

void World::done(int rank, OpId op) {
  fabrics_[static_cast<std::size_t>(rank)]->ops_.at(op).done = true;
  wake(rank);
}

OpId World::post_collective(int rank, CollectiveKind kind, Member member, Reduction reduction,
                            int root) {
  auto& fabric = *fabrics_[static_cast<std::size_t>(rank)];
  member.op = fabric.allocate();
  const std::uint64_t index = fabric.collectives_posted_++;
  OwnerScope simulator(-1);
  while (first_collective_ + collectives_.size() <= index) collectives_.emplace_back();
  Collective& collective = collectives_[index - first_collective_];
  if (collective.members.empty()) {
    collective.kind = kind;
    collective.reduction = reduction;
    collective.root = root;
    collective.payload = member.words.size() * sizeof(std::uint64_t) + member.bytes.size();
  } else if (collective.kind != kind) {
    throw std::logic_error("sim: ranks posted different collectives");
  }
  if (kind == CollectiveKind::kAllreduce) {
    if (collective.members.empty()) {
      collective.accumulated.assign(member.words.begin(), member.words.end());
    } else {
      reduce_words(reduction, member.words.data(), collective.accumulated.data(),
                   member.words.size());
    }
  }
  if (kind == CollectiveKind::kBroadcast && rank == root) {
    collective.root_data.assign(member.bytes.begin(), member.bytes.end());
  }
  collective.members.push_back(member);
  if (collective.members.size() == static_cast<std::size_t>(size_)) {
    complete(collective);
    while (!collectives_.empty() &&
           collectives_.front().members.size() == static_cast<std::size_t>(size_)) {
      collectives_.pop_front();
      ++first_collective_;
    }
  }
  return member.op;
}

void World::complete(Collective& collective) {
  count_collective(collective);
  for (const Member& member : collective.members) {
    switch (collective.kind) {
      case CollectiveKind::kAllreduce:
        std::copy(collective.accumulated.begin(), collective.accumulated.end(),
                  member.words.begin());
        break;
      case CollectiveKind::kBroadcast:
        if (member.rank != collective.root) {
          std::memcpy(member.bytes.data(), collective.root_data.data(),
                      std::min(member.bytes.size(), collective.root_data.size()));
        }
        break;
      case CollectiveKind::kSplit: {
        OwnerScope scope(member.rank);
        *member.node = node_of_(member.rank);
        break;
      }
      case CollectiveKind::kBarrier:
      case CollectiveKind::kDuplicate:
        break;
    }
    done(member.rank, member.op);
  }
}

void World::count_collective(const Collective& collective) {
  for (int r = 0; r < size_; ++r) {
    RankCounts& c = counts_[static_cast<std::size_t>(r)];
    ++c.collectives;
    const std::uint64_t children = binomial_children(r, size_);
    const std::uint64_t parent = r == 0 ? 0 : 1;
    const auto tree = [&](std::uint64_t payload, std::uint64_t times) {
      // Up to rank 0 and back down: each rank receives from its children and its parent and
      // sends to both.
      c.messages_sent += times * (children + parent);
      c.messages_received += times * (children + parent);
      c.bytes_sent += times * (children + parent) * payload;
      c.bytes_received += times * (children + parent) * payload;
    };
    switch (collective.kind) {
      case CollectiveKind::kAllreduce: {
        // The MPI fabric's recursive doubling (bootstrap/mpi_fabric.cpp), exactly.
        int power = 1;
        while (power * 2 <= size_) power *= 2;
        const int extra = size_ - power;
        const std::uint64_t rounds = ceil_log2(power);
        std::uint64_t sends = rounds, receives = rounds;
        if (r < 2 * extra) {
          sends = r % 2 == 0 ? 1 : rounds + 1;
          receives = r % 2 == 0 ? 1 : rounds + 1;
        }
        c.messages_sent += sends;
        c.messages_received += receives;
        c.bytes_sent += sends * collective.payload;
        c.bytes_received += receives * collective.payload;
        break;
      }
      case CollectiveKind::kBroadcast: {
        const std::uint64_t payload = collective.root_data.size();
        if (size_ <= 4) {
          const bool root = r == collective.root;
          const std::uint64_t sends = root ? static_cast<std::uint64_t>(size_ - 1) : 0;
          const std::uint64_t receives = root ? 0 : 1;
          c.messages_sent += sends;
          c.bytes_sent += sends * payload;
          c.messages_received += receives;
          c.bytes_received += receives * payload;
        } else {
          c.messages_sent += children;
          c.bytes_sent += children * payload;
          c.messages_received += parent;
          c.bytes_received += parent * payload;
        }
        break;
      }
      case CollectiveKind::kBarrier:
        c.messages_sent += ceil_log2(size_);
        c.messages_received += ceil_log2(size_);
        break;
      case CollectiveKind::kDuplicate:
        tree(4, 3);
        break;
      case CollectiveKind::kSplit:
        tree(16, 4);
        break;
    }
  }
}

OpId World::post_send(int rank, int dest, int tag, std::vector<std::byte> data, bool synchronous) {
  auto& fabric = *fabrics_[static_cast<std::size_t>(rank)];
  const OpId op = fabric.allocate();
  RankCounts& sender = counts_[static_cast<std::size_t>(rank)];
  ++sender.messages_sent;
  sender.bytes_sent += data.size();
  if (dest < 0 || dest >= size_) throw std::logic_error("sim: send to a rank outside the world");
  Message message{rank, tag, {}, synchronous ? std::optional<OpId>(op) : std::nullopt};
  {
    // The transport's copy belongs to the receiver once delivered; until then to the sender,
    // as an MPI library's buffered send would.
    message.data = std::move(data);
  }
  auto& posted = posted_[static_cast<std::size_t>(dest)];
  const auto match = std::find_if(posted.begin(), posted.end(), [&](const Posted& p) {
    return p.tag == tag && (p.source == kAnySource || p.source == rank);
  });
  if (match != posted.end()) {
    const Posted receive = *match;
    posted.erase(match);
    deliver(dest, receive, std::move(message));
  } else {
    OwnerScope scope(dest);
    unexpected_[static_cast<std::size_t>(dest)].push_back(std::move(message));
  }
  if (!synchronous) fabric.ops_[op].done = true;
  return op;
}

OpId World::post_receive(int rank, int source, int tag) {
  auto& fabric = *fabrics_[static_cast<std::size_t>(rank)];
  const OpId op = fabric.allocate();
  auto& queue = unexpected_[static_cast<std::size_t>(rank)];
  const auto match = std::find_if(queue.begin(), queue.end(), [&](const Message& m) {
    return m.tag == tag && (source == kAnySource || m.source == source);
  });
  if (match != queue.end()) {
    Message message = std::move(*match);
    queue.erase(match);
    deliver(rank, {op, source, tag}, std::move(message));
  } else {
    posted_[static_cast<std::size_t>(rank)].push_back({op, source, tag});
  }
  return op;
}

void World::deliver(int dest, Posted posted, Message message) {
  RankCounts& receiver = counts_[static_cast<std::size_t>(dest)];
  ++receiver.messages_received;
  receiver.bytes_received += message.data.size();
  auto& op = fabrics_[static_cast<std::size_t>(dest)]->ops_.at(posted.op);
  op.received.source = message.source;
  {
    OwnerScope scope(dest);
    op.received.data.assign(message.data.begin(), message.data.end());
  }
  if (message.synchronous_op) done(message.source, *message.synchronous_op);
  done(dest, posted.op);
}

}  // namespace dtrain::bootstrap::sim
