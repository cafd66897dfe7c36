// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/agreement.hpp"

#include <xxhash.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "bootstrap/peers.hpp"
#include "bootstrap/rank_set.hpp"

namespace dtrain::bootstrap {

namespace {

constexpr int kTagHereForward = kTagFirst;   // to the successor on the ring
constexpr int kTagHereBack = kTagFirst + 1;  // to the predecessor
constexpr int kTagReport = kTagFirst + 2;    // "my neighbour never arrived", to rank 0
constexpr int kTagEndpoint = kTagFirst + 3;  // preflight endpoints, without the plugin
constexpr int kTagGather = kTagFirst + 4;
constexpr int kTagGatherAgain = kTagFirst + 5;
constexpr int kTagListRequest = kTagFirst + 6;
constexpr int kTagListReply = kTagFirst + 7;
constexpr int kTagNodeRank = kTagFirst + 8;
constexpr int kTagMailbox = kTagFirst + 9;
static_assert(kTagMailbox == kTagLast);

// Changes whenever the words or messages of the protocol change.
constexpr std::uint64_t kProtocolMagic = 0x6474726100000004ull;

// The node checks sum terms modulo a prime, so that a sum of zero is a statement about the
// multiset of terms (a difference survives unless a random-looking polynomial vanishes).
constexpr std::uint64_t kPrime = (1ull << 61) - 1;
constexpr std::uint64_t kBase = 0x1d8e4e27c47d124full % kPrime;

enum Word : std::size_t {
  kMagic,
  kMagicNot,
  kFpLow,
  kFpLowNot,
  kFpHigh,
  kFpHighNot,
  kList,
  kListNot,
  kPresent,
  kPresentNot,
  kChecksOk,
  kPreflightOk,
  kPlaced,
  kPlacedNot,
  kLeaders,          // sum: ranks that lead their node (lowest rank there)
  kRankZeroNodes,    // sum: rank 0's DTRAIN_NNODES + 1 (0 without the variables)
  kNodeConsistency,  // sum mod kPrime: zero when every rank has its node leader's node rank
  kNodeRanks,        // sum mod kPrime over leaders of kBase^node_rank
};
static_assert(kNodeRanks + 1 == kAgreementWords);
constexpr std::size_t kFirstSum = kLeaders;
constexpr std::size_t kFirstModularSum = kNodeConsistency;

// The reference round: holders of each candidate and of rank 0's value (sums), then the
// lowest rank holding each candidate (minima).
enum ReferenceWord : std::size_t {
  kHoldersPresence,
  kHoldersFingerprint,
  kHoldersList,
  kHoldersZeroPresence,
  kHoldersZeroFingerprint,
  kHoldersZeroList,
  kLowestPresence,
  kLowestFingerprint,
  kLowestList,
};
static_assert(kLowestList + 1 == kReferenceWords);
constexpr std::size_t kFirstReferenceMinimum = kLowestPresence;

// The bit-count round: presence, fingerprint (128 bits), list (64 bits), then rank 0's values.
constexpr std::size_t kCountPresence = 0;
constexpr std::size_t kCountFingerprint = 1;
constexpr std::size_t kCountList = 129;
constexpr std::size_t kZeroValues = 193;  // fingerprint low, high, list, presence
constexpr std::size_t kCountWords = 197;

// Entries per range of the endpoint-list search, and entries sent at its last step.
constexpr std::size_t kSearchFanout = 64;

constexpr const char* kArrivalStep = "waiting for all ranks to start the bootstrap";
constexpr const char* kDiagnosisStep = "finding which ranks disagree";
constexpr const char* kClosingStep = "creating the communicator";
constexpr const char* kSplitStep = "asking MPI which ranks share a node";
constexpr const char* kPreflightStep = "in the connectivity preflight";
constexpr const char* kPlacementStep = "comparing the node placement";

// The operations to wait for, as a named value: GCC 12 cannot keep an initializer list's array
// alive across a co_await.
template <typename... Ops>
std::vector<OpId> ops_of(Ops... ops) {
  return std::vector<OpId>{ops...};
}

__extension__ using Wide = unsigned __int128;

std::uint64_t mul_mod(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint64_t>(static_cast<Wide>(a) * b % kPrime);
}

std::uint64_t pow_mod(std::uint64_t base, std::uint64_t exponent) {
  std::uint64_t result = 1;
  base %= kPrime;
  while (exponent > 0) {
    if (exponent & 1) result = mul_mod(result, base);
    base = mul_mod(base, base);
    exponent >>= 1;
  }
  return result;
}

// kBase^0 + ... + kBase^(k-1) modulo kPrime: what the leaders' terms sum to when their node
// ranks are exactly 0..k-1.
std::uint64_t node_rank_sum(std::uint64_t k) {
  const std::uint64_t numerator = (pow_mod(kBase, k) + kPrime - 1) % kPrime;
  return mul_mod(numerator, pow_mod(kBase - 1, kPrime - 2));
}

std::uint64_t node_term(int leader, int node_rank) {
  const std::int32_t key[2] = {leader, node_rank};
  return XXH3_64bits_withSeed(key, sizeof key, 0x6474) % kPrime;
}

struct Hash128 {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  bool operator==(const Hash128&) const = default;
};

Hash128 fingerprint_hash(const Fingerprint& fingerprint) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  for (const auto& field : fingerprint_fields()) {
    const std::string& value = fingerprint.*field.member;
    XXH3_128bits_update(state, value.data(), value.size() + 1);  // with the terminator
  }
  const auto hash = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {hash.low64, hash.high64};
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string describe(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " on " + host;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += "\n  " + line;
  return text;
}

// Little-endian fixed-width fields of the protocol's small messages.
void put_u64(std::vector<std::byte>& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

std::uint64_t get_u64(const std::vector<std::byte>& in, std::size_t& at) {
  if (at + 8 > in.size()) throw Error(ErrorKind::kInternal, "bootstrap message too short");
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  at += 8;
  return value;
}

void put_text(std::vector<std::byte>& out, std::string_view text) {
  put_u64(out, text.size());
  for (char c : text) out.push_back(static_cast<std::byte>(c));
}

std::string get_text(const std::vector<std::byte>& in, std::size_t& at) {
  const auto length = get_u64(in, at);
  if (at + length > in.size()) throw Error(ErrorKind::kInternal, "bootstrap message too short");
  std::string text(length, '\0');
  std::memcpy(text.data(), in.data() + at, length);
  at += length;
  return text;
}

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::string text_of(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// [low, high) cut into `parts` ranges; part j of them.
std::pair<std::size_t, std::size_t> sub_range(std::size_t low, std::size_t high, std::size_t parts,
                                              std::size_t j) {
  const std::size_t width = high - low;
  return {low + width * j / parts, low + width * (j + 1) / parts};
}

// What the agreement's words say, the same on every rank.
struct Agreed {
  bool versions_equal = true;
  bool fingerprints_equal = true;
  bool lists_equal = true;
  bool all_present = false;
  bool none_present = true;
  bool checks_ok = true;
  bool preflight_ok = true;
  bool all_placed = true;
  std::uint64_t leaders = 0;
  long rank_zero_nodes = -1;
  bool node_consistent = true;
  bool node_ranks_distinct = true;

  bool presence_equal() const { return all_present || none_present; }
  bool nodes_ok() const {
    return node_consistent && node_ranks_distinct && rank_zero_nodes == static_cast<long>(leaders);
  }
  bool checks_failed() const {
    return !versions_equal || !checks_ok || !presence_equal() ||
           (all_present && (!lists_equal || (all_placed && !nodes_ok())));
  }
};

Agreed read_agreement(const std::vector<std::uint64_t>& w) {
  const auto equal = [&](std::size_t word) { return w[word] == ~w[word + 1]; };
  Agreed a;
  a.versions_equal = equal(kMagic);
  a.fingerprints_equal = equal(kFpLow) && equal(kFpHigh);
  a.lists_equal = equal(kList);
  a.all_present = w[kPresent] == 1;
  a.none_present = ~w[kPresentNot] == 0;  // the largest presence is 0
  a.checks_ok = w[kChecksOk] == 1;
  a.preflight_ok = w[kPreflightOk] == 1;
  a.all_placed = w[kPlaced] == 1;
  a.leaders = w[kLeaders];
  a.rank_zero_nodes = static_cast<long>(w[kRankZeroNodes]) - 1;
  a.node_consistent = w[kNodeConsistency] == 0;
  a.node_ranks_distinct = w[kNodeRanks] == node_rank_sum(a.leaders);
  return a;
}

// A rank's record on the diagnostic path, sent to rank 0 through the gather tree.
struct Record {
  int rank = -1;
  std::string host;
  std::vector<std::string> problems;
  std::vector<std::string> env_lines;
  bool differs_presence = false;
  bool present = false;
  std::string list_line;
  std::vector<std::string> node_lines;
  std::optional<Fingerprint> fingerprint;
  bool fingerprint_reference = false;
  std::string listen_endpoint;
  int listen_errno = 0;
  std::vector<ProbeOutcome> probe_failures;
  std::vector<int> reached;  // listen-failed peers this rank connected to (second gather)
};

std::string encode(const Record& record) {
  nlohmann::json json = {{"rank", record.rank}, {"host", record.host}};
  if (!record.problems.empty()) json["problems"] = record.problems;
  if (!record.env_lines.empty()) json["env"] = record.env_lines;
  if (record.differs_presence) json["present"] = record.present;
  if (!record.list_line.empty()) json["list"] = record.list_line;
  if (!record.node_lines.empty()) json["nodes"] = record.node_lines;
  if (record.fingerprint) {
    nlohmann::json fp = nlohmann::json::object();
    for (const auto& field : fingerprint_fields())
      fp[field.label] = (*record.fingerprint).*field.member;
    json["fingerprint"] = fp;
    json["reference"] = record.fingerprint_reference;
  }
  if (!record.listen_endpoint.empty()) {
    json["listen"] = record.listen_endpoint;
    json["listen_errno"] = record.listen_errno;
  }
  if (!record.probe_failures.empty()) {
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& f : record.probe_failures) failures.push_back({f.target, f.error});
    json["failures"] = failures;
  }
  if (!record.reached.empty()) json["reached"] = record.reached;
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Record decode(const std::string& text) {
  const auto json = nlohmann::json::parse(text);
  Record record;
  record.rank = json.at("rank");
  record.host = json.at("host");
  record.problems = json.value("problems", std::vector<std::string>{});
  record.env_lines = json.value("env", std::vector<std::string>{});
  if (json.contains("present")) {
    record.differs_presence = true;
    record.present = json.at("present");
  }
  record.list_line = json.value("list", std::string{});
  record.node_lines = json.value("nodes", std::vector<std::string>{});
  if (json.contains("fingerprint")) {
    Fingerprint fp;
    for (const auto& field : fingerprint_fields()) {
      fp.*field.member = json.at("fingerprint").at(field.label).get<std::string>();
    }
    record.fingerprint = fp;
    record.fingerprint_reference = json.at("reference");
  }
  record.listen_endpoint = json.value("listen", std::string{});
  record.listen_errno = json.value("listen_errno", 0);
  if (json.contains("failures")) {
    for (const auto& f : json.at("failures")) record.probe_failures.push_back({f.at(0), f.at(1)});
  }
  record.reached = json.value("reached", std::vector<int>{});
  return record;
}

RankRecord as_rank_record(const Record& record) {
  RankRecord out;
  out.mpi.rank = record.rank;
  out.hostname = record.host;
  out.listen_endpoint = record.listen_endpoint;
  out.listen_errno = record.listen_errno;
  return out;
}

class Protocol {
 public:
  Protocol(Fabric& fabric, Suspension& suspension, RankFacts facts, ProtocolConfig config,
           ProtocolHooks hooks)
      : fabric_(fabric),
        suspension_(suspension),
        facts_(std::move(facts)),
        config_(std::move(config)),
        hooks_(std::move(hooks)),
        rank_(fabric.rank()),
        size_(fabric.size()) {
    deadline_ = rank_ == 0 ? config_.deadline : config_.deadline + kFollowerGrace;
    // Ranks whose neighbour has not arrived tell rank 0 this long before its deadline.
    const auto lead =
        std::min<std::chrono::milliseconds>(std::chrono::milliseconds(2000), config_.timeout / 4);
    census_at_ = config_.deadline - lead;
  }

  Task<Outcome> run() {
    const auto started = fabric_.now();
    phase("waiting for all ranks to arrive");
    post_arrival();

    // With the plugin's list every rank knows its peers' endpoints and probes them now, and its
    // failures ride in the agreement. (Without it the endpoints must be exchanged first, which
    // only makes sense once every rank is known to lack the list: after the agreement.)
    const bool early = facts_.preflight && size_ > 1 && facts_.env.present &&
                       facts_.list_count == static_cast<std::size_t>(size_);
    if (early) {
      const auto peers = preflight_peers(rank_, size_);
      std::vector<ProbeTarget> targets;
      targets.reserve(peers.size());
      for (int peer : peers) {
        const auto entry = facts_.list_entries.find(static_cast<std::size_t>(peer));
        if (entry == facts_.list_entries.end()) continue;
        try {
          parse_endpoint(entry->second, facts_.list_source + " entry " + std::to_string(peer));
          targets.push_back({peer, entry->second});
        } catch (const Error& error) {
          facts_.problems.push_back(error.what());
        }
      }
      probe(targets, true);
    }

    std::vector<std::uint64_t> words = agreement_words();
    OpId op = fabric_.allreduce(words, Reduction::kAgreement);
    if (!co_await wait_all(ops_of(op))) co_return timed_out(kArrivalStep, true);
    fabric_.release(op);
    // Every rank arrived: the ring's messages are in or on their way, and the census is over.
    if (!co_await wait_all(ring_)) co_return timed_out(kArrivalStep, true);
    for (OpId ring_op : ring_) fabric_.release(ring_op);
    ring_.clear();
    census_armed_ = false;
    if (!co_await wait_all(reports_)) co_return timed_out(kArrivalStep, true);
    for (OpId report : reports_) fabric_.release(report);
    reports_.clear();
    Agreed agreed = read_agreement(words);

    if (agreed.versions_equal && agreed.none_present && facts_.preflight && size_ > 1) {
      // Without the plugin: the endpoints go to the peers, then every rank probes them, then
      // one more all-reduce brings the outcomes.
      std::vector<ProbeTarget> targets;
      if (!co_await exchange_endpoints(preflight_peers(rank_, size_), targets)) {
        co_return timed_out(kPreflightStep, false);
      }
      probe(targets, false);
      words = agreement_words();
      op = fabric_.allreduce(words, Reduction::kAgreement);
      if (!co_await wait_all(ops_of(op))) co_return timed_out(kPreflightStep, false);
      fabric_.release(op);
      agreed = read_agreement(words);
    }
    if (hooks_.probes_done) hooks_.probes_done();
    const auto agreed_at = fabric_.now();
    timings_.arrival = seconds_between(started, agreed_at) - timings_.preflight;

    if (!agreed.versions_equal) {
      if (!co_await close(false)) co_return timed_out(kClosingStep, false);
      co_return failed(ErrorKind::kMismatch,
                       "the ranks run programs built against different versions of dtrain's "
                       "bootstrap; build every rank's program against the same dtrain",
                       "the ranks run programs built against different dtrain versions");
    }

    if (!agreed.all_placed) {
      // Some rank's launcher did not say which ranks share its node: every rank asks MPI.
      if (!co_await close(false)) co_return timed_out(kClosingStep, false);
      phase("MPI_Comm_split_type");
      NodeMembers members;
      op = fabric_.split_node(members);
      if (!co_await wait_all(ops_of(op))) {
        co_return timed_out(kSplitStep, false);
      }
      fabric_.release(op);
      facts_.node = std::move(members);
      words = agreement_words();
      op = fabric_.allreduce(words, Reduction::kAgreement);
      if (!co_await wait_all(ops_of(op))) {
        co_return timed_out(kPlacementStep, false);
      }
      fabric_.release(op);
      agreed = read_agreement(words);
      timings_.placement = seconds_between(agreed_at, fabric_.now());
    }

    const bool clean = !agreed.checks_failed() && agreed.fingerprints_equal && agreed.preflight_ok;
    if (clean) {
      const auto closing = fabric_.now();
      if (!co_await close(config_.duplicate)) co_return timed_out(kClosingStep, false);
      timings_.communicator = seconds_between(closing, fabric_.now());
      co_return ready(agreed);
    }

    const auto diagnosis_started = fabric_.now();
    phase("finding which ranks disagree");
    if (!co_await close(false)) co_return timed_out(kClosingStep, false);
    Outcome outcome;
    if (!co_await diagnose(agreed, outcome)) co_return timed_out(kDiagnosisStep, false);
    timings_.verdict = seconds_between(diagnosis_started, fabric_.now());
    if (outcome.kind == Outcome::Kind::kReady && config_.duplicate) {
      const auto closing = fabric_.now();
      op = fabric_.duplicate();
      if (!co_await wait_all(ops_of(op))) co_return timed_out(kClosingStep, false);
      fabric_.release(op);
      timings_.communicator = seconds_between(closing, fabric_.now());
    }
    if (!agreed.checks_failed() && agreed.none_present && rank_ == 0 && !config_.quiet) {
      outcome.notes.insert(outcome.notes.begin(), no_plugin_note());
    }
    finish(outcome);
    co_return outcome;
  }

 private:
  void phase(const char* name) {
    if (hooks_.phase) hooks_.phase(name);
  }

  // ---- arrival and its census ----------------------------------------------------------------

  int successor() const { return (rank_ + 1) % size_; }
  int predecessor() const { return (rank_ - 1 + size_) % size_; }

  void post_arrival() {
    if (size_ < 2) return;
    from_predecessor_ = fabric_.receive(predecessor(), kTagHereForward);
    from_successor_ = fabric_.receive(successor(), kTagHereBack);
    ring_ = {*from_predecessor_, *from_successor_,
             fabric_.send(successor(), kTagHereForward, {}, false),
             fabric_.send(predecessor(), kTagHereBack, {}, false)};
    if (rank_ == 0) inbox_ = fabric_.receive(kAnySource, kTagReport);
    census_armed_ = true;
  }

  // Shortly before the deadline, a rank whose neighbour has not arrived tells rank 0 which
  // one. Every missing run of ranks has an arrived rank on each side (rank 0 arrived), so
  // rank 0 learns where each run starts and ends from two reports at most, whatever n is.
  void run_census() {
    census_armed_ = false;
    if (size_ < 2) return;
    const bool successor_here = fabric_.test(*from_successor_);
    const bool predecessor_here = fabric_.test(*from_predecessor_);
    if (rank_ == 0) return;  // rank 0 reads its own ring when it names the missing ranks
    const auto report = [&](int missing, bool is_successor) {
      std::vector<std::byte> message;
      put_u64(message, static_cast<std::uint64_t>(missing));
      put_u64(message, is_successor ? 1 : 0);
      // Synchronous, so that a report is known to be received before its sender moves on
      // (see close()).
      reports_.push_back(fabric_.send(0, kTagReport, std::move(message), true));
    };
    if (!successor_here && successor() != 0) report(successor(), true);
    if (!predecessor_here && predecessor() != 0) report(predecessor(), false);
  }

  void serve_inbox() {
    while (inbox_ && fabric_.test(*inbox_)) {
      const Received message = fabric_.take(*inbox_);
      inbox_.reset();
      if (!inbox_closing_) inbox_ = fabric_.receive(kAnySource, kTagReport);
      if (message.data.size() != 16) continue;  // a withdrawn receive
      std::size_t at = 0;
      const auto missing = static_cast<int>(get_u64(message.data, at));
      const bool is_successor = get_u64(message.data, at) == 1;
      (is_successor ? run_starts_ : run_ends_).insert(missing);
    }
  }

  // "; rank 7 never arrived (...)": the runs of missing ranks between the reports.
  std::string describe_missing() {
    serve_inbox();
    std::set<int> starts = run_starts_;
    std::set<int> ends = run_ends_;
    if (size_ > 1 && from_successor_ && !fabric_.test(*from_successor_)) starts.insert(1);
    if (size_ > 1 && from_predecessor_ && !fabric_.test(*from_predecessor_)) ends.insert(size_ - 1);
    RankSet missing;
    for (auto start = starts.begin(); start != starts.end(); ++start) {
      const auto end = ends.lower_bound(*start);
      const auto next_start = std::next(start);
      if (end != ends.end() && (next_start == starts.end() || *next_start > *end)) {
        for (int r = *start; r <= *end; ++r) missing.insert(r);
      } else {
        missing.insert(*start);
      }
    }
    for (int end : ends) missing.insert(end);
    if (missing.empty()) {
      return "; every rank arrived, but the agreement did not finish (a rank died after arriving, "
             "or the network between nodes is too slow)";
    }
    return (missing.count() == 1 ? "; rank " : "; ranks ") + missing.format() +
           " never arrived (died, or stuck before dtrain's bootstrap)";
  }

  // Polls until every operation of `ops` completed (true) or this rank's deadline passed
  // (false). Rank 0 keeps reading the census's reports meanwhile.
  Task<bool> wait_all(std::vector<OpId> ops) {
    while (true) {
      serve_inbox();
      bool all = true;
      for (OpId op : ops) {
        if (!fabric_.test(op)) {
          all = false;
          break;
        }
      }
      if (all) co_return true;
      const auto now = fabric_.now();
      if (census_armed_ && now >= census_at_) run_census();
      if (now >= deadline_) co_return false;
      WaitFor wait;
      wait.all = ops;
      if (inbox_) wait.any.push_back(*inbox_);
      wait.until = census_armed_ ? std::min(census_at_, deadline_) : deadline_;
      co_await Wait{suspension_, &wait};
    }
  }

  // The first collective after the agreement. Every rank posts it only after its own census
  // reports were received (their sends are synchronous), so once it completes on rank 0 no
  // report is on its way, and rank 0 withdraws its receive: nothing of the bootstrap's is
  // left for the job to receive.
  Task<bool> close(bool duplicate) {
    if (closed_) {
      // Closed before (the placement's fallback): only the communicator is still to make.
      if (!duplicate) co_return true;
      OpId op = fabric_.duplicate();
      if (!co_await wait_all(ops_of(op))) co_return false;
      fabric_.release(op);
      co_return true;
    }
    closed_ = true;
    phase(duplicate ? "creating the MPI communicator" : "waiting for the other ranks");
    OpId op = duplicate ? fabric_.duplicate() : fabric_.barrier();
    if (!co_await wait_all(ops_of(op))) co_return false;
    fabric_.release(op);
    if (inbox_) {
      inbox_closing_ = true;
      fabric_.cancel(*inbox_);
      while (true) {
        serve_inbox();
        if (!inbox_) break;
        if (fabric_.now() >= deadline_) co_return false;
        WaitFor wait;
        wait.any = {*inbox_};
        wait.until = deadline_;
        co_await Wait{suspension_, &wait};
      }
    }
    co_return true;
  }

  Outcome timed_out(const std::string& step, bool arrival) {
    Outcome outcome;
    outcome.kind = Outcome::Kind::kTimedOut;
    outcome.timeout = "timed out after " + seconds_text(config_.timeout) + " s " + step;
    if (arrival) {
      outcome.timeout +=
          rank_ == 0 ? describe_missing() : " (rank 0 names the ranks that are missing)";
    }
    finish(outcome);
    return outcome;
  }

  Outcome failed(ErrorKind kind, const std::string& report, const std::string& summary) {
    Outcome outcome;
    outcome.kind = Outcome::Kind::kFailed;
    outcome.error = kind;
    if (rank_ == 0) outcome.report = report;
    outcome.summary = summary;
    finish(outcome);
    return outcome;
  }

  Outcome ready(const Agreed& agreed) {
    Outcome outcome;
    if (agreed.none_present && rank_ == 0 && !config_.quiet)
      outcome.notes.push_back(no_plugin_note());
    finish(outcome);
    return outcome;
  }

  static std::string no_plugin_note() {
    return "note: no DTRAIN_* variables (not launched with srun --distributed-train); skipping the "
           "environment check; the preflight uses endpoints derived from MPI (host name address, "
           "ephemeral port)";
  }

  void finish(Outcome& outcome) {
    outcome.timings = timings_;
    if (facts_.node) {
      const auto& ranks = facts_.node->ranks;
      outcome.local_rank =
          static_cast<int>(std::find(ranks.begin(), ranks.end(), rank_) - ranks.begin());
      outcome.local_size = static_cast<int>(ranks.size());
    }
  }

  void probe(const std::vector<ProbeTarget>& targets, bool early) {
    if (targets.empty()) return;
    const auto started = fabric_.now();
    phase("connectivity preflight");
    outcomes_ = hooks_.probe(targets, early);
    phase("waiting for all ranks to arrive");
    timings_.preflight += seconds_between(started, fabric_.now());
  }

  // ---- preflight endpoints without the plugin -----------------------------------------------

  // Each rank sends its endpoint to its preflight peers and receives theirs (the peers are
  // symmetric): 2 log2 n small messages each way.
  Task<bool> exchange_endpoints(const std::vector<int>& peers, std::vector<ProbeTarget>& targets) {
    std::vector<OpId> ops;
    std::vector<OpId> receives;
    for (int peer : peers) {
      receives.push_back(fabric_.receive(peer, kTagEndpoint));
      ops.push_back(fabric_.send(peer, kTagEndpoint, bytes_of(facts_.listen_endpoint), false));
    }
    ops.insert(ops.end(), receives.begin(), receives.end());
    if (!co_await wait_all(ops)) co_return false;
    for (std::size_t i = 0; i < peers.size(); ++i) {
      targets.push_back({peers[i], text_of(fabric_.take(receives[i]).data)});
      fabric_.release(ops[i]);
    }
    co_return true;
  }

  // ---- the agreement --------------------------------------------------------------------------

  std::vector<std::string> env_lines() const {
    std::vector<std::string> lines;
    const auto& env = facts_.env;
    if (!env.present) return lines;
    const auto mismatch = [&](const char* variable, int value, const std::string& mpi_says) {
      lines.push_back(describe(rank_, facts_.host) + ": " + variable + "=" + std::to_string(value) +
                      " but MPI says " + mpi_says);
    };
    if (env.rank != rank_) mismatch("DTRAIN_RANK", env.rank, std::to_string(rank_));
    if (env.world_size != size_)
      mismatch("DTRAIN_WORLD_SIZE", env.world_size, std::to_string(size_));
    if (facts_.node) {
      const auto& ranks = facts_.node->ranks;
      const int local_rank =
          static_cast<int>(std::find(ranks.begin(), ranks.end(), rank_) - ranks.begin());
      const int local_size = static_cast<int>(ranks.size());
      if (env.local_rank != local_rank) {
        mismatch("DTRAIN_LOCAL_RANK", env.local_rank, "local rank " + std::to_string(local_rank));
      }
      if (env.local_world_size != local_size) {
        mismatch("DTRAIN_LOCAL_WORLD_SIZE", env.local_world_size,
                 std::to_string(local_size) + " ranks share its node");
      }
    }
    return lines;
  }

  bool preflight_ok() const {
    if (!facts_.preflight) return true;
    if (facts_.listen_errno != 0) return false;
    return std::all_of(outcomes_.begin(), outcomes_.end(),
                       [](const ProbeOutcome& o) { return o.error == 0; });
  }

  std::vector<std::uint64_t> agreement_words() const {
    std::vector<std::uint64_t> w(kAgreementWords, 0);
    const auto pair = [&](std::size_t word, std::uint64_t value) {
      w[word] = value;
      w[word + 1] = ~value;
    };
    const Hash128 fp = fingerprint_hash(facts_.fingerprint);
    pair(kMagic, kProtocolMagic);
    pair(kFpLow, fp.low);
    pair(kFpHigh, fp.high);
    pair(kList, facts_.env.present ? facts_.list_hash : 0);
    pair(kPresent, facts_.env.present ? 1 : 0);
    w[kChecksOk] = facts_.problems.empty() && env_lines().empty() ? 1 : 0;
    w[kPreflightOk] = preflight_ok() ? 1 : 0;
    pair(kPlaced, facts_.node ? 1 : 0);
    if (rank_ == 0)
      w[kRankZeroNodes] =
          facts_.env.present ? static_cast<std::uint64_t>(facts_.env.nnodes) + 1 : 0;
    if (facts_.node) {
      const int leader = facts_.node->ranks.front();
      const bool leads = leader == rank_;
      w[kLeaders] = leads ? 1 : 0;
      if (facts_.env.present) {
        const int node_rank = facts_.env.node_rank;
        std::uint64_t consistency = node_term(leader, node_rank);
        if (leads) {
          const auto local_size = static_cast<std::uint64_t>(facts_.node->ranks.size());
          consistency = (consistency + kPrime - mul_mod(local_size % kPrime, consistency)) % kPrime;
          w[kNodeRanks] = pow_mod(kBase, static_cast<std::uint64_t>(node_rank));
        }
        w[kNodeConsistency] = consistency;
      }
    }
    return w;
  }

  // ---- the diagnostic path ----------------------------------------------------------------------

  struct Reference {
    Hash128 fingerprint;
    int fingerprint_rank = 0;
    std::uint64_t list = 0;
    int list_rank = 0;
    std::uint64_t list_holders = 0;
    bool present = false;
  };

  // Two small all-reduces find the value most ranks hold (each bit of a strict majority's
  // value is the majority of that bit), or rank 0's value when no value has a majority.
  Task<bool> find_reference(Reference& reference) {
    const Hash128 fp = fingerprint_hash(facts_.fingerprint);
    const std::uint64_t list = facts_.env.present ? facts_.list_hash : 0;
    const std::uint64_t present = facts_.env.present ? 1 : 0;
    std::vector<std::uint64_t> counts(kCountWords, 0);
    counts[kCountPresence] = present;
    for (int bit = 0; bit < 64; ++bit) {
      counts[kCountFingerprint + bit] = (fp.low >> bit) & 1;
      counts[kCountFingerprint + 64 + bit] = (fp.high >> bit) & 1;
      counts[kCountList + bit] = (list >> bit) & 1;
    }
    if (rank_ == 0) {
      counts[kZeroValues] = fp.low;
      counts[kZeroValues + 1] = fp.high;
      counts[kZeroValues + 2] = list;
      counts[kZeroValues + 3] = present;
    }
    OpId op = fabric_.allreduce(counts, Reduction::kSum);
    if (!co_await wait_all(ops_of(op))) co_return false;
    fabric_.release(op);
    const auto n = static_cast<std::uint64_t>(size_);
    const auto majority = [&](std::size_t word) { return 2 * counts[word] > n ? 1ull : 0ull; };
    Hash128 candidate_fp;
    std::uint64_t candidate_list = 0;
    for (int bit = 0; bit < 64; ++bit) {
      candidate_fp.low |= majority(kCountFingerprint + bit) << bit;
      candidate_fp.high |= majority(kCountFingerprint + 64 + bit) << bit;
      candidate_list |= majority(kCountList + bit) << bit;
    }
    const std::uint64_t candidate_present = majority(kCountPresence);
    const Hash128 zero_fp{counts[kZeroValues], counts[kZeroValues + 1]};
    const std::uint64_t zero_list = counts[kZeroValues + 2];
    const std::uint64_t zero_present = counts[kZeroValues + 3];

    std::vector<std::uint64_t> holders(kReferenceWords, 0);
    holders[kHoldersPresence] = present == candidate_present;
    holders[kHoldersFingerprint] = fp == candidate_fp;
    holders[kHoldersList] = list == candidate_list;
    holders[kHoldersZeroPresence] = present == zero_present;
    holders[kHoldersZeroFingerprint] = fp == zero_fp;
    holders[kHoldersZeroList] = list == zero_list;
    const auto lowest = [&](bool holds) { return holds ? static_cast<std::uint64_t>(rank_) : n; };
    holders[kLowestPresence] = lowest(present == candidate_present);
    holders[kLowestFingerprint] = lowest(fp == candidate_fp);
    holders[kLowestList] = lowest(list == candidate_list);
    op = fabric_.allreduce(holders, Reduction::kReference);
    if (!co_await wait_all(ops_of(op))) co_return false;
    fabric_.release(op);
    const auto has_majority = [&](std::size_t word) { return 2 * holders[word] > n; };
    if (has_majority(kHoldersFingerprint)) {
      reference.fingerprint = candidate_fp;
      reference.fingerprint_rank = static_cast<int>(holders[kLowestFingerprint]);
    } else {
      reference.fingerprint = zero_fp;
      reference.fingerprint_rank = 0;
    }
    if (has_majority(kHoldersList)) {
      reference.list = candidate_list;
      reference.list_rank = static_cast<int>(holders[kLowestList]);
      reference.list_holders = holders[kHoldersList];
    } else {
      reference.list = zero_list;
      reference.list_rank = 0;
      reference.list_holders = holders[kHoldersZeroList];
    }
    reference.present = (has_majority(kHoldersPresence) ? candidate_present : zero_present) == 1;
    co_return true;
  }

  // The first entry where this rank's list differs from the reference rank's, found in
  // log_64(n) exchanges of at most 64 hashes with that rank; only the ranks whose list differs
  // take part, and the reference rank answers each of them.
  Task<bool> search_list(const Reference& reference, std::string& line) {
    const std::size_t differing = static_cast<std::size_t>(size_) - reference.list_holders;
    const EndpointList* list = facts_.list;
    if (rank_ == reference.list_rank) {
      std::size_t served = 0;
      std::vector<OpId> sends;
      while (served < differing) {
        OpId op = fabric_.receive(kAnySource, kTagListRequest);
        if (!co_await wait_all(ops_of(op))) co_return false;
        const Received request = fabric_.take(op);
        std::size_t at = 0;
        std::size_t low = get_u64(request.data, at);
        std::size_t high = get_u64(request.data, at);
        const std::size_t their_count = get_u64(request.data, at);
        const bool done = get_u64(request.data, at) == 1;
        if (done) {
          ++served;
          continue;
        }
        const std::size_t my_count = list ? list->count() : 0;
        if (high == 0) high = std::max(my_count, their_count);
        std::vector<std::byte> reply;
        put_u64(reply, my_count);
        put_u64(reply, low);
        put_u64(reply, high);
        if (high - low <= kSearchFanout) {
          put_u64(reply, 1);
          std::vector<std::string> entries;
          if (list) {
            list->visit(low, high,
                        [&](std::size_t, std::string_view entry) { entries.emplace_back(entry); });
          }
          put_u64(reply, entries.size());
          for (const auto& entry : entries) put_text(reply, entry);
          ++served;
        } else {
          put_u64(reply, 0);
          for (std::size_t j = 0; j < kSearchFanout; ++j) {
            const auto [a, b] = sub_range(low, high, kSearchFanout, j);
            put_u64(reply, list ? entry_range_hash(*list, a, b) : 0);
          }
        }
        sends.push_back(fabric_.send(request.source, kTagListReply, std::move(reply), false));
      }
      if (!co_await wait_all(sends)) co_return false;
      for (OpId op : sends) fabric_.release(op);
      co_return true;
    }
    if (!facts_.env.present || facts_.list_hash == reference.list) co_return true;

    const std::size_t my_count = list ? list->count() : 0;
    std::size_t low = 0;
    std::size_t high = 0;  // 0: the reference rank decides (the longer list's length)
    const std::string them = "rank " + std::to_string(reference.list_rank);
    while (true) {
      std::vector<std::byte> request;
      put_u64(request, low);
      put_u64(request, high);
      put_u64(request, my_count);
      put_u64(request, 0);
      OpId sent = fabric_.send(reference.list_rank, kTagListRequest, std::move(request), false);
      OpId op = fabric_.receive(reference.list_rank, kTagListReply);
      if (!co_await wait_all(ops_of(sent, op))) co_return false;
      fabric_.release(sent);
      const Received reply = fabric_.take(op);
      std::size_t at = 0;
      const std::size_t their_count = get_u64(reply.data, at);
      low = get_u64(reply.data, at);
      high = get_u64(reply.data, at);
      const bool leaf = get_u64(reply.data, at) == 1;
      if (leaf) {
        const std::size_t entries = get_u64(reply.data, at);
        std::vector<std::string> theirs;
        for (std::size_t i = 0; i < entries; ++i) theirs.push_back(get_text(reply.data, at));
        std::vector<std::string> mine;
        if (list) {
          list->visit(low, high,
                      [&](std::size_t, std::string_view entry) { mine.emplace_back(entry); });
        }
        for (std::size_t i = low; i < high; ++i) {
          const std::size_t k = i - low;
          const std::string left = i < their_count && k < theirs.size() ? theirs[k] : "(missing)";
          const std::string right = i < my_count && k < mine.size() ? mine[k] : "(missing)";
          if (left == right) continue;
          line = "the endpoint list (" + facts_.list_source + ") differs from " + them +
                 "'s at entry " + std::to_string(i) + ": " + them + " has '" + left + "', rank " +
                 std::to_string(rank_) + " has '" + right + "'";
          co_return true;
        }
        break;
      }
      std::size_t next = kSearchFanout;
      for (std::size_t j = 0; j < kSearchFanout; ++j) {
        const auto theirs = get_u64(reply.data, at);
        const auto [a, b] = sub_range(low, high, kSearchFanout, j);
        if (next == kSearchFanout && (!list || entry_range_hash(*list, a, b) != theirs)) next = j;
      }
      if (next == kSearchFanout) {
        // The texts differ, the entries do not (a separator or trailing byte): say so, and end
        // the conversation.
        std::vector<std::byte> done;
        put_u64(done, 0);
        put_u64(done, 0);
        put_u64(done, my_count);
        put_u64(done, 1);
        OpId op_done = fabric_.send(reference.list_rank, kTagListRequest, std::move(done), false);
        if (!co_await wait_all(ops_of(op_done))) co_return false;
        fabric_.release(op_done);
        break;
      }
      std::tie(low, high) = sub_range(low, high, kSearchFanout, next);
    }
    line = "the endpoint list (" + facts_.list_source + ") differs from " + them +
           "'s in its text (hash " + hex64(reference.list) + " there, " + hex64(facts_.list_hash) +
           " here), though not in any entry";
    co_return true;
  }

  // Only when the node sums disagree. Each rank tells its node's leader its node rank (O(local
  // size) messages at the leader); each leader sends its node's claim to the rank numbered
  // like the claimed node rank (mod n), which finds nodes claiming the same number. The claims
  // are synchronous sends and every rank enters a barrier once its own was received, so when
  // the barrier completes every claim has arrived (a non-blocking consensus: the mailboxes do
  // not know how many claims to expect).
  Task<bool> check_nodes(std::vector<std::string>& lines) {
    const auto& ranks = facts_.node->ranks;
    const int leader = ranks.front();
    const int node_rank = facts_.env.node_rank;
    int claimed = node_rank;
    if (rank_ != leader) {
      std::vector<std::byte> message;
      put_u64(message, static_cast<std::uint64_t>(node_rank));
      OpId op = fabric_.send(leader, kTagNodeRank, std::move(message), false);
      if (!co_await wait_all(ops_of(op))) co_return false;
      fabric_.release(op);
    } else {
      std::vector<OpId> receives;
      for (int member : ranks) {
        if (member != rank_) receives.push_back(fabric_.receive(member, kTagNodeRank));
      }
      if (!co_await wait_all(receives)) co_return false;
      std::set<int> values = {node_rank};
      for (OpId op : receives) {
        const Received message = fabric_.take(op);
        std::size_t at = 0;
        values.insert(static_cast<int>(get_u64(message.data, at)));
      }
      claimed = *values.begin();
      if (values.size() > 1) {
        lines.push_back("ranks " + RankSet::of(ranks).format() +
                        " share a node according to MPI but have different DTRAIN_NODE_RANK "
                        "values (" +
                        RankSet::of(std::vector<int>(values.begin(), values.end())).format() + ")");
      }
    }

    std::optional<OpId> claim;
    if (rank_ == leader) {
      std::vector<std::byte> message;
      put_u64(message, static_cast<std::uint64_t>(claimed));
      put_text(message, RankSet::of(ranks).format());
      const int mailbox =
          static_cast<int>(static_cast<std::uint64_t>(claimed) % static_cast<std::uint64_t>(size_));
      claim = fabric_.send(mailbox, kTagMailbox, std::move(message), true);
    }
    std::map<int, std::map<int, std::string>> claims;  // node rank -> leader -> members
    OpId inbox = fabric_.receive(kAnySource, kTagMailbox);
    std::optional<OpId> barrier;
    while (true) {
      if (!barrier && (!claim || fabric_.test(*claim))) barrier = fabric_.barrier();
      if (fabric_.test(inbox)) {
        const Received message = fabric_.take(inbox);
        std::size_t at = 0;
        const int value = static_cast<int>(get_u64(message.data, at));
        claims[value][message.source] = get_text(message.data, at);
        inbox = fabric_.receive(kAnySource, kTagMailbox);
        continue;
      }
      if (barrier && fabric_.test(*barrier)) break;
      std::vector<OpId> any = {inbox};
      if (barrier) any.push_back(*barrier);
      if (claim && !barrier) any.push_back(*claim);
      if (fabric_.now() >= deadline_) co_return false;
      WaitFor wait;
      wait.any = std::move(any);
      wait.until = deadline_;
      co_await Wait{suspension_, &wait};
    }
    fabric_.release(*barrier);
    if (claim) fabric_.release(*claim);
    fabric_.cancel(inbox);
    if (!co_await wait_all(ops_of(inbox))) co_return false;
    fabric_.release(inbox);
    for (const auto& [value, nodes] : claims) {
      if (nodes.size() < 2) continue;
      std::string groups;
      for (const auto& [node_leader, members] : nodes) {
        groups += (groups.empty() ? "" : " and ") + members;
      }
      lines.push_back("ranks " + groups +
                      " are on different nodes according to MPI but all have DTRAIN_NODE_RANK=" +
                      std::to_string(value));
    }
    co_return true;
  }

  // A binomial tree rooted at rank 0: every rank receives from its children, appends its own
  // record if it has one, and sends the concatenation to its parent. Records are passed on as
  // bytes; only rank 0 decodes them. Each rank sends one message and receives at most
  // ceil(log2 n); the bytes are those of the records below it.
  Task<bool> gather(const std::optional<Record>& mine, int tag, std::vector<Record>& records) {
    const int low_bit = rank_ == 0 ? 0 : (rank_ & -rank_);
    std::vector<OpId> receives;
    for (int bit = 1; bit < size_ && (rank_ == 0 || bit < low_bit); bit <<= 1) {
      if (rank_ + bit < size_) receives.push_back(fabric_.receive(rank_ + bit, tag));
    }
    if (!co_await wait_all(receives)) co_return false;
    std::vector<std::byte> payload;
    for (OpId op : receives) {
      const Received part = fabric_.take(op);
      payload.insert(payload.end(), part.data.begin(), part.data.end());
    }
    if (mine) put_text(payload, encode(*mine));
    if (rank_ != 0) {
      OpId op = fabric_.send(rank_ - low_bit, tag, std::move(payload), false);
      if (!co_await wait_all(ops_of(op))) co_return false;
      fabric_.release(op);
      co_return true;
    }
    std::size_t at = 0;
    while (at < payload.size()) records.push_back(decode(get_text(payload, at)));
    fabric_.note_records_decoded(records.size());
    std::sort(records.begin(), records.end(),
              [](const Record& a, const Record& b) { return a.rank < b.rank; });
    co_return true;
  }

  // Rank 0's list of ranks, to every rank (a size, then the ranks).
  Task<bool> broadcast_ranks(std::vector<int>& ranks) {
    std::vector<std::byte> length(8);
    if (rank_ == 0) {
      std::vector<std::byte> encoded;
      put_u64(encoded, ranks.size());
      length = encoded;
    }
    OpId op = fabric_.broadcast(length, 0);
    if (!co_await wait_all(ops_of(op))) co_return false;
    fabric_.release(op);
    std::size_t at = 0;
    const std::size_t count = get_u64(length, at);
    std::vector<std::byte> data;
    if (rank_ == 0) {
      for (int r : ranks) put_u64(data, static_cast<std::uint64_t>(r));
    } else {
      data.resize(count * 8);
    }
    if (count > 0) {
      op = fabric_.broadcast(data, 0);
      if (!co_await wait_all(ops_of(op))) co_return false;
      fabric_.release(op);
    }
    at = 0;
    ranks.clear();
    for (std::size_t i = 0; i < count; ++i) ranks.push_back(static_cast<int>(get_u64(data, at)));
    co_return true;
  }

  Record own_record() const {
    Record record;
    record.rank = rank_;
    record.host = facts_.host;
    return record;
  }

  Task<bool> diagnose(const Agreed& agreed, Outcome& outcome) {
    const bool checks = agreed.checks_failed();
    const bool fingerprints = !checks && !agreed.fingerprints_equal;
    const bool need_reference =
        (checks && (!agreed.presence_equal() || (agreed.all_present && !agreed.lists_equal))) ||
        fingerprints;
    Reference reference;
    if (need_reference && !co_await find_reference(reference)) co_return false;

    if (checks) {
      Record mine = own_record();
      bool report = false;
      for (const auto& problem : facts_.problems) mine.problems.push_back(problem);
      mine.env_lines = env_lines();
      report = !mine.problems.empty() || !mine.env_lines.empty();
      if (!agreed.presence_equal() && facts_.env.present != reference.present) {
        mine.differs_presence = true;
        mine.present = facts_.env.present;
        report = true;
      }
      if (agreed.all_present && !agreed.lists_equal) {
        if (!co_await search_list(reference, mine.list_line)) co_return false;
        report = report || !mine.list_line.empty();
      }
      if (agreed.all_present && agreed.all_placed &&
          (!agreed.node_consistent || !agreed.node_ranks_distinct)) {
        if (!co_await check_nodes(mine.node_lines)) co_return false;
        report = report || !mine.node_lines.empty();
      }
      std::vector<Record> records;
      std::optional<Record> contribution;
      if (report) contribution = mine;
      if (!co_await gather(contribution, kTagGather, records)) co_return false;
      outcome = checks_report(agreed, reference, records, mine.list_line);
      co_return true;
    }

    if (fingerprints) {
      Record mine = own_record();
      const bool differs = fingerprint_hash(facts_.fingerprint) != reference.fingerprint;
      const bool holds_reference = rank_ == reference.fingerprint_rank;
      if (differs || holds_reference) {
        mine.fingerprint = facts_.fingerprint;
        mine.fingerprint_reference = holds_reference;
      }
      std::vector<Record> records;
      std::optional<Record> contribution;
      if (mine.fingerprint) contribution = mine;
      if (!co_await gather(contribution, kTagGather, records)) co_return false;
      const std::string table = rank_ == 0 ? fingerprint_report(records) : std::string();
      if (!config_.allow_mismatch) {
        outcome = failed(ErrorKind::kMismatch,
                         "the ranks do not run the same software (pass --allow-mismatch to "
                         "continue anyway):\n" +
                             table,
                         "the ranks do not run the same software (rank 0 prints the table)");
        co_return true;
      }
      if (rank_ == 0) {
        outcome.notes.push_back(
            "warning: the ranks differ (continuing because of --allow-mismatch):\n" + table);
      }
      if (agreed.preflight_ok) co_return true;
    }

    std::vector<std::string> notes = std::move(outcome.notes);
    if (!co_await diagnose_preflight(outcome)) co_return false;
    outcome.notes.insert(outcome.notes.begin(), notes.begin(), notes.end());
    co_return true;
  }

  Outcome checks_report(const Agreed& agreed, const Reference& reference,
                        const std::vector<Record>& records, const std::string& own_list_line) {
    std::vector<std::string> problems;
    if (rank_ == 0) {
      for (const auto& record : records) {
        if (record.problems.empty()) continue;
        std::string line = describe(record.rank, record.host) + ": ";
        for (std::size_t i = 0; i < record.problems.size(); ++i) {
          line += (i ? "; " : "") + record.problems[i];
        }
        problems.push_back(line);
      }
      if (problems.empty() && !agreed.presence_equal()) {
        RankSet differing;
        for (const auto& record : records) {
          if (record.differs_presence) differing.insert(record.rank);
        }
        const RankSet others = RankSet::all(size_).minus(differing);
        const RankSet& with = reference.present ? others : differing;
        const RankSet& without = reference.present ? differing : others;
        problems.push_back("the DTRAIN_* variables are set on ranks " + with.format() +
                           " but absent on ranks " + without.format() +
                           "; launch every task with srun --distributed-train");
      } else if (problems.empty() && agreed.all_present) {
        for (const auto& record : records) {
          problems.insert(problems.end(), record.env_lines.begin(), record.env_lines.end());
        }
        std::vector<std::string> shared, distinct;
        for (const auto& record : records) {
          for (const auto& line : record.node_lines) {
            (line.find(" share a node ") != std::string::npos ? shared : distinct).push_back(line);
          }
        }
        problems.insert(problems.end(), shared.begin(), shared.end());
        problems.insert(problems.end(), distinct.begin(), distinct.end());
        if (agreed.all_placed && agreed.rank_zero_nodes != static_cast<long>(agreed.leaders)) {
          problems.push_back("DTRAIN_NNODES=" + std::to_string(agreed.rank_zero_nodes) +
                             " but MPI places the ranks on " + std::to_string(agreed.leaders) +
                             " nodes");
        }
        if (!agreed.lists_equal) {
          RankSet differing;
          for (const auto& record : records) {
            if (!record.list_line.empty()) differing.insert(record.rank);
          }
          problems.push_back("the endpoint list differs from rank " +
                             std::to_string(reference.list_rank) + "'s (hash " +
                             hex64(reference.list) + ") on ranks " + differing.format() +
                             "; the first differing entry of each follows");
        }
      }
      if (agreed.all_present) {
        for (const auto& record : records) {
          if (!record.list_line.empty()) {
            problems.push_back(describe(record.rank, record.host) + ": " + record.list_line);
          }
        }
      }
      if (!agreed.versions_equal || problems.empty()) {
        problems.push_back("the ranks disagree, but none could say how (report this as a bug)");
      }
    }
    // A rank that found its own list difference says it itself: a launcher that ends the job
    // at the first non-zero exit could otherwise end rank 0 before it prints.
    return failed(ErrorKind::kMismatch, "bootstrap checks failed:" + join_lines(problems),
                  own_list_line.empty() ? "bootstrap checks failed (rank 0 prints the details)"
                                        : own_list_line);
  }

  // The table of fingerprint_mismatch_table, from the reference holder's fingerprint (every
  // rank that sent none holds it) and the differing ranks' own.
  std::string fingerprint_report(const std::vector<Record>& records) const {
    std::vector<std::pair<Fingerprint, RankSet>> groups;
    RankSet differing;
    const Record* reference = nullptr;
    for (const auto& record : records) {
      if (record.fingerprint_reference) {
        reference = &record;
      } else {
        differing.insert(record.rank);
      }
    }
    if (reference) {
      groups.push_back({*reference->fingerprint, RankSet::all(size_).minus(differing)});
    }
    for (const auto& record : records) {
      if (!record.fingerprint_reference)
        groups.push_back({*record.fingerprint, RankSet::of({record.rank})});
    }
    return fingerprint_mismatch_table(groups);
  }

  // Listen failures and failed probes come in the first gather. Rank 0 then asks, in one
  // broadcast, for what only other ranks know: the host and endpoint of each unreachable
  // target, and which ranks connected to a rank that could not listen (another process
  // answers there). Those ranks answer in a second gather.
  Task<bool> diagnose_preflight(Outcome& outcome) {
    Record mine = own_record();
    std::vector<ProbeOutcome> failures;
    for (const auto& o : outcomes_) {
      if (o.error != 0) failures.push_back(o);
    }
    const bool listen_failed = facts_.preflight && facts_.listen_errno != 0;
    if (listen_failed || !failures.empty()) {
      mine.listen_endpoint = facts_.listen_endpoint;
      mine.listen_errno = facts_.listen_errno;
      mine.probe_failures = failures;
    }
    std::vector<Record> records;
    std::optional<Record> contribution;
    if (!mine.listen_endpoint.empty()) contribution = mine;
    if (!co_await gather(contribution, kTagGather, records)) co_return false;
    std::vector<int> wanted;  // ranks that could not listen, then -1, then unknown targets
    if (rank_ == 0) {
      std::set<int> known, unknown;
      for (const auto& record : records) {
        known.insert(record.rank);
        if (record.listen_errno != 0) wanted.push_back(record.rank);
      }
      for (const auto& record : records) {
        for (const auto& f : record.probe_failures) {
          if (!known.contains(f.target)) unknown.insert(f.target);
        }
      }
      wanted.push_back(-1);
      wanted.insert(wanted.end(), unknown.begin(), unknown.end());
    }
    if (!co_await broadcast_ranks(wanted)) co_return false;
    const auto separator = std::find(wanted.begin(), wanted.end(), -1);
    const std::set<int> silent(wanted.begin(), separator);
    const std::set<int> unknown(std::next(separator), wanted.end());
    Record second = own_record();
    for (const auto& o : outcomes_) {
      if (o.error == 0 && silent.contains(o.target)) second.reached.push_back(o.target);
    }
    const bool identify = unknown.contains(rank_);
    if (identify) {
      second.listen_endpoint = facts_.listen_endpoint;
      second.listen_errno = facts_.listen_errno;
    }
    std::vector<Record> more;
    std::optional<Record> answer;
    if (identify || !second.reached.empty()) answer = second;
    if (!co_await gather(answer, kTagGatherAgain, more)) co_return false;

    std::vector<std::string> lines;
    // Rank 0's verdict, broadcast: {1, ranks on the suspect node...} when nodes failed to
    // connect, empty otherwise. The ranks tell each rank on that node to leave the fault hint.
    std::vector<int> node_fault;
    if (rank_ == 0) {
      std::map<int, RankRecord> by_rank;
      for (const auto* list : {&records, &more}) {
        for (const auto& record : *list) {
          auto& entry = by_rank[record.rank];
          if (entry.hostname.empty()) entry = as_rank_record(record);
          if (!record.listen_endpoint.empty()) {
            entry.listen_endpoint = record.listen_endpoint;
            entry.listen_errno = record.listen_errno;
          }
        }
      }
      for (const auto& [r, record] : by_rank) {
        if (record.listen_errno != 0) lines.push_back(describe_listen_failure(record));
      }
      std::map<int, std::map<int, int>> by_source;  // source -> target -> errno (0: reached)
      for (const auto& record : records) {
        for (const auto& f : record.probe_failures) by_source[record.rank][f.target] = f.error;
      }
      for (const auto& record : more) {
        for (int target : record.reached) by_source[record.rank][target] = 0;
      }
      std::vector<FailedLink> links;
      for (const auto& [source, targets] : by_source) {
        for (const auto& [target, error] : targets) {
          const RankRecord& from = by_rank[source];
          const RankRecord& to = by_rank[target];
          lines.push_back(error != 0 ? describe_probe_failure(from, to, error)
                                     : describe_impostor(from, to));
          if (error != 0) links.push_back({from.hostname, to.hostname});
        }
      }
      if (auto suspect = describe_suspect(links); !suspect.empty()) {
        lines.push_back(std::move(suspect));
        node_fault.push_back(1);
        if (const auto node = suspect_node(links)) {
          for (const auto& [r, record] : by_rank) {
            if (record.hostname == *node && node_fault.size() <= kMaxSuspectRanks) {
              node_fault.push_back(r);
            }
          }
        }
      }
    }
    std::string own;
    if (listen_failed) {
      RankRecord self;
      self.mpi.rank = rank_;
      self.hostname = facts_.host;
      self.listen_endpoint = facts_.listen_endpoint;
      self.listen_errno = facts_.listen_errno;
      own = describe_listen_failure(self);
    }
    // One more broadcast, on the failure path only: every rank exits with the same status.
    if (!co_await broadcast_ranks(node_fault)) co_return false;
    const auto notes = std::move(outcome.notes);
    outcome = failed(ErrorKind::kResource, "connectivity preflight failed:" + join_lines(lines),
                     own.empty() ? "connectivity preflight failed (rank 0 prints the details)"
                                 : "connectivity preflight failed: " + own);
    outcome.notes = notes;
    outcome.node_fault = !node_fault.empty();
    outcome.on_suspect_node =
        node_fault.size() > 1 &&
        std::find(node_fault.begin() + 1, node_fault.end(), rank_) != node_fault.end();
    co_return true;
  }

  Fabric& fabric_;
  Suspension& suspension_;
  RankFacts facts_;
  ProtocolConfig config_;
  ProtocolHooks hooks_;
  int rank_;
  int size_;
  Clock::time_point deadline_;
  Clock::time_point census_at_;
  bool census_armed_ = false;
  bool closed_ = false;
  std::optional<OpId> from_predecessor_, from_successor_, inbox_;
  bool inbox_closing_ = false;
  std::vector<OpId> ring_;
  std::vector<OpId> reports_;
  std::set<int> run_starts_, run_ends_;
  std::vector<ProbeOutcome> outcomes_;
  ProtocolTimings timings_;
};

}  // namespace

void reduce_words(Reduction reduction, const std::uint64_t* in, std::uint64_t* inout,
                  std::size_t count) {
  switch (reduction) {
    case Reduction::kSum:
      for (std::size_t i = 0; i < count; ++i) inout[i] += in[i];
      return;
    case Reduction::kAgreement:
      if (count != kAgreementWords) {
        throw Error(ErrorKind::kInternal,
                    "agreement reduction of " + std::to_string(count) + " words");
      }
      for (std::size_t i = 0; i < count; ++i) {
        if (i < kFirstSum) {
          inout[i] = std::min(inout[i], in[i]);
        } else if (i < kFirstModularSum) {
          inout[i] += in[i];
        } else {
          inout[i] = (inout[i] + in[i]) % kPrime;
        }
      }
      return;
    case Reduction::kReference:
      if (count != kReferenceWords) {
        throw Error(ErrorKind::kInternal,
                    "reference reduction of " + std::to_string(count) + " words");
      }
      for (std::size_t i = 0; i < count; ++i) {
        inout[i] = i < kFirstReferenceMinimum ? inout[i] + in[i] : std::min(inout[i], in[i]);
      }
      return;
  }
}

Task<Outcome> run_protocol(Fabric& fabric, Suspension& suspension, RankFacts facts,
                           ProtocolConfig config, ProtocolHooks hooks) {
  Protocol protocol(fabric, suspension, std::move(facts), std::move(config), std::move(hooks));
  Outcome outcome = co_await protocol.run();
  co_return outcome;
}

}  // namespace dtrain::bootstrap
