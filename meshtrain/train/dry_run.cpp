#include "meshtrain/train/dry_run.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <ostream>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/train/trainer.h"

namespace meshtrain {

namespace {

// "0-3,8-11" for {0, 1, 2, 3, 8, 9, 10, 11}.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) text += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return text;
}

// The unit a table's figures are printed in: the largest that leaves its largest figure >= 10.
struct Unit {
  const char* name;
  double bytes;
};
Unit unit_for(uint64_t largest) {
  for (const Unit unit : {Unit{"GiB", 1 << 30}, Unit{"MiB", 1 << 20}})
    if (static_cast<double>(largest) >= 10 * unit.bytes) return unit;
  return {"KiB", 1 << 10};
}

// One table: a header of column names, then for each distinct row of figures the ranks that have
// it, in order of first appearance, figures in `unit`-sized units.
void print_table(std::ostream& out, const std::vector<std::string>& columns,
                 const std::vector<std::vector<uint64_t>>& rows, Unit unit) {
  std::vector<std::vector<uint64_t>> distinct;
  std::vector<std::vector<int>> ranks_of;
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto it = std::find(distinct.begin(), distinct.end(), rows[r]);
    if (it == distinct.end()) {
      distinct.push_back(rows[r]);
      ranks_of.push_back({static_cast<int>(r)});
    } else {
      ranks_of[it - distinct.begin()].push_back(static_cast<int>(r));
    }
  }
  std::vector<std::string> labels;
  size_t label_width = 5;  // "ranks"
  for (const std::vector<int>& ranks : ranks_of) {
    labels.push_back(rank_ranges(ranks));
    label_width = std::max(label_width, labels.back().size());
  }
  std::vector<size_t> widths;
  for (const std::string& c : columns) widths.push_back(std::max<size_t>(c.size(), 9));
  char cell[64];
  std::string line = "  " + std::string("ranks") + std::string(label_width - 5, ' ');
  for (size_t c = 0; c < columns.size(); ++c)
    line += "  " + std::string(widths[c] - columns[c].size(), ' ') + columns[c];
  out << line << "   (" << unit.name << ")\n";
  for (size_t k = 0; k < distinct.size(); ++k) {
    line = "  " + labels[k] + std::string(label_width - labels[k].size(), ' ');
    for (size_t c = 0; c < columns.size(); ++c) {
      std::snprintf(cell, sizeof cell, "%*.1f", static_cast<int>(widths[c]),
                    static_cast<double>(distinct[k][c]) / unit.bytes);
      line += std::string("  ") + cell;
    }
    out << line << "\n";
  }
}

}  // namespace

DryRun dry_run(const TrainConfig& config) {
  MT_CHECK(config.dry_run(), "dry_run: the configuration must have device meta (--dry-run)");
  TrainConfig one_step = config;
  one_step.steps = 1;
  one_step.validate();
  DryRun run;
  run.ranks.resize(static_cast<size_t>(config.world));
  std::mutex mutex;
  spawn_ranks(
      config.world,
      [&](RankContext& ctx) {
        ops::cpu::set_cpu_threads(1);  // nothing is computed
        Trainer trainer(one_step, ctx.world, ctx.memory);
        std::vector<std::pair<std::string, uint64_t>> sent = trainer.bytes_sent_by_group();
        trainer.step();
        const std::vector<std::pair<std::string, uint64_t>> after = trainer.bytes_sent_by_group();
        for (size_t i = 0; i < sent.size(); ++i) sent[i].second = after[i].second - sent[i].second;
        DryRunRank mine{ctx.rank, ctx.memory.stats(DeviceKind::meta),
                        ctx.memory.stats(DeviceKind::cpu), std::move(sent)};
        const std::lock_guard lock(mutex);
        run.ranks[ctx.rank] = std::move(mine);
        if (ctx.rank == 0) {
          run.mesh = trainer.mesh().layout().to_string();
          run.plan = trainer.plan().describe();
        }
      },
      CommOptions{std::chrono::seconds(config.timeout_s)});
  return run;
}

void print_dry_run(const TrainConfig& config, const DryRun& run, std::ostream& out) {
  out << "dry run: " << config.model->describe() << ", " << config.model->num_parameters()
      << " parameters, on " << run.ranks.size() << " ranks (" << run.mesh << "), global batch "
      << config.batch << " x " << config.seq << " tokens in " << config.grad_accum << " micro-batch"
      << (config.grad_accum > 1 ? "es" : "") << " per data rank\n"
      << "  plan: " << run.plan << "\n"
      << "  shape-only tensors: every allocation and collective counted, nothing computed or "
         "read; one step with AdamW's state held, as after the first\n\n";

  std::vector<MemoryStats> memory;
  std::vector<BytesPerGroup> sent;
  for (const DryRunRank& r : run.ranks) {
    memory.push_back(r.memory);
    sent.push_back(r.sent);
  }
  print_rank_tables(memory, sent, out);
}

void print_rank_tables(const std::vector<MemoryStats>& memory,
                       const std::vector<BytesPerGroup>& sent, std::ostream& out) {
  MT_CHECK(!sent.empty() && sent.size() == memory.size(),
           "print_rank_tables: one memory and one traffic row per rank expected, got ",
           memory.size(), " and ", sent.size());
  // Memory: what is held between steps, then the peaks of what a step allocates and frees.
  const std::vector<std::string> memory_columns = {
      "params", "grads", "optimizer", "full params", "full grads", "activations", "comm", "peak"};
  std::vector<std::vector<uint64_t>> memory_rows;
  uint64_t largest = 0;
  for (const MemoryStats& m : memory) {
    memory_rows.push_back(
        {m[MemoryCategory::param].current, m[MemoryCategory::grad].current,
         m[MemoryCategory::optimizer].current, m[MemoryCategory::unsharded_param].peak,
         m[MemoryCategory::unsharded_grad].peak, m[MemoryCategory::activation].peak,
         m[MemoryCategory::comm].peak, m.total.peak});
    largest = std::max<uint64_t>(largest, m.total.peak);
  }
  out << "memory per rank: held between steps (params, grads, optimizer), and the step's peaks "
         "(full params and grads while gathered, activations, collective buffers, all together)\n";
  print_table(out, memory_columns, memory_rows, unit_for(largest));

  std::vector<std::string> axes;
  std::vector<std::vector<uint64_t>> sent_rows;
  for (const auto& [group, bytes] : sent.front()) axes.push_back(group);
  uint64_t most = 0;
  for (const BytesPerGroup& rank : sent) {
    std::vector<uint64_t> row;
    for (const auto& [group, bytes] : rank) {
      row.push_back(bytes);
      most = std::max(most, bytes);
    }
    sent_rows.push_back(std::move(row));
  }
  out << "\nbytes sent per rank in the step, by group (\"dp\": both data axes as one group)\n";
  print_table(out, axes, sent_rows, unit_for(most));
}

}  // namespace meshtrain
