// SPDX-License-Identifier: Apache-2.0
#include "topology/load_io.hpp"

#include <fcntl.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <type_traits>

#include "core/error.hpp"
#include "topology/pci_address.hpp"
#include "topology/xml_guard.hpp"

namespace dtrain::topology {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kDisplayClassMask = 0xff00;
constexpr unsigned kDisplayClass = 0x0300;     // 0x0300 VGA, 0x0302 3D controller
constexpr const char* kActivePortState = "4";  // IB_PORT_ACTIVE
// Far above any real machine's XML (a few MB), and within the int hwloc takes as a size.
constexpr std::size_t kMaxXmlBytes = 64u << 20;

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

[[noreturn]] void throw_resource(const std::string& message) {
  throw Error(ErrorKind::kResource, message);
}

// hwloc parses the file in set_xml or in load, depending on the backend and the error.
[[noreturn]] void throw_invalid_xml(const std::string& xml_path, const std::string& detail = "") {
  throw_resource("topology XML '" + xml_path + "' is not a valid hwloc topology" +
                 (detail.empty() ? "" : ": " + detail) +
                 "; regenerate it on the node with `lstopo --of xml FILE`");
}

[[noreturn]] void throw_unreadable(const std::string& xml_path, const std::string& why) {
  throw_resource("cannot read topology XML '" + xml_path + "': " + why +
                 "; fix the topology= path or remove it to discover this machine");
}

struct FdCloser {
  int fd;
  ~FdCloser() { close(fd); }
};

// The whole file, read once: hwloc then parses the very bytes that find_xml_hazard checked.
// O_NONBLOCK keeps a FIFO at the path from blocking the step; it is then refused.
std::string read_topology_xml(const std::string& xml_path) {
  const int fd = open(xml_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw_unreadable(xml_path, std::strerror(errno));
  const FdCloser closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) throw_unreadable(xml_path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw_unreadable(xml_path, "it is not a regular file");
  std::string xml;
  char chunk[1 << 14];  // modest: this runs on slurmstepd's stack
  while (true) {
    const ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_unreadable(xml_path, std::strerror(errno));
    if (got == 0) return xml;
    if (xml.size() + static_cast<std::size_t>(got) > kMaxXmlBytes) {
      throw_invalid_xml(xml_path,
                        "it is larger than " + std::to_string(kMaxXmlBytes >> 20) + " MiB");
    }
    xml.append(chunk, static_cast<std::size_t>(got));
  }
}

CpuList to_list(hwloc_const_bitmap_t bitmap) {
  CpuList list;
  if (bitmap == nullptr) return list;
  for (int index = hwloc_bitmap_first(bitmap); index >= 0;
       index = hwloc_bitmap_next(bitmap, index)) {
    list.push_back(static_cast<unsigned>(index));
  }
  return list;
}

// hwloc keeps whatever number an XML file gives for these fields; reading one through its enum
// type is undefined behaviour when the number is not an enumerator, so read the raw integer.
template <typename Enum>
std::underlying_type_t<Enum> raw_value(const Enum& field) {
  std::underlying_type_t<Enum> value;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

bool is_io(hwloc_obj_t object) {
  return hwloc_obj_type_is_io(object->type) != 0;
}

Placement placement_of(hwloc_obj_t device) {
  Placement placement;
  hwloc_obj_t object = device->parent;
  for (; object != nullptr && is_io(object); object = object->parent) {
    if (object->type != HWLOC_OBJ_BRIDGE) continue;
    const bool host = raw_value(object->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_HOST;
    placement.io_path.push_back(
        {host ? IoHop::Kind::kHostBridge : IoHop::Kind::kPciBridge, object->gp_index});
  }
  if (object == nullptr) return placement;  // malformed tree: no CPU-side ancestor
  Locality& locality = placement.locality;
  locality.id = object->gp_index;
  locality.cpus = to_list(object->cpuset);
  locality.numa_nodes = to_list(object->nodeset);
  for (hwloc_obj_t up = object; up != nullptr; up = up->parent) {
    if (up->type == HWLOC_OBJ_PACKAGE) {
      locality.package = static_cast<int>(up->os_index);
      break;
    }
  }
  return placement;
}

std::string bus_id_of(hwloc_obj_t pci) {
  const auto& attr = pci->attr->pcidev;
  return to_string(PciAddress{attr.domain, attr.bus, attr.dev, attr.func});
}

bool starts_with(const char* text, std::string_view prefix) {
  return text != nullptr && std::string_view(text).substr(0, prefix.size()) == prefix;
}

// The first active port from the PortNState infos hwloc records for OpenFabrics devices,
// else the first port listed; 0 when there is none.
unsigned hca_port(hwloc_obj_t osdev) {
  unsigned first_listed = 0;
  for (unsigned i = 0; i < osdev->infos_count; ++i) {
    const std::string_view name = osdev->infos[i].name;
    if (name.size() <= 9 || name.substr(0, 4) != "Port" ||
        name.substr(name.size() - 5) != "State") {
      continue;
    }
    unsigned port = 0;
    for (char c : name.substr(4, name.size() - 9)) {
      if (c < '0' || c > '9') {
        port = 0;
        break;
      }
      port = port * 10 + static_cast<unsigned>(c - '0');
    }
    if (port == 0) continue;
    if (std::strcmp(osdev->infos[i].value, kActivePortState) == 0) return port;
    if (first_listed == 0 || port < first_listed) first_listed = port;
  }
  return first_listed;
}

void add_pci_device(hwloc_obj_t pci, NodeTopology& topology) {
  Gpu gpu;
  Nic nic;
  for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
    if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == nullptr) continue;
    switch (raw_value(child->attr->osdev.type)) {
      case HWLOC_OBJ_OSDEV_COPROC:
      case HWLOC_OBJ_OSDEV_GPU:
        if (starts_with(child->name, "cuda")) gpu.cuda_name = child->name;
        if (starts_with(child->name, "nvml")) gpu.nvml_name = child->name;
        if (const char* model = hwloc_obj_get_info_by_name(child, "GPUModel")) gpu.model = model;
        break;
      case HWLOC_OBJ_OSDEV_OPENFABRICS:
        if (nic.hca.empty()) {
          nic.hca = child->name;
          nic.port = hca_port(child);
        }
        break;
      case HWLOC_OBJ_OSDEV_NETWORK:
        if (nic.netdev.empty()) nic.netdev = child->name;
        break;
      default:
        break;
    }
  }
  const auto& attr = pci->attr->pcidev;
  const bool nvidia_display =
      attr.vendor_id == kNvidiaVendor && (attr.class_id & kDisplayClassMask) == kDisplayClass;
  if (nvidia_display || !gpu.cuda_name.empty() || !gpu.nvml_name.empty()) {
    gpu.bus_id = bus_id_of(pci);
    if (gpu.model.empty()) {
      if (const char* name = hwloc_obj_get_info_by_name(pci, "PCIDevice")) gpu.model = name;
    }
    gpu.placement = placement_of(pci);
    topology.gpus.push_back(std::move(gpu));
  } else if (!nic.hca.empty() || !nic.netdev.empty()) {
    nic.bus_id = bus_id_of(pci);
    nic.placement = placement_of(pci);
    topology.nics.push_back(std::move(nic));
  }
}

TopologyPtr open_topology(const std::string& xml_path) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw_resource("hwloc_topology_init failed");
  TopologyPtr topology(raw);
  std::string xml;  // hwloc may parse it in set_xmlbuffer or in load, so it lives until then
  if (!xml_path.empty()) {
    xml = read_topology_xml(xml_path);
    if (const auto hazard = find_xml_hazard(xml)) {
      throw_invalid_xml(xml_path, "line " + std::to_string(hazard->line) + ": " + hazard->reason);
    }
    if (xml.empty() ||
        hwloc_topology_set_xmlbuffer(raw, xml.data(), static_cast<int>(xml.size())) != 0) {
      throw_invalid_xml(xml_path);
    }
  } else {
    // GPUs are found through PCI, so these backends add nothing but cost: OpenCL would
    // initialise vendor runtimes inside slurmstepd and GL would contact an X server. A backend
    // missing from this hwloc build makes the call fail harmlessly.
    for (const char* component : {"opencl", "gl", "cuda", "rsmi", "levelzero"}) {
      hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
    }
  }
  if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
    throw_resource("hwloc refused to keep I/O objects");
  }
  errno = 0;
  if (hwloc_topology_load(raw) != 0) {
    if (xml_path.empty()) {
      throw_resource(std::string("hwloc cannot discover this machine's topology: ") +
                     std::strerror(errno));
    }
    throw_invalid_xml(xml_path);
  }
  return topology;
}

}  // namespace

NodeTopology load_topology(const std::string& xml_path) {
  const TopologyPtr owner = open_topology(xml_path);
  hwloc_topology_t topo = owner.get();
  NodeTopology topology;
  topology.source = xml_path.empty() ? "this machine" : xml_path;

  std::map<std::uint64_t, std::size_t> core_slot;  // core gp_index -> index in cores
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu)) {
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
    // A PU without a Core (some virtual machines) is its own core.
    const std::uint64_t key = core != nullptr ? core->gp_index : pu->gp_index;
    auto [it, inserted] = core_slot.emplace(key, topology.cores.size());
    if (inserted) topology.cores.emplace_back();
    topology.cores[it->second].push_back(pu->os_index);
  }
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) {
    topology.numa_nodes.push_back({node->os_index, to_list(node->cpuset)});
  }
  std::sort(topology.numa_nodes.begin(), topology.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });

  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    topology.has_io = true;
    add_pci_device(pci, topology);
  }
  const auto by_bus = [](const auto& a, const auto& b) {
    return pci_order_less(a.bus_id, b.bus_id);
  };
  std::sort(topology.gpus.begin(), topology.gpus.end(), by_bus);
  std::sort(topology.nics.begin(), topology.nics.end(), by_bus);
  return topology;
}

void export_live_topology(const std::string& xml_path) {
  const TopologyPtr owner = open_topology("");
  // Written beside the target and renamed, so a reader never sees half a file; the pid keeps
  // two writers (several slurmd on one host) from sharing the partial file.
  const std::string partial = xml_path + ".partial." + std::to_string(getpid());
  if (hwloc_topology_export_xml(owner.get(), partial.c_str(), 0) != 0) {
    throw_resource("cannot write topology XML '" + partial + "': " + std::strerror(errno));
  }
  if (std::rename(partial.c_str(), xml_path.c_str()) != 0) {
    const int saved = errno;
    std::remove(partial.c_str());
    throw_resource("cannot rename '" + partial + "' to '" + xml_path +
                   "': " + std::strerror(saved));
  }
}

}  // namespace dtrain::topology
