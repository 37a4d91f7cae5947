#include "meshtrain/train/run_estimate.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>

#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/train/bound_strategies.h"

namespace meshtrain {

double local_rank_overhead_bytes(int world) {
  const double w = static_cast<double>(world);
  return 2.2 * (1 << 20) + 0.95 * w * w;
}

HostBytes estimate_rank_host_bytes(const TrainConfig& config) {
  const MeshLayout mesh = config.effective_mesh();
  const auto size = [&](std::string_view axis) {
    return mesh.has_axis(axis) ? static_cast<double>(mesh.axis_size(axis)) : 1.0;
  };
  const double tp = size(mesh_axis::tp);
  const double dp = static_cast<double>(mesh.span_size(mesh_axis::dp));
  // Each strategy says what share of the model state it leaves a rank (FSDP's shard, TP's and
  // PP's pieces) and whether it keeps it on the host (offload).
  const ModelStateShare share = model_state_share(bind_strategies(config), mesh);
  const double params = static_cast<double>(config.model->num_parameters());
  const double model_state = 16.0 * params * share.fraction;  // fp32 master, grad, 2 moments
  const double tokens = static_cast<double>(config.batch) / dp * static_cast<double>(config.seq) /
                        static_cast<double>(config.grad_accum);
  const double logits = 4.0 * tokens * static_cast<double>(config.model->vocab()) / tp;
  HostBytes host;
  const auto count = [&](double bytes, std::string_view what) {
    host.bytes += bytes;
    host.parts += (host.parts.empty() ? "" : ", ") + std::string(what);
  };
  if (config.device == DeviceKind::cpu) {
    count(model_state, "model state");
    count(logits, "logits");
  } else if (share.on_host) {
    count(model_state, "offloaded model state");
  }
  if (config.backend == BackendKind::local)
    count(local_rank_overhead_bytes(config.world), "the local backend's overhead");
  return host;
}

double machine_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

double free_disk_bytes(const std::string& folder) {
  struct statvfs fs {};
  if (statvfs(folder.c_str(), &fs) != 0) return -1.0;
  return static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
}

}  // namespace meshtrain
