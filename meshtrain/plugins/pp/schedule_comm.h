// The transfers that a list of computations implies, placed where a runtime wants them.
#pragma once

#include "meshtrain/plugins/pp/schedule.h"

namespace meshtrain {

// Returns `compute_only` with sends and receives added wherever consecutive stages live on
// different ranks: a RECV_F just before each F that needs another rank's activations and a
// SEND_F just after each F whose output another rank needs; likewise RECV_B before and SEND_B
// after each B or I. Receives sit just before the computation that needs them, so a rank blocks
// only when it has nothing else to do; sends are posted as soon as their data exists.
// Throws InvalidArgument if `compute_only` already holds a send or receive.
Schedule add_communication(const Schedule& compute_only);

}  // namespace meshtrain
