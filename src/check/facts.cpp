// SPDX-License-Identifier: Apache-2.0
#include "check/facts.hpp"

#include "core/error.hpp"

namespace dtrain::check {

namespace {

nlohmann::json fingerprint_to_json(const bootstrap::Fingerprint& fingerprint) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& field : bootstrap::fingerprint_fields()) {
    json[field.label] = fingerprint.*field.member;
  }
  return json;
}

bootstrap::Fingerprint fingerprint_from_json(const nlohmann::json& json) {
  bootstrap::Fingerprint fingerprint;
  for (const auto& field : bootstrap::fingerprint_fields()) {
    fingerprint.*field.member = json.at(field.label).get<std::string>();
  }
  return fingerprint;
}

}  // namespace

nlohmann::json to_json(const RankFacts& facts) {
  nlohmann::json ports = nlohmann::json::array();
  for (const auto& port : facts.ports) {
    ports.push_back({{"role", port.role},
                     {"endpoint", port.endpoint},
                     {"in_use", port.in_use},
                     {"held_by_other_user", port.held_by_other_user},
                     {"holder_uid", port.holder_uid}});
  }
  nlohmann::json json = {{"rank", facts.rank},
                         {"local_rank", facts.local_rank},
                         {"host", facts.host},
                         {"plugin", facts.plugin},
                         {"environment", facts.environment},
                         {"cpus_allowed", facts.cpus_allowed},
                         {"ports", ports},
                         {"listen_endpoint", facts.listen_endpoint},
                         {"listen_errno", facts.listen_errno},
                         {"interfaces", facts.interfaces},
                         {"fingerprint", fingerprint_to_json(facts.fingerprint)},
                         {"topology_error", facts.topology_error}};
  if (facts.gpus) {
    json["gpus"] = nlohmann::json::array();
    for (const auto& gpu : *facts.gpus) {
      json["gpus"].push_back({{"bus_id", gpu.bus_id}, {"model", gpu.model}});
    }
  }
  return json;
}

RankFacts rank_facts_from_json(const nlohmann::json& json, int from_rank) {
  try {
    RankFacts facts;
    facts.rank = json.at("rank").get<int>();
    facts.local_rank = json.at("local_rank").get<int>();
    facts.host = json.at("host").get<std::string>();
    facts.plugin = json.at("plugin").get<bool>();
    facts.environment = json.at("environment").get<std::map<std::string, std::string>>();
    facts.cpus_allowed = json.at("cpus_allowed").get<std::string>();
    for (const auto& port : json.at("ports")) {
      facts.ports.push_back({port.at("role").get<std::string>(),
                             port.at("endpoint").get<std::string>(), port.at("in_use").get<bool>(),
                             port.at("held_by_other_user").get<bool>(),
                             port.at("holder_uid").get<std::uint32_t>()});
    }
    facts.listen_endpoint = json.at("listen_endpoint").get<std::string>();
    facts.listen_errno = json.at("listen_errno").get<int>();
    facts.interfaces = json.at("interfaces").get<std::vector<std::string>>();
    facts.fingerprint = fingerprint_from_json(json.at("fingerprint"));
    facts.topology_error = json.at("topology_error").get<std::string>();
    if (json.contains("gpus")) {
      facts.gpus.emplace();
      for (const auto& gpu : json.at("gpus")) {
        facts.gpus->push_back(
            {gpu.at("bus_id").get<std::string>(), gpu.at("model").get<std::string>()});
      }
    }
    if (facts.rank != from_rank) {
      throw Error(ErrorKind::kMismatch, "it says it is rank " + std::to_string(facts.rank));
    }
    return facts;
  } catch (const nlohmann::json::exception& error) {
    throw Error(ErrorKind::kMismatch, "rank " + std::to_string(from_rank) +
                                          " sent facts dtrain-check cannot read (" + error.what() +
                                          "); is it running the same dtrain-check?");
  } catch (const Error& error) {
    if (error.kind() != ErrorKind::kMismatch) throw;
    throw Error(ErrorKind::kMismatch, "rank " + std::to_string(from_rank) +
                                          " sent the facts of another rank: " + error.what());
  }
}

}  // namespace dtrain::check
