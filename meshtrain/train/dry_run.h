// Dry run (meshtrain train --dry-run): the run's real code paths — mesh, model, every strategy's
// plan and checks, the step runner and its schedule, AdamW — on every rank of the world as threads
// of the local backend, over shape-only tensors (Device::meta): every allocation is counted by the
// rank's memory tracker and every collective by its group's counters, but nothing is computed,
// read or stored. So a layout's memory per rank and traffic per axis come out as a real run would
// count them, for any world size, in seconds, on a laptop.
//
// It runs one step with AdamW's moments allocated before it, as every step after a real run's
// first holds them: the figures of a real run's second step.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/memory.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

struct DryRunRank {
  int rank = 0;
  // The run's device memory (shape-only) over the step: currents at its end, its peaks.
  MemoryStats memory;
  // What the run keeps on the host meanwhile: the step's figures exchanged between ranks.
  MemoryStats host;
  // Bytes this rank sent in the step on each mesh axis's group and on "dp", in mesh order
  // with "dp" last (Trainer::bytes_sent_by_group).
  std::vector<std::pair<std::string, uint64_t>> sent;
};

struct DryRun {
  std::string mesh;               // "pp=2,dp_shard=2,tp=2"
  std::string plan;               // ParallelPlan::describe()
  std::vector<DryRunRank> ranks;  // by rank
};

// `config` with its device set to meta (TrainConfig::dry_run()); InvalidArgument for what a dry
// run cannot do (TrainConfig::validate).
DryRun dry_run(const TrainConfig& config);

// The console's tables: memory per rank by category and bytes sent per rank and axis, ranks with
// equal figures on one line ("0-3,8-11").
void print_dry_run(const TrainConfig& config, const DryRun& run, std::ostream& out);

// Those two tables alone, for any figures per rank (the planner prints its replay's): each rank's
// memory over a step and bytes sent per group, in the same group order on every rank.
using BytesPerGroup = std::vector<std::pair<std::string, uint64_t>>;
void print_rank_tables(const std::vector<MemoryStats>& memory,
                       const std::vector<BytesPerGroup>& sent, std::ostream& out);

}  // namespace meshtrain
