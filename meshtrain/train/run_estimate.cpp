#include "meshtrain/train/run_estimate.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>

#include "meshtrain/mesh/axis_names.h"

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
  const double tp = size(mesh_axis::tp), pp = size(mesh_axis::pp);
  const double dp = static_cast<double>(mesh.span_size(mesh_axis::dp));
  // FSDP shards over the data axes unless told not to; hybrid shards within dp_shard only.
  double shard = dp;
  bool offload = false;
  if (const auto fsdp = config.strategies.find("fsdp"); fsdp != config.strategies.end()) {
    if (const auto mode = fsdp->second.find("mode"); mode != fsdp->second.end())
      shard = mode->second == "none" ? 1.0 : mode->second == "hybrid" ? size(mesh_axis::dp_shard) : dp;
    const auto flag = fsdp->second.find("offload");
    offload = flag != fsdp->second.end() && flag->second == "true";
  }
  const double params = static_cast<double>(config.model.num_parameters());
  const double model_state = 16.0 * params / (tp * pp * shard);  // fp32 master, grad, 2 moments
  const double tokens = static_cast<double>(config.batch) / dp * static_cast<double>(config.seq) /
                        static_cast<double>(config.grad_accum);
  const double logits = 4.0 * tokens * static_cast<double>(config.model.vocab) / tp;
  HostBytes host;
  const auto count = [&](double bytes, std::string_view what) {
    host.bytes += bytes;
    host.parts += (host.parts.empty() ? "" : ", ") + std::string(what);
  };
  if (config.device == DeviceKind::cpu) {
    count(model_state, "model state");
    count(logits, "logits");
  } else if (offload) {
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
