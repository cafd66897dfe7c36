// SPDX-License-Identifier: Apache-2.0
#include "core/config.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/parse.hpp"
#include "core/ports.hpp"

namespace dtrain::core {
namespace {

bool parse_switch(std::string_view key, std::string_view value) {
  if (value == "on" || value == "yes" || value == "true" || value == "1") return true;
  if (value == "off" || value == "no" || value == "false" || value == "0") return false;
  throw_invalid("plugstack argument '" + std::string(key) + "': " + quote_for_error(value) +
                " is not a switch; use on or off");
}

PortRange parse_port_range(std::string_view value) {
  const auto dash = value.find('-');
  if (dash == std::string_view::npos) {
    throw_invalid("plugstack argument 'ports': " + quote_for_error(value) +
                  " is not a range; use ports=FIRST-LAST, e.g. ports=20000-32767");
  }
  PortRange range;
  range.first = static_cast<std::uint16_t>(parse_unsigned(
      value.substr(0, dash), "plugstack argument 'ports' (first port)", 1024, 65535));
  range.last = static_cast<std::uint16_t>(parse_unsigned(
      value.substr(dash + 1), "plugstack argument 'ports' (last port)", 1024, 65535));
  if (range.last < range.first) {
    throw_invalid("plugstack argument 'ports': " + quote_for_error(value) +
                  " ends before it starts; use ports=FIRST-LAST with FIRST <= LAST");
  }
  return range;
}

std::string require_absolute_path(std::string_view key, std::string_view value) {
  if (value.empty() || value.front() != '/' || value.find('\0') != std::string_view::npos) {
    throw_invalid("plugstack argument '" + std::string(key) + "': " + quote_for_error(value) +
                  " must be an absolute path");
  }
  require_length(value, key, 4096);
  return std::string(value);
}

}  // namespace

FrameworkSet parse_frameworks(std::string_view text) {
  require_length(text, "framework list", 256);
  if (text.empty() || text == "all") return FrameworkSet{};
  FrameworkSet set{false, false, false, false};
  for (auto name : split(text, ',')) {
    if (name == "torch" || name == "pytorch") {
      set.torch = true;
    } else if (name == "paddle" || name == "paddlepaddle") {
      set.paddle = true;
    } else if (name == "tf" || name == "tensorflow") {
      set.tf = true;
    } else if (name == "jax") {
      set.jax = true;
    } else if (name == "all") {
      set = FrameworkSet{};
    } else {
      throw_invalid("unknown framework " + quote_for_error(name) + " in " + quote_for_error(text) +
                    "; valid values: " + std::string(kValidFrameworks));
    }
  }
  return set;
}

std::string to_string(const FrameworkSet& set) {
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ',';
    out += name;
  };
  add(set.torch, "torch");
  add(set.paddle, "paddle");
  add(set.tf, "tf");
  add(set.jax, "jax");
  return out.empty() ? "none" : out;
}

GpuView parse_gpu_view(std::string_view text, std::string_view what) {
  if (text == "auto") return GpuView::kAuto;
  if (text == "node") return GpuView::kNode;
  if (text == "task") return GpuView::kTask;
  throw_invalid(std::string(what) + ": " + quote_for_error(text) +
                " is not a GPU view; use one of " + std::string(kValidGpuViews) +
                " (node: every task sees the step's GPUs of its node, device LOCAL_RANK its own; "
                "task: each task sees its own GPUs only)");
}

std::string to_string(GpuView view) {
  switch (view) {
    case GpuView::kNode:
      return "node";
    case GpuView::kTask:
      return "task";
    case GpuView::kAuto:
      break;
  }
  return "auto";
}

bool node_gpu_view(GpuView view, const FrameworkSet& frameworks) {
  if (view != GpuView::kAuto) return view == GpuView::kNode;
  return frameworks.torch || frameworks.paddle || frameworks.jax;
}

PluginConfig parse_plugin_args(const std::vector<std::string>& args) {
  PluginConfig config;
  std::vector<std::string> seen;
  for (const auto& arg : args) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw_invalid("plugstack argument " + quote_for_error(arg) +
                    " is not key=value; valid keys: " + std::string(kPluginKeys));
    }
    const std::string key = arg.substr(0, eq);
    const std::string_view value = std::string_view(arg).substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      throw_invalid("plugstack argument '" + key + "' is given twice; keep one");
    }
    seen.push_back(key);
    if (key == "enable") {
      if (value == "always") {
        config.enabled_by_default = true;
      } else if (value == "option") {
        config.enabled_by_default = false;
      } else {
        throw_invalid("plugstack argument 'enable': " + quote_for_error(value) +
                      " is not valid; use enable=option (default) or enable=always");
      }
    } else if (key == "frameworks") {
      config.frameworks = parse_frameworks(value);
    } else if (key == "ports") {
      config.ports = parse_port_range(value);
    } else if (key == "port_block") {
      config.port_block = static_cast<std::uint32_t>(
          parse_unsigned(value, "plugstack argument 'port_block'", 2, 4096));
    } else if (key == "address") {
      if (value == "ip") {
        config.address_mode = AddressMode::kAddress;
      } else if (value == "name") {
        config.address_mode = AddressMode::kName;
      } else {
        throw_invalid("plugstack argument 'address': " + quote_for_error(value) +
                      " is not valid; use address=ip (default) or address=name");
      }
    } else if (key == "ip_max_nodes") {
      config.ip_max_nodes = static_cast<std::uint32_t>(
          parse_unsigned(value, "plugstack argument 'ip_max_nodes'", 1, kMaxNodes));
    } else if (key == "suffix") {
      require_length(value, "plugstack argument 'suffix'", 200);
      if (value.find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") !=
          std::string_view::npos) {
        throw_invalid("plugstack argument 'suffix': " + quote_for_error(value) +
                      " may hold only letters, digits, '-' and '.'");
      }
      config.host_suffix = value;
    } else if (key == "topology") {
      if (value == "live") {
        config.topology = {};
      } else if (value == "none") {
        config.topology = {TopologySource::Kind::kNone, {}};
      } else {
        config.topology = {TopologySource::Kind::kFile, require_absolute_path(key, value)};
      }
    } else if (key == "topology_cache") {
      config.topology_cache = value == "none"
                                  ? TopologyCache{false, {}}
                                  : TopologyCache{true, require_absolute_path(key, value)};
    } else if (key == "bind") {
      config.bind = parse_switch(key, value);
    } else if (key == "gpus") {
      if (value != "auto" && value != "slurm") {
        throw_invalid("plugstack argument 'gpus': " + quote_for_error(value) +
                      " is not valid; use gpus=auto (default) or gpus=slurm");
      }
      config.gpus_from_slurm_only = value == "slurm";
    } else if (key == "gpu_view") {
      config.gpu_view = parse_gpu_view(value, "plugstack argument 'gpu_view'");
    } else if (key == "loopback") {
      if (value != "refuse" && value != "allow") {
        throw_invalid("plugstack argument 'loopback': " + quote_for_error(value) +
                      " is not valid; use loopback=refuse (default) or loopback=allow");
      }
      config.allow_loopback = value == "allow";
    } else if (key == "check_ports") {
      config.check_ports = parse_switch(key, value);
    } else if (key == "node_check") {
      config.node_check = parse_switch(key, value);
    } else {
      throw_invalid("unknown plugstack argument '" + key +
                    "'; valid keys: " + std::string(kPluginKeys));
    }
  }
  if (derived_port_job_classes(config.ports, config.port_block) == 0) {
    throw_invalid("plugstack argument 'port_block' (" + std::to_string(config.port_block) +
                  ") needs a port range of at least " +
                  std::to_string(kDerivedPortMinRowWidth * config.port_block) +
                  " ports (a row of 64 ports for each of the port_block ports a step may use on a "
                  "node), but ports= holds " +
                  std::to_string(config.ports.size()) + "; widen ports= or lower port_block=");
  }
  return config;
}

}  // namespace dtrain::core
