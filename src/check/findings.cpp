// SPDX-License-Identifier: Apache-2.0
#include "check/findings.hpp"

#include "core/error.hpp"

namespace dtrain::check {

std::string_view severity_name(Severity severity) {
  return severity == Severity::kProblem ? "problem" : "warning";
}

const std::vector<FindingKind>& finding_catalog() {
  static const std::vector<FindingKind> catalog = {
      {"plugin-not-in-effect", Severity::kProblem,
       "No DTRAIN_* variable in the task environment: the step was not launched with "
       "`srun --distributed-train`, or spank_dtrain.so is not loaded on the node.",
       "PyTorch `env://` stops with \"environment variable MASTER_ADDR expected, but not set\"; "
       "every process thinks it is rank 0 of 1; Paddle and TensorFlow start single workers.",
       "Launch with `srun --mpi=pmix --distributed-train ...`. If srun does not know the option, "
       "the plugin is not loaded there: the site enables the plugin line of "
       "/etc/slurm/plugstack.conf.d/dtrain.conf on the login and compute nodes (spank_dtrain(8))."},
      {"endpoint-port-in-use", Severity::kProblem,
       "A rank's endpoint port (DTRAIN_CURRENT_ENDPOINT) is held by another listening process on "
       "its node, checked before anything of this step bound it.",
       "The framework cannot bind: \"Address already in use\" (EADDRINUSE) from torch, gloo or "
       "Paddle; or peers reach the other process and the rendezvous hangs or fails.",
       "Find the holder with `ss -ltnp 'sport = :PORT'` on that node and stop it, or move "
       "dtrain's ports: `MpiParams=ports=A-B` in slurm.conf (Slurm reserves them per step) or "
       "`ports=A-B` in plugstack.conf."},
      {"port-held-by-another-user", Severity::kProblem,
       "An endpoint or master port of the step is held by a listening process of another user "
       "(the listener's uid in /proc/net/tcp).",
       "The plugin stops the step on that node (`is held by a process of another user`); without "
       "the check, peers could rendezvous with the foreign process.",
       "Ask for exclusive nodes or Slurm's reserved ports (`MpiParams=ports=A-B`), or have the "
       "holder found (`ss -ltnp 'sport = :PORT'` on that node) and stopped."},
      {"master-port-in-use", Severity::kProblem,
       "DTRAIN_MASTER_PORT (MASTER_PORT) on rank 0's node is held by another listening process.",
       "torch.distributed's TCPStore on rank 0 fails with \"Address already in use\"; the other "
       "ranks wait for the store until their timeout.",
       "Find the holder with `ss -ltnp 'sport = :PORT'` on rank 0's node and stop it, or move "
       "dtrain's ports (`MpiParams=ports=A-B` in slurm.conf, or `ports=A-B` in plugstack.conf)."},
      {"endpoint-listen-failed", Severity::kProblem,
       "A rank could not listen on its own endpoint for another reason than a busy port, for "
       "example because the address is not one of its node's addresses.",
       "\"Cannot assign requested address\" (EADDRNOTAVAIL) when the framework binds its "
       "endpoint; the peers cannot connect.",
       "The endpoint address must belong to the node: check how the node's name resolves there "
       "(`getent hosts $(hostname)`) and the plugin's `suffix=` and `address=` settings."},
      {"endpoint-answered-by-another-process", Severity::kProblem,
       "A peer's connection to a rank's endpoint succeeded although that rank could not listen "
       "there: another process answers on that port.",
       "The rendezvous hangs or fails with protocol errors: a foreign process accepted the "
       "framework's connection.",
       "Stop the process holding the port (`ss -ltnp 'sport = :PORT'` on that node), or move "
       "dtrain's ports (`MpiParams=ports=A-B`, or `ports=A-B` in plugstack.conf)."},
      {"connection-refused", Severity::kProblem,
       "A TCP connection from one rank to a peer's endpoint was refused (ECONNREFUSED) while the "
       "peer was listening there.",
       "\"Connection refused\" from gloo, torch's TCPStore or NCCL's bootstrap "
       "(\"socketStartConnect: "
       "Connect to ... failed\").",
       "Firewall or wrong interface: a host firewall rejects the endpoint ports (open them between "
       "compute nodes), or the node's address belongs to an interface the peer does not reach "
       "(choose the cluster network with the plugin's `suffix=`/`address=` and "
       "NCCL_SOCKET_IFNAME)."},
      {"connection-timed-out", Severity::kProblem,
       "A TCP connection from one rank to a peer's endpoint got no answer before the probe "
       "deadline.",
       "Start-up hangs: NCCL initialisation or `init_process_group` waits until its timeout, then "
       "\"Connection timed out\".",
       "A firewall drops the packets, or the address leads to a network the peer is not on: open "
       "the endpoint ports between compute nodes, check `ip route get ADDRESS` on the connecting "
       "node, and choose the cluster interface."},
      {"endpoint-unreachable", Severity::kProblem,
       "A TCP connection from one rank to a peer's endpoint failed with another error (no route "
       "to host, network unreachable, unresolvable name).",
       "\"No route to host\" or \"Network is unreachable\" when ranks connect.",
       "The peer's address is on a network this node cannot reach: fix name resolution on the "
       "nodes or the plugin's `suffix=`/`address=` so endpoints use the cluster network."},
      {"fingerprint-mismatch", Severity::kProblem,
       "Ranks run different executables, different dtrain, MPI, NCCL or CUDA versions, or see "
       "different GPU models (a warning with --allow-mismatch).",
       "Hangs or crashes inside collectives, NCCL version or protocol warnings, wrong results, or "
       "behaviour that differs on some nodes.",
       "Install the same software on every node (one shared file system or container image) and "
       "redeploy the binary everywhere; pass --allow-mismatch only when the difference is "
       "intended."},
      {"gpu-shared", Severity::kProblem,
       "Two ranks on one node are bound to the same GPU (their DTRAIN_GPU_BUS_IDS overlap).",
       "NCCL fails with \"Duplicate GPU detected: rank X and rank Y both on CUDA device\"; CUDA "
       "runs out of memory.",
       "Start at most one task per GPU (`--ntasks-per-node` no more than the GPUs, or "
       "`--gpus-per-task=1`) and do not override CUDA_VISIBLE_DEVICES in the job."},
      {"gpu-binding-without-gpus", Severity::kWarning,
       "CUDA_VISIBLE_DEVICES names GPUs, but discovery found no GPU on the node.",
       "\"no CUDA-capable device is detected\" or \"invalid device ordinal\" when the framework "
       "starts.",
       "Check the job's GPU request (`--gpus`, gres.conf), the driver on the node, and that the "
       "plugin's `topology=` file describes this kind of node."},
      {"gpu-count-differs", Severity::kWarning,
       "The nodes of the step have different numbers of GPUs.",
       "Uneven step times; ranks on the smaller nodes share GPUs or fail with \"invalid device "
       "ordinal\".",
       "Run on a partition of identical nodes, or ask for the same GPUs on each "
       "(`--gpus-per-node`)."},
      {"cpu-affinity-not-applied", Severity::kWarning,
       "A task may run on other CPUs than the DTRAIN_CPU_LIST the plugin chose "
       "(its Cpus_allowed_list differs).",
       "Data loading and NCCL's proxy threads run on far cores: lower, noisy throughput.",
       "Something reset the affinity after the plugin (`srun --cpu-bind`, a task plugin, an MPI "
       "or OpenMP binding, a launcher inside the job): use `srun --cpu-bind=none` or switch the "
       "other binding off."},
      {"cpus-shared", Severity::kWarning,
       "Ranks on one node that the plugin bound may run on the same CPUs (their Cpus_allowed_list "
       "overlap).",
       "Ranks compete for cores: slow and uneven step times.",
       "Give each task its own cores (`--cpus-per-task`, fewer tasks per node) and leave the "
       "binding to the plugin."},
      {"socket-ifname-missing", Severity::kProblem,
       "NCCL_SOCKET_IFNAME selects no network interface of the node.",
       "NCCL prints \"Bootstrap : no socket interface found\" and fails, or bootstraps over an "
       "unintended interface.",
       "Set NCCL_SOCKET_IFNAME to interfaces that exist on every node (`ip -br link`), or unset "
       "it and let the plugin set it from the topology."},
      {"endpoint-lists-differ", Severity::kProblem,
       "DTRAIN_ENDPOINTS_HASH, the plugin's hash of the endpoint list, differs between ranks: the "
       "nodes planned different endpoint lists.",
       "Ranks connect to the wrong peers: gloo or TCPStore rendezvous hangs, Paddle or TensorFlow "
       "workers wait for a peer that never answers, or collectives mix up ranks.",
       "Usually a node resolves a host name differently (`getent hosts NAME` on every node, e.g. "
       "a '127.0.1.1 NAME' line in /etc/hosts), or nodes run different plugin versions or "
       "plugstack.conf lines (`ports=`, `suffix=`, `address=`): make them the same everywhere."},
      {"variables-changed-after-dtrain", Severity::kProblem,
       "A task's variables no longer say what dtrain set: DTRAIN_RANK or DTRAIN_LOCAL_RANK is not "
       "Slurm's SLURM_PROCID or SLURM_LOCALID, or PyTorch's RANK, LOCAL_RANK, WORLD_SIZE, "
       "MASTER_ADDR or MASTER_PORT is not dtrain's. Something that ran after dtrain changed them.",
       "Ranks rendezvous on a port or address dtrain did not plan (TCPStore times out, or meets "
       "another job), tasks claim one rank, or OMP_NUM_THREADS and GPUs are the container's. "
       "pyxis (--container-image) copies the container's environment over each task's, including "
       "what enroot's 50-slurm-pytorch.sh hook adds for images that set PYTORCH_VERSION.",
       "Load dtrain after pyxis: its plugstack.conf line after pyxis's, or a drop-in named to sort "
       "after pyxis.conf (zz-dtrain.conf). Or leave out srun's --container-env, which replaces "
       "the list of variables dtrain asks pyxis to keep."},
      {"ntasks-without-ntasks-per-node", Severity::kWarning,
       "The step was sized with --ntasks (-n) alone: its tasks have SLURM_NTASKS above 1 but no "
       "SLURM_NTASKS_PER_NODE.",
       "PyTorch Lightning's SLURMEnvironment stops before training: \"You set `--ntasks=N` in "
       "your SLURM bash script, but this variable is not supported. HINT: Use "
       "`--ntasks-per-node=N` instead.\" Other frameworks are not affected.",
       "For Lightning, launch with `-N NODES --ntasks-per-node=T` (in srun or #SBATCH) and give "
       "the Trainer the same numbers: `Trainer(devices=T, num_nodes=NODES)`."},
      {"nccl-environment-differs", Severity::kWarning,
       "An NCCL_*, UCX_* or CUDA_* variable other than the per-task binding has different values "
       "on different nodes or ranks.",
       "Ranks pick different transports or algorithms: a hang in the first collective, NCCL "
       "mismatch warnings, or low bandwidth on some nodes.",
       "Set these variables once in the job script so that every task inherits them, and remove "
       "per-node settings from shell start-up files."},
      {"topology-unavailable", Severity::kWarning,
       "hwloc could not read the node's topology, so its GPUs are unknown.",
       "The plugin cannot bind GPUs, NICs or CPUs on that node either (it warns once per step).",
       "Check that hwloc works on the node (`lstopo-no-graphics`), or give the plugin a "
       "topology file (`topology=/path.xml` in plugstack.conf)."},
  };
  return catalog;
}

const FindingKind& finding_kind(std::string_view id) {
  for (const auto& kind : finding_catalog()) {
    if (kind.id == id) return kind;
  }
  throw Error(ErrorKind::kInternal, "dtrain-check has no finding '" + std::string(id) + "'");
}

Finding make_finding(std::string_view id, std::string node, int rank, std::string detail) {
  const FindingKind& kind = finding_kind(id);
  return {std::string(kind.id), kind.severity, std::move(node), rank, std::move(detail)};
}

namespace {

// Markdown table cells cannot hold a bare '|'.
std::string table_cell(std::string_view text) {
  std::string cell;
  for (char c : text) {
    if (c == '|') cell += '\\';
    cell += c;
  }
  return cell;
}

}  // namespace

std::string troubleshooting_markdown() {
  std::string text = std::string(kTroubleshootingBegin) + "\n";
  text +=
      "## Troubleshooting\n\n"
      "When training misbehaves, run the doctor as a step of the same shape as the job:\n\n"
      "```sh\n"
      "srun --mpi=pmix --distributed-train -N<nodes> -n<tasks> dtrain-check --json check.json\n"
      "```\n\n"
      "It reports per node the GPUs it sees, the binding the plugin chose, whether the endpoint "
      "and master ports are free, whether every endpoint is reachable, whether all ranks run the "
      "same software, and the NCCL/UCX/CUDA environment. It exits 0 when healthy, 1 when it "
      "found a problem, 2 when it could not run. Each finding it can report, with the symptom it "
      "explains and the fix (this table is generated by `dtrain-check "
      "--troubleshooting-markdown`):\n\n"
      "| Finding | Severity | What dtrain-check saw | Symptom it explains | Fix |\n"
      "|---|---|---|---|---|\n";
  for (const auto& kind : finding_catalog()) {
    text += "| `" + std::string(kind.id) + "` | " + std::string(severity_name(kind.severity)) +
            " | " + table_cell(kind.seen) + " | " + table_cell(kind.symptom) + " | " +
            table_cell(kind.fix) + " |\n";
  }
  text += std::string(kTroubleshootingEnd) + "\n";
  return text;
}

}  // namespace dtrain::check
