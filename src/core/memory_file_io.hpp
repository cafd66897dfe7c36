#pragma once
// Values too long for execve (node_environment decides which) reach the task as memory files:
// a sealed memfd the task holds across exec, named by /proc/<pid>/fd/<n>. Nothing is written to
// disk, so nothing is left behind, and a private /tmp (job_container/tmpfs) or a container's
// mount namespace does not hide it. Runs in the task itself (task_init), as the job's user.

#include <string>
#include <string_view>
#include <vector>

namespace dtrain::core {

// Creates the memory file holding `content`, kept open (not close-on-exec) at a high descriptor
// so that shell redirections of low ones leave it alone, and sealed against changes. Returns its
// path as any process of the user on the node can open it while this process lives:
// "/proc/<pid>/fd/<fd>". Throws dtrain::Error(kResource).
std::string export_memory_file(std::string_view name, std::string_view content);

// export_memory_file for one task's variables: a value equal to one already exported (the
// endpoint list under DTRAIN_ENDPOINTS and PADDLE_TRAINER_ENDPOINTS) gets the same file, so a
// large step writes each megabyte once per task, not once per name.
class MemoryFileExporter {
 public:
  std::string path_for(std::string_view name, std::string_view content);

 private:
  struct Exported {
    std::string_view content;  // the caller's value; it must outlive this exporter
    std::string path;
  };
  std::vector<Exported> exported_;
};

}  // namespace dtrain::core
