// SPDX-License-Identifier: Apache-2.0
#pragma once
// Files that root writes for root (or for every user's steps to read) in the plugin's root-only
// directories: the topology cache (slurmd) and the fault hints (slurmstepd, the epilog). A path
// is trusted only while root alone can write it, and root never follows a link there.

#include <string>

namespace dtrain::spank {

// Whether `path` is a directory (or a regular file) owned by root that neither group nor others
// can write; never follows a symbolic link.
bool root_only(const std::string& path, bool want_directory);

// Creates `dir` (mode `mode`) when it is missing and checks that it is root_only. Throws
// dtrain::Error naming the directory when it cannot be created or is not root's alone.
void make_root_dir(const std::string& dir, unsigned mode);

// Writes `content` to `path` in a root-only directory: a new file beside it, then rename(2), so
// a reader never sees half a file. Throws dtrain::Error naming the file.
void write_root_file(const std::string& path, const std::string& content, unsigned mode = 0644);

}  // namespace dtrain::spank
