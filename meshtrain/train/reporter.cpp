#include "meshtrain/train/reporter.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"

namespace meshtrain {

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

namespace {
std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  else
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return text;
}

// --threads past this rank's share of the CPUs is allowed (a bigger machine's layout rehearsed on
// a small one) but named, since the threads only take turns on the cores.
std::string oversubscription_note(const TrainConfig& config) {
  const int cpus = ops::cpu::available_cpus();
  if (config.threads <= std::max(1, cpus / config.ranks_on_this_machine())) return "";
  return detail::concat(" (--threads ", config.threads, " x ", config.ranks_on_this_machine(),
                        " rank", config.ranks_on_this_machine() > 1 ? "s" : "",
                        " is more than the ", cpus, " CPU", cpus > 1 ? "s" : "",
                        " this process may use: the threads take turns, with the same results)");
}
}  // namespace

TrainReporter::TrainReporter(const TrainConfig& config, std::ostream& out, bool interactive)
    : config_(config), out_(out), interactive_(interactive) {}

void TrainReporter::write_metrics(const std::string& line) {
  // Opened at the first step, once the run has started: a run refused before it (a checkpoint
  // folder ahead of it, other data) leaves the file of the run before as it was.
  if (!metrics_.is_open()) {
    metrics_.open(config_.metrics_path,
                  config_.resume_dir.empty() ? std::ios::trunc : std::ios::app);
    if (!metrics_)
      throw IoError(detail::concat("cannot open the metrics file '", config_.metrics_path,
                                   "': ", std::strerror(errno)));
  }
  errno = 0;
  metrics_ << line << '\n' << std::flush;
  if (!metrics_)
    throw IoError(detail::concat("writing the metrics file '", config_.metrics_path, "' failed: ",
                                 std::strerror(errno)));
}

void TrainReporter::start(const std::string& mesh, const std::string& plan, int64_t parameters) {
  start_ = std::chrono::steady_clock::now();
  if (config_.quiet) return;
  out_ << "meshtrain: " << config_.model->describe() << " (" << parameters
       << " parameters) on " << config_.world << " rank" << (config_.world > 1 ? "s" : "")
       << " of the " << backend_name(config_.backend) << " backend, "
       << config_.threads_per_rank() << " CPU thread" << (config_.threads_per_rank() > 1 ? "s" : "")
       << " per rank" << oversubscription_note(config_)
       << (config_.device == DeviceKind::cuda ? ", state on CUDA GPUs" : "")
       << "\n"
       << "          mesh " << mesh << ", plan " << plan;
  for (const auto& [plugin, options] : config_.strategies)
    for (const auto& [key, value] : options) out_ << ", " << plugin << " " << key << "=" << value;
  out_ << "\n"
       << "          " << config_.steps << " steps of " << config_.batch << " x " << config_.seq
       << " tokens" << (config_.grad_accum > 1 ? " in micro-batches" : "") << ", lr "
       << config_.lr.lr << "\n";
  out_.flush();
}

void TrainReporter::print_progress(const StepMetrics& m, bool kept) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = elapsed / static_cast<double>(m.step + 1 - first_step_) *
                     static_cast<double>(config_.steps - m.step - 1);
  char val[32] = "";
  if (m.val_loss) std::snprintf(val, sizeof val, " | val %.4f", *m.val_loss);
  // MFU where the devices' peak is known, else the model FLOP/s achieved.
  char flops[32];
  if (m.mfu > 0)
    std::snprintf(flops, sizeof flops, "MFU %.1f%%", 100.0 * m.mfu);
  else
    std::snprintf(flops, sizeof flops, "%.1f GFLOP/s", m.model_flops_per_s * 1e-9);
  char line[320];
  std::snprintf(line, sizeof line,
                "step %5lld/%lld | loss %.4f%s | %8.0f tok/s, %s | comm %s exposed %.1f ms | "
                "peak %s/rank | ETA %s",
                static_cast<long long>(m.step + 1), static_cast<long long>(config_.steps), m.loss,
                val, m.tokens_per_s, flops, format_bytes(m.comm_bytes).c_str(),
                m.exposed_comm_s * 1e3, format_bytes(m.peak_mem_bytes).c_str(),
                format_duration(eta).c_str());
  // On a terminal the line is written over the live line, if any.
  out_ << (interactive_ ? "\r" : "") << line << (interactive_ ? "\033[K" : "");
  live_line_ = interactive_ && !kept;
  if (!live_line_) out_ << "\n";
  out_.flush();
}

void TrainReporter::resumed(const std::string& checkpoint, int64_t steps_done) {
  note("resumed from " + checkpoint + " at step " + std::to_string(steps_done));
  if (config_.metrics_path.empty() || !std::filesystem::exists(config_.metrics_path)) return;
  std::string kept;
  {
    std::ifstream in(config_.metrics_path);
    for (std::string line; std::getline(in, line);) {
      // A last line without its newline was torn by a write that failed (a full disk).
      if (in.eof()) break;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      const bool later = j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                         j["step"].get<int64_t>() > steps_done;
      if (!later) kept += line + "\n";
    }
    if (in.bad()) throw IoError("cannot read the metrics file '" + config_.metrics_path + "'");
  }
  AtomicFile file(config_.metrics_path);
  std::ofstream out(file.partial_path(), std::ios::binary | std::ios::trunc);
  errno = 0;
  out << kept;
  out.close();
  if (!out)
    throw IoError(detail::concat("writing the metrics file '", file.partial_path(), "' failed: ",
                                 std::strerror(errno)));
  file.commit();
}

void TrainReporter::on_step(const StepMetrics& m) {
  if (!seen_step_) {
    seen_step_ = true;
    first_step_ = m.step;
    first_loss_ = m.loss;
  } else {  // the first step warms caches and allocators
    tokens_per_s_sum_ += m.tokens_per_s;
    ++timed_steps_;
  }
  last_ = m;
  if (!config_.metrics_path.empty()) {
    // Numbered as the console and the checkpoints count: 1 is the first step.
    nlohmann::json j = {{"step", m.step + 1},
                        {"loss", m.loss},
                        {"lr", m.lr},
                        {"step_time_s", m.step_time_s},
                        {"tokens_per_s", m.tokens_per_s},
                        {"peak_mem_bytes", m.peak_mem_bytes},
                        {"peak_mem_bytes_per_rank", m.peak_mem_per_rank},
                        {"comm_bytes", m.comm_bytes},
                        {"exposed_comm_s", m.exposed_comm_s},
                        {"sharded_state_bytes", m.sharded_state_bytes},
                        {"model_state_peak_bytes", m.model_state_peak_bytes},
                        {"comm_staging_peak_bytes", m.comm_staging_peak_bytes},
                        {"unsharded_param_peak_bytes", m.unsharded_param_peak_bytes},
                        {"unsharded_grad_peak_bytes", m.unsharded_grad_peak_bytes}};
    if (m.bubble_s) j["bubble_s"] = *m.bubble_s;
    j["model_flops_per_s"] = m.model_flops_per_s;
    if (m.mfu > 0) j["mfu"] = m.mfu;
    if (m.grad_norm >= 0) j["grad_norm"] = m.grad_norm;
    if (m.val_loss) j["val_loss"] = *m.val_loss;
    write_metrics(j.dump());
  }
  if (config_.quiet) return;
  const int64_t every =
      config_.log_every > 0 ? config_.log_every : std::max<int64_t>(1, config_.steps / 20);
  const bool kept = (m.step + 1) % every == 0 || m.step == first_step_ ||
                    m.step + 1 == config_.steps || m.val_loss.has_value();
  if (kept || interactive_) print_progress(m, kept);
}

void TrainReporter::note(const std::string& text) {
  if (config_.quiet) return;
  if (live_line_) out_ << "\r\033[K";  // the note replaces the live line; the next step redraws it
  live_line_ = false;
  out_ << text << "\n" << std::flush;
}

void TrainReporter::finish() {
  if (config_.quiet) return;
  if (!seen_step_) {
    out_ << "done: no steps left to train (--steps " << config_.steps << ")\n";
    out_.flush();
    return;
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  out_ << "done: loss " << first_loss_ << " -> " << last_.loss << " in "
       << last_.step + 1 - first_step_ << " steps, " << format_duration(elapsed) << ", "
       << static_cast<int64_t>(timed_steps_ ? tokens_per_s_sum_ / timed_steps_ : last_.tokens_per_s)
       << " tok/s on average\n";
  out_ << "memory per rank (peak of the last step):";
  for (size_t r = 0; r < last_.peak_mem_per_rank.size(); ++r)
    out_ << (r % 4 == 0 ? "\n  " : "  ") << "rank " << r << ": "
         << format_bytes(last_.peak_mem_per_rank[r]);
  out_ << "\n  sharded state " << format_bytes(last_.sharded_state_bytes)
       << ", unsharded parameters peak " << format_bytes(last_.unsharded_param_peak_bytes)
       << ", unsharded gradients peak " << format_bytes(last_.unsharded_grad_peak_bytes) << "\n";
  if (!config_.save_path.empty()) out_ << "saved the model to " << config_.save_path << "\n";
  out_.flush();
}

void TrainReporter::sample_byte(char byte) {
  if (config_.quiet) return;
  if (!sampling_) out_ << "sample:\n";
  sampling_ = true;
  out_ << byte << std::flush;  // a long sample shows as it is drawn
}

void TrainReporter::end_sample() {
  if (config_.quiet || !sampling_) return;
  out_ << "\n" << std::flush;
  sampling_ = false;
}

}  // namespace meshtrain
