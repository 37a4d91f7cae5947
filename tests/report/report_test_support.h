// Metrics files for the report tests, in the trainer's format (meshtrain/train/reporter.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace meshtrain::testing {

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline double loss_at(int64_t step) { return 5.5 - std::log(static_cast<double>(step)); }

inline double bubble_at(int64_t step) { return 0.002 + 0.0001 * static_cast<double>(step); }

// `steps` lines as `meshtrain train --metrics` writes them, on `ranks` ranks; with a validation
// loss every `val_every` steps (0: none), and a pipeline's bubble when `pipelined`.
inline void write_metrics(const std::string& path, int64_t steps, int ranks, int64_t val_every = 0,
                          bool pipelined = false) {
  std::string text;
  for (int64_t step = 1; step <= steps; ++step) {
    nlohmann::json per_rank = nlohmann::json::array();
    double peak = 0;
    for (int r = 0; r < ranks; ++r) {
      const double bytes = (r + static_cast<double>(step)) * (1 << 20);
      per_rank.push_back(static_cast<uint64_t>(bytes));
      peak = std::max(peak, bytes);
    }
    nlohmann::json j = {{"step", step},
                        {"loss", loss_at(step)},
                        {"lr", 3e-4},
                        {"step_time_s", 0.05 + 0.001 * step},
                        {"tokens_per_s", 1000.0 + 10.0 * step},
                        {"peak_mem_bytes", static_cast<uint64_t>(peak)},
                        {"peak_mem_bytes_per_rank", per_rank},
                        {"comm_bytes", 123456},
                        {"exposed_comm_s", 0.01},
                        {"sharded_state_bytes", 1000},
                        {"model_state_peak_bytes", 2000},
                        {"comm_staging_peak_bytes", 300},
                        {"unsharded_param_peak_bytes", 400},
                        {"unsharded_grad_peak_bytes", 500},
                        {"grad_norm", 1.5}};
    if (val_every > 0 && step % val_every == 0) j["val_loss"] = loss_at(step) + 0.25;
    if (pipelined) j["bubble_s"] = bubble_at(step);
    text += j.dump() + "\n";
  }
  write_file(path, text);
}

}  // namespace meshtrain::testing
