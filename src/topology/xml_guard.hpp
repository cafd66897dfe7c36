// SPDX-License-Identifier: Apache-2.0
#pragma once
// A pre-flight scan of hwloc topology XML for the inputs on which hwloc 2.9 (Debian 12)
// aborts or dereferences NULL instead of returning an error. hwloc runs inside slurmd and
// slurmstepd, where such a crash takes users' jobs with it, so a file that fails this scan
// is refused before hwloc sees it.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dtrain::topology {

struct XmlHazard {
  std::size_t line = 0;  // 1-based line of the construct refused
  std::string reason;    // what is wrong, for a message that also names the file
};

// The first construct in `xml` that hwloc 2.9 might crash on, or that hides what hwloc's
// readers (libxml2, or its own) would see from this scan; nothing when the file is safe to
// hand to hwloc. A file this accepts may still be invalid: hwloc rejects that itself.
//
// Refused: a bitmap attribute (any name ending in cpuset or nodeset) that is not hex words
// as hwloc writes them, e.g. one starting with a comma (an assert in hwloc_bitmap_sscanf);
// an object without a type, or of a type hwloc does not know; a root object of an I/O or
// Misc type (open-mpi/hwloc#800); any other object without all of cpuset, complete_cpuset,
// nodeset and complete_nodeset (open-mpi/hwloc#783), or whose cpuset or nodeset is not part
// of its complete one; an hwloc 1.x file may leave the nodesets out of every object, as
// hwloc 1.x did. And, since the two readers would then see different things, or something
// this scan does not: NUL bytes or malformed UTF-8; an encoding declared other than UTF-8;
// a DOCTYPE with an internal subset; tags not in the form hwloc writes (lowercase names,
// name="value" pairs, none twice, no literal '<', '>', tab or line break in a value, no
// references but &quot; &lt; &gt; &amp; &#9; &#10; &#13;); elements nested deeper than
// libxml2's limit of 256.
std::optional<XmlHazard> find_xml_hazard(std::string_view xml);

}  // namespace dtrain::topology
