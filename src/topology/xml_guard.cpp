// SPDX-License-Identifier: Apache-2.0
#include "topology/xml_guard.hpp"

#include <hwloc.h>
#include <strings.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <vector>

namespace dtrain::topology {
namespace {

// libxml2's default nesting limit; hwloc's own reader recurses once per level with no limit.
constexpr std::size_t kMaxDepth = 256;
constexpr std::size_t kQuotedLimit = 40;
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
constexpr std::array<std::string_view, 4> kObjectSets = {"cpuset", "complete_cpuset", "nodeset",
                                                         "complete_nodeset"};
// Accepted by hwloc's XML import although hwloc_type_sscanf does not know them.
constexpr std::array<const char*, 4> kLegacyTypes = {"Cache", "System", "Tile", "Module"};

// Thrown inside the scan only; find_xml_hazard turns it into its result.
struct Refusal {
  std::size_t offset;
  std::string reason;
};

[[noreturn]] void refuse(std::size_t offset, std::string reason) {
  throw Refusal{offset, std::move(reason)};
}

// A value from the file, quoted for a log line: cut short and without control characters.
std::string quoted(std::string_view value) {
  std::string out = "'";
  for (char c : value.substr(0, kQuotedLimit)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out + (value.size() > kQuotedLimit ? "...'" : "'");
}

// The separators both readers skip: hwloc's own reader does not treat '\r' as one.
bool is_separator(char c) {
  return c == ' ' || c == '\t' || c == '\n';
}

bool is_xml_space(char c) {
  return is_separator(c) || c == '\r';
}

bool is_lower_or_underscore(char c) {
  return (c >= 'a' && c <= 'z') || c == '_';
}

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// "<name>", for a refusal's message.
std::string label(std::string_view tag) {
  std::string text;
  text.reserve(tag.size() + 2);
  text.append("<").append(tag).append(">");
  return text;
}

// hwloc_bitmap_snprintf's output: "0xf...f" alone (every bit set), or an optional "0xf...f,"
// then 32-bit words separated by commas, each 0x and 1 to 8 hex digits or empty (all zero);
// the last is never empty. Nor is the first without "0xf...f,": hwloc_bitmap_sscanf counts
// words from the second character on and asserts when a leading comma makes one too many.
bool is_hwloc_bitmap(std::string_view value) {
  constexpr std::string_view kInfinite = "0xf...f";
  if (value == kInfinite) return true;
  const bool infinite = value.substr(0, kInfinite.size() + 1) == "0xf...f,";
  if (infinite) value.remove_prefix(kInfinite.size() + 1);
  for (bool first = true;; first = false) {
    const std::size_t comma = value.find(',');
    const std::string_view word = value.substr(0, comma);
    const bool last = comma == std::string_view::npos;
    if (word.empty() && (last || (first && !infinite))) return false;
    if (!word.empty() && (word.size() < 3 || word.size() > 10 || word[0] != '0' || word[1] != 'x' ||
                          !std::all_of(word.begin() + 2, word.end(), is_hex_digit))) {
      return false;
    }
    if (last) return true;
    value.remove_prefix(comma + 1);
  }
}

// The offset of the first byte that is not part of well-formed UTF-8 (no overlong forms,
// surrogates or code points above U+10FFFF), or npos.
std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80;  // the range of the second byte, narrowed for the lead byte
    unsigned char high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead == 0xe0) low = 0xa0;
      if (lead == 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead == 0xf0) low = 0x90;
      if (lead == 0xf4) high = 0x8f;
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xbf)) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* bitmap) const { hwloc_bitmap_free(bitmap); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

// Only for values is_hwloc_bitmap accepted, on which hwloc_bitmap_sscanf is safe.
BitmapPtr parse_bitmap(const std::string& value) {
  BitmapPtr bitmap(hwloc_bitmap_alloc());
  if (!bitmap || hwloc_bitmap_sscanf(bitmap.get(), value.c_str()) != 0) throw std::bad_alloc();
  return bitmap;
}

struct Attribute {
  std::string_view name;
  std::string value;  // with references replaced
};

const Attribute* find_attribute(const std::vector<Attribute>& attributes, std::string_view name) {
  for (const auto& attribute : attributes) {
    if (attribute.name == name) return &attribute;
  }
  return nullptr;
}

// True for the object types hwloc calls special (I/O and Misc), which carry no cpusets;
// refuses a type hwloc would not import.
bool is_special_type(const std::string& type, std::size_t offset) {
  hwloc_obj_type_t parsed{};
  if (hwloc_type_sscanf(type.c_str(), &parsed, nullptr, 0) == 0) {
    return hwloc_obj_type_is_io(parsed) != 0 || parsed == HWLOC_OBJ_MISC;
  }
  for (const char* legacy : kLegacyTypes) {
    if (strcasecmp(type.c_str(), legacy) == 0) return false;
  }
  refuse(offset, "object type " + quoted(type) + " is not one hwloc knows");
}

// Scans the whole file once, front to back, keeping only the stack of open elements.
//
// Both hwloc readers must see exactly what this scan sees. libxml2 parses XML; hwloc's own
// reader parses only what hwloc writes and silently drops the rest of a tag's attributes at
// anything else, which would hide a cpuset from hwloc but not from this scan. So tags are
// held to hwloc's own form: lowercase names, name="value" pairs, the references hwloc writes.
class Scanner {
 public:
  explicit Scanner(std::string_view xml) : xml_(xml) {}

  void run() {
    if (const std::size_t nul = xml_.find('\0'); nul != std::string_view::npos) {
      refuse(nul, "it holds a NUL byte, so it is not UTF-8 text (UTF-16 files are refused)");
    }
    // libxml2 refuses malformed UTF-8 but hwloc's own reader would pass it on to names.
    if (const std::size_t bad = first_invalid_utf8(xml_); bad != std::string_view::npos) {
      refuse(bad, "it is not UTF-8 text");
    }
    if (xml_.substr(0, kUtf8Bom.size()) == kUtf8Bom) pos_ = kUtf8Bom.size();
    while (pos_ < xml_.size() && is_xml_space(xml_[pos_])) ++pos_;
    // An EBCDIC file, which libxml2 would decode, has no ASCII '<' for this scan to find.
    if (pos_ < xml_.size() && xml_[pos_] != '<') refuse(pos_, "it does not start with '<'");
    while ((pos_ = xml_.find('<', pos_)) != std::string_view::npos) markup();
  }

 private:
  bool at(std::string_view text) const { return xml_.substr(pos_, text.size()) == text; }

  std::size_t find_or_refuse(std::string_view terminator, std::string_view what) const {
    const std::size_t end = xml_.find(terminator, pos_);
    if (end == std::string_view::npos) refuse(pos_, std::string(what) + " is never closed");
    return end;
  }

  void markup() {
    if (at("<?")) {
      const std::size_t end = find_or_refuse("?>", "a processing instruction");
      if (at("<?xml") && end > pos_ + 5 && is_xml_space(xml_[pos_ + 5])) {
        check_declaration(xml_.substr(pos_, end - pos_));
      }
      pos_ = end + 2;
    } else if (at("<!--")) {
      pos_ = find_or_refuse("-->", "a comment") + 3;
    } else if (at("<![CDATA[")) {
      pos_ = find_or_refuse("]]>", "a CDATA section") + 3;
    } else if (at("<!DOCTYPE")) {
      const std::size_t end = find_or_refuse(">", "the DOCTYPE");
      if (xml_.substr(pos_, end - pos_).find('[') != std::string_view::npos) {
        refuse(pos_, "its DOCTYPE has an internal subset, which can define entities");
      }
      pos_ = end + 1;
    } else if (at("<!")) {
      refuse(pos_, "it has markup '<!' that is neither a comment, CDATA nor the DOCTYPE");
    } else if (at("</")) {
      pos_ = find_or_refuse(">", "an end tag") + 1;
      if (!open_.empty()) open_.pop_back();
    } else {
      start_tag();
    }
  }

  // libxml2 decodes the declared encoding; this scan and hwloc's own reader read UTF-8.
  void check_declaration(std::string_view declaration) const {
    const std::size_t key = declaration.find("encoding");
    if (key == std::string_view::npos) return;
    std::size_t at = key + 8;
    while (at < declaration.size() && is_xml_space(declaration[at])) ++at;
    if (at < declaration.size() && declaration[at] == '=') ++at;
    while (at < declaration.size() && is_xml_space(declaration[at])) ++at;
    const char quote = at < declaration.size() ? declaration[at] : '\0';
    const std::size_t close =
        (quote == '"' || quote == '\'') ? declaration.find(quote, at + 1) : std::string::npos;
    if (close == std::string_view::npos) refuse(pos_, "its XML declaration is malformed");
    const std::string encoding(declaration.substr(at + 1, close - at - 1));
    for (const char* known : {"UTF-8", "US-ASCII", "ASCII"}) {
      if (strcasecmp(encoding.c_str(), known) == 0) return;
    }
    refuse(pos_, "it declares encoding " + quoted(encoding) + "; only UTF-8 is read");
  }

  std::string_view read_name(bool attribute) {
    const std::size_t start = pos_;
    while (pos_ < xml_.size() && (is_lower_or_underscore(xml_[pos_]) ||
                                  (!attribute && xml_[pos_] >= '0' && xml_[pos_] <= '9'))) {
      ++pos_;
    }
    return xml_.substr(start, pos_ - start);
  }

  void start_tag() {
    const std::size_t start = pos_++;
    const std::string_view name = read_name(false);
    if (name.empty() ||
        (pos_ < xml_.size() && xml_[pos_] != ' ' && xml_[pos_] != '>' && !at("/>"))) {
      refuse(start,
             "it has a tag whose name is not lowercase letters, digits and '_' "
             "followed by a space, as hwloc writes tags");
    }
    bool self_closing = false;
    const std::vector<Attribute> attributes = read_attributes(name, self_closing);
    for (const Attribute& attribute : attributes) {
      if ((attribute.name.ends_with("cpuset") || attribute.name.ends_with("nodeset")) &&
          !is_hwloc_bitmap(attribute.value)) {
        refuse(start, label(name) + " has " + std::string(attribute.name) + "=" +
                          quoted(attribute.value) +
                          ", not a bitmap as hwloc writes one (comma-separated words of "
                          "0x and up to 8 hex digits, the first and last not empty)");
      }
    }
    if (open_.empty()) v1_document_ = is_v1_root(name, attributes);
    if (name == "object") check_object(attributes, start);
    if (self_closing) return;
    if (open_.size() == kMaxDepth) {
      refuse(start, "its elements nest more than " + std::to_string(kMaxDepth) + " deep");
    }
    open_.push_back(name);
  }

  std::vector<Attribute> read_attributes(std::string_view tag, bool& self_closing) {
    std::vector<Attribute> attributes;
    while (true) {
      const std::size_t before = pos_;
      while (pos_ < xml_.size() && is_separator(xml_[pos_])) ++pos_;
      if (pos_ == xml_.size()) refuse(before, "a " + label(tag) + " tag is never closed");
      if (at("/>") || at(">")) {
        self_closing = at("/>");
        pos_ += self_closing ? 2 : 1;
        return attributes;
      }
      const std::size_t start = pos_;
      const std::string_view name = read_name(true);
      if (name.empty() || pos_ == before || !at("=\"")) {
        refuse(start, label(tag) +
                          " has an attribute not written as name=\"value\" with a "
                          "lowercase name after a space, as hwloc writes attributes");
      }
      // libxml2 refuses a repeated attribute; hwloc's own reader would take the last one.
      if (find_attribute(attributes, name) != nullptr) {
        refuse(start, label(tag) + " has attribute " + std::string(name) + " twice");
      }
      pos_ += 2;
      const std::size_t close = xml_.find('"', pos_);
      if (close == std::string_view::npos) {
        refuse(start, label(tag) + " attribute " + std::string(name) + " is never closed");
      }
      attributes.push_back({name, decode(xml_.substr(pos_, close - pos_), tag, name, start)});
      pos_ = close + 1;
    }
  }

  // The references hwloc writes are the only ones both readers decode alike: libxml2 knows
  // more, and hwloc's own reader stops reading the tag at any other. A literal '>' ends the
  // tag for hwloc's reader; literal whitespace other than a space is normalised by libxml2.
  static std::string decode(std::string_view raw, std::string_view tag, std::string_view name,
                            std::size_t offset) {
    static constexpr std::array<std::pair<std::string_view, char>, 7> kReferences = {{
        {"&#10;", '\n'},
        {"&#13;", '\r'},
        {"&#9;", '\t'},
        {"&quot;", '"'},
        {"&lt;", '<'},
        {"&gt;", '>'},
        {"&amp;", '&'},
    }};
    std::string value;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      const char c = raw[i];
      if (c == '<' || c == '>' || c == '\t' || c == '\n' || c == '\r') {
        refuse(offset, label(tag) + " attribute " + std::string(name) +
                           " holds a literal tab, line break, '<' or '>'; hwloc writes them "
                           "as references");
      }
      if (c != '&') {
        value += c;
        continue;
      }
      const auto known = std::find_if(kReferences.begin(), kReferences.end(), [&](const auto& ref) {
        return raw.substr(i, ref.first.size()) == ref.first;
      });
      if (known == kReferences.end()) {
        refuse(offset, label(tag) + " attribute " + std::string(name) + " holds the reference " +
                           quoted(raw.substr(i, raw.find(';', i) - i + 1)) +
                           "; hwloc writes only &quot; &lt; &gt; &amp; &#9; &#10; &#13;");
      }
      value += known->second;
      i += known->first.size() - 1;
    }
    return value;
  }

  // As both hwloc readers decide it: a v2 file says so in the root element's version.
  static bool is_v1_root(std::string_view name, const std::vector<Attribute>& attributes) {
    if (name != "topology") return true;
    const Attribute* version = find_attribute(attributes, "version");
    unsigned major = 0;
    unsigned minor = 0;
    return version == nullptr ||
           std::sscanf(version->value.c_str(), "%u.%u", &major, &minor) != 2 || major < 2;
  }

  // hwloc 1.x wrote no nodesets on machines without NUMA nodes, and hwloc 2.9 still reads
  // such files: it adds the nodesets itself when none of the objects has any.
  bool needs_nodesets(const std::vector<Attribute>& attributes, std::size_t offset) {
    if (!v1_document_) return true;
    const bool without = find_attribute(attributes, "nodeset") == nullptr &&
                         find_attribute(attributes, "complete_nodeset") == nullptr;
    if (!v1_has_nodesets_) v1_has_nodesets_ = !without;
    if (!*v1_has_nodesets_ && !without) {
      refuse(offset, "this hwloc 1.x file has objects both with and without nodesets");
    }
    return *v1_has_nodesets_;
  }

  void check_object(const std::vector<Attribute>& attributes, std::size_t offset) {
    const Attribute* type = find_attribute(attributes, "type");
    if (type == nullptr) refuse(offset, "an <object> has no type attribute");
    const bool special = is_special_type(type->value, offset);
    const bool root = open_.empty() || open_.back() != "object";
    if (root && special) {
      refuse(offset, "its root object is of type " + quoted(type->value) +
                         "; the root must be the Machine, and hwloc 2.9 crashes when it is "
                         "an I/O or Misc object");
    }
    if (special) return;
    const bool nodesets = needs_nodesets(attributes, offset);
    for (std::string_view set : kObjectSets) {
      if (!nodesets && set.ends_with("nodeset")) continue;
      if (find_attribute(attributes, set) == nullptr) {
        refuse(offset, "<object type=" + quoted(type->value) + "> has no " + std::string(set) +
                           "; hwloc 2.9 crashes unless CPU and memory objects have all of "
                           "cpuset, complete_cpuset, nodeset and complete_nodeset");
      }
    }
    // The complete set adds offline and disallowed CPUs or nodes to the set; hwloc 2.9
    // dereferences NULL on a childless root whose complete_cpuset misses its cpuset.
    for (const char* kind : {"cpuset", "nodeset"}) {
      const Attribute* set = find_attribute(attributes, kind);
      const Attribute* complete = find_attribute(attributes, std::string("complete_") + kind);
      if (set == nullptr || complete == nullptr) continue;
      if (!hwloc_bitmap_isincluded(parse_bitmap(set->value).get(),
                                   parse_bitmap(complete->value).get())) {
        refuse(offset, "<object type=" + quoted(type->value) + "> has a " + kind +
                           " that is not part of its complete_" + kind);
      }
    }
  }

  std::string_view xml_;
  std::size_t pos_ = 0;
  std::vector<std::string_view> open_;  // names of the elements open at pos_
  bool v1_document_ = false;
  std::optional<bool> v1_has_nodesets_;  // decided by the first CPU or memory object
};

}  // namespace

std::optional<XmlHazard> find_xml_hazard(std::string_view xml) {
  try {
    Scanner(xml).run();
    return std::nullopt;
  } catch (const Refusal& refusal) {
    const auto before = xml.substr(0, std::min(refusal.offset, xml.size()));
    return XmlHazard{1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n')),
                     refusal.reason};
  }
}

}  // namespace dtrain::topology
