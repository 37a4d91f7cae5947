// A strategy plugin written in the tests: replicated data parallelism (PyTorch DDP's result),
// whole parameters on every rank and gradients summed over its axis once backward has finished.
#pragma once

#include <memory>

#include "meshtrain/parallel/strategy_registry.h"

namespace meshtrain::testing {

// The built-in plugins and "ddp".
std::shared_ptr<const StrategyRegistry> plugins_with_ddp();

}  // namespace meshtrain::testing
