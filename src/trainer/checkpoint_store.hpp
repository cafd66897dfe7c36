// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checkpoint files on disk. Layout of --checkpoint-dir:
//   ckpt-<step>.dtc   the last two checkpoints (older ones are removed after a new one commits)
//   latest            the file name of the newest committed checkpoint
// Every file is written atomically: a temporary ".<name>.tmp" in the same directory, fsync,
// rename over the final name, fsync of the directory. A crash at any point therefore leaves
// either the old or the new file, never a partial one under the final name.
//
// Loading tries the checkpoint named by `latest`, then the others from the newest step down.
// A corrupt or truncated file is refused with a message naming it, and the previous good
// checkpoint is loaded with a warning. If checkpoint files exist but none is valid, loading
// fails rather than silently starting from step 0.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "trainer/checkpoint.hpp"

namespace dtrain::trainer {

void write_file_atomically(const std::filesystem::path& target, std::span<const std::byte> bytes);
std::vector<std::byte> read_file(const std::filesystem::path& path);

class CheckpointStore {
 public:
  explicit CheckpointStore(std::filesystem::path directory);

  static std::string file_name(std::uint64_t step);
  const std::filesystem::path& directory() const { return directory_; }

  // Writes the checkpoint, commits it in `latest`, keeps the newest two. Returns its path.
  std::filesystem::path save(const TrainState& state);

  struct Loaded {
    std::vector<std::byte> bytes;
    TrainState state;
    std::filesystem::path path;
    std::vector<std::string> warnings;  // one per refused newer checkpoint
  };
  std::optional<Loaded> load_latest() const;

  // Removes temporaries left by a writer that was killed mid-write.
  void remove_stale_temporaries() const;

 private:
  std::vector<std::pair<std::uint64_t, std::filesystem::path>> checkpoints() const;
  std::filesystem::path directory_;
};

}  // namespace dtrain::trainer
