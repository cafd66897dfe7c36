// SPDX-License-Identifier: Apache-2.0
#include "trainer/checkpoint_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::trainer {
namespace fs = std::filesystem;

namespace {

constexpr const char* kLatest = "latest";
constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".dtc";

[[noreturn]] void fail_io(const std::string& what, const fs::path& path) {
  throw Error(ErrorKind::kResource, what + " " + path.string() + ": " + std::strerror(errno));
}

void fsync_directory(const fs::path& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io("cannot open directory", directory);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail_io("cannot fsync directory", directory);
}

std::optional<std::uint64_t> step_of(const std::string& name) {
  const std::string prefix = kPrefix;
  const std::string suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix)) {
    return std::nullopt;
  }
  try {
    return core::parse_unsigned(
        std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - suffix.size()),
        "checkpoint step", 0, UINT64_MAX);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

void write_file_atomically(const fs::path& target, std::span<const std::byte> bytes) {
  const fs::path temporary =
      target.parent_path() / std::string(".").append(target.filename().string()).append(".tmp");
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io("cannot create", temporary);
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      errno = saved;
      fail_io("cannot write", temporary);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    errno = saved;
    fail_io("cannot fsync", temporary);
  }
  ::close(fd);
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    errno = saved;
    fail_io("cannot rename " + temporary.string() + " to", target);
  }
  fsync_directory(target.parent_path().empty() ? fs::path(".") : target.parent_path());
}

std::vector<std::byte> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_io("cannot open", path);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail_io("cannot read", path);
  std::vector<std::byte> bytes(data.size());
  std::memcpy(bytes.data(), data.data(), data.size());
  return bytes;
}

CheckpointStore::CheckpointStore(fs::path directory) : directory_(std::move(directory)) {
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec || !fs::is_directory(directory_)) {
    throw_invalid("--checkpoint-dir " + directory_.string() + " is not a usable directory" +
                  (ec ? ": " + ec.message() : std::string()));
  }
}

std::string CheckpointStore::file_name(std::uint64_t step) {
  return kPrefix + std::to_string(step) + kSuffix;
}

std::vector<std::pair<std::uint64_t, fs::path>> CheckpointStore::checkpoints() const {
  std::vector<std::pair<std::uint64_t, fs::path>> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory_)) {
    if (!entry.is_regular_file()) continue;
    if (const auto step = step_of(entry.path().filename().string())) {
      found.emplace_back(*step, entry.path());
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

fs::path CheckpointStore::save(const TrainState& state) {
  const fs::path path = directory_ / file_name(state.step);
  write_file_atomically(path, encode_checkpoint(state));
  const std::string pointer = file_name(state.step) + "\n";
  write_file_atomically(directory_ / kLatest,
                        std::as_bytes(std::span<const char>(pointer.data(), pointer.size())));
  const auto all = checkpoints();
  for (std::size_t i = 2; i < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i].second, ec);  // best effort: an extra old file harms nothing
  }
  return path;
}

std::optional<CheckpointStore::Loaded> CheckpointStore::load_latest() const {
  std::vector<fs::path> candidates;
  std::vector<std::string> warnings;
  const fs::path latest = directory_ / kLatest;
  if (fs::exists(latest)) {
    std::string name;
    for (std::byte b : read_file(latest)) name.push_back(static_cast<char>(b));
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    if (step_of(name) && name.find('/') == std::string::npos) {
      candidates.push_back(directory_ / name);
    } else {
      warnings.push_back(latest.string() + " does not name a checkpoint file; ignoring it");
    }
  }
  for (const auto& [step, path] : checkpoints()) {
    if (std::find(candidates.begin(), candidates.end(), path) == candidates.end()) {
      candidates.push_back(path);
    }
  }
  if (candidates.empty()) return std::nullopt;
  for (const fs::path& path : candidates) {
    try {
      if (!fs::exists(path))
        throw Error(ErrorKind::kResource, "checkpoint " + path.string() + " is missing");
      Loaded loaded;
      loaded.bytes = read_file(path);
      loaded.state = decode_checkpoint(loaded.bytes, path.string());
      loaded.path = path;
      loaded.warnings = std::move(warnings);
      return loaded;
    } catch (const Error& e) {
      warnings.push_back(std::string(e.what()) + "; refusing it");
    }
  }
  std::string message = "no usable checkpoint in " + directory_.string() + ":";
  for (const std::string& w : warnings) message += "\n  " + w;
  message += "\nremove the damaged files or choose another --checkpoint-dir";
  throw Error(ErrorKind::kInvalidInput, message);
}

void CheckpointStore::remove_stale_temporaries() const {
  for (const fs::directory_entry& entry : fs::directory_iterator(directory_)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".") && name.ends_with(".tmp") && entry.is_regular_file()) {
      std::error_code ec;
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace dtrain::trainer
