// Layouts as the planner's tests name them (a mesh, plugin options, micro-batches, activation
// checkpointing) and the model families they run over, applied to a run's configuration, and
// the memory the dry run and the replay must count exactly.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <ostream>
#include <string>

#include "meshtrain/core/memory.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain::testing {

using PluginOptions = std::map<std::string, std::map<std::string, std::string>>;

struct LayoutCase {
  std::string name;
  std::string mesh;
  PluginOptions options;  // plugin -> key -> value
  int grad_accum = 1;
  AcMode ac = AcMode::none;
};

struct ModelFamily {
  std::string name;
  ModelSpecPtr spec;
};

inline void PrintTo(const LayoutCase& k, std::ostream* os) { *os << k.name; }
inline void PrintTo(const ModelFamily& f, std::ostream* os) { *os << f.name; }

// `base` running `model` on the case's layout.
inline TrainConfig with_layout(TrainConfig base, const ModelSpecPtr& model, const LayoutCase& k) {
  base.model = model;
  base.mesh = parse_mesh_spec(k.mesh);
  base.world = base.mesh.size();
  base.grad_accum = k.grad_accum;
  base.ac.mode = k.ac;
  for (const auto& [plugin, options] : k.options)
    for (const auto& [key, value] : options) base.set(plugin, key, value);
  return base;
}

// Rank `rank`'s parameters, gradients, optimizer state, full parameters and gradients and
// activations equal in `got` and `want`, held and peak: what the dry run and the replay count
// exactly (collective staging lives as long as ops take, which depends on timing).
inline void expect_same_state_and_activations(const MemoryStats& got, const MemoryStats& want,
                                              size_t rank) {
  for (const MemoryCategory category :
       {MemoryCategory::param, MemoryCategory::grad, MemoryCategory::optimizer,
        MemoryCategory::unsharded_param, MemoryCategory::unsharded_grad,
        MemoryCategory::activation}) {
    EXPECT_EQ(got[category].current, want[category].current)
        << "rank " << rank << " " << memory_category_name(category) << " held";
    EXPECT_EQ(got[category].peak, want[category].peak)
        << "rank " << rank << " " << memory_category_name(category) << " peak";
  }
}

}  // namespace meshtrain::testing
